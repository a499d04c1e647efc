// Package wire defines Farwing's datagram format (docs/PROTOCOL.md): a 16-byte clear header that is
// authenticated as AEAD associated data, followed by a sealed frame. A data datagram keeps its
// 12-byte data frame header in the clear as well (associated data too), so that the receiver knows
// where a chunk belongs before it decrypts, and decrypts it straight into its block.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/farwing/farwing/lane"
)

// Version is the wire protocol version carried in every datagram's first byte.
const Version = 2

const (
	magic     = 0xF0 // high nibble of byte 0
	HeaderLen = 16   // clear, authenticated header
	TagLen    = 16   // AES-GCM tag
	// Overhead is what every datagram adds around its plaintext frame.
	Overhead = HeaderLen + TagLen
	// DataAADLen is a data datagram's clear, authenticated part: header and data frame header.
	DataAADLen = HeaderLen + DataFrameLen
	// MaxDatagramV6 is the largest UDP payload Farwing sends, on IPv4 and IPv6 alike: a 1500-byte
	// MTU less IPv6 and UDP headers (lane.IPv6UDPHeaders); lane.MaxDatagram, which the sockets
	// enforce.
	MaxDatagramV6 = lane.MaxDatagram
	// ChunkSize is the file bytes carried by one data datagram. It keeps the datagram within
	// MaxDatagramV6 so a session never depends on the address family.
	ChunkSize = MaxDatagramV6 - Overhead - DataFrameLen - 2 // 1406; Reed-Solomon parity of such chunks is 2 bytes longer and still fits
	// JumboChunkSize is the chunk of a session whose lanes agreed on large datagrams in their
	// handshake (loopback, or --mtu where the path proves it). Per-datagram costs (AEAD set-up and
	// tag, framing, acknowledgement, the kernel's per-segment work) are then paid once per 8 KiB.
	// It is 8 KiB less the 2 bytes Reed-Solomon parity adds (fec.JumboShardSize), so that a parity
	// row of whole chunks is a multiple of 64 bytes, as the wide code wants, and no longer than
	// the largest data datagram.
	JumboChunkSize = 8190
)

// DatagramFor returns the largest datagram of a session whose chunks are chunk bytes: a data
// datagram, or a parity datagram (2 bytes longer).
func DatagramFor(chunk int) int { return chunk + Overhead + DataFrameLen + 2 }

// Type is a datagram's kind.
type Type uint8

const (
	TypeData     Type = 1 // data, block hash or parity frame
	TypeFeedback Type = 2 // receiver → sender acknowledgements and window
	TypeHello    Type = 3 // lane opening, client → server
	TypeHelloAck Type = 4 // lane opening answer, server → client
	TypeClose    Type = 5 // orderly end of a session's UDP path
	TypePing     Type = 6 // sender → receiver keepalive while it has nothing to send (no payload)
	TypeControl  Type = 7 // a copy of a control message, or a part of one (either way)
)

func (t Type) valid() bool { return t >= TypeData && t <= TypeControl }

// Header is the clear part of every datagram.
type Header struct {
	Type   Type
	Lane   uint8
	Flags  uint8
	ConnID uint32 // random per session; cheap filter before AEAD
	Seq    uint64 // per lane and direction; never reused under one key
}

// ErrShort, ErrVersion and ErrType classify datagrams that are not Farwing's.
var (
	ErrShort   = errors.New("wire: datagram too short")
	ErrVersion = errors.New("wire: unknown protocol version")
	ErrType    = errors.New("wire: unknown datagram type")
)

// Put encodes h into b[:HeaderLen].
func (h Header) Put(b []byte) {
	_ = b[HeaderLen-1]
	b[0] = magic | Version
	b[1] = byte(h.Type)
	b[2] = h.Lane
	b[3] = h.Flags
	binary.BigEndian.PutUint32(b[4:8], h.ConnID)
	binary.BigEndian.PutUint64(b[8:16], h.Seq)
}

// ParseHeader decodes the clear header of a datagram.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen+TagLen {
		return Header{}, ErrShort
	}
	if b[0] != magic|Version {
		return Header{}, fmt.Errorf("%w: byte 0x%02x", ErrVersion, b[0])
	}
	h := Header{
		Type:   Type(b[1]),
		Lane:   b[2],
		Flags:  b[3],
		ConnID: binary.BigEndian.Uint32(b[4:8]),
		Seq:    binary.BigEndian.Uint64(b[8:16]),
	}
	if !h.Type.valid() {
		return Header{}, ErrType
	}
	return h, nil
}

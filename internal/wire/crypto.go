package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/farwing/farwing/internal/aesgcm"
)

// KeyLen is the session key size (AES-256).
const KeyLen = 32

// Direction separates the two nonce spaces of one session key.
type Direction uint8

const (
	ClientToServer Direction = 0
	ServerToClient Direction = 1
)

// ErrAuth is returned for a datagram that fails authentication: tampered, foreign or replayed.
var ErrAuth = errors.New("wire: datagram failed authentication")

// Crypto seals outgoing and opens incoming datagrams of one session. The nonce is
// direction ‖ lane ‖ 0 ‖ 0 ‖ seq, so it is unique as long as each lane's sequence number never
// repeats in a direction. Safe for concurrent use (the AEAD keeps no state between calls).
type Crypto struct {
	aead       *aesgcm.Datagram
	send, recv Direction
	connID     uint32
}

// NewCrypto returns a Crypto for the side that sends in direction send.
func NewCrypto(key []byte, connID uint32, send Direction) (*Crypto, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("wire: session key is %d bytes, want %d", len(key), KeyLen)
	}
	aead, err := aesgcm.NewDatagram(key)
	if err != nil {
		return nil, err
	}
	return &Crypto{aead: aead, send: send, recv: 1 - send, connID: connID}, nil
}

// ConnID is the session's connection id.
func (c *Crypto) ConnID() uint32 { return c.connID }

func nonce(n *[12]byte, dir Direction, lane uint8, seq uint64) {
	n[0] = byte(dir)
	n[1] = lane
	n[2], n[3] = 0, 0
	binary.BigEndian.PutUint64(n[4:], seq)
}

// aadLen is how much of a datagram of type t is clear, authenticated data.
func aadLen(t Type) int {
	if t == TypeData {
		return DataAADLen
	}
	return HeaderLen
}

// Seal writes h and the sealed plaintext into dst, which must have capacity for
// HeaderLen+len(plaintext)+TagLen, and returns the datagram. plaintext may alias
// dst[HeaderLen:] (in-place sealing). The plaintext of a data datagram starts with its data frame
// header, which stays in the clear.
func (c *Crypto) Seal(dst []byte, h Header, plaintext []byte) []byte {
	a := aadLen(h.Type)
	dst = dst[:a]
	copy(dst[HeaderLen:], plaintext[:a-HeaderLen])
	return c.seal(dst, h, plaintext[a-HeaderLen:])
}

// SealData seals a data datagram whose frame header is already in dst[HeaderLen:DataAADLen]:
// it writes h and the sealed payload into dst (capacity DataAADLen+len(payload)+TagLen) and
// returns the datagram. payload is read where it lies (a block's memory), or it is
// dst[DataAADLen:] exactly (in place).
func (c *Crypto) SealData(dst []byte, h Header, payload []byte) []byte {
	h.Type = TypeData
	return c.seal(dst[:DataAADLen], h, payload)
}

// seal writes h into aad[:HeaderLen] (aad holds the rest of the clear part already) and appends
// the sealed payload.
func (c *Crypto) seal(aad []byte, h Header, payload []byte) []byte {
	h.ConnID = c.connID
	h.Put(aad)
	// On the stack: aesgcm.Datagram takes the nonce by pointer and does not keep it (with VAES no
	// pool either; a nonce given to cipher.AEAD escapes through the interface).
	var n [12]byte
	nonce(&n, c.send, h.Lane, h.Seq)
	return c.aead.Seal(aad, &n, payload, aad)
}

// Check parses pkt's clear header and checks that it belongs to this session; it does not
// authenticate (see OpenChecked and OpenDataInto).
func (c *Crypto) Check(pkt []byte) (Header, error) {
	h, err := ParseHeader(pkt)
	if err != nil {
		return h, err
	}
	if h.ConnID != c.connID {
		return h, ErrAuth
	}
	if len(pkt) < aadLen(h.Type)+TagLen {
		return h, ErrShort
	}
	return h, nil
}

// Open authenticates and decrypts pkt in place and returns its header and plaintext (for a data
// datagram: its frame header followed by the payload, as Seal took them).
// A datagram for another session or one that was altered returns ErrAuth (or a header error).
func (c *Crypto) Open(pkt []byte) (Header, []byte, error) {
	h, err := c.Check(pkt)
	if err != nil {
		return h, nil, err
	}
	pt, err := c.OpenChecked(h, pkt)
	return h, pt, err
}

// OpenChecked is Open for a datagram whose header Check returned.
func (c *Crypto) OpenChecked(h Header, pkt []byte) ([]byte, error) {
	a := aadLen(h.Type)
	pt, err := c.open(h, pkt[a:a], pkt)
	if err != nil {
		return nil, err
	}
	return pkt[HeaderLen : a+len(pt)], nil
}

// OpenDataInto authenticates the data datagram pkt (its header from Check) and decrypts its
// payload into dst, which must be exactly DataPayloadLen(pkt) long and must not overlap pkt. On
// failure dst's contents are undefined (crypto/cipher clears it) and ErrAuth is returned.
func (c *Crypto) OpenDataInto(h Header, pkt, dst []byte) error {
	if h.Type != TypeData || len(dst) != DataPayloadLen(pkt) {
		return ErrAuth
	}
	_, err := c.open(h, dst[:0:len(dst)], pkt)
	return err
}

// DataPayloadLen is the payload length of the data datagram pkt.
func DataPayloadLen(pkt []byte) int { return len(pkt) - DataAADLen - TagLen }

func (c *Crypto) open(h Header, dst, pkt []byte) ([]byte, error) {
	a := aadLen(h.Type)
	var n [12]byte
	nonce(&n, c.recv, h.Lane, h.Seq)
	pt, err := c.aead.Open(dst, &n, pkt[a:], pkt[:a])
	if err != nil {
		return nil, ErrAuth
	}
	return pt, nil
}

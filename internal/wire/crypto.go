package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
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
// repeats in a direction. Safe for concurrent use (cipher.AEAD from crypto/aes is).
type Crypto struct {
	aead       cipher.AEAD
	send, recv Direction
	connID     uint32
}

// NewCrypto returns a Crypto for the side that sends in direction send.
func NewCrypto(key []byte, connID uint32, send Direction) (*Crypto, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("wire: session key is %d bytes, want %d", len(key), KeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Crypto{aead: aead, send: send, recv: 1 - send, connID: connID}, nil
}

// ConnID is the session's connection id.
func (c *Crypto) ConnID() uint32 { return c.connID }

// nonces holds 12-byte nonce buffers: a nonce passed to cipher.AEAD (an interface) escapes, so a
// stack array would cost one allocation per datagram.
var nonces = sync.Pool{New: func() any { return new([12]byte) }}

func nonce(n *[12]byte, dir Direction, lane uint8, seq uint64) {
	n[0] = byte(dir)
	n[1] = lane
	n[2], n[3] = 0, 0
	binary.BigEndian.PutUint64(n[4:], seq)
}

// Seal writes h and the sealed plaintext into dst, which must have capacity for
// HeaderLen+len(plaintext)+TagLen, and returns the datagram. plaintext may alias
// dst[HeaderLen:] (in-place sealing).
func (c *Crypto) Seal(dst []byte, h Header, plaintext []byte) []byte {
	h.ConnID = c.connID
	dst = dst[:HeaderLen]
	h.Put(dst)
	n := nonces.Get().(*[12]byte)
	nonce(n, c.send, h.Lane, h.Seq)
	out := c.aead.Seal(dst, n[:], plaintext, dst[:HeaderLen])
	nonces.Put(n)
	return out
}

// Open authenticates and decrypts pkt in place and returns its header and plaintext.
// A datagram for another session or one that was altered returns ErrAuth (or a header error).
func (c *Crypto) Open(pkt []byte) (Header, []byte, error) {
	h, err := ParseHeader(pkt)
	if err != nil {
		return h, nil, err
	}
	if h.ConnID != c.connID {
		return h, nil, ErrAuth
	}
	n := nonces.Get().(*[12]byte)
	nonce(n, c.recv, h.Lane, h.Seq)
	pt, err := c.aead.Open(pkt[HeaderLen:HeaderLen], n[:], pkt[HeaderLen:], pkt[:HeaderLen])
	nonces.Put(n)
	if err != nil {
		return h, nil, ErrAuth
	}
	return h, pt, nil
}

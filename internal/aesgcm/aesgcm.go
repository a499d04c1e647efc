// Package aesgcm provides AES-256-GCM (the datagram AEAD, docs/PROTOCOL.md) as a cipher.AEAD.
//
// On x86-64 CPUs with VAES, VPCLMULQDQ and AVX-512 it is this package's own implementation,
// which encrypts and authenticates sixteen blocks at a time in 512-bit registers; elsewhere, or
// after SetVAES(false) (FARWING_VAES=0, set by cmd/farwing), it is crypto/cipher's GCM. Both produce the same bytes (the tests compare
// them on random keys, nonces, lengths and associated data). Go's own AES-GCM uses 128-bit
// AES-NI and PCLMULQDQ only (golang.org/issue/42726): on a loopback copy it was a quarter of all
// CPU time, half of it per end.
package aesgcm

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"
)

// KeyLen is the key size: AES-256.
const KeyLen = 32

const (
	nonceSize = 12
	tagSize   = 16
	// maxPlaintext is GCM's limit for one message: 2^32-2 blocks.
	maxPlaintext = (1<<32 - 2) * 16
)

var errOpen = errors.New("aesgcm: message authentication failed")

// New returns AES-256-GCM with a 12-byte nonce and a 16-byte tag under key.
func New(key []byte) (cipher.AEAD, error) {
	if len(key) != KeyLen {
		return nil, errors.New("aesgcm: key is not 32 bytes")
	}
	if Accelerated() {
		return newVAES(key)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Datagram is AES-256-GCM for sealing and opening one datagram after another: New's AEAD behind
// methods that take the nonce by pointer. A nonce passed to cipher.AEAD (an interface) escapes, so
// its caller pays an allocation or a pool per call; with VAES these call this package's
// implementation directly and the nonce stays on the caller's stack. The same bytes either way.
// Safe for concurrent use.
type Datagram struct {
	v    *vaesGCM    // the VAES implementation, or nil
	aead cipher.AEAD // New's AEAD (v itself where v is set)
}

// NewDatagram returns a Datagram under key, with New's choice of implementation.
func NewDatagram(key []byte) (*Datagram, error) {
	aead, err := New(key)
	if err != nil {
		return nil, err
	}
	d := &Datagram{aead: aead}
	d.v, _ = aead.(*vaesGCM)
	return d, nil
}

// nonces holds nonce buffers for crypto/cipher's GCM, which takes the nonce through an interface.
var nonces = sync.Pool{New: func() any { return new([nonceSize]byte) }}

// Seal is cipher.AEAD's Seal with the nonce by pointer (it does not escape).
func (d *Datagram) Seal(dst []byte, nonce *[nonceSize]byte, plaintext, aad []byte) []byte {
	if d.v != nil {
		return d.v.seal(dst, nonce, plaintext, aad)
	}
	n := nonces.Get().(*[nonceSize]byte)
	*n = *nonce
	out := d.aead.Seal(dst, n[:], plaintext, aad)
	nonces.Put(n)
	return out
}

// Open is cipher.AEAD's Open with the nonce by pointer (it does not escape).
func (d *Datagram) Open(dst []byte, nonce *[nonceSize]byte, ciphertext, aad []byte) ([]byte, error) {
	if d.v != nil {
		return d.v.open(dst, nonce, ciphertext, aad)
	}
	n := nonces.Get().(*[nonceSize]byte)
	*n = *nonce
	out, err := d.aead.Open(dst, n[:], ciphertext, aad)
	nonces.Put(n)
	return out, err
}

// noVAES: SetVAES(false) was called.
var noVAES atomic.Bool

// SetVAES allows (on, the default) or forbids this package's VAES implementation for the keys
// New makes from now on. The process's command sets it once, before any session.
func SetVAES(on bool) { noVAES.Store(!on) }

// Accelerated reports whether New returns this package's VAES implementation.
func Accelerated() bool { return haveVAES && !noVAES.Load() }

// maxAggregated is the most blocks (associated data, ciphertext and lengths, each padded) that
// the assembly hashes with one power of H per block and a single reduction: a datagram is at
// most ~95. Longer messages are hashed 16 blocks per step.
const maxAggregated = 128

// gcmKey is what the assembly reads: the AES-256 round keys, then the powers
// H^maxAggregated … H^1 of the hash key (see pow), then zero blocks, so that a run of r blocks
// ending a message reads its powers H^r … H^1 from &hp[maxAggregated-r] with 64-byte loads and
// gets zeros past its end.
type gcmKey struct {
	rk [15][16]byte
	hp [maxAggregated + 16][16]byte
}

type vaesGCM struct{ k gcmKey }

func newVAES(key []byte) (*vaesGCM, error) {
	g := new(vaesGCM)
	expandKey256((*[32]byte)(key), &g.k.rk)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	var h [16]byte
	block.Encrypt(h[:], h[:])
	hh, hl := binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])
	ph, pl := hh, hl // H^1
	for i := 1; i <= maxAggregated; i++ {
		g.k.hp[maxAggregated-i] = pow(ph, pl)
		ph, pl = gfMul(ph, pl, hh, hl)
	}
	return g, nil
}

// gfMul multiplies x and y in GCM's field as NIST SP 800-38D's algorithm 1 does, in constant
// time. A field element is its block read as a big-endian 128-bit integer (hi, lo): the most
// significant bit is the coefficient of x^0. It only computes the powers of H, once per key.
func gfMul(xh, xl, yh, yl uint64) (zh, zl uint64) {
	vh, vl := yh, yl
	for i := range 128 {
		var bit uint64
		if i < 64 {
			bit = xh >> (63 - i) & 1
		} else {
			bit = xl >> (127 - i) & 1
		}
		m := -bit
		zh ^= vh & m
		zl ^= vl & m
		lsb := vl & 1
		vl = vl>>1 | vh<<63
		vh = vh>>1 ^ 0xe1<<56&-lsb
	}
	return zh, zl
}

// pow is a power of H as the assembly multiplies by it: the block byte-reversed (so that a
// 128-bit little-endian load gives the big-endian integer above), shifted left by one bit and
// reduced by x^128 + x^127 + x^126 + x^121 + 1 (the bit-reflected GCM polynomial; the usual
// representation of Gueron and Kounavis, which lets a carry-less product of a reflected block
// and such a power be reduced with two further multiplications).
func pow(h, l uint64) (b [16]byte) {
	carry := h >> 63
	h = h<<1 | l>>63
	l <<= 1
	h ^= 0xc2 << 56 & -carry
	l ^= carry
	binary.LittleEndian.PutUint64(b[:8], l)
	binary.LittleEndian.PutUint64(b[8:], h)
	return b
}

func (g *vaesGCM) NonceSize() int { return nonceSize }
func (g *vaesGCM) Overhead() int  { return tagSize }

func (g *vaesGCM) Seal(dst, nonce, plaintext, aad []byte) []byte {
	if len(nonce) != nonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	return g.seal(dst, (*[nonceSize]byte)(nonce), plaintext, aad)
}

func (g *vaesGCM) seal(dst []byte, nonce *[nonceSize]byte, plaintext, aad []byte) []byte {
	if uint64(len(plaintext)) > maxPlaintext {
		panic("aesgcm: message too large for GCM")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+tagSize)
	if inexactOverlap(out, plaintext) {
		panic("aesgcm: invalid buffer overlap")
	}
	var j0, tag [16]byte
	copy(j0[:], nonce[:])
	j0[15] = 1
	gcmCrypt(&g.k, unsafe.SliceData(out), unsafe.SliceData(plaintext), len(plaintext),
		unsafe.SliceData(aad), len(aad), &j0, &tag, true)
	copy(out[len(plaintext):], tag[:])
	return ret
}

func (g *vaesGCM) Open(dst, nonce, ciphertext, aad []byte) ([]byte, error) {
	if len(nonce) != nonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	return g.open(dst, (*[nonceSize]byte)(nonce), ciphertext, aad)
}

func (g *vaesGCM) open(dst []byte, nonce *[nonceSize]byte, ciphertext, aad []byte) ([]byte, error) {
	if len(ciphertext) < tagSize || uint64(len(ciphertext)) > maxPlaintext+tagSize {
		return nil, errOpen
	}
	n := len(ciphertext) - tagSize
	ret, out := sliceForAppend(dst, n)
	if inexactOverlap(out, ciphertext[:n]) {
		panic("aesgcm: invalid buffer overlap")
	}
	var j0, tag [16]byte
	copy(j0[:], nonce[:])
	j0[15] = 1
	gcmCrypt(&g.k, unsafe.SliceData(out), unsafe.SliceData(ciphertext), n,
		unsafe.SliceData(aad), len(aad), &j0, &tag, false)
	if !tagEqual(&tag, ciphertext[n:]) {
		clear(out)
		return nil, errOpen
	}
	return ret, nil
}

// tagEqual compares a computed tag with a received one (tagSize bytes) in constant time, as two
// 64-bit words: subtle.ConstantTimeCompare's byte loop was 1-2 % of a receiver's CPU per datagram.
func tagEqual(tag *[tagSize]byte, got []byte) bool {
	_ = got[tagSize-1]
	lo := binary.LittleEndian.Uint64(tag[:8]) ^ binary.LittleEndian.Uint64(got[:8])
	hi := binary.LittleEndian.Uint64(tag[8:]) ^ binary.LittleEndian.Uint64(got[8:16])
	return lo|hi == 0
}

// sliceForAppend extends in by n bytes, reallocating if needed: head is the whole result, tail
// the n new bytes.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}

// inexactOverlap reports whether x and y share memory at different offsets (the same start is
// allowed: in-place sealing and opening).
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	xs, ys := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&y[0]))
	return xs < ys+uintptr(len(y)) && ys < xs+uintptr(len(x))
}

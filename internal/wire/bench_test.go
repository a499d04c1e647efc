package wire

import (
	"crypto/rand"
	"testing"
)

// BenchmarkSeal seals one full data datagram in place per op (AES-256-GCM).
func BenchmarkSeal(b *testing.B) {
	key := make([]byte, KeyLen)
	rand.Read(key)
	c, _ := NewCrypto(key, 1, ClientToServer)
	buf := make([]byte, MaxDatagramV6)
	pt := buf[HeaderLen : MaxDatagramV6-TagLen]
	rand.Read(pt)
	b.SetBytes(int64(len(pt)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Seal(buf[:0], Header{Type: TypeData, Seq: uint64(i) + 1}, pt)
	}
}

// BenchmarkOpen opens one full data datagram in place per op.
func BenchmarkOpen(b *testing.B) {
	key := make([]byte, KeyLen)
	rand.Read(key)
	tx, _ := NewCrypto(key, 1, ClientToServer)
	rx, _ := NewCrypto(key, 1, ServerToClient)
	pt := make([]byte, MaxDatagramV6-Overhead)
	rand.Read(pt)
	sealed := tx.Seal(make([]byte, 0, MaxDatagramV6), Header{Type: TypeData, Seq: 1}, pt)
	work := make([]byte, len(sealed))
	b.SetBytes(int64(len(pt)))
	b.ReportAllocs()
	for b.Loop() {
		copy(work, sealed) // Open decrypts in place
		if _, _, err := rx.Open(work); err != nil {
			b.Fatal(err)
		}
	}
}

package aesgcm

import (
	"crypto/cipher"
	"fmt"
	"testing"
)

// BenchmarkSeal and BenchmarkOpen compare this package's AES-256-GCM with crypto/cipher's on a
// full data datagram (1,406 bytes of payload, 24 of associated data) and on larger messages.
func BenchmarkSeal(b *testing.B) { benchAEAD(b, true) }
func BenchmarkOpen(b *testing.B) { benchAEAD(b, false) }

func benchAEAD(b *testing.B, seal bool) {
	key := make([]byte, KeyLen)
	impls := []struct {
		name string
		g    cipher.AEAD
	}{{"stdlib", stdGCM(b, key)}}
	if haveVAES {
		g, _ := newVAES(key)
		impls = append(impls, struct {
			name string
			g    cipher.AEAD
		}{"vaes", g})
	}
	for _, n := range []int{1406, 8192} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("%s/%d", im.name, n), func(b *testing.B) {
				nonce, aad := make([]byte, nonceSize), make([]byte, 24)
				pt := make([]byte, n)
				ct := im.g.Seal(nil, nonce, pt, aad)
				out := make([]byte, n+tagSize)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if seal {
						im.g.Seal(out[:0], nonce, pt, aad)
					} else if _, err := im.g.Open(out[:0], nonce, ct, aad); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSealCold seals datagrams whose plaintext is not in the CPU's cache (a 64 MiB
// buffer walked through), as the sender does with blocks read some milliseconds before.
func BenchmarkSealCold(b *testing.B) {
	key := make([]byte, KeyLen)
	impls := map[string]cipher.AEAD{"stdlib": stdGCM(b, key)}
	if haveVAES {
		impls["vaes"], _ = newVAES(key)
	}
	for _, name := range []string{"stdlib", "vaes"} {
		g := impls[name]
		if g == nil {
			continue
		}
		b.Run(name, func(b *testing.B) {
			const n = 1406
			big := make([]byte, 64<<20)
			nonce, aad := make([]byte, nonceSize), make([]byte, 24)
			out := make([]byte, n+tagSize)
			b.SetBytes(n)
			off := 0
			for b.Loop() {
				g.Seal(out[:0], nonce, big[off:off+n], aad)
				off += n
				if off+n > len(big) {
					off = 0
				}
			}
		})
	}
}

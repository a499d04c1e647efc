package fec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The last shape is auto mode's: a quarter of a 1 MiB block (Leopard GF(2^8), which codes all 64
// parity rows in one pass), with the parity planned at 3 % loss.
var benchShapes = []struct{ k, m int }{{10, 2}, {10, 4}, {8, 2}, {8, 4}, {32, 8}, {187, 9}}

func fullLens(k int) []int {
	lens := make([]int, k)
	for i := range lens {
		lens[i] = MaxData
		if Wide(k) {
			lens[i] = WideMaxData
		}
	}
	return lens
}

// BenchmarkEncode codes m parity shards for k full data shards (1422 B data, 1424 B parity;
// 1406 and 1408 in a wide group).
// Bytes are data bytes.
func BenchmarkEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("k=%d,m=%d", s.k, s.m), func(b *testing.B) {
			tg := newTestGroup(b, rng, fullLens(s.k), s.m)
			var e Encoder
			b.SetBytes(int64(s.k * MaxData))
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Encode(tg.data, 0, tg.parity); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode assembles a group that lost m of its data shards (the worst case for the
// rebuild) from the other shards, and rebuilds it: copies into pooled buffers, reconstruction
// and the row checks. Bytes are data bytes.
func BenchmarkDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("k=%d,m=%d", s.k, s.m), func(b *testing.B) {
			tg := newTestGroup(b, rng, fullLens(s.k), s.m)
			g, _ := NewGroup(s.k, s.m, ShardSize)
			b.SetBytes(int64(s.k * MaxData))
			b.ReportAllocs()
			for b.Loop() {
				g.Reset(s.k, s.m, ShardSize)
				for idx := s.m; idx < s.k+s.m; idx++ {
					if _, err := g.Add(ShardID{K: s.k, M: s.m, Index: idx}, tg.shard(s.k, idx)); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := g.Reconstruct(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeNoLoss is the common case: every data shard arrives, nothing is rebuilt.
func BenchmarkDecodeNoLoss(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	const k, m = 10, 2
	tg := newTestGroup(b, rng, fullLens(k), m)
	g, _ := NewGroup(k, m, ShardSize)
	b.SetBytes(int64(k * MaxData))
	b.ReportAllocs()
	for b.Loop() {
		g.Reset(k, m, ShardSize)
		for idx := range k {
			g.Add(ShardID{K: k, M: m, Index: idx}, tg.data[idx])
		}
		if _, err := g.Reconstruct(); err != nil {
			b.Fatal(err)
		}
	}
}

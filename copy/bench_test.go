package copy

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"testing"

	"github.com/zeebo/blake3"
)

// BenchmarkBlockHash is one block digest (the block's BLAKE3 subtree node, tree.go) per op: the
// only hashing either end does per byte.
func BenchmarkBlockHash(b *testing.B) {
	data := make([]byte, BlockSize)
	rand.Read(data)
	plan, _ := NewPlan([]File{{Name: "f", Size: 4 * BlockSize}})
	b.SetBytes(BlockSize)
	b.ReportAllocs()
	for b.Loop() {
		s := plan.Sum(2, data)
		s.Digest()
	}
}

// BenchmarkBlake3Sum256 is a plain BLAKE3 of one block with github.com/zeebo/blake3, for
// comparison (before the tree digests, each end did this twice per block).
func BenchmarkBlake3Sum256(b *testing.B) {
	data := make([]byte, BlockSize)
	rand.Read(data)
	b.SetBytes(BlockSize)
	b.ReportAllocs()
	for b.Loop() {
		blake3.Sum256(data)
	}
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// memPlan is a one-file plan of n bytes served from memory.
func memPlan(b *testing.B, n int) (*Plan, Opener, []byte) {
	data := make([]byte, n)
	rand.Read(data)
	plan, err := NewPlan([]File{{Name: "f", Size: int64(n), Mode: 0o644}})
	if err != nil {
		b.Fatal(err)
	}
	return plan, func(int) (io.ReaderAt, io.Closer, error) { return bytes.NewReader(data), nopCloser{}, nil }, data
}

// BenchmarkRead reads, block-hashes and file-hashes a 64 MiB in-memory file per op: the sender's
// whole copy-side CPU cost.
func BenchmarkRead(b *testing.B) {
	const size = 64 << 20
	plan, open, _ := memPlan(b, size)
	pool := NewPool(32)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		out := make(chan *Block, 4)
		errc := make(chan error, 1)
		go func() {
			errc <- Read(context.Background(), plan, open, pool, out, func(int, [32]byte) {})
			close(out)
		}()
		for blk := range out {
			pool.Put(blk.Data)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteSink verifies a 64 MiB file block by block on one goroutine and checks its
// whole-file digest in sink mode per op: the receiver's copy-side CPU cost without the disk.
func BenchmarkWriteSink(b *testing.B) {
	const size = 64 << 20
	plan, _, data := memPlan(b, size)
	sum := blake3.Sum256(data)
	hashes := make([][32]byte, plan.NumBlocks())
	for i := range hashes {
		_, off, n := plan.Locate(uint32(i))
		s := plan.Sum(uint32(i), data[off:off+int64(n)])
		hashes[i] = s.Digest()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		w := NewWriter(plan, nil, WriterOptions{Sink: true, Digest: func(context.Context, int) ([32]byte, error) { return sum, nil }})
		for i := range hashes {
			_, off, n := plan.Locate(uint32(i))
			if err := w.WriteBlock(ctx, uint32(i), data[off:off+int64(n)], hashes[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Finish(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

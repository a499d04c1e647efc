package copy

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
)

// TestFileTree checks that the digest built from block nodes is the plain BLAKE3 of the file for
// sizes around every boundary of the tree (chunk, SIMD group, block).
func TestFileTree(t *testing.T) {
	data := make([]byte, 5*BlockSize+3*simdBytes+777)
	rand.Read(data)
	sizes := []int{0, 1, 63, 64, 65, 1023, 1024, 1025, 2048, 3000, simdBytes - 1, simdBytes, simdBytes + 1,
		2*simdBytes + 5, 3 * simdBytes, BlockSize - 1, BlockSize, BlockSize + 1, BlockSize + 1024, 2 * BlockSize,
		3*BlockSize + 12345, 4 * BlockSize, 5*BlockSize + 3*simdBytes + 777}
	for _, size := range sizes {
		f := data[:size]
		plan, err := NewPlan([]File{{Name: "x", Size: int64(size)}, {Name: "y", Size: int64(size)}})
		if err != nil {
			t.Fatal(err)
		}
		var tr fileTree
		first, nb := plan.FileBlocks(1) // the second file: its blocks are not global block 0
		for k := uint32(0); k < nb; k++ {
			_, off, n := plan.Locate(first + k)
			s := plan.Sum(first+k, f[off:off+int64(n)])
			tr.add(&s)
		}
		if got, want := tr.sum(), blake3.Sum256(f); got != want {
			t.Fatalf("size %d: tree digest %x, BLAKE3 %x", size, got[:8], want[:8])
		}
	}
}

// TestBlockDigestOffset checks that a block's digest depends on where it sits in its file.
func TestBlockDigestOffset(t *testing.T) {
	b := make([]byte, BlockSize)
	rand.Read(b)
	plan, _ := NewPlan([]File{{Name: "x", Size: 3 * BlockSize}})
	s0, s1 := plan.Sum(0, b), plan.Sum(1, b)
	if s0.Digest() == s1.Digest() {
		t.Fatal("equal blocks at different offsets have the same digest")
	}
	if !s1.Matches(s1.Digest()) {
		t.Fatal("Matches")
	}
}

// TestBlockHasher checks that hashing a block piece by piece, in any order, gives Plan.Sum.
func TestBlockHasher(t *testing.T) {
	data := make([]byte, 3*BlockSize)
	rand.Read(data)
	for _, size := range []int{1, 1024, 1025, PieceSize - 1, PieceSize, PieceSize + 1, 5*PieceSize + 100,
		BlockSize - 1, BlockSize, 2*BlockSize + 3*PieceSize + 1, 3 * BlockSize} {
		plan, err := NewPlan([]File{{Name: "x", Size: 7}, {Name: "y", Size: int64(size)}})
		if err != nil {
			t.Fatal(err)
		}
		first, nb := plan.FileBlocks(1)
		var h BlockHasher
		for k := first; k < first+nb; k++ {
			_, off, n := plan.Locate(k)
			blk := data[off : off+int64(n)]
			h.Reset(plan, k, n)
			np := Pieces(n)
			for _, i := range mrand.Perm(np) {
				h.Piece(i, blk[i*PieceSize:min((i+1)*PieceSize, n)])
			}
			got, want := h.Sum(), plan.Sum(k, blk)
			if got.Digest() != want.Digest() {
				t.Fatalf("size %d block %d (%d pieces): piecewise digest differs", size, k, np)
			}
		}
	}
}

package copy

import (
	"encoding/binary"

	"lukechampine.com/blake3/guts"
)

// Block digests are nodes of the file's own BLAKE3 tree.
//
// BLAKE3 hashes 1 KiB chunks into a left-complete binary tree, and a block (BlockSize = 1024
// chunks, aligned) is a whole subtree of it: the block's digest is that subtree's 32-byte
// chaining value, computed with the block's chunk counter within its file. The whole-file digest
// then follows from the block nodes with a few dozen parent compressions per file, so each end
// hashes every byte once, not twice, and the result is still the plain BLAKE3 of the file
// (b3sum-compatible). The same construction verifies streams in Bao.

// chunksPerBlock is the BLAKE3 chunk count of a full block.
const chunksPerBlock = BlockSize / guts.ChunkSize

// simdBytes is what guts.CompressBuffer takes at once.
const simdBytes = guts.MaxSIMD * guts.ChunkSize

// blockNode returns the root node (not yet compressed) of the subtree over data, which starts at
// BLAKE3 chunk index counter. data must hold at most one block.
func blockNode(data []byte, counter uint64) guts.Node {
	if len(data) <= guts.ChunkSize {
		return guts.CompressChunk(data, &guts.IV, counter, 0)
	}
	var cvs [chunksPerBlock / guts.MaxSIMD][8]uint32
	n := 0
	for off := 0; off < len(data); off += simdBytes {
		ln := min(simdBytes, len(data)-off)
		var nd guts.Node
		if ln == simdBytes {
			nd = guts.CompressBuffer((*[simdBytes]byte)(data[off:off+simdBytes]), ln, &guts.IV, counter+uint64(off/guts.ChunkSize), 0)
		} else {
			// The tail: the SIMD code reads whole buffers, so give it one of its own.
			var tail [simdBytes]byte
			copy(tail[:], data[off:])
			nd = guts.CompressBuffer(&tail, ln, &guts.IV, counter+uint64(off/guts.ChunkSize), 0)
		}
		if off == 0 && ln == len(data) {
			return nd // at most 16 chunks: that buffer's root is the block's
		}
		cvs[n] = guts.ChainingValue(nd)
		n++
	}
	// Pairwise with carry, bottom up: the left-complete tree BLAKE3 prescribes (every group but
	// the last is a full power-of-two subtree).
	for n > 2 {
		h := n / 2
		for i := range h {
			cvs[i] = guts.ChainingValue(guts.ParentNode(cvs[2*i], cvs[2*i+1], &guts.IV, 0))
		}
		if n%2 == 1 {
			cvs[h] = cvs[n-1]
			h++
		}
		n = h
	}
	return guts.ParentNode(cvs[0], cvs[1], &guts.IV, 0)
}

// cvBytes encodes a chaining value as BLAKE3 does its output.
func cvBytes(cv [8]uint32) (b [32]byte) {
	for i, w := range cv {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// BlockSum is a block's place in its file's BLAKE3 tree, as computed by Plan.Sum.
type BlockSum struct {
	node guts.Node
}

// Digest is the block digest sent with the block: the subtree's chaining value.
func (s *BlockSum) Digest() [32]byte { return cvBytes(guts.ChainingValue(s.node)) }

// Matches reports whether the block's digest is hash.
func (s *BlockSum) Matches(hash [32]byte) bool { return s.Digest() == hash }

// Sum hashes global block b, whose bytes are data. It is safe for concurrent use: both ends
// hash blocks on several goroutines and feed the results to the file digest in order.
func (p *Plan) Sum(b uint32, data []byte) BlockSum {
	_, off, _ := p.Locate(b)
	return BlockSum{node: blockNode(data, uint64(off/BlockSize)*chunksPerBlock)}
}

// fileTree computes a file's BLAKE3 digest from its block nodes, given in order. It keeps the
// chaining values of completed power-of-two subtrees on a stack, like the BLAKE3 reference
// hasher, and holds the newest block back until it knows whether that block is the last.
type fileTree struct {
	stack   [64][8]uint32
	depth   int
	blocks  uint64 // blocks pushed onto the stack
	pending guts.Node
	have    bool
}

func (t *fileTree) reset() { t.depth, t.blocks, t.have = 0, 0, false }

// add appends the next block of the file.
func (t *fileTree) add(s *BlockSum) {
	if t.have {
		cv := guts.ChainingValue(t.pending)
		t.blocks++
		for total := t.blocks; total&1 == 0; total >>= 1 {
			t.depth--
			cv = guts.ChainingValue(guts.ParentNode(t.stack[t.depth], cv, &guts.IV, 0))
		}
		t.stack[t.depth] = cv
		t.depth++
	}
	t.pending, t.have = s.node, true
}

// sum returns the BLAKE3 digest of the blocks added so far.
func (t *fileTree) sum() [32]byte {
	n := t.pending
	if !t.have {
		n = guts.CompressChunk(nil, &guts.IV, 0, 0) // the empty file
	}
	for k := t.depth - 1; k >= 0; k-- {
		n = guts.ParentNode(t.stack[k], guts.ChainingValue(n), &guts.IV, 0)
	}
	n.Flags |= guts.FlagRoot
	w := guts.CompressNode(n)
	var cv [8]uint32
	copy(cv[:], w[:8])
	return cvBytes(cv)
}

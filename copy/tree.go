package copy

import (
	"encoding/binary"
	"sync"

	"github.com/farwing/farwing/internal/b3"
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

// PieceSize is the unit a block is hashed in: one SIMD buffer of guts (16 chunks). Hashing each
// piece as soon as its bytes are in memory (just read, just decrypted) finds them in the CPU's
// cache; hashing the whole block afterwards read it back from DRAM at half the speed.
const PieceSize = simdBytes

// PiecesPerBlock is the number of pieces of a full block.
const PiecesPerBlock = BlockSize / PieceSize

// pieceNode returns the root node of the subtree over one piece (at most PieceSize bytes),
// which starts at chunk index counter.
func pieceNode(data []byte, counter uint64) guts.Node {
	if len(data) <= guts.ChunkSize {
		return guts.CompressChunk(data, &guts.IV, counter, 0)
	}
	if len(data) == PieceSize {
		return guts.CompressBuffer((*[simdBytes]byte)(data), PieceSize, &guts.IV, counter, 0)
	}
	// The SIMD code reads whole buffers: give a short piece one of its own.
	var tail [simdBytes]byte
	copy(tail[:], data)
	return guts.CompressBuffer(&tail, len(data), &guts.IV, counter, 0)
}

// mergeCVs returns the root node of the left-complete tree over the chaining values cvs[:n]
// (n >= 2) of a block's pieces or chunks, merging them in place: pairwise with carry, bottom up,
// as BLAKE3 prescribes (every group but the last is a full power-of-two subtree), 16 parents per
// b3.Parents16 call. len(cvs) must be a multiple of 32, at least n: a call reads 32 values and
// the kernel writes 16, past n reading values left from before and writing values never read.
func mergeCVs(cvs [][8]uint32, n int) guts.Node {
	for n > 2 {
		h := n / 2
		carry := cvs[n-1]
		for c := 0; c < h; c += 16 {
			b3.Parents16((*[16][8]uint32)(cvs[c:]), (*[32][8]uint32)(cvs[2*c:]), min(16, h-c))
		}
		if n%2 == 1 {
			cvs[h] = carry
			h++
		}
		n = h
	}
	return guts.ParentNode(cvs[0], cvs[1], &guts.IV, 0)
}

// BlockHasher computes a block's digest a piece at a time, the pieces in any order and on any
// goroutines (each piece's result has its own slot), so that each piece is hashed where and
// when its bytes were just written. Sum, after every piece, gives what Plan.Sum gives.
//
// With AVX-512 (internal/b3) a piece leaves its 16 chunk values and Sum merges all of a block's
// chunk values 16 parents at a time; otherwise each piece is reduced to its own subtree's value
// (guts, AVX2) and Sum merges those.
type BlockHasher struct {
	counter uint64 // the block's first chunk index within its file
	n       int    // pieces
	chunks  int    // chunks, the last one possibly partial
	single  guts.Node
	cvs     [PiecesPerBlock][8]uint32  // piece values (without AVX-512)
	ccv     *[chunksPerBlock][8]uint32 // chunk values (with AVX-512), from ccvPool until Sum
}

// ccvPool recycles the chunk values of blocks being hashed (32 KiB each): the receiver has a
// hasher per block in flight, and allocating them anew cost it fresh memory for every block.
var ccvPool = sync.Pool{New: func() any { return new([chunksPerBlock][8]uint32) }}

// Pieces returns the number of pieces of a block of n bytes.
func Pieces(n int) int { return max((n+PieceSize-1)/PieceSize, 1) }

// Reset prepares h for global block b of n bytes.
func (h *BlockHasher) Reset(p *Plan, b uint32, n int) {
	_, off, _ := p.Locate(b)
	h.counter = uint64(off/BlockSize) * chunksPerBlock
	h.n = Pieces(n)
	h.chunks = (n + guts.ChunkSize - 1) / guts.ChunkSize
	if b3.Available && h.n > 1 && h.ccv == nil {
		h.ccv = ccvPool.Get().(*[chunksPerBlock][8]uint32)
	}
}

// Piece hashes piece i, whose bytes are data (block[i*PieceSize:], at most PieceSize bytes).
func (h *BlockHasher) Piece(i int, data []byte) {
	first := i * (PieceSize / guts.ChunkSize)
	counter := h.counter + uint64(first)
	switch {
	case h.n == 1:
		h.single = pieceNode(data, counter)
	case !b3.Available:
		h.cvs[i] = guts.ChainingValue(pieceNode(data, counter))
	case len(data) == PieceSize:
		b3.Chunks16((*[16][8]uint32)(h.ccv[first:]), (*[PieceSize]byte)(data), counter)
	default:
		// The block's last piece, short: the kernel reads whole chunks, so give it a padded
		// copy, and hash a partial last chunk on its own.
		var tail [PieceSize]byte
		var cvs [16][8]uint32
		copy(tail[:], data)
		b3.Chunks16(&cvs, &tail, counter)
		whole := len(data) / guts.ChunkSize
		copy(h.ccv[first:first+whole], cvs[:whole])
		if rest := data[whole*guts.ChunkSize:]; len(rest) > 0 {
			h.ccv[first+whole] = guts.ChainingValue(guts.CompressChunk(rest, &guts.IV, counter+uint64(whole), 0))
		}
	}
}

// Range hashes the pieces of block[lo:hi]: lo is a multiple of PieceSize, and so is hi unless it
// is len(block).
func (h *BlockHasher) Range(block []byte, lo, hi int) {
	for q := lo; q < hi; q += PieceSize {
		h.Piece(q/PieceSize, block[q:min(q+PieceSize, len(block))])
	}
}

// Sum returns the block's sum once every piece has been hashed. It uses up h's values: call
// Reset before hashing another block with it.
func (h *BlockHasher) Sum() BlockSum {
	switch {
	case h.n == 1:
		return BlockSum{node: h.single}
	case !b3.Available:
		return BlockSum{node: mergeCVs(h.cvs[:], h.n)}
	}
	nd := mergeCVs(h.ccv[:], h.chunks)
	ccvPool.Put(h.ccv)
	h.ccv = nil
	return BlockSum{node: nd}
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
	var h BlockHasher
	h.Reset(p, b, len(data))
	h.Range(data, 0, len(data))
	return h.Sum()
}

// fileTree computes a file's BLAKE3 digest from its block nodes, given in order. It keeps the
// chaining values of completed power-of-two subtrees on a stack, like the BLAKE3 reference
// hasher, and holds the newest block back until it knows whether that block is the last.
type fileTree struct {
	stack   [64][8]uint32
	depth   int
	blocks  uint64 // blocks pushed onto the stack
	pending guts.Node
	// pendingCV is the pending block's chaining value where only that was given (addCV).
	pendingCV [8]uint32
	cvOnly    bool
	have      bool
}

func (t *fileTree) reset() { t.depth, t.blocks, t.have = 0, 0, false }

// add appends the next block of the file.
func (t *fileTree) add(s *BlockSum) {
	t.push()
	t.pending, t.cvOnly, t.have = s.node, false, true
}

// addCV appends the next block by its chaining value alone (its digest): enough for any block of
// a file of more than one block. The only block of a one-block file is the root, whose digest
// needs its node (add).
func (t *fileTree) addCV(cv [8]uint32) {
	t.push()
	t.pendingCV, t.cvOnly, t.have = cv, true, true
}

// pendingChain is the pending block's chaining value.
func (t *fileTree) pendingChain() [8]uint32 {
	if t.cvOnly {
		return t.pendingCV
	}
	return guts.ChainingValue(t.pending)
}

// push moves the pending block, now known not to be the last, onto the stack.
func (t *fileTree) push() {
	if !t.have {
		return
	}
	cv := t.pendingChain()
	t.blocks++
	for total := t.blocks; total&1 == 0; total >>= 1 {
		t.depth--
		cv = guts.ChainingValue(guts.ParentNode(t.stack[t.depth], cv, &guts.IV, 0))
	}
	t.stack[t.depth] = cv
	t.depth++
}

// count is the number of blocks added.
func (t *fileTree) count() uint64 {
	if t.have {
		return t.blocks + 1
	}
	return 0
}

// sum returns the BLAKE3 digest of the blocks added so far.
func (t *fileTree) sum() [32]byte {
	n := t.pending
	if !t.have {
		n = guts.CompressChunk(nil, &guts.IV, 0, 0) // the empty file
	}
	for k := t.depth - 1; k >= 0; k-- {
		cv := guts.ChainingValue(n)
		if k == t.depth-1 && t.have {
			cv = t.pendingChain()
		}
		n = guts.ParentNode(t.stack[k], cv, &guts.IV, 0)
	}
	n.Flags |= guts.FlagRoot
	w := guts.CompressNode(n)
	var cv [8]uint32
	copy(cv[:], w[:8])
	return cvBytes(cv)
}

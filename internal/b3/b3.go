// Package b3 computes many BLAKE3 chaining values at once with AVX-512: the chunk values of 16
// whole chunks, or the parent values of 16 pairs of nodes, one input per 32-bit lane. It is the
// hashing kernel under copy's block digests; elsewhere (no AVX-512, or the purego tag) Available
// is false and the portable functions here compute the same values one node at a time.
//
// Both use the plain hashing mode (the IV as key, no mode flags) and never the ROOT flag: the
// caller finalises the root node itself.
package b3

import "lukechampine.com/blake3/guts"

// ChunkSize is BLAKE3's chunk, and Chunks16 hashes 16 of them.
const ChunkSize = guts.ChunkSize

// Available reports whether the AVX-512 kernels run on this machine.
var Available = available

// Chunks16 sets cvs[i] to the chaining value of the whole chunk buf[1024 i : 1024 (i+1)], whose
// index within its file is counter+i.
func Chunks16(cvs *[16][8]uint32, buf *[16 * ChunkSize]byte, counter uint64) {
	if !Available {
		chunksGeneric(cvs, buf, counter)
		return
	}
	var ctr [2][16]uint32
	for i := range 16 {
		c := counter + uint64(i)
		ctr[0][i], ctr[1][i] = uint32(c), uint32(c>>32)
	}
	chunks16(cvs, buf, &ctr)
}

// Parents16 sets out[i] to the chaining value of the parent of in[2i] and in[2i+1] for i < n
// (n <= 16); out may be in's first half. The kernel computes all 16 at the cost of one (and
// writes out[n:] too); the portable code computes and writes only n.
func Parents16(out *[16][8]uint32, in *[32][8]uint32, n int) {
	if !Available {
		parentsGeneric(out, in, n)
		return
	}
	parents16(out, in)
}

func chunksGeneric(cvs *[16][8]uint32, buf *[16 * ChunkSize]byte, counter uint64) {
	for i := range cvs {
		cvs[i] = guts.ChainingValue(guts.CompressChunk(buf[i*ChunkSize:(i+1)*ChunkSize], &guts.IV, counter+uint64(i), 0))
	}
}

func parentsGeneric(out *[16][8]uint32, in *[32][8]uint32, n int) {
	var r [16][8]uint32
	for i := range n {
		r[i] = guts.ChainingValue(guts.ParentNode(in[2*i], in[2*i+1], &guts.IV, 0))
	}
	copy(out[:n], r[:n])
}

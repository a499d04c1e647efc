//go:build !amd64 || purego

package b3

const available = false

func chunks16(cvs *[16][8]uint32, buf *[16 * ChunkSize]byte, ctr *[2][16]uint32) {
	panic("b3: no AVX-512")
}

func parents16(out *[16][8]uint32, in *[32][8]uint32) { panic("b3: no AVX-512") }

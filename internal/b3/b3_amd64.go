//go:build amd64 && !purego

package b3

import "golang.org/x/sys/cpu"

//go:generate sh -c "go run gen_amd64.go > b3_amd64.s"

// available needs AVX512F only (VPRORD, VPTERNLOG-free code, VSHUFI32X4, VEXTRACTI32X4); x/sys/cpu
// also checks that the OS saves the ZMM state.
var available = cpu.X86.HasAVX512F

//go:noescape
func chunks16(cvs *[16][8]uint32, buf *[16 * ChunkSize]byte, ctr *[2][16]uint32)

//go:noescape
func parents16(out *[16][8]uint32, in *[32][8]uint32)

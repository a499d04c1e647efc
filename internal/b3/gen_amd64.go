//go:build ignore

// gen_amd64.go writes b3_amd64.s, the AVX-512 BLAKE3 kernels: go run gen_amd64.go > b3_amd64.s
//
// Both kernels compress 16 independent inputs at once, one per 32-bit lane of a ZMM register.
// The 16 message rows (64 bytes each) are loaded whole and transposed in registers with
// VPUNPCK*/VSHUFI32X4 (64 shuffles per block) rather than gathered; the state rotates with
// VPRORD; the message schedule is a renaming done here, at generation time, so the rounds move
// no data. Registers: Z0-Z7 hold the chaining values (the state's first row pair) across blocks;
// the other 24 hold the 16 message words and state rows v8-v15 of the block in hand.
package main

import (
	"fmt"
	"os"
	"strings"
)

var out strings.Builder

func emit(format string, a ...any) { fmt.Fprintf(&out, "\t"+format+"\n", a...) }

func z(r int) string { return fmt.Sprintf("Z%d", r) }

// regs hands out the ZMM registers above Z7.
type regs struct{ free []int }

func (p *regs) get() int {
	r := p.free[0]
	p.free = p.free[1:]
	return r
}

func (p *regs) put(r ...int) { p.free = append(p.free, r...) }

// transpose16 turns 16 rows (row i in rows[i], 16 dwords) into 16 columns: it returns col with
// col[j] holding dword j of every row, lane i from row i. It frees the row registers.
func transpose16(p *regs, rows [16]int) (col [16]int) {
	// Stage 1: interleave dwords of row pairs. a[k] (low) and b[k] (high) come from rows 2k, 2k+1.
	var a, b [8]int
	for k := range 8 {
		r0, r1 := rows[2*k], rows[2*k+1]
		a[k], b[k] = p.get(), p.get()
		emit("VPUNPCKLDQ %s, %s, %s", z(r1), z(r0), z(a[k]))
		emit("VPUNPCKHDQ %s, %s, %s", z(r1), z(r0), z(b[k]))
		p.put(r0, r1)
	}
	// Stage 2: interleave qwords. c[m][q], lane L: rows 4m..4m+3 of column 4L+q.
	var c [4][4]int
	for m := range 4 {
		for q, src := range [2][8]int{a, b} {
			lo, hi := src[2*m], src[2*m+1]
			c[m][2*q], c[m][2*q+1] = p.get(), p.get()
			emit("VPUNPCKLQDQ %s, %s, %s", z(hi), z(lo), z(c[m][2*q]))
			emit("VPUNPCKHQDQ %s, %s, %s", z(hi), z(lo), z(c[m][2*q+1]))
			p.put(lo, hi)
		}
	}
	// Stages 3 and 4: for each q, a 4x4 transpose of 128-bit lanes across c[0..3][q].
	for q := range 4 {
		d := [4]int{p.get(), p.get(), p.get(), p.get()}
		emit("VSHUFI32X4 $0x88, %s, %s, %s", z(c[1][q]), z(c[0][q]), z(d[0]))
		emit("VSHUFI32X4 $0xdd, %s, %s, %s", z(c[1][q]), z(c[0][q]), z(d[1]))
		emit("VSHUFI32X4 $0x88, %s, %s, %s", z(c[3][q]), z(c[2][q]), z(d[2]))
		emit("VSHUFI32X4 $0xdd, %s, %s, %s", z(c[3][q]), z(c[2][q]), z(d[3]))
		p.put(c[0][q], c[1][q], c[2][q], c[3][q])
		for i, sel := range [4]struct {
			x, y int
			imm  string
		}{{0, 2, "0x88"}, {1, 3, "0x88"}, {0, 2, "0xdd"}, {1, 3, "0xdd"}} {
			col[4*i+q] = p.get()
			emit("VSHUFI32X4 $%s, %s, %s, %s", sel.imm, z(d[sel.y]), z(d[sel.x]), z(col[4*i+q]))
		}
		p.put(d[:]...)
	}
	return col
}

// storeCVs writes the chaining values in Z0-Z7 (word j of input i in lane i of Zj) to the
// [16][8]uint32 at AX: the 8 x 16 half of transpose16, then 128-bit stores.
func storeCVs(p *regs) {
	var a, b [4]int
	for k := range 4 {
		a[k], b[k] = p.get(), p.get()
		emit("VPUNPCKLDQ %s, %s, %s", z(2*k+1), z(2*k), z(a[k]))
		emit("VPUNPCKHDQ %s, %s, %s", z(2*k+1), z(2*k), z(b[k]))
	}
	// c[m][q] lane L: words 4m..4m+3 of input 4L+q.
	for m := range 2 {
		for q, src := range [2][4]int{a, b} {
			lo, hi := src[2*m], src[2*m+1]
			c0, c1 := p.get(), p.get()
			emit("VPUNPCKLQDQ %s, %s, %s", z(hi), z(lo), z(c0))
			emit("VPUNPCKHQDQ %s, %s, %s", z(hi), z(lo), z(c1))
			for qq, cr := range [2]int{c0, c1} {
				for L := range 4 {
					emit("VEXTRACTI32X4 $%d, %s, %d(AX)", L, z(cr), 32*(4*L+2*q+qq)+16*m)
				}
			}
			p.put(c0, c1)
		}
	}
	p.put(a[:]...)
	p.put(b[:]...)
}

var msgPerm = [16]int{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8}

// rounds emits BLAKE3's seven rounds on state registers v with message registers m, the four
// G functions of each half round interleaved step by step.
func rounds(v [16]int, m [16]int) {
	for r := range 7 {
		for half := range 2 {
			var gs [4][4]int // a, b, c, d
			if half == 0 {
				gs = [4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}
			} else {
				gs = [4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
			}
			mx := func(g, k int) int { return m[8*half+2*g+k] }
			each := func(f func(g int, a, b, c, d int)) {
				for g, s := range gs {
					f(g, v[s[0]], v[s[1]], v[s[2]], v[s[3]])
				}
			}
			for k, rot := range [2][2]int{{16, 12}, {8, 7}} {
				each(func(g, a, b, c, d int) { emit("VPADDD %s, %s, %s", z(b), z(a), z(a)) })
				each(func(g, a, b, c, d int) { emit("VPADDD %s, %s, %s", z(mx(g, k)), z(a), z(a)) })
				each(func(g, a, b, c, d int) { emit("VPXORD %s, %s, %s", z(a), z(d), z(d)) })
				each(func(g, a, b, c, d int) { emit("VPRORD $%d, %s, %s", rot[0], z(d), z(d)) })
				each(func(g, a, b, c, d int) { emit("VPADDD %s, %s, %s", z(d), z(c), z(c)) })
				each(func(g, a, b, c, d int) { emit("VPXORD %s, %s, %s", z(c), z(b), z(b)) })
				each(func(g, a, b, c, d int) { emit("VPRORD $%d, %s, %s", rot[1], z(b), z(b)) })
			}
		}
		if r < 6 {
			var next [16]int
			for i := range next {
				next[i] = m[msgPerm[i]]
			}
			m = next
		}
	}
}

// block emits the compression of one 64-byte block of each of 16 inputs, row i at
// rowOff(i)(SI), into the chaining values Z0-Z7. lowState emits the loads of v8-v15 into the
// registers it is given.
func block(rowOff func(i int) int, lowState func(v [8]int)) {
	p := &regs{}
	for r := 8; r < 32; r++ {
		p.put(r)
	}
	var rows [16]int
	for i := range rows {
		rows[i] = p.get()
		emit("VMOVDQU32 %d(SI), %s", rowOff(i), z(rows[i]))
	}
	m := transpose16(p, rows)
	var v [16]int
	for i := range 8 {
		v[i] = i
	}
	var low [8]int
	for i := range low {
		low[i] = p.get()
		v[8+i] = low[i]
	}
	lowState(low)
	rounds(v, m)
	for i := range 8 {
		emit("VPXORD %s, %s, %s", z(v[8+i]), z(i), z(i))
	}
}

func main() {
	fmt.Fprintln(&out, "// Code generated by gen_amd64.go; DO NOT EDIT.")
	fmt.Fprintln(&out, "\n//go:build amd64 && !purego\n")
	fmt.Fprintln(&out, "#include \"textflag.h\"\n")
	iv := []uint32{0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19}
	for i, w := range iv {
		fmt.Fprintf(&out, "DATA iv<>+%d(SB)/4, $0x%08x\n", 4*i, w)
	}
	fmt.Fprintf(&out, "GLOBL iv<>(SB), RODATA|NOPTR, $32\n\n")
	// Per-block flags of a chunk: CHUNK_START on the first, CHUNK_END on the last; then the
	// block length (64) and the parent flag.
	for i := range 16 {
		f := 0
		if i == 0 {
			f |= 1
		}
		if i == 15 {
			f |= 2
		}
		fmt.Fprintf(&out, "DATA consts<>+%d(SB)/4, $%d\n", 4*i, f)
	}
	fmt.Fprintf(&out, "DATA consts<>+64(SB)/4, $64\n")
	fmt.Fprintf(&out, "DATA consts<>+68(SB)/4, $4\n")
	fmt.Fprintf(&out, "GLOBL consts<>(SB), RODATA|NOPTR, $72\n\n")

	ivState := func() {
		for i := range 8 {
			emit("VPBROADCASTD iv<>+%d(SB), Z%d", 4*i, i)
		}
	}

	// chunks16 hashes 16 whole chunks: every block of chunk i at buf + 1024 i + 64 b.
	fmt.Fprintln(&out, "// func chunks16(cvs *[16][8]uint32, buf *[16384]byte, ctr *[2][16]uint32)")
	fmt.Fprintln(&out, "TEXT ·chunks16(SB), NOSPLIT, $0-24")
	emit("MOVQ cvs+0(FP), AX")
	emit("MOVQ buf+8(FP), SI")
	emit("MOVQ ctr+16(FP), CX")
	emit("LEAQ consts<>(SB), R8")
	emit("XORQ DX, DX")
	ivState()
	fmt.Fprintln(&out, "loop:")
	block(func(i int) int { return 1024 * i }, func(v [8]int) {
		for i := range 4 {
			emit("VPBROADCASTD iv<>+%d(SB), %s", 4*i, z(v[i]))
		}
		emit("VMOVDQU32 (CX), %s", z(v[4]))
		emit("VMOVDQU32 64(CX), %s", z(v[5]))
		emit("VPBROADCASTD 64(R8), %s", z(v[6]))
		emit("VPBROADCASTD (R8)(DX*4), %s", z(v[7]))
	})
	emit("ADDQ $64, SI")
	emit("INCQ DX")
	emit("CMPQ DX, $16")
	emit("JNE loop")
	storeCVs(&regs{free: []int{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}})
	emit("VZEROUPPER")
	emit("RET")

	// parents16 compresses 16 parent nodes: parent i's block is in[2i] || in[2i+1], at in + 64 i.
	fmt.Fprintln(&out, "\n// func parents16(out *[16][8]uint32, in *[32][8]uint32)")
	fmt.Fprintln(&out, "TEXT ·parents16(SB), NOSPLIT, $0-16")
	emit("MOVQ out+0(FP), AX")
	emit("MOVQ in+8(FP), SI")
	emit("LEAQ consts<>(SB), R8")
	ivState()
	block(func(i int) int { return 64 * i }, func(v [8]int) {
		for i := range 4 {
			emit("VPBROADCASTD iv<>+%d(SB), %s", 4*i, z(v[i]))
		}
		emit("VPXORD %s, %s, %s", z(v[4]), z(v[4]), z(v[4]))
		emit("VPXORD %s, %s, %s", z(v[5]), z(v[5]), z(v[5]))
		emit("VPBROADCASTD 64(R8), %s", z(v[6]))
		emit("VPBROADCASTD 68(R8), %s", z(v[7]))
	})
	storeCVs(&regs{free: []int{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}})
	emit("VZEROUPPER")
	emit("RET")

	os.Stdout.WriteString(out.String())
}

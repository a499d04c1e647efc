//go:build amd64 && !purego

#include "textflag.h"

#define maxAggregated 128 // aesgcm.go

// AES-256-GCM with VAES and VPCLMULQDQ on 512-bit registers: 16 blocks (256 bytes) per group,
// four blocks per register. The last group of a message, or of its associated data, is loaded
// and stored with byte masks (AVX-512BW), so there is no separate tail code.
//
// GHASH follows Gueron and Kounavis: blocks are byte-reversed (a little-endian load of the
// reversed block is the block's big-endian integer), multiplied without carry by powers of H
// stored shifted left by one and reduced (aesgcm.go, pow), and a 256-bit product is reduced by
// two multiplications by 0xc2 << 56. A group of r blocks X1 … Xr updates the hash Y to
// (Y ^ X1)·H^r ^ X2·H^(r-1) ^ … ^ Xr·H: every product of the group is summed first and reduced
// once.
//
// Registers:
//   Z16-Z30  the 15 round keys, each broadcast to the four 128-bit lanes
//   Z31      the byte-reversal shuffle, in every lane
//   X12      0xc2 << 56, the reduction constant
//   X13      the hash Y (upper lanes zero)
//   Z14      the next four counter blocks, byte-reversed (the 32-bit counter is dword 0)
//   Z15      4 in dword 0 of every lane: the step between groups of four blocks
//   Z0-Z3    AES state; Z4-Z7 the group's data; Z8-Z11 products; K1-K4 byte masks

DATA bswapMask<>+0x00(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapMask<>+0x08(SB)/8, $0x0001020304050607
GLOBL bswapMask<>(SB), RODATA|NOPTR, $16

DATA redPoly<>+0x00(SB)/8, $0xc200000000000000
DATA redPoly<>+0x08(SB)/8, $0x0000000000000000
GLOBL redPoly<>(SB), RODATA|NOPTR, $16

DATA ctrInc<>+0x00(SB)/8, $4
DATA ctrInc<>+0x08(SB)/8, $0
GLOBL ctrInc<>(SB), RODATA|NOPTR, $16

// ctrFirst turns J0 (counter 1) into the counters 2, 3, 4, 5 of the first four blocks.
DATA ctrFirst<>+0x00(SB)/8, $1
DATA ctrFirst<>+0x08(SB)/8, $0
DATA ctrFirst<>+0x10(SB)/8, $2
DATA ctrFirst<>+0x18(SB)/8, $0
DATA ctrFirst<>+0x20(SB)/8, $3
DATA ctrFirst<>+0x28(SB)/8, $0
DATA ctrFirst<>+0x30(SB)/8, $4
DATA ctrFirst<>+0x38(SB)/8, $0
GLOBL ctrFirst<>(SB), RODATA|NOPTR, $64

// func expandKey256(key *[32]byte, rk *[15][16]byte)
TEXT ·expandKey256(SB), NOSPLIT, $0-16
	MOVQ key+0(FP), AX
	MOVQ rk+8(FP), BX
	MOVOU 0(AX), X1
	MOVOU 16(AX), X3
	MOVOU X1, 0(BX)
	MOVOU X3, 16(BX)

// Round key 2i+2 from the previous two (X1, X3): RotWord(SubWord(w7)) ^ rcon, prefix-XORed.
#define EXPAND_EVEN(rcon, off) \
	AESKEYGENASSIST $rcon, X3, X2 \
	PSHUFD $0xff, X2, X2 \
	MOVOU X1, X4 \
	PSLLDQ $4, X4 \
	PXOR X4, X1 \
	PSLLDQ $4, X4 \
	PXOR X4, X1 \
	PSLLDQ $4, X4 \
	PXOR X4, X1 \
	PXOR X2, X1 \
	MOVOU X1, off(BX)

// Round key 2i+3: SubWord(w) of the key just made, no rotation, no rcon.
#define EXPAND_ODD(off) \
	AESKEYGENASSIST $0, X1, X2 \
	PSHUFD $0xaa, X2, X2 \
	MOVOU X3, X4 \
	PSLLDQ $4, X4 \
	PXOR X4, X3 \
	PSLLDQ $4, X4 \
	PXOR X4, X3 \
	PSLLDQ $4, X4 \
	PXOR X4, X3 \
	PXOR X2, X3 \
	MOVOU X3, off(BX)

	EXPAND_EVEN(0x01, 32)
	EXPAND_ODD(48)
	EXPAND_EVEN(0x02, 64)
	EXPAND_ODD(80)
	EXPAND_EVEN(0x04, 96)
	EXPAND_ODD(112)
	EXPAND_EVEN(0x08, 128)
	EXPAND_ODD(144)
	EXPAND_EVEN(0x10, 160)
	EXPAND_ODD(176)
	EXPAND_EVEN(0x20, 192)
	EXPAND_ODD(208)
	EXPAND_EVEN(0x40, 224)
	RET

// BYTEMASK sets k to the low min(max(CX-lo, 0), 64) bits set: the bytes of a group's register
// at offset lo that the message covers (CX bytes). Clobbers R13, R15.
#define BYTEMASK(lo, k) \
	MOVQ CX, R13 \
	SUBQ $lo, R13 \
	XORQ R15, R15 \
	CMPQ R13, R15 \
	CMOVQLT R15, R13 \
	MOVQ $64, R15 \
	CMPQ R13, R15 \
	CMOVQGT R15, R13 \
	MOVQ $-1, R15 \
	BZHIQ R13, R15, R15 \
	KMOVQ R15, k

// GROUP prepares a Horner group of CX bytes (1 to 256): masks K1-K4, and in R14 the address of
// the powers H^r … H^1 for its r = ceil(CX/16) blocks. BX holds the address of H^16.
#define GROUP \
	BYTEMASK(0, K1) \
	BYTEMASK(64, K2) \
	BYTEMASK(128, K3) \
	BYTEMASK(192, K4) \
	LEAQ 15(CX), R13 \
	ANDQ $~15, R13 \
	LEAQ 256(BX), R14 \
	SUBQ R13, R14

// MUL4 multiplies the four blocks of data register d by the powers at off(R14) and adds the
// products to Z8 (low), Z9 (high) and Z10 (middle), using t1, t2, t3.
#define MUL4(d, off, t1, t2, t3) \
	VPCLMULQDQ $0x00, off(R14), d, t1 \
	VPCLMULQDQ $0x11, off(R14), d, t2 \
	VPCLMULQDQ $0x01, off(R14), d, t3 \
	VPXORD t1, Z8, Z8 \
	VPCLMULQDQ $0x10, off(R14), d, t1 \
	VPXORD t2, Z9, Z9 \
	VPTERNLOGD $0x96, t1, t3, Z10

// FOLD_REDUCE sums the four lanes of the products in Z8 (low), Z9 (high) and Z10 (middle) and
// reduces them into X13. Clobbers Z0, Z1.
#define FOLD_REDUCE \
	VPSLLDQ $8, Z10, Z0 \
	VPSRLDQ $8, Z10, Z1 \
	VPXORD Z0, Z8, Z8 \
	VPXORD Z1, Z9, Z9 \
	VEXTRACTI64X4 $1, Z8, Y0 \
	VEXTRACTI64X4 $1, Z9, Y1 \
	VPXOR Y0, Y8, Y8 \
	VPXOR Y1, Y9, Y9 \
	VEXTRACTI128 $1, Y8, X0 \
	VEXTRACTI128 $1, Y9, X1 \
	VPXOR X0, X8, X8 \
	VPXOR X1, X9, X9 \
	VPCLMULQDQ $0x00, X8, X12, X0 \
	VPSHUFD $0x4e, X8, X8 \
	VPXOR X0, X8, X8 \
	VPCLMULQDQ $0x00, X8, X12, X0 \
	VPSHUFD $0x4e, X8, X8 \
	VPXOR X0, X8, X8 \
	VPXOR X9, X8, X13

// ZERO_PRODUCTS clears the product sums.
#define ZERO_PRODUCTS \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10

// MUL16 multiplies the blocks of Z4-Z7 (byte-reversed) by the 16 powers at R14 into the sums.
// Clobbers Z0-Z4, Z11.
#define MUL16 \
	MUL4(Z4, 0, Z0, Z1, Z2) \
	MUL4(Z5, 64, Z3, Z11, Z4) \
	MUL4(Z6, 128, Z0, Z1, Z2) \
	MUL4(Z7, 192, Z3, Z11, Z4)

#define BSWAP4 \
	VPSHUFB Z31, Z4, Z4 \
	VPSHUFB Z31, Z5, Z5 \
	VPSHUFB Z31, Z6, Z6 \
	VPSHUFB Z31, Z7, Z7

// GHASH folds the group in Z4-Z7 (message byte order, zero past its end) into X13 (Horner
// step), with the powers at R14. Clobbers Z0-Z11.
#define GHASH \
	BSWAP4 \
	VPXORD Z13, Z4, Z4 \
	ZERO_PRODUCTS \
	MUL16 \
	FOLD_REDUCE

#define AESROUND(k) \
	VAESENC k, Z0, Z0 \
	VAESENC k, Z1, Z1 \
	VAESENC k, Z2, Z2 \
	VAESENC k, Z3, Z3

#define AES1(r) \
	VPXORD Z16, r, r \
	VAESENC Z17, r, r \
	VAESENC Z18, r, r \
	VAESENC Z19, r, r \
	VAESENC Z20, r, r \
	VAESENC Z21, r, r \
	VAESENC Z22, r, r \
	VAESENC Z23, r, r \
	VAESENC Z24, r, r \
	VAESENC Z25, r, r \
	VAESENC Z26, r, r \
	VAESENC Z27, r, r \
	VAESENC Z28, r, r \
	VAESENC Z29, r, r \
	VAESENCLAST Z30, r, r

#define AES4 \
	VPXORD Z16, Z0, Z0 \
	VPXORD Z16, Z1, Z1 \
	VPXORD Z16, Z2, Z2 \
	VPXORD Z16, Z3, Z3 \
	AESROUND(Z17) \
	AESROUND(Z18) \
	AESROUND(Z19) \
	AESROUND(Z20) \
	AESROUND(Z21) \
	AESROUND(Z22) \
	AESROUND(Z23) \
	AESROUND(Z24) \
	AESROUND(Z25) \
	AESROUND(Z26) \
	AESROUND(Z27) \
	AESROUND(Z28) \
	AESROUND(Z29) \
	VAESENCLAST Z30, Z0, Z0 \
	VAESENCLAST Z30, Z1, Z1 \
	VAESENCLAST Z30, Z2, Z2 \
	VAESENCLAST Z30, Z3, Z3

// CTR4 puts the next 16 counter blocks in Z0-Z3.
#define CTR4 \
	VPSHUFB Z31, Z14, Z0 \
	VPADDD Z15, Z14, Z14 \
	VPSHUFB Z31, Z14, Z1 \
	VPADDD Z15, Z14, Z14 \
	VPSHUFB Z31, Z14, Z2 \
	VPADDD Z15, Z14, Z14 \
	VPSHUFB Z31, Z14, Z3 \
	VPADDD Z15, Z14, Z14

// ADVANCE moves R14 past the powers of the ceil(CX/16) blocks just hashed. Clobbers R13.
#define ADVANCE \
	LEAQ 15(CX), R13 \
	ANDQ $~15, R13 \
	ADDQ R13, R14

// func gcmCrypt(k *gcmKey, dst, src *byte, n int, aad *byte, aadLen int, j0, tag *[16]byte, enc bool)
//
// A message of at most maxAggregated blocks in all (associated data, ciphertext and the lengths
// block: every datagram) multiplies each block by its own power of H, H^m … H^1, sums the
// products and reduces once at the end: no block waits for another's reduction. A longer one is
// hashed in Horner steps of 16 blocks, one reduction each.
TEXT ·gcmCrypt(SB), NOSPLIT, $0-65
	MOVQ k+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), DX
	MOVQ aad+32(FP), R8
	MOVQ aadLen+40(FP), R9
	MOVQ j0+48(FP), R10
	MOVQ tag+56(FP), R11
	MOVBQZX enc+64(FP), R12

	// Ask for every cache line of the message at once: from memory, loads issued a group at a
	// time left the loop waiting on each group's lines in turn (slower than crypto/cipher on a
	// message not in cache).
	XORQ CX, CX
prefetch:
	CMPQ CX, DX
	JAE prefetched
	PREFETCHT0 (SI)(CX*1)
	BYTE $0x0f; BYTE $0x0d; BYTE $0x0c; BYTE $0x0f // PREFETCHW (DI)(CX*1)
	ADDQ $64, CX
	JMP prefetch
prefetched:

	VBROADCASTI32X4 0(AX), Z16
	VBROADCASTI32X4 16(AX), Z17
	VBROADCASTI32X4 32(AX), Z18
	VBROADCASTI32X4 48(AX), Z19
	VBROADCASTI32X4 64(AX), Z20
	VBROADCASTI32X4 80(AX), Z21
	VBROADCASTI32X4 96(AX), Z22
	VBROADCASTI32X4 112(AX), Z23
	VBROADCASTI32X4 128(AX), Z24
	VBROADCASTI32X4 144(AX), Z25
	VBROADCASTI32X4 160(AX), Z26
	VBROADCASTI32X4 176(AX), Z27
	VBROADCASTI32X4 192(AX), Z28
	VBROADCASTI32X4 208(AX), Z29
	VBROADCASTI32X4 224(AX), Z30
	VBROADCASTI32X4 bswapMask<>(SB), Z31
	VMOVDQU redPoly<>(SB), X12
	VBROADCASTI32X4 ctrInc<>(SB), Z15
	VPXOR X13, X13, X13
	ZERO_PRODUCTS

	// m = ceil(aadLen/16) + ceil(n/16) + 1
	LEAQ 15(R9), R13
	SHRQ $4, R13
	LEAQ 15(DX), CX
	SHRQ $4, CX
	LEAQ 1(R13)(CX*1), R13
	CMPQ R13, $maxAggregated
	JA horner

	// R14 = &hp[maxAggregated-m], the power H^m.
	SHLQ $4, R13
	LEAQ (240+16*maxAggregated)(AX), R14
	SUBQ R13, R14

shortAAD:
	TESTQ R9, R9
	JZ shortAADDone
	MOVQ $64, CX
	CMPQ R9, CX
	CMOVQLT R9, CX
	BYTEMASK(0, K1)
	VMOVDQU8.Z 0(R8), K1, Z4
	VPSHUFB Z31, Z4, Z4
	MUL4(Z4, 0, Z0, Z1, Z2)
	ADVANCE
	ADDQ CX, R8
	SUBQ CX, R9
	JMP shortAAD

shortAADDone:
	VBROADCASTI32X4 0(R10), Z14
	VPSHUFB Z31, Z14, Z14
	VPADDD ctrFirst<>(SB), Z14, Z14
	MOVQ DX, R9

shortFull:
	CMPQ R9, $256
	JB shortTail
	CTR4
	AES4
	VMOVDQU64 0(SI), Z4
	VMOVDQU64 64(SI), Z5
	VMOVDQU64 128(SI), Z6
	VMOVDQU64 192(SI), Z7
	TESTQ R12, R12
	JZ shortFullDec
	VPXORD Z0, Z4, Z4
	VPXORD Z1, Z5, Z5
	VPXORD Z2, Z6, Z6
	VPXORD Z3, Z7, Z7
	VMOVDQU64 Z4, 0(DI)
	VMOVDQU64 Z5, 64(DI)
	VMOVDQU64 Z6, 128(DI)
	VMOVDQU64 Z7, 192(DI)
	JMP shortFullHash

shortFullDec:
	VPXORD Z4, Z0, Z0
	VPXORD Z5, Z1, Z1
	VPXORD Z6, Z2, Z2
	VPXORD Z7, Z3, Z3
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)

shortFullHash:
	BSWAP4
	MUL16
	ADDQ $256, R14
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $256, R9
	JMP shortFull

	// The rest, 64 bytes (four counters) at a time.
shortTail:
	TESTQ R9, R9
	JZ shortLengths
	MOVQ $64, CX
	CMPQ R9, CX
	CMOVQLT R9, CX
	BYTEMASK(0, K1)
	VPSHUFB Z31, Z14, Z0
	VPADDD Z15, Z14, Z14
	AES1(Z0)
	VMOVDQU8.Z 0(SI), K1, Z4
	TESTQ R12, R12
	JZ shortTailDec
	VPXORD Z0, Z4, Z4
	VMOVDQU8.Z Z4, K1, Z4
	VMOVDQU8 Z4, K1, 0(DI)
	JMP shortTailHash

shortTailDec:
	VPXORD Z4, Z0, Z0
	VMOVDQU8 Z0, K1, 0(DI)

shortTailHash:
	VPSHUFB Z31, Z4, Z4
	MUL4(Z4, 0, Z0, Z1, Z2)
	ADVANCE
	ADDQ CX, SI
	ADDQ CX, DI
	SUBQ CX, R9
	JMP shortTail

shortLengths:
	MOVQ $1, R8 // the lengths block joins this message's sums (below)
	JMP lengths

horner:
	LEAQ (240+16*(maxAggregated-16))(AX), BX // &hp of H^16 … H^1

	// The associated data, zero-padded to whole blocks.
aadLoop:
	TESTQ R9, R9
	JZ aadDone
	MOVQ $256, CX
	CMPQ R9, CX
	CMOVQLT R9, CX
	GROUP
	VMOVDQU8.Z 0(R8), K1, Z4
	VMOVDQU8.Z 64(R8), K2, Z5
	VMOVDQU8.Z 128(R8), K3, Z6
	VMOVDQU8.Z 192(R8), K4, Z7
	GHASH
	ADDQ CX, R8
	SUBQ CX, R9
	JMP aadLoop

aadDone:
	VBROADCASTI32X4 0(R10), Z14
	VPSHUFB Z31, Z14, Z14
	VPADDD ctrFirst<>(SB), Z14, Z14
	MOVQ DX, R9 // bytes left

dataLoop:
	TESTQ R9, R9
	JZ dataDone
	MOVQ $256, CX
	CMPQ R9, CX
	CMOVQLT R9, CX
	GROUP
	CTR4
	AES4
	VMOVDQU8.Z 0(SI), K1, Z4
	VMOVDQU8.Z 64(SI), K2, Z5
	VMOVDQU8.Z 128(SI), K3, Z6
	VMOVDQU8.Z 192(SI), K4, Z7
	TESTQ R12, R12
	JZ decrypt

	// Encrypt: the ciphertext, cut to the message, is both the output and what is hashed.
	VPXORD Z0, Z4, Z4
	VPXORD Z1, Z5, Z5
	VPXORD Z2, Z6, Z6
	VPXORD Z3, Z7, Z7
	VMOVDQU8.Z Z4, K1, Z4
	VMOVDQU8.Z Z5, K2, Z5
	VMOVDQU8.Z Z6, K3, Z6
	VMOVDQU8.Z Z7, K4, Z7
	VMOVDQU8 Z4, K1, 0(DI)
	VMOVDQU8 Z5, K2, 64(DI)
	VMOVDQU8 Z6, K3, 128(DI)
	VMOVDQU8 Z7, K4, 192(DI)
	JMP hash

decrypt:
	// Decrypt: the ciphertext loaded (zero past the message) is what is hashed.
	VPXORD Z4, Z0, Z0
	VPXORD Z5, Z1, Z1
	VPXORD Z6, Z2, Z2
	VPXORD Z7, Z3, Z3
	VMOVDQU8 Z0, K1, 0(DI)
	VMOVDQU8 Z1, K2, 64(DI)
	VMOVDQU8 Z2, K3, 128(DI)
	VMOVDQU8 Z3, K4, 192(DI)

hash:
	GHASH
	ADDQ CX, SI
	ADDQ CX, DI
	SUBQ CX, R9
	JMP dataLoop

dataDone:
	XORQ R8, R8 // the lengths block is a Horner step of its own

lengths:
	// The lengths block: len(aad) and n in bits, big-endian, in block byte order.
	MOVQ aadLen+40(FP), R13
	SHLQ $3, R13
	BSWAPQ R13
	SHLQ $3, DX
	BSWAPQ DX
	VMOVQ R13, X4
	VPINSRQ $1, DX, X4, X4
	TESTQ R8, R8
	JZ hornerLengths
	VPSHUFB Z31, Z4, Z4
	MUL4(Z4, 0, Z0, Z1, Z2) // R14 is at H^1
	FOLD_REDUCE
	JMP finish

hornerLengths:
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	LEAQ 240(BX), R14
	GHASH

finish:
	// tag = E(K, J0) ^ Y, Y back in block byte order.
	VMOVDQU 0(R10), X0
	AES1(Z0)
	VPSHUFB X31, X13, X1
	VPXOR X1, X0, X0
	VMOVDQU X0, 0(R11)
	VZEROUPPER
	RET

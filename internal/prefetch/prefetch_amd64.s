//go:build amd64 && !purego

#include "textflag.h"

// func forWrite(p *byte, n int)
TEXT ·forWrite(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), DX
	ADDQ DI, DX
	ANDQ $~63, DI
loop:
	BYTE $0x0f; BYTE $0x0d; BYTE $0x0f // PREFETCHW (DI)
	ADDQ $64, DI
	CMPQ DI, DX
	JB loop
	RET

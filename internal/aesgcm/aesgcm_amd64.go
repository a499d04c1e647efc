//go:build amd64 && !purego

package aesgcm

import "golang.org/x/sys/cpu"

var haveVAES = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VAES && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAES && cpu.X86.HasBMI2

// expandKey256 writes the 15 round keys of AES-256 key into rk (AESKEYGENASSIST).
//
//go:noescape
func expandKey256(key *[32]byte, rk *[15][16]byte)

// gcmCrypt encrypts (enc) or decrypts the n bytes at src into dst (which may be src) in counter
// mode from j0+1, and writes the GCM tag over aad and the ciphertext to tag.
//
//go:noescape
func gcmCrypt(k *gcmKey, dst, src *byte, n int, aad *byte, aadLen int, j0, tag *[16]byte, enc bool)

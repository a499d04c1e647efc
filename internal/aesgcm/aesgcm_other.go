//go:build !amd64 || purego

package aesgcm

const haveVAES = false

func expandKey256(key *[32]byte, rk *[15][16]byte) { panic("unreachable") }

func gcmCrypt(k *gcmKey, dst, src *byte, n int, aad *byte, aadLen int, j0, tag *[16]byte, enc bool) {
	panic("unreachable")
}

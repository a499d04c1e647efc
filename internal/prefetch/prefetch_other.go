//go:build !amd64 || purego

package prefetch

func forWrite(p *byte, n int) {}

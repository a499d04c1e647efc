//go:build amd64 && !purego

package prefetch

//go:noescape
func forWrite(p *byte, n int)

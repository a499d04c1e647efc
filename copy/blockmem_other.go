//go:build !linux

package copy

// NewBlockBuffer returns a zeroed BlockSize buffer.
func NewBlockBuffer() []byte { return make([]byte, BlockSize) }

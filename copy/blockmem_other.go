//go:build !linux

package copy

// NewBlockBuffer returns a zeroed BlockSize buffer.
func NewBlockBuffer() []byte { return make([]byte, BlockSize) }

// BlockMemory is how many bytes of block buffers have been mapped outside the heap: none here.
func BlockMemory() int { return 0 }

// SetHugePages does nothing here: block buffers always come from the Go heap.
func SetHugePages(on bool) {}

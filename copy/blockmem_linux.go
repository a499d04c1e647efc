//go:build linux

package copy

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Block buffers come from anonymous memory in 2 MiB-aligned chunks marked MADV_HUGEPAGE, so that
// (where transparent huge pages are enabled, even only for madvise) each pair of blocks is one
// huge page: a direct-I/O write pins one page instead of 256, a new block takes one page fault
// instead of 256, and hashing and sealing walk one TLB entry per 2 MiB. The memory is never
// returned: blocks are recycled by Pool and the receiver for the life of the process, as before.
// SetHugePages(false) (FARWING_HUGEPAGES=0, set once by cmd/farwing) allocates them from the Go
// heap instead.

const (
	hugePage   = 2 << 20
	arenaChunk = 8 << 20 // mapped at a time: eight blocks
)

// heapBlocks: block buffers come from the Go heap (SetHugePages(false)).
var heapBlocks atomic.Bool

// SetHugePages chooses where new block buffers come from: the huge-page arena (on, the default)
// or the Go heap. The process's command sets it once, before any copy.
func SetHugePages(on bool) { heapBlocks.Store(!on) }

var arena struct {
	mu     sync.Mutex
	free   [][]byte
	off    bool
	mapped int // bytes mapped for block buffers
}

// BlockMemory is how many bytes of block buffers have been mapped (they are never returned).
func BlockMemory() int {
	arena.mu.Lock()
	defer arena.mu.Unlock()
	return arena.mapped
}

// NewBlockBuffer returns a zeroed BlockSize buffer, aligned to BlockSize.
func NewBlockBuffer() []byte {
	if heapBlocks.Load() {
		return make([]byte, BlockSize)
	}
	arena.mu.Lock()
	defer arena.mu.Unlock()
	if len(arena.free) == 0 && !arena.off {
		mem, err := unix.Mmap(-1, 0, arenaChunk+hugePage, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			arena.off = true // no more mappings; the heap will do
		} else {
			// Keep the 2 MiB-aligned part; the slack before and after stays mapped, untouched.
			skip := (hugePage - int(uintptr(unsafePointer(mem))%hugePage)) % hugePage
			mem = mem[skip : skip+arenaChunk : skip+arenaChunk]
			arena.mapped += arenaChunk
			_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // a hint: without THP the blocks still work
			for off := 0; off < arenaChunk; off += BlockSize {
				arena.free = append(arena.free, mem[off:off+BlockSize:off+BlockSize])
			}
		}
	}
	if k := len(arena.free); k > 0 {
		b := arena.free[k-1]
		arena.free = arena.free[:k-1]
		return b
	}
	return make([]byte, BlockSize)
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

package fec

import (
	"sync"

	"github.com/klauspost/reedsolomon"
)

// The wide (Leopard) coder needs temporary work buffers on every Encode and Reconstruct: tens of
// KiB per call at a whole-block group's k. reedsolomon keeps them in a sync.Pool by default, and
// a sync.Pool is emptied by every garbage collection; with the GC kept close to the live heap
// (tuning.TuneGC) the pool was empty on most calls, so each one allocated fresh memory that the
// runtime had returned to the kernel. Measured on the lab (400 Mbit/s, 140 ms, 1 % loss, 1 GiB):
// those buffers were 74 % of the receiver's allocations and 42 % of every page fault on the
// machine, and the lanes that rebuilt groups stalled for 80-200 ms at a time in the faults. The
// sender's parity encoding, on its one sending goroutine, paid the same.
//
// workPool lends them from a free list the collector does not empty, bounded to maxIdleWork sets
// (four lanes may rebuild at once, and the sender encodes; a set is about 350 KiB at a
// whole-block group's k).
type workPool struct {
	mu   sync.Mutex
	free [][][]byte
}

const maxIdleWork = 6

// work is the allocator every wide coder shares.
var work workPool

// Get implements reedsolomon.WorkAllocator: n buffers of at least size bytes (not zeroed: the
// coder writes before it reads, as with its own pool).
func (p *workPool) Get(n, size int) [][]byte {
	var w [][]byte
	p.mu.Lock()
	if k := len(p.free); k > 0 {
		w = p.free[k-1]
		p.free[k-1] = nil
		p.free = p.free[:k-1]
	}
	p.mu.Unlock()
	if cap(w) < n {
		grown := make([][]byte, n)
		copy(grown, w[:cap(w)])
		w = grown
	}
	w = w[:n]
	for i := range w {
		if cap(w[i]) < size {
			w[i] = reedsolomon.AllocAligned(1, size)[0]
		} else {
			w[i] = w[i][:size]
		}
	}
	return w
}

// Put implements reedsolomon.WorkAllocator: the set is kept for the next call, or dropped when
// maxIdleWork sets are idle already.
func (p *workPool) Put(w [][]byte) {
	p.mu.Lock()
	if len(p.free) < maxIdleWork {
		p.free = append(p.free, w)
	}
	p.mu.Unlock()
}

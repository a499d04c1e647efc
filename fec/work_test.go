package fec

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestWorkPool: the wide coder's work buffers are lent again after a garbage collection (a
// sync.Pool would have dropped them), grown when a call needs more, and at most maxIdleWork sets
// are kept.
func TestWorkPool(t *testing.T) {
	var p workPool
	w := p.Get(4, 1000)
	if len(w) != 4 || len(w[3]) != 1000 {
		t.Fatalf("Get(4, 1000): %d buffers, the last %d bytes", len(w), len(w[3]))
	}
	first := &w[0][0]
	p.Put(w)
	runtime.GC()
	w = p.Get(3, 900)
	if len(w) != 3 || len(w[2]) != 900 || &w[0][0] != first {
		t.Errorf("after a GC: %d buffers of %d bytes, same memory %v", len(w), len(w[0]), &w[0][0] == first)
	}
	p.Put(w)
	w = p.Get(8, 2000)
	if len(w) != 8 {
		t.Fatalf("Get(8, 2000): %d buffers", len(w))
	}
	for i, b := range w {
		if len(b) != 2000 {
			t.Errorf("buffer %d: %d bytes, want 2000", i, len(b))
		}
	}
	sets := make([][][]byte, maxIdleWork+3)
	for i := range sets {
		sets[i] = p.Get(2, 64)
	}
	for _, s := range sets {
		p.Put(s)
	}
	if len(p.free) != maxIdleWork {
		t.Errorf("%d idle sets kept, want at most %d", len(p.free), maxIdleWork)
	}
}

// TestWideWorkAfterGC: a wide group's rebuild after a garbage collection takes its work buffers
// from the shared pool instead of allocating them again.
func TestWideWorkAfterGC(t *testing.T) {
	k := GroupSize(746)
	if !Wide(k) {
		t.Fatalf("k=%d is not a wide group", k)
	}
	const m = 4
	tg := newTestGroup(t, rand.New(rand.NewPCG(5, 6)), fullLens(k), m)
	g, err := NewGroup(k, m, ShardSize)
	if err != nil {
		t.Fatal(err)
	}
	rebuild := func() {
		g.Reset(k, m, ShardSize)
		for idx := m; idx < k+m; idx++ { // the first m data shards lost
			if _, err := g.Add(ShardID{K: k, M: m, Index: idx}, tg.shard(k, idx)); err != nil {
				t.Fatal(err)
			}
		}
		out, err := g.Reconstruct()
		if err != nil {
			t.Fatal(err)
		}
		checkData(t, out, tg.data)
	}
	rebuild()
	work.mu.Lock()
	idle, setBytes := len(work.free), 0
	for _, b := range work.free[idle-1] {
		setBytes += len(b)
	}
	work.mu.Unlock()
	if idle == 0 {
		t.Fatal("the wide coder returned no work buffers to the pool")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rebuild()
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("rebuild after a GC allocated %d bytes; a work set is %d bytes", got, setBytes)
	if got >= uint64(setBytes) {
		t.Errorf("rebuild after a GC allocated %d bytes, at least a work set (%d bytes)", got, setBytes)
	}
}

package copy

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestWindowEnd: a window of w BlockSize blocks holds w whole blocks, as many short blocks as
// their lengths allow (but no more than w × WindowSlots), a half-block or longer one as a whole
// block, always at least one block, and past the plan's end just its slots.
func TestWindowEnd(t *testing.T) {
	var files []File
	add := func(n int, size int64) {
		for range n {
			files = append(files, File{Name: fmt.Sprintf("f%05d", len(files)), Size: size, Mode: 0o644})
		}
	}
	add(1, 10*BlockSize)  // blocks 0–9
	add(1, BlockSize+100) // 10, 11 (100 bytes)
	add(300, 4096)        // 12–311
	add(3, SmallBlock)    // 312–314: charged as whole blocks
	add(1, 0)             // no blocks
	add(100, 1)           // 315–414
	plan, err := NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	if plan.NumBlocks() != 415 {
		t.Fatalf("%d blocks, want 415", plan.NumBlocks())
	}
	cases := []struct {
		base, w, want uint32
	}{
		{0, 4, 4},                     // whole blocks
		{8, 4, 8 + 4*WindowSlots},     // three whole, 100 bytes, then 4 KiB ones up to the slots
		{12, 1, 12 + WindowSlots},     // 4 KiB blocks: 256 fit in 1 MiB, but only 32 slots
		{12, 16, 415},                 // everything left: 4.2 MiB of charge, 403 blocks
		{300, 2, 313},                 // 12 × 4 KiB and one whole block; a second passes 2 MiB
		{312, 1, 313},                 // one whole block
		{314, 2, 314 + 2*WindowSlots}, // a whole block and 1-byte blocks up to the 64 slots
		{414, 4, 415},                 // the last block
		{415, 4, 415 + 4*WindowSlots}, // past the end
	}
	for _, c := range cases {
		if got := plan.WindowEnd(c.base, c.w); got != c.want {
			t.Errorf("WindowEnd(%d, %d) = %d, want %d", c.base, c.w, got, c.want)
		}
	}
	// Whatever the base and window, the window's charge is within its budget (or it is one
	// block), and it holds at most its slots.
	for base := uint32(0); base < plan.NumBlocks(); base++ {
		for _, w := range []uint32{1, 2, 5, 40} {
			end := plan.WindowEnd(base, w)
			var charge int64
			for b := base; b < end; b++ {
				charge += Charge(plan.BlockLen(b))
			}
			if end <= base || end-base > w*WindowSlots || end-base > 1 && charge > int64(w)*BlockSize {
				t.Fatalf("WindowEnd(%d, %d) = %d: %d blocks charged %d", base, w, end, end-base, charge)
			}
			if end < plan.NumBlocks() && end-base < w*WindowSlots && charge+Charge(plan.BlockLen(end)) <= int64(w)*BlockSize {
				t.Fatalf("WindowEnd(%d, %d) = %d leaves out block %d, which fits", base, w, end, end)
			}
		}
	}
}

// TestPoolShortBlocks: buffers for short blocks come out of a byte budget of the pool's size in
// blocks, and wait while it is spent; whole ones out of its buffers; both come back with Put.
func TestPoolShortBlocks(t *testing.T) {
	p := NewPool(1)
	ctx := context.Background()
	a, _ := p.GetLen(ctx, BlockSize/2-1)
	b, _ := p.GetLen(ctx, BlockSize/2-1)
	if len(a) != BlockSize/2-1 || cap(a) >= BlockSize {
		t.Fatalf("a short block's buffer: len %d cap %d", len(a), cap(a))
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.GetLen(short, 3); err == nil {
		t.Fatal("a third short buffer past the budget of one block did not wait")
	}
	got := make(chan []byte)
	go func() { c, _ := p.GetLen(ctx, 3); got <- c }()
	p.Put(a)
	if c := <-got; len(c) != 3 {
		t.Fatalf("after a Put: %d bytes", len(c))
	}
	whole, err := p.GetLen(ctx, SmallBlock)
	if err != nil || len(whole) != SmallBlock || cap(whole) != BlockSize {
		t.Fatalf("a half block: len %d cap %d (%v)", len(whole), cap(whole), err)
	}
	if _, err := p.Get(short); err == nil {
		t.Fatal("a second whole buffer from a pool of one did not wait")
	}
	p.Put(whole)
	p.Put(b)
	if _, err := p.Get(ctx); err != nil {
		t.Fatal(err)
	}
}

package session

import (
	"testing"
	"time"

	"github.com/farwing/farwing/internal/wire"
)

// TestSenderMemory: memory made beforehand (NewSenderMemory) is what a sender of that window and
// chunk size takes, ring and batches; a sender of a smaller window takes the first part of its
// ring; memory for a larger window or another chunk size is left, and the sender makes its own. Each batch's datagram buffers are slices of one allocation that cannot
// grow into each other.
func TestSenderMemory(t *testing.T) {
	const window = 185
	m := NewSenderMemory(window, wire.ChunkSize)
	dgram := wire.DatagramFor(wire.ChunkSize)
	n := min(maxBatch, batchBytes/dgram)
	for i := range m.rings {
		if len(m.rings[i]) != ringSize(window, wire.ChunkSize) {
			t.Fatalf("lane %d: ring of %d, want %d", i, len(m.rings[i]), ringSize(window, wire.ChunkSize))
		}
		for _, bt := range m.batches[i] {
			for k := range n {
				if b := bt.bufs[k]; len(b) != dgram || cap(b) != dgram {
					t.Fatalf("lane %d: buffer %d has length %d, capacity %d; want %d", i, k, len(b), cap(b), dgram)
				}
			}
			if n < maxBatch && bt.bufs[n] != nil {
				t.Fatalf("lane %d: a buffer beyond the batch's %d", i, n)
			}
		}
	}
	s := NewSender(&Path{}, nil, nil, SenderConfig{Window: window, Memory: m})
	for i := range s.lanes {
		if &s.lanes[i].ring[0] != &m.rings[i][0] {
			t.Errorf("lane %d: the sender made its own ring, though the memory fits", i)
		}
		if bt := <-s.lanes[i].free; bt != m.batches[i][0] {
			t.Errorf("lane %d: the sender's first batch is not the memory's", i)
		}
	}
	small := 4 // a short path's window: a smaller ring
	if ringSize(small, wire.ChunkSize) == ringSize(window, wire.ChunkSize) {
		t.Fatalf("windows %d and %d need the same ring; pick another", small, window)
	}
	big := NewSenderMemory(window, wire.ChunkSize)
	s = NewSender(&Path{}, nil, nil, SenderConfig{Window: small, Memory: big})
	if len(s.lanes[0].ring) != ringSize(small, wire.ChunkSize) || &s.lanes[0].ring[0] != &big.rings[0][0] {
		t.Errorf("a sender of window %d took a ring of %d (its memory's: %v), want the first %d of the memory's",
			small, len(s.lanes[0].ring), &s.lanes[0].ring[0] == &big.rings[0][0], ringSize(small, wire.ChunkSize))
	}
	little := NewSenderMemory(small, wire.ChunkSize)
	s = NewSender(&Path{}, nil, nil, SenderConfig{Window: window, Memory: little})
	if len(s.lanes[0].ring) != ringSize(window, wire.ChunkSize) || &s.lanes[0].ring[0] == &little.rings[0][0] {
		t.Errorf("a sender of window %d on memory for %d: ring of %d, want its own of %d", window, small, len(s.lanes[0].ring), ringSize(window, wire.ChunkSize))
	}
	jm := NewSenderMemory(window, wire.JumboChunkSize)
	if jm.fits(window, wire.ChunkSize) || !jm.fits(window, wire.JumboChunkSize) || little.fits(window, wire.ChunkSize) {
		t.Errorf("memory for jumbo chunks: fits standard %v, jumbo %v", jm.fits(window, wire.ChunkSize), jm.fits(window, wire.JumboChunkSize))
	}
}

// TestTransferSenderMemory: a transfer whose sender runs on memory made beforehand for a larger
// window (the first part of its record of datagrams in flight), through 3 %
// loss: every byte arrives (transfer checks them).
func TestTransferSenderMemory(t *testing.T) {
	cfg := SenderConfig{Window: 32, InitialRTT: 10 * time.Millisecond, Memory: NewSenderMemory(185, wire.ChunkSize)}
	st, _ := transfer(t, 0.03, 41, []int{3<<20 + 17, 5000}, cfg)
	if st.Datagrams == 0 {
		t.Fatal("nothing sent")
	}
}

package session

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/wire"
)

// countHandler records the data datagrams it is given, by lane and sequence number, and their
// sequence numbers in the order they came.
type countHandler struct {
	mu    sync.Mutex
	seen  map[[2]uint64]uint32 // (lane, seq) -> payload tag
	order []uint64
}

func (c *countHandler) Datagram(i int, h wire.Header, pt []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[[2]uint64{uint64(i), h.Seq}] = binary.BigEndian.Uint32(pt)
	c.order = append(c.order, h.Seq)
}

// seqs returns the sequence numbers handed over so far, in order.
func (c *countHandler) seqs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.order...)
}

func (c *countHandler) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// TestEarlyDatagramsHeld checks that data arriving before the receiving engine is attached is
// held and handed over intact once it is (it used to be dropped, and the sender re-sent up to a
// round trip of data when the receiver's set-up was slow), and that it is acknowledged then.
func TestEarlyDatagramsHeld(t *testing.T) {
	client, server := benchPair(t, 4<<20)
	const per = 300
	want := map[[2]uint64]uint32{}
	send := func(tag uint32) {
		for i := range Lanes {
			pkts := make([][]byte, 0, per)
			for range per {
				pt := make([]byte, 1000)
				binary.BigEndian.PutUint32(pt, tag)
				seq := client.NextSeq(i)
				want[[2]uint64{uint64(i), seq}] = tag
				pkts = append(pkts, client.Seal(make([]byte, 0, wire.MaxDatagramV6), wire.TypeData, i, seq, pt))
			}
			if err := client.Send(i, pkts); err != nil {
				t.Fatal(err)
			}
		}
	}
	var before [Lanes]uint64 // the handshake's hellos are acknowledged, data must not be
	for i := range Lanes {
		before[i] = client.txSeq[i].Load()
	}
	send(1)
	deadline := time.Now().Add(5 * time.Second)
	for server.EarlyHeld.Load() < Lanes*per && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := server.EarlyHeld.Load(); got != Lanes*per {
		t.Fatalf("held %d datagrams before the engine, want %d", got, Lanes*per)
	}
	for i := range Lanes {
		server.rx[i].mu.Lock()
		l, _ := server.rx[i].win.Largest()
		server.rx[i].mu.Unlock()
		if l > before[i] {
			t.Fatalf("lane %d acknowledges up to %d, beyond the hellos (%d), before any engine took them", i, l, before[i])
		}
	}
	h := &countHandler{seen: map[[2]uint64]uint32{}}
	server.SetHandler(h)
	// The held datagrams are handed over by the next arrival on the lane, or by the lane's
	// receive timeout (200 ms) when nothing more comes.
	for h.count() < Lanes*per && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	send(2)
	for h.count() < 2*Lanes*per && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.count(); n != 2*Lanes*per {
		t.Fatalf("engine got %d datagrams, want %d", n, 2*Lanes*per)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, tag := range want {
		if got, ok := h.seen[k]; !ok || got != tag {
			t.Fatalf("lane %d seq %d: tag %d (present %v), want %d", k[0], k[1], got, ok, tag)
		}
	}
	for i := range Lanes {
		server.rx[i].mu.Lock()
		l, _ := server.rx[i].win.Largest()
		server.rx[i].mu.Unlock()
		if l != client.txSeq[i].Load() {
			t.Fatalf("lane %d acknowledges up to %d, want %d", i, l, client.txSeq[i].Load())
		}
	}
	if d := server.EarlyDropped.Load(); d != 0 {
		t.Fatalf("%d early datagrams dropped", d)
	}
}

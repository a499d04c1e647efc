package lanetest

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/farwing/farwing/lane"
)

var (
	hostA = netip.MustParseAddr("198.18.0.1")
	hostB = netip.MustParseAddr("198.18.0.2")
)

func pair(t *testing.T, n *Network) (a, b *Conn) {
	t.Helper()
	a, err := n.Listen(hostA)
	if err != nil {
		t.Fatal(err)
	}
	b, err = n.Listen(hostB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func numbered(n, size int) [][]byte {
	pkts := make([][]byte, n)
	for i := range pkts {
		pkts[i] = make([]byte, size)
		binary.BigEndian.PutUint32(pkts[i], uint32(i))
	}
	return pkts
}

// drain reads until a receive waits longer than wait, returning the datagrams' numbers.
func drain(t *testing.T, c *Conn, wait time.Duration) (got []uint32, from []netip.AddrPort) {
	t.Helper()
	for {
		_, err := c.Recv(time.Now().Add(wait), func(b []byte, f netip.AddrPort) {
			got = append(got, binary.BigEndian.Uint32(b))
			from = append(from, f)
		})
		if errors.Is(err, lane.ErrTimeout) {
			return got, from
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeliveryInOrder: without jitter every datagram arrives once, in order, from the sender's
// address, after the link's delay; the counters agree.
func TestDeliveryInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Link{Delay: 30 * time.Millisecond}, 1)
		a, b := pair(t, n)
		start := time.Now()
		if err := a.Send(b.LocalAddr(), numbered(500, 100)); err != nil {
			t.Fatal(err)
		}
		var first time.Time
		_, err := b.Recv(time.Time{}, func([]byte, netip.AddrPort) {
			if first.IsZero() {
				first = time.Now()
			}
		})
		if err != nil || first.Sub(start) != 30*time.Millisecond {
			t.Fatalf("first arrival after %v (err %v), want 30ms", first.Sub(start), err)
		}
		got, from := drain(t, b, time.Second)
		if len(got) != 500-recvBatch {
			t.Fatalf("got %d more datagrams, want %d", len(got), 500-recvBatch)
		}
		for i, v := range got {
			if v != uint32(i+recvBatch) || from[i] != a.LocalAddr() {
				t.Fatalf("datagram %d: number %d from %s", i, v, from[i])
			}
		}
		if sa, sb := a.Stats(), b.Stats(); sa.SentDatagrams != 500 || sb.RecvDatagrams != 500 || sb.RecvBytes != 500*100 {
			t.Fatalf("stats: sender %+v receiver %+v", sa, sb)
		}
	})
}

// TestLossAndJitter: random loss drops about the fraction asked for and is counted; jitter
// reorders but loses nothing.
func TestLossAndJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Link{Loss: 0.1}, 7)
		a, b := pair(t, n)
		a.Send(b.LocalAddr(), numbered(10000, 10))
		got, _ := drain(t, b, time.Millisecond)
		if lost := 10000 - len(got); lost < 850 || lost > 1150 || uint64(lost) != n.Dropped.Load() {
			t.Fatalf("lost %d of 10000 at 10 %% (network counted %d)", lost, n.Dropped.Load())
		}
		n.SetLink(hostA, hostB, Link{Jitter: 5 * time.Millisecond})
		a.Send(b.LocalAddr(), numbered(1000, 10))
		got, _ = drain(t, b, 100*time.Millisecond)
		seen, reordered := map[uint32]bool{}, 0
		for i, v := range got {
			seen[v] = true
			if i > 0 && v < got[i-1] {
				reordered++
			}
		}
		if len(got) != 1000 || len(seen) != 1000 || reordered == 0 {
			t.Fatalf("jitter: %d datagrams, %d distinct, %d out of order", len(got), len(seen), reordered)
		}
	})
}

// TestRateAndQueue: a bottleneck spaces datagrams at its rate and drops what overflows its queue.
func TestRateAndQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 972 + 28 bytes at 8 Mbit/s: 1 ms each; a queue of 10 datagrams.
		n := New(Link{Rate: 8e6, Queue: 10 * 1000}, 1)
		a, b := pair(t, n)
		start := time.Now()
		a.Send(b.LocalAddr(), numbered(50, 972))
		var at []time.Duration
		for len(at) < 50 {
			_, err := b.Recv(time.Now().Add(50*time.Millisecond), func([]byte, netip.AddrPort) { at = append(at, time.Since(start)) })
			if errors.Is(err, lane.ErrTimeout) {
				break
			}
		}
		if len(at) < 10 || len(at) > 12 {
			t.Fatalf("%d datagrams through a 10-datagram queue, want 10-12", len(at))
		}
		for i, d := range at {
			if d != time.Duration(i+1)*time.Millisecond {
				t.Fatalf("datagram %d arrived at %v, want %v", i, d, time.Duration(i+1)*time.Millisecond)
			}
		}
	})
}

// TestInjectTapMTUClose: injected datagrams arrive from the forged address; the tap sees what is
// sent; datagrams over the MTU are dropped; a closed Conn returns net.ErrClosed.
func TestInjectTapMTUClose(t *testing.T) {
	n := New(Link{}, 1)
	a, b := pair(t, n)
	forged := netip.MustParseAddrPort("203.0.113.9:53")
	if !n.Inject(forged, b.LocalAddr(), []byte{0, 0, 0, 7}) {
		t.Fatal("inject found no Conn")
	}
	got, from := drain(t, b, 10*time.Millisecond)
	if len(got) != 1 || got[0] != 7 || from[0] != forged {
		t.Fatalf("injected: %v from %v", got, from)
	}
	var tapped int
	n.Tap(func(_, _ netip.AddrPort, _ []byte) { tapped++ })
	n.SetMTU(100)
	a.Send(b.LocalAddr(), [][]byte{make([]byte, 100), make([]byte, 101)})
	got, _ = drain(t, b, 10*time.Millisecond)
	if len(got) != 1 || tapped != 2 {
		t.Fatalf("MTU 100: %d of 2 arrived (want 1), tap saw %d", len(got), tapped)
	}
	done := make(chan error)
	go func() {
		_, err := b.Recv(time.Time{}, func([]byte, netip.AddrPort) {})
		done <- err
	}()
	time.Sleep(5 * time.Millisecond)
	b.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
	if err := b.Send(a.LocalAddr(), numbered(1, 4)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// TestLinkMTU: a link drops the datagrams whose IP size (UDP payload and 28 bytes of headers)
// exceeds its MTU, one way only, and counts them.
func TestLinkMTU(t *testing.T) {
	n := New(Link{}, 1)
	n.SetLink(hostA, hostB, Link{MTU: 1500})
	a, b := pair(t, n)
	fits, over := numbered(1, 1500-lane.IPv4UDPHeaders), numbered(1, 1500-lane.IPv4UDPHeaders+1)
	binary.BigEndian.PutUint32(over[0], 1)
	if err := a.Send(b.LocalAddr(), append(fits, over...)); err != nil {
		t.Fatal(err)
	}
	if got, _ := drain(t, b, 10*time.Millisecond); len(got) != 1 || got[0] != 0 {
		t.Fatalf("A to B over an MTU of 1500: got %v, want the 1,472-byte datagram alone", got)
	}
	if n.Dropped.Load() != 1 {
		t.Fatalf("dropped %d, want 1", n.Dropped.Load())
	}
	// The other way has no limit.
	if err := b.Send(a.LocalAddr(), numbered(1, 9000)); err != nil {
		t.Fatal(err)
	}
	if got, _ := drain(t, a, 10*time.Millisecond); len(got) != 1 {
		t.Fatalf("B to A, no MTU: got %v", got)
	}
}

//go:build linux

package lab

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests drive the emulator core through SOCK_SEQPACKET socket pairs
// instead of TUN devices, so they need no privileges and run everywhere.

func seqpacketPair(t *testing.T) (a, b *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		// Room for a whole test burst (100 packets of 1000 bytes and their overhead) before
		// anything reads it.
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
	}
	a, b = os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// startLink returns the sending end of the link's input and the receiving
// end of its output.
func startLink(t *testing.T, p Path, seed uint64) (*link, *os.File, *os.File) {
	return startLinkAfter(t, p, seed, nil)
}

// startLinkAfter is startLink with before run on the sending end first, so
// that what it writes is waiting in full when the link starts reading: a
// burst then reaches the link at memory speed however the test's own writes
// are scheduled (written while the link ran, one burst in ~30 on the busy
// 2-core CI machine arrived slowly enough for the queue to drain 4 packets
// during it).
func startLinkAfter(t *testing.T, p Path, seed uint64, before func(send *os.File)) (*link, *os.File, *os.File) {
	t.Helper()
	send, in := seqpacketPair(t)
	out, recv := seqpacketPair(t)
	if before != nil {
		before(send)
	}
	done := make(chan struct{})
	lk := newLink(in, out, p, seed, time.Now(), done)
	finished := make(chan struct{}, 2)
	go func() { lk.readLoop(); finished <- struct{}{} }()
	go func() { lk.releaseLoop(); finished <- struct{}{} }()
	t.Cleanup(func() {
		close(done)
		in.Close()
		out.Close()
		<-finished
		<-finished
	})
	return lk, send, recv
}

type arrival struct {
	n  int
	at time.Time
}

func collect(t *testing.T, f *os.File, want int, idle time.Duration) []arrival {
	t.Helper()
	var got []arrival
	buf := make([]byte, bufSize)
	for len(got) < want {
		f.SetReadDeadline(time.Now().Add(idle))
		n, err := f.Read(buf)
		if err != nil {
			break
		}
		got = append(got, arrival{n, time.Now()})
	}
	return got
}

func TestLinkRateDelayQueue(t *testing.T) {
	const (
		rate  = 10e6
		delay = 20 * time.Millisecond
		queue = 30000
		size  = 1000
		sent  = 100
	)
	start := time.Now()
	lk, _, recv := startLinkAfter(t, Path{RateBps: rate, Delay: delay, QueueBytes: queue}, 1, func(send *os.File) {
		pkt := make([]byte, size)
		for range sent {
			if _, err := send.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
	})
	got := collect(t, recv, sent, 300*time.Millisecond)
	st := lk.snapshot()
	t.Logf("stats %+v", st)
	// The burst arrives far faster than 10 Mbit/s, so the queue admits
	// about queue/size packets and drops the rest.
	if len(got) < queue/size-2 || len(got) > queue/size+3 {
		t.Errorf("delivered %d packets, want about %d", len(got), queue/size)
	}
	if int(st.Packets) != len(got) || int(st.Packets+st.QueueDrops) != sent {
		t.Errorf("delivered %d, stats %+v: counts do not add up to %d", len(got), st, sent)
	}
	if st.MaxQueueBytes > queue {
		t.Errorf("max queue %d exceeds the limit %d", st.MaxQueueBytes, queue)
	}
	// Scheduling on a busy machine can only make packets late, so early
	// delivery is checked strictly and lateness loosely: packet i (0-based)
	// must not leave before delay + (i+1) serialization times.
	serial := time.Duration(size * 8 / rate * float64(time.Second))
	for i, a := range got {
		earliest := delay + time.Duration(i+1)*serial - releaseSlack - time.Millisecond
		if at := a.at.Sub(start); at < earliest {
			t.Errorf("packet %d delivered after %v, earlier than rate and delay allow (%v)", i, at, earliest)
		}
	}
	last := got[len(got)-1].at.Sub(start)
	if want := delay + time.Duration(len(got))*serial; last > want+100*time.Millisecond {
		t.Errorf("last packet after %v, want about %v", last, want)
	}
}

func TestLinkLoss(t *testing.T) {
	const sent = 4000
	lk, send, recv := startLink(t, Path{Loss: 0.2}, 42)
	done := make(chan []arrival)
	go func() { done <- collect(t, recv, sent, 300*time.Millisecond) }()
	pkt := make([]byte, 64)
	for range sent {
		if _, err := send.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	got := <-done
	st := lk.snapshot()
	loss := 1 - float64(len(got))/sent
	t.Logf("loss %.3f, stats %+v", loss, st)
	// 20% of 4000: σ ≈ 0.6%, so ±4% is far outside chance.
	if loss < 0.16 || loss > 0.24 {
		t.Errorf("loss %.3f, want 0.20 ± 0.04", loss)
	}
	if int(st.LossDrops)+len(got) != sent {
		t.Errorf("stats %+v do not account for %d packets", st, sent)
	}
}

func TestLinkSetPathNoReorder(t *testing.T) {
	lk, send, recv := startLink(t, Path{Delay: 50 * time.Millisecond}, 1)
	send.Write([]byte{1})
	lk.update(Path{Delay: time.Millisecond})
	send.Write([]byte{2})
	buf := make([]byte, 16)
	for _, want := range []byte{1, 2} {
		recv.SetReadDeadline(time.Now().Add(time.Second))
		n, err := recv.Read(buf)
		if err != nil || n != 1 || buf[0] != want {
			t.Fatalf("got %v %v, want packet %d (FIFO after shortening the delay)", buf[:n], err, want)
		}
	}
}

func TestDefaultQueueBytes(t *testing.T) {
	if got := DefaultQueueBytes(400e6, 70*time.Millisecond); got != 7_000_000 {
		t.Errorf("400M × 140ms: %d, want 7000000", got)
	}
	if got := DefaultQueueBytes(1e6, time.Millisecond); got != minQueueBytes {
		t.Errorf("tiny BDP: %d, want the 64 KiB floor", got)
	}
}

// TestLinkProtocolCounters: UDP and TCP bytes are counted apart, on arrival (before random loss
// and the queue) and on delivery; anything else (here an IPv6 header and a runt) counts in the
// totals only.
func TestLinkProtocolCounters(t *testing.T) {
	ipv4 := func(proto byte, n int) []byte {
		p := make([]byte, n)
		p[0], p[9] = 0x45, proto
		return p
	}
	const udpN, tcpN = 200, 100
	// A 5-packet queue at 1 Mbit/s: a burst of 1000-byte packets loses most of them to it.
	lk, _, recv := startLinkAfter(t, Path{RateBps: 1e6, QueueBytes: 5000}, 1, func(send *os.File) {
		for i := range udpN + tcpN { // every third a TCP packet
			pkt := ipv4(protoUDP, 1000)
			if i%3 == 0 {
				pkt = ipv4(protoTCP, 500)
			}
			if _, err := send.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
		send.Write([]byte{0x60, 0, 0, 0, 0, 0, 0, 0, 0, protoUDP, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
		send.Write([]byte{0x45, 0, 0, 0, 0, 0, 0, 0, 0, protoUDP})
	})
	got := collect(t, recv, udpN+tcpN+2, 300*time.Millisecond)
	st := lk.snapshot()
	var udp, tcp, other uint64
	for _, a := range got {
		switch a.n {
		case 1000:
			udp += 1000
		case 500:
			tcp += 500
		default:
			other += uint64(a.n)
		}
	}
	t.Logf("stats %+v; delivered udp %d tcp %d other %d", st, udp, tcp, other)
	if st.UDPArrived != udpN*1000 || st.TCPArrived != tcpN*500 {
		t.Errorf("arrived UDP %d, TCP %d; want %d and %d", st.UDPArrived, st.TCPArrived, udpN*1000, tcpN*500)
	}
	if st.QueueDrops == 0 || udp == 0 || tcp == 0 || st.UDPDelivered != udp || st.TCPDelivered != tcp {
		t.Errorf("delivered UDP %d, TCP %d (queue drops %d); the far end got %d and %d", st.UDPDelivered, st.TCPDelivered, st.QueueDrops, udp, tcp)
	}
	if st.Bytes != udp+tcp+other {
		t.Errorf("total %d bytes delivered, the far end got %d", st.Bytes, udp+tcp+other)
	}
	if d := st.Sub(st); d.UDPArrived != 0 || d.UDPDelivered != 0 || d.TCPArrived != 0 || d.TCPDelivered != 0 {
		t.Errorf("Sub leaves %+v", d)
	}
}

// TestLinkDropUDP: a path that blocks UDP drops every UDP packet and counts it; TCP and other
// packets pass.
func TestLinkDropUDP(t *testing.T) {
	ipv4 := func(proto byte, n int) []byte {
		p := make([]byte, n)
		p[0], p[9] = 0x45, proto
		return p
	}
	lk, _, recv := startLinkAfter(t, Path{DropUDP: true}, 1, func(send *os.File) {
		for i := range 30 {
			pkt := ipv4(protoUDP, 1000)
			if i%3 == 0 {
				pkt = ipv4(protoTCP, 500)
			}
			if _, err := send.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
	})
	got := collect(t, recv, 30, 300*time.Millisecond) // all that comes, until 300 ms of nothing
	st := lk.snapshot()
	for _, a := range got {
		if a.n != 500 {
			t.Errorf("a %d-byte packet passed a path that blocks UDP", a.n)
		}
	}
	if len(got) != 10 || st.Blocked != 20 || st.UDPDelivered != 0 || st.TCPDelivered != 10*500 {
		t.Errorf("delivered %d packets, stats %+v; want the 10 TCP ones, 20 blocked", len(got), st)
	}
}

// TestLinkDropTCP: a path that blocks TCP ports drops the segments to a port in the range and
// counts them; TCP to other ports and UDP to those ports pass.
func TestLinkDropTCP(t *testing.T) {
	pkt := func(proto byte, port uint16, n int) []byte {
		p := make([]byte, n)
		p[0], p[9] = 0x45, proto
		p[22], p[23] = byte(port>>8), byte(port)
		return p
	}
	lk, _, recv := startLinkAfter(t, Path{DropTCP: Ports{Lo: 45000, Hi: 45009}}, 1, func(send *os.File) {
		for _, p := range [][]byte{pkt(protoTCP, 45000, 100), pkt(protoTCP, 45009, 100), pkt(protoTCP, 44999, 200),
			pkt(protoTCP, 45010, 200), pkt(protoUDP, 45005, 300), pkt(protoTCP, 22, 200)} {
			if _, err := send.Write(p); err != nil {
				t.Fatal(err)
			}
		}
	})
	got := collect(t, recv, 4, 300*time.Millisecond)
	st := lk.snapshot()
	for _, a := range got {
		if a.n == 100 {
			t.Error("a TCP segment to a blocked port passed")
		}
	}
	if len(got) != 4 || st.Blocked != 2 {
		t.Errorf("delivered %d packets, stats %+v; want 4, 2 blocked", len(got), st)
	}
}

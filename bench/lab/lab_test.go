//go:build linux

package lab_test

import (
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
)

// udpPair returns a socket in NSA connected to a socket bound in NSB.
func udpPair(t *testing.T, l *lab.Lab) (a, b *net.UDPConn) {
	t.Helper()
	err := l.Do(l.NSB, func() (err error) {
		b, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.AddrB.AsSlice()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	// Bursts of small datagrams must not overflow the default receive
	// buffer; loss has to come from the emulator only.
	_ = b.SetReadBuffer(4 << 20)
	err = l.Do(l.NSA, func() (err error) {
		a, err = net.DialUDP("udp4", nil, b.LocalAddr().(*net.UDPAddr))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, b
}

// udpEcho answers every datagram b receives with itself, until b is closed.
func udpEcho(b *net.UDPConn) {
	buf := make([]byte, 2048)
	for {
		k, from, err := b.ReadFromUDP(buf)
		if err != nil {
			return
		}
		b.WriteToUDP(buf[:k], from)
	}
}

// echoRTTs sends n sequential UDP pings through the lab and returns the
// round-trip times sorted.
func echoRTTs(t *testing.T, l *lab.Lab, n int) []time.Duration {
	t.Helper()
	a, b := udpPair(t, l)
	go udpEcho(b)
	var rtts []time.Duration
	buf := make([]byte, 2048)
	for i := range n {
		msg := []byte{byte(i), 'p', 'i', 'n', 'g'}
		start := time.Now()
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		a.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := a.Read(buf)
		if err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		if !bytes.Equal(buf[:k], msg) {
			t.Fatalf("ping %d: got %q", i, buf[:k])
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	return rtts
}

func TestRTT(t *testing.T) {
	l := labtest.Start(t, lab.Symmetric(100e6, 60*time.Millisecond, 0, 0, 1))
	rtts := echoRTTs(t, l, 20)
	med := rtts[len(rtts)/2]
	t.Logf("RTT min %v median %v max %v (configured 60ms)", rtts[0], med, rtts[len(rtts)-1])
	if med < 55*time.Millisecond || med > 90*time.Millisecond {
		t.Errorf("median RTT %v, want 55–90ms", med)
	}
}

func TestSetPath(t *testing.T) {
	l := labtest.Start(t, lab.Symmetric(100e6, 10*time.Millisecond, 0, 0, 1))
	rtts := echoRTTs(t, l, 5)
	if med := rtts[len(rtts)/2]; med < 9*time.Millisecond || med > 30*time.Millisecond {
		t.Errorf("median RTT %v before SetPath, want 9–30ms", med)
	}
	p := l.Path(lab.AtoB)
	p.Delay = 25 * time.Millisecond
	l.SetPath(lab.AtoB, p)
	l.SetPath(lab.BtoA, p)
	rtts = echoRTTs(t, l, 5)
	if med := rtts[len(rtts)/2]; med < 49*time.Millisecond || med > 75*time.Millisecond {
		t.Errorf("median RTT %v after SetPath to 2×25ms, want 49–75ms", med)
	}
}

// recvUntilIdle counts datagrams on c until nothing arrives for idle.
func recvUntilIdle(c *net.UDPConn, idle time.Duration, want int) (n int, first, last time.Time) {
	buf := make([]byte, 2048)
	for n < want {
		c.SetReadDeadline(time.Now().Add(idle))
		if _, err := c.Read(buf); err != nil {
			break
		}
		last = time.Now()
		if n == 0 {
			first = last
		}
		n++
	}
	return n, first, last
}

func TestLoss(t *testing.T) {
	cfg := lab.Symmetric(100e6, 20*time.Millisecond, 0, 0, 7)
	cfg.AtoB.Loss = 0.10
	l := labtest.Start(t, cfg)
	a, b := udpPair(t, l)

	const sent = 2000
	got := make(chan int, 1)
	go func() {
		n, _, _ := recvUntilIdle(b, 500*time.Millisecond, sent)
		got <- n
	}()
	payload := make([]byte, 100)
	for i := range sent {
		if _, err := a.Write(payload); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			time.Sleep(time.Millisecond) // stay well under the rate
		}
	}
	n := <-got
	lossRate := 1 - float64(n)/sent
	atob, _ := l.Stats()
	t.Logf("received %d/%d, loss %.1f%% (configured 10%%); stats %+v", n, sent, 100*lossRate, atob)
	if lossRate < 0.06 || lossRate > 0.14 {
		t.Errorf("loss rate %.3f, want 0.06–0.14", lossRate)
	}
	if atob.LossDrops == 0 || atob.QueueDrops != 0 || atob.OverflowDrops != 0 {
		t.Errorf("stats %+v: want only loss drops", atob)
	}
	if int(atob.Packets) < n {
		t.Errorf("stats count %d forwarded, but %d received", atob.Packets, n)
	}
}

func TestQueueDrop(t *testing.T) {
	const rate, queue = 10e6, 30000
	l := labtest.Start(t, lab.Config{
		AtoB: lab.Path{RateBps: rate, Delay: 5 * time.Millisecond, QueueBytes: queue},
		BtoA: lab.Path{Delay: 5 * time.Millisecond},
	})
	a, b := udpPair(t, l)

	const sent = 500
	type result struct {
		n           int
		first, last time.Time
	}
	got := make(chan result, 1)
	go func() {
		n, first, last := recvUntilIdle(b, 500*time.Millisecond, sent)
		got <- result{n, first, last}
	}()
	payload := make([]byte, 1400) // 1428 IP bytes
	start := time.Now()
	for range sent {
		if _, err := a.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	r := <-got
	atob, _ := l.Stats()
	t.Logf("received %d/%d; stats %+v", r.n, sent, atob)
	if atob.QueueDrops == 0 {
		t.Errorf("no queue drops for a %d-packet blast into a %d-byte queue", sent, queue)
	}
	if atob.MaxQueueBytes > queue || atob.MaxQueueBytes < queue-1500 {
		t.Errorf("max queue %d bytes, want just under the %d-byte limit", atob.MaxQueueBytes, queue)
	}
	if r.n != int(atob.Packets) || atob.Packets+atob.QueueDrops != sent {
		t.Errorf("received %d, stats %+v: want received == forwarded and forwarded+dropped == %d", r.n, atob, sent)
	}
	if atob.UDPArrived != sent*1428 || atob.UDPDelivered != uint64(r.n)*1428 || atob.TCPArrived != 0 {
		t.Errorf("UDP arrived %d, delivered %d, TCP arrived %d: want %d, %d and 0", atob.UDPArrived, atob.UDPDelivered, atob.TCPArrived, sent*1428, r.n*1428)
	}
	// The queue drains at the bottleneck rate: the last packet cannot
	// arrive before the delay plus the serialization of everything
	// delivered. Scheduling noise only makes it later, so the upper bound
	// is loose.
	if r.n > 0 {
		serial := time.Duration(1428 * 8 / rate * float64(time.Second))
		earliest := 5*time.Millisecond + time.Duration(r.n)*serial - 2*time.Millisecond
		took := r.last.Sub(start)
		t.Logf("last packet after %v; rate and delay allow %v at the earliest", took, earliest)
		if took < earliest || took > earliest+200*time.Millisecond {
			t.Errorf("last packet after %v, want %v (+ scheduling noise)", took, earliest)
		}
	}
}

func TestTCP(t *testing.T) {
	l := labtest.Start(t, lab.Symmetric(100e6, 20*time.Millisecond, 0, 0, 1))
	var ln net.Listener
	err := l.Do(l.NSB, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(l.AddrB.String(), "0"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 4 << 20
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	var c net.Conn
	err = l.Do(l.NSA, func() (err error) {
		c, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	n := <-got
	t.Logf("TCP moved %d bytes in %v", n, time.Since(start))
	if n != size {
		t.Errorf("received %d bytes, want %d", n, size)
	}
}

func TestCloseRemovesNamespaces(t *testing.T) {
	labtest.Skip(t)
	l, err := lab.Start(lab.Symmetric(0, 0, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Command(l.NSA, "ip", "link", "show", lab.DevName).Run(); err != nil {
		t.Fatalf("device %s missing in %s: %v", lab.DevName, l.NSA, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	assertGone(t, l)
}

func TestCheckMessage(t *testing.T) {
	// Check must explain itself whenever it refuses.
	if err := lab.Check(); err != nil && !strings.Contains(err.Error(), "lab:") {
		t.Errorf("Check error %q does not name the lab", err)
	}
}

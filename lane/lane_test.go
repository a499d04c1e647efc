package lane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// quiet keeps the capped-buffer warning out of test output.
func quiet(o Options) Options {
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return o
}

// socketPath is one of a platform's ways of using its sockets: on Linux the batched path and the
// portable one (Options.Portable), elsewhere the portable one alone (socketPaths, in
// conn_linux_test.go and conn_default_test.go).
type socketPath struct {
	name     string
	portable bool
}

// eachPath runs f as a subtest for each socket path of this platform; f hands portable on to
// Options.Portable, so that the generic tests run on the path macOS runs wherever they run.
func eachPath(t *testing.T, f func(t *testing.T, portable bool)) {
	for _, p := range socketPaths {
		t.Run(p.name, func(t *testing.T) { f(t, p.portable) })
	}
}

// laneEnd is one end's options in TestLoopback.
type laneEnd struct {
	name string
	opt  Options
}

// loopbackEnds are the senders and receivers TestLoopback pairs: on the batched path with and
// without offload, and on the portable path.
func loopbackEnds() (senders, receivers []laneEnd) {
	for _, p := range socketPaths {
		if p.portable {
			senders = append(senders, laneEnd{"portable", Options{Portable: true}})
			receivers = append(receivers, laneEnd{"portable", Options{Portable: true}})
			continue
		}
		senders = append(senders, laneEnd{"gso", Options{}}, laneEnd{"nogso", Options{DisableGSO: true}})
		receivers = append(receivers, laneEnd{"gro", Options{}}, laneEnd{"nogro", Options{DisableGRO: true}})
	}
	return senders, receivers
}

func listen(tb testing.TB, addr string, opt Options) *Conn {
	tb.Helper()
	c, err := Listen(addr, quiet(opt))
	if err != nil {
		if strings.Contains(addr, "::1") {
			tb.Skipf("no IPv6 loopback: %v", err)
		}
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// numbered returns n packets; packet i has length lens(i) and starts with i as a uint32, then
// bytes derived from i, so a receiver can check identity, order and contents.
func numbered(n int, lens func(i int) int) [][]byte {
	pkts := make([][]byte, n)
	for i := range pkts {
		p := make([]byte, max(lens(i), 4))
		binary.BigEndian.PutUint32(p, uint32(i))
		for j := 4; j < len(p); j++ {
			p[j] = byte(i*7 + j)
		}
		pkts[i] = p
	}
	return pkts
}

// mixedLens is a sender-like size pattern: runs of full packets with short tails and odd sizes.
func mixedLens(i int) int {
	switch {
	case i%50 == 49:
		return 100 + i%300
	case i%97 == 0:
		return 8
	case (i/200)%2 == 1:
		return 1200
	}
	return MaxDatagram
}

// recvAll receives until want datagrams arrived or the deadline passed.
func recvAll(tb testing.TB, c *Conn, want int, from netip.AddrPort) [][]byte {
	tb.Helper()
	var got [][]byte
	end := time.Now().Add(5 * time.Second)
	for len(got) < want {
		_, err := c.Recv(end, func(b []byte, f netip.AddrPort) {
			if f != from {
				tb.Errorf("datagram from %v, want %v", f, from)
			}
			got = append(got, bytes.Clone(b))
		})
		if err != nil {
			tb.Fatalf("after %d of %d datagrams: %v", len(got), want, err)
		}
	}
	return got
}

func checkSame(tb testing.TB, got, want [][]byte) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("got %d datagrams, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			tb.Fatalf("datagram %d: got %d bytes (first %x), want %d bytes (first %x)",
				i, len(got[i]), got[i][:min(8, len(got[i]))], len(want[i]), want[i][:min(8, len(want[i]))])
		}
	}
}

// TestLoopback sends a mixed pattern over every combination of family and sender and receiver
// (batched with and without GSO or GRO, portable; the two paths must understand each other, as a
// Mac and a Linux host do) and checks that each datagram arrives once, intact and in order.
func TestLoopback(t *testing.T) {
	senders, receivers := loopbackEnds()
	for _, fam := range []string{"127.0.0.1:0", "[::1]:0"} {
		for _, snd := range senders {
			for _, rcv := range receivers {
				gso, gro := !snd.opt.DisableGSO && !snd.opt.Portable, !rcv.opt.DisableGRO && !rcv.opt.Portable
				t.Run(fam+"/"+snd.name+"/"+rcv.name, func(t *testing.T) {
					tx := listen(t, fam, snd.opt)
					rx := listen(t, fam, rcv.opt)
					pkts := numbered(1000, mixedLens)
					// Chunks of various sizes, as a paced sender hands them over.
					for i := 0; i < len(pkts); {
						j := min(len(pkts), i+1+i%173)
						if err := tx.Send(rx.LocalAddr(), pkts[i:j]); err != nil {
							t.Fatal(err)
						}
						i = j
					}
					got := recvAll(t, rx, len(pkts), tx.LocalAddr())
					checkSame(t, got, pkts)

					ts, rs := tx.Stats(), rx.Stats()
					var bytes uint64
					for _, p := range pkts {
						bytes += uint64(len(p))
					}
					if ts.SentDatagrams != 1000 || ts.SentBytes != bytes || rs.RecvDatagrams != 1000 || rs.RecvBytes != bytes {
						t.Errorf("stats: sent %d/%d B, received %d/%d B, want 1000/%d B",
							ts.SentDatagrams, ts.SentBytes, rs.RecvDatagrams, rs.RecvBytes, bytes)
					}
					g, _ := tx.Offload()
					_, r := rx.Offload()
					t.Logf("offload gso=%v gro=%v; tx syscalls %d, rx syscalls %d, GSO fallbacks %d",
						g, r, ts.TxSyscalls, rs.RxSyscalls, ts.GSOFallbacks)
					if !gso && g || !gro && r {
						t.Errorf("offload on although disabled: gso=%v gro=%v", g, r)
					}
					// The portable path makes one system call per datagram, each way.
					if snd.opt.Portable && (!tx.Portable() || ts.TxSyscalls != ts.SentDatagrams) {
						t.Errorf("portable sender: Portable() %v, %d send calls for %d datagrams", tx.Portable(), ts.TxSyscalls, ts.SentDatagrams)
					}
					if rcv.opt.Portable && (!rx.Portable() || rs.RxSyscalls != rs.RecvDatagrams) {
						t.Errorf("portable receiver: Portable() %v, %d receive calls for %d datagrams", rx.Portable(), rs.RxSyscalls, rs.RecvDatagrams)
					}
					// Loopback passes super-packets whole to a GRO socket and never coalesces
					// plain datagrams, so few receive calls prove that both ends did their part.
					if g && r && rs.RxSyscalls > 50 {
						t.Errorf("GSO to GRO took %d receive calls for 1000 packets", rs.RxSyscalls)
					}
				})
			}
		}
	}
}

func TestRecvTimeoutAndClose(t *testing.T) { eachPath(t, testRecvTimeoutAndClose) }

func testRecvTimeoutAndClose(t *testing.T, portable bool) {
	c := listen(t, "127.0.0.1:0", Options{Portable: portable})
	start := time.Now()
	n, err := c.Recv(time.Now().Add(20*time.Millisecond), func([]byte, netip.AddrPort) { t.Error("unexpected datagram") })
	if n != 0 || err != ErrTimeout {
		t.Fatalf("Recv = %d, %v; want 0, ErrTimeout", n, err)
	}
	if d := time.Since(start); d < 15*time.Millisecond || d > 2*time.Second {
		t.Errorf("timeout after %v", d)
	}
	// A deadline in the past times out at once, and the same deadline again too.
	past := time.Now().Add(-time.Second)
	for range 2 {
		if _, err := c.Recv(past, nil); err != ErrTimeout {
			t.Fatalf("past deadline: %v", err)
		}
	}
	// Zero deadline blocks until Close.
	done := make(chan error, 1)
	go func() {
		_, err := c.Recv(time.Time{}, func([]byte, netip.AddrPort) {})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) || err != net.ErrClosed {
			t.Fatalf("Recv after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv did not return after Close")
	}
	if _, err := c.Recv(time.Time{}, nil); err != net.ErrClosed {
		t.Fatalf("Recv on closed conn = %v", err)
	}
	if err := c.Send(c.LocalAddr(), [][]byte{{1}}); err == nil {
		t.Fatal("Send on closed conn succeeded")
	}
}

// TestRecvAfterTimeout checks that a socket keeps working after a deadline passed.
func TestRecvAfterTimeout(t *testing.T) { eachPath(t, testRecvAfterTimeout) }

func testRecvAfterTimeout(t *testing.T, portable bool) {
	a := listen(t, "127.0.0.1:0", Options{Portable: portable})
	b := listen(t, "127.0.0.1:0", Options{Portable: portable})
	if _, err := b.Recv(time.Now().Add(time.Millisecond), nil); err != ErrTimeout {
		t.Fatal(err)
	}
	if err := a.Send(b.LocalAddr(), [][]byte{[]byte("hello")}); err != nil {
		t.Fatal(err)
	}
	got := recvAll(t, b, 1, a.LocalAddr())
	if string(got[0]) != "hello" {
		t.Fatalf("got %q", got[0])
	}
}

func TestDualStack(t *testing.T) { eachPath(t, testDualStack) }

func testDualStack(t *testing.T, portable bool) {
	c, err := Listen("[::]:0", quiet(Options{Portable: portable}))
	if err != nil {
		t.Skip(err)
	}
	defer c.Close()
	v4 := listen(t, "127.0.0.1:0", Options{Portable: portable})
	pkts := numbered(100, func(int) int { return MaxDatagram })
	if err := c.Send(v4.LocalAddr(), pkts); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	end := time.Now().Add(5 * time.Second)
	for len(got) < len(pkts) {
		if _, err := v4.Recv(end, func(b []byte, from netip.AddrPort) {
			if from.Port() != c.LocalAddr().Port() {
				t.Errorf("from %v", from)
			}
			got = append(got, bytes.Clone(b))
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkSame(t, got, pkts)
	// And back: the dual-stack socket sees the IPv4 sender as an IPv4-mapped address, as
	// net.UDPConn reports it.
	if err := v4.Send(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), c.LocalAddr().Port()), pkts[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(end, func(b []byte, from netip.AddrPort) {
		if from.Addr().Unmap() != netip.MustParseAddr("127.0.0.1") || from.Port() != v4.LocalAddr().Port() {
			t.Errorf("from %v", from)
		}
	}); err != nil {
		t.Fatal(err)
	}
}

func TestBuffers(t *testing.T) { eachPath(t, testBuffers) }

func testBuffers(t *testing.T, portable bool) {
	c := listen(t, "127.0.0.1:0", Options{Buffer: 1 << 20, Portable: portable})
	r, s := c.Buffers()
	if r <= 0 || s <= 0 {
		t.Fatalf("Buffers() = %d, %d", r, s)
	}
	t.Logf("asked for 1 MiB: receive %d, send %d", r, s)
}

func TestBufferWarning(t *testing.T) {
	if m := bufferWarning(8<<20, 16<<20, 16<<20, false, false); m != "" {
		t.Errorf("uncapped: %q", m)
	}
	for _, tt := range []struct {
		r, s      bool
		want, not string
	}{
		{true, false, "net.core.rmem_max=8388608", "wmem"},
		{false, true, "net.core.wmem_max=8388608", "rmem"},
		{true, true, "net.core.rmem_max=8388608 net.core.wmem_max=8388608", ""},
	} {
		m := bufferWarning(8<<20, 425984, 425984, tt.r, tt.s)
		if !strings.Contains(m, tt.want) || tt.not != "" && strings.Contains(m, tt.not) {
			t.Errorf("bufferWarning(%v, %v) = %q", tt.r, tt.s, m)
		}
	}

	// Once per process, through Options.Warn.
	old := bufferWarned.Load()
	defer bufferWarned.Store(old)
	bufferWarned.Store(false)
	var got []string
	opt := Options{Warn: func(m string) { got = append(got, m) }}
	warnOnce(opt, "")
	warnOnce(opt, "first")
	warnOnce(opt, "second")
	if len(got) != 1 || got[0] != "first" {
		t.Fatalf("warnings = %q", got)
	}
}

// TestOptionsDisableOffload: DisableGSO and DisableGRO (FARWING_GSO=0 FARWING_GRO=0, read by
// tuning.FromEnv) leave both offloads off.
func TestOptionsDisableOffload(t *testing.T) {
	c := listen(t, "127.0.0.1:0", Options{DisableGSO: true, DisableGRO: true})
	if gso, gro := c.Offload(); gso || gro {
		t.Fatalf("Offload() = %v, %v with DisableGSO and DisableGRO", gso, gro)
	}
}

// TestPortable: a lane opened with Options.Portable runs the portable path, as every lane does off
// Linux: no offload, one system call per datagram each way, no receive timestamps (RxTime zero
// after SetRxTimestamps), Pending false even with a datagram waiting.
func TestPortable(t *testing.T) {
	a := listen(t, "127.0.0.1:0", Options{Portable: true})
	b := listen(t, "127.0.0.1:0", Options{Portable: true})
	if !a.Portable() {
		t.Fatal("Portable() false with Options.Portable")
	}
	if gso, gro := a.Offload(); gso || gro {
		t.Fatalf("Offload() = %v, %v on the portable path", gso, gro)
	}
	if err := b.SetRxTimestamps(true); err != nil {
		t.Fatal(err)
	}
	pkts := numbered(100, mixedLens)
	if err := a.Send(b.LocalAddr(), pkts); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // queued, unread
	if b.Pending() {
		t.Error("Pending() true on the portable path")
	}
	var got [][]byte
	end := time.Now().Add(5 * time.Second)
	for len(got) < len(pkts) {
		if _, err := b.Recv(end, func(p []byte, from netip.AddrPort) {
			if !b.RxTime().IsZero() {
				t.Errorf("RxTime %v on the portable path", b.RxTime())
			}
			got = append(got, bytes.Clone(p))
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkSame(t, got, pkts)
	if as, bs := a.Stats(), b.Stats(); as.SentDatagrams != 100 || as.TxSyscalls != 100 || bs.RecvDatagrams != 100 || bs.RxSyscalls != 100 {
		t.Fatalf("sender %+v, receiver %+v: want 100 datagrams in 100 system calls each way", as, bs)
	}
}

// TestConcurrentSendRecv runs Send and Recv on the same pair of lanes from different goroutines,
// both directions at once, as the session does (and gives the race detector something to see).
func TestConcurrentSendRecv(t *testing.T) { eachPath(t, testConcurrentSendRecv) }

func testConcurrentSendRecv(t *testing.T, portable bool) {
	a := listen(t, "127.0.0.1:0", Options{Portable: portable})
	b := listen(t, "127.0.0.1:0", Options{Portable: portable})
	const total = 3000
	pkts := numbered(total, mixedLens)
	run := func(from, to *Conn, errc chan<- error) {
		var got [][]byte
		deadline := time.Now().Add(10 * time.Second)
		sendDone := make(chan error, 1)
		var received atomic.Int64
		go func() {
			for i := 0; i < total; {
				// At most ~300 KB in flight, well inside the receive buffer.
				for int64(i)-received.Load() > 200 && time.Now().Before(deadline) {
					time.Sleep(100 * time.Microsecond)
				}
				j := min(total, i+64)
				if err := from.Send(to.LocalAddr(), pkts[i:j]); err != nil {
					sendDone <- err
					return
				}
				i = j
			}
			sendDone <- nil
		}()
		for len(got) < total {
			if _, err := to.Recv(deadline, func(p []byte, _ netip.AddrPort) {
				got = append(got, bytes.Clone(p))
				received.Add(1)
			}); err != nil {
				errc <- err
				return
			}
		}
		if err := <-sendDone; err != nil {
			errc <- err
			return
		}
		for i := range got {
			if !bytes.Equal(got[i], pkts[i]) {
				errc <- fmt.Errorf("datagram %d differs", i)
				return
			}
		}
		errc <- nil
	}
	errc := make(chan error, 2)
	go run(a, b, errc)
	go run(b, a, errc)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

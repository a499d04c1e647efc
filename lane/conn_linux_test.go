//go:build linux

package lane

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// fakeBatchWriter stands in for sendmmsg (after tailscale's net/batching fakeBatchWriter). It
// splits GSO super-packets the way the kernel does, accepts at most perCall messages per call (to
// exercise the partial-send loop), and fails the first GSO message it sees with failGSO, once.
type fakeBatchWriter struct {
	perCall  int
	failGSO  error
	failed   bool
	calls    int
	gsoMsgs  int        // super-packets accepted
	got      [][]byte   // datagrams as the network would see them
	gsoSeen  []int      // gso size of each accepted message (0: none)
	err      error      // if set, every call fails with it
	segLimit int        // if set, super-packets with more segments fail with EINVAL (UDP_MAX_SEGMENTS)
	t        *testing.T // for protocol violations
}

func (f *fakeBatchWriter) WriteBatch(ms []ipv6.Message, flags int) (int, error) {
	f.calls++
	if f.err != nil {
		return 0, f.err
	}
	for i, m := range ms {
		if f.perCall > 0 && i == f.perCall {
			return i, nil
		}
		gso := 0
		if len(m.OOB) > 0 {
			h := (*unix.Cmsghdr)(unsafe.Pointer(&m.OOB[0]))
			if h.Level != unix.SOL_UDP || h.Type != unix.UDP_SEGMENT || int(h.Len) != unix.CmsgLen(2) {
				f.t.Errorf("bad control message %+v", *h)
			}
			gso = int(binary.NativeEndian.Uint16(m.OOB[unix.CmsgLen(0):]))
		}
		if gso > 0 && f.failGSO != nil && !f.failed {
			if i > 0 {
				return i, nil // sendmmsg reports the error on the next call
			}
			f.failed = true
			return 0, &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("sendmmsg", f.failGSO)}
		}
		var data []byte
		for _, b := range m.Buffers {
			data = append(data, b...)
		}
		if gso > 0 && f.segLimit > 0 && (len(data)+gso-1)/gso > f.segLimit {
			if i > 0 {
				return i, nil
			}
			return 0, &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("sendmmsg", unix.EINVAL)}
		}
		if m.Addr == nil {
			f.t.Error("message without address")
		}
		f.gsoSeen = append(f.gsoSeen, gso)
		if gso > 0 {
			f.gsoMsgs++
		}
		for rest := data; ; {
			var seg []byte
			seg, rest = nextSegment(rest, gso)
			f.got = append(f.got, seg)
			if len(rest) == 0 {
				break
			}
		}
		ms[i].N = len(data)
	}
	return len(ms), nil
}

// fakeConn is a real socket whose sends go to a fakeBatchWriter, with GSO forced on (so the test
// means the same where the kernel has no GSO).
func fakeConn(t *testing.T, f *fakeBatchWriter, copyMode bool) *Conn {
	c := listen(t, "127.0.0.1:0", Options{})
	f.t = t
	c.tx.w = f
	c.tx.gso.Store(true)
	c.tx.copyMode = copyMode
	return c
}

var fakeDst = netip.MustParseAddrPort("192.0.2.1:9")

func TestSendFake(t *testing.T) {
	for _, copyMode := range []bool{false, true} {
		f := &fakeBatchWriter{perCall: 3}
		c := fakeConn(t, f, copyMode)
		pkts := numbered(1000, mixedLens)
		if err := c.Send(fakeDst, pkts); err != nil {
			t.Fatal(err)
		}
		checkSame(t, f.got, pkts)
		if f.gsoMsgs == 0 {
			t.Fatal("no GSO super-packets")
		}
		st := c.Stats()
		if st.SentDatagrams != 1000 || st.TxSyscalls != uint64(f.calls) || st.GSOFallbacks != 0 {
			t.Fatalf("stats %+v, fake calls %d", st, f.calls)
		}
		t.Logf("copy=%v: 1000 packets in %d messages, %d super-packets, %d calls", copyMode, len(f.gsoSeen), f.gsoMsgs, f.calls)
	}
}

// TestSendGSOFallback: the first GSO send fails with EIO (or EINVAL); Send turns GSO off, resends
// uncoalesced, reports no error, and every datagram arrives intact and in order.
func TestSendGSOFallback(t *testing.T) {
	for _, errno := range []syscall.Errno{unix.EIO, unix.EINVAL} {
		t.Run(errno.Error(), func(t *testing.T) {
			f := &fakeBatchWriter{perCall: 5, failGSO: errno}
			c := fakeConn(t, f, false)
			// Odd sizes first, so that the failing super-packet is not the first message.
			pkts := numbered(500, func(i int) int {
				if i < 3 {
					return 10 + i*100
				}
				return mixedLens(i)
			})
			if err := c.Send(fakeDst, pkts); err != nil {
				t.Fatalf("Send = %v, want nil after fallback", err)
			}
			checkSame(t, f.got, pkts)
			if gso, _ := c.Offload(); gso {
				t.Error("GSO still on after fallback")
			}
			if st := c.Stats(); st.GSOFallbacks != 1 || st.SentDatagrams != 500 {
				t.Errorf("stats %+v", st)
			}
			// The fallback sticks: the next Send goes out uncoalesced.
			f.got, f.gsoSeen = nil, nil
			if err := c.Send(fakeDst, pkts); err != nil {
				t.Fatal(err)
			}
			checkSame(t, f.got, pkts)
			for _, g := range f.gsoSeen {
				if g != 0 {
					t.Fatal("GSO used after fallback")
				}
			}
		})
	}
}

// TestSendSegmentStepDown: a kernel that refuses 128 segments gets 64, and GSO stays on.
func TestSendSegmentStepDown(t *testing.T) {
	f := &fakeBatchWriter{segLimit: udpSegmentMaxDatagrams}
	c := fakeConn(t, f, false)
	c.tx.maxSegs = udpSegmentMaxDatagramsNew
	pkts := numbered(300, func(int) int { return 100 })
	if err := c.Send(fakeDst, pkts); err != nil {
		t.Fatal(err)
	}
	checkSame(t, f.got, pkts)
	if gso, _ := c.Offload(); !gso || c.tx.maxSegs != udpSegmentMaxDatagrams || c.Stats().GSOFallbacks != 0 {
		t.Fatalf("gso %v, maxSegs %d, fallbacks %d", gso, c.tx.maxSegs, c.Stats().GSOFallbacks)
	}
}

// TestSendErrorNotFallback: errors unrelated to GSO come back to the caller, GSO stays on.
func TestSendErrorNotFallback(t *testing.T) {
	f := &fakeBatchWriter{err: &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("sendmmsg", unix.EPERM)}}
	c := fakeConn(t, f, false)
	err := c.Send(fakeDst, numbered(10, func(int) int { return 100 }))
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("Send = %v, want EPERM", err)
	}
	if gso, _ := c.Offload(); !gso {
		t.Fatal("GSO turned off by an unrelated error")
	}
	// A plain (non-GSO) message failing with EINVAL is not a GSO problem either.
	f.err = &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("sendmmsg", unix.EINVAL)}
	if err := c.Send(fakeDst, [][]byte{make([]byte, 10)}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Send = %v, want EINVAL", err)
	}
	if c.Stats().GSOFallbacks != 0 {
		t.Fatal("fallback counted")
	}
}

// TestGSOSegmentLimit sends 128-segment super-packets over loopback where the kernel allows it,
// and checks that a refusal (older kernels: 64) falls back without losing data.
func TestGSOSegmentLimit(t *testing.T) {
	tx := listen(t, "127.0.0.1:0", Options{GSOSegments: 1000})
	rx := listen(t, "127.0.0.1:0", Options{})
	if tx.tx.maxSegs != udpSegmentMaxDatagramsNew {
		t.Fatalf("maxSegs = %d", tx.tx.maxSegs)
	}
	pkts := numbered(256, func(int) int { return 200 })
	if err := tx.Send(rx.LocalAddr(), pkts); err != nil {
		t.Fatal(err)
	}
	checkSame(t, recvAll(t, rx, len(pkts), tx.LocalAddr()), pkts)
	gso, _ := tx.Offload()
	t.Logf("128 segments: gso still on = %v, fallbacks %d, tx syscalls %d", gso, tx.Stats().GSOFallbacks, tx.Stats().TxSyscalls)
}

func TestCmsgRoundTrip(t *testing.T) {
	b := make([]byte, 64)
	oob := putGSOSize(b, 1452)
	if len(oob) != gsoCmsgSpace {
		t.Fatalf("len %d", len(oob))
	}
	// The parser must skip an unknown message and read GRO size and drop count.
	msgs := make([]byte, 0, 128)
	add := func(level, typ int32, v uint32) {
		m := make([]byte, unix.CmsgSpace(4))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&m[0]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(4))
		binary.NativeEndian.PutUint32(m[unix.CmsgLen(0):], v)
		msgs = append(msgs, m...)
	}
	add(unix.IPPROTO_IP, unix.IP_TOS, 7)
	add(unix.SOL_UDP, unix.UDP_GRO, 1452)
	add(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 42)
	ts := make([]byte, unix.CmsgSpace(16))
	th := (*unix.Cmsghdr)(unsafe.Pointer(&ts[0]))
	th.Level, th.Type = unix.SOL_SOCKET, unix.SO_TIMESTAMPNS
	th.SetLen(unix.CmsgLen(16))
	binary.NativeEndian.PutUint64(ts[unix.CmsgLen(0):], 1_700_000_000)
	binary.NativeEndian.PutUint64(ts[unix.CmsgLen(0)+8:], 123_456_789)
	msgs = append(msgs, ts...)
	gso, drops, ok, ns := parseCmsgs(msgs)
	if gso != 1452 || drops != 42 || !ok || ns != 1_700_000_000_123_456_789 {
		t.Fatalf("parseCmsgs = %d, %d, %v, %d", gso, drops, ok, ns)
	}
	if gso, _, ok, _ := parseCmsgs(msgs[:unix.CmsgSpace(4)+10]); gso != 0 || ok {
		t.Fatalf("truncated control data parsed: %d %v", gso, ok)
	}
	if gso, _, _, _ := parseCmsgs(nil); gso != 0 {
		t.Fatal("empty")
	}
}

// TestRxDropped overruns a small receive buffer and checks that the kernel's drop count arrives.
func TestRxDropped(t *testing.T) {
	tx := listen(t, "127.0.0.1:0", Options{DisableGSO: true})
	rx := listen(t, "127.0.0.1:0", Options{Buffer: 16 << 10, DisableGRO: true})
	pkts := numbered(200, func(int) int { return MaxDatagram })
	if err := tx.Send(rx.LocalAddr(), pkts); err != nil {
		t.Fatal(err)
	}
	// The queue holds whatever fitted. The kernel stamps each datagram with the drop count at
	// the time it was queued, so one sent after the drops carries it.
	n := 0
	drain := func() {
		for {
			k, err := rx.Recv(time.Now().Add(50*time.Millisecond), func([]byte, netip.AddrPort) {})
			if err == ErrTimeout {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
	}
	drain()
	if err := tx.Send(rx.LocalAddr(), pkts[:1]); err != nil {
		t.Fatal(err)
	}
	drain()
	n--
	st := rx.Stats()
	if n == 200 || st.RxDropped == 0 || int(st.RxDropped)+n != 200 {
		t.Fatalf("received %d of 200, RxDropped %d", n, st.RxDropped)
	}
	t.Logf("received %d, kernel dropped %d", n, st.RxDropped)
}

func TestKernelVersion(t *testing.T) {
	ma, mi := kernelVersion()
	if ma == 0 {
		t.Fatal("no kernel version")
	}
	if !kernelAtLeast(ma, mi) || kernelAtLeast(ma, mi+1) || !kernelAtLeast(2, 6) {
		t.Fatal("kernelAtLeast")
	}
	t.Logf("kernel %d.%d", ma, mi)
	if itoa(0) != "0" || itoa(4294967295) != "4294967295" {
		t.Fatal("itoa")
	}
}

// TestZoneCache: a link-local IPv6 sender comes with its zone.
func TestAddrPortZone(t *testing.T) {
	var r receiver
	var sa [unix.SizeofSockaddrInet6]byte
	binary.NativeEndian.PutUint16(sa[0:], unix.AF_INET6)
	binary.BigEndian.PutUint16(sa[2:], 4242)
	a := netip.MustParseAddr("fe80::1").As16()
	copy(sa[8:], a[:])
	binary.NativeEndian.PutUint32(sa[24:], 1)
	ap := r.addrPort(&sa)
	if ap.Port() != 4242 || ap.Addr().WithZone("") != netip.MustParseAddr("fe80::1") || ap.Addr().Zone() == "" {
		t.Fatalf("addrPort = %v", ap)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.addrPort(&sa) }); allocs != 0 {
		t.Errorf("addrPort with zone: %v allocs", allocs)
	}
	binary.NativeEndian.PutUint16(sa[0:], unix.AF_INET)
	copy(sa[4:], []byte{10, 1, 2, 3})
	if ap := r.addrPort(&sa); ap != netip.MustParseAddrPort("10.1.2.3:4242") {
		t.Fatalf("addrPort = %v", ap)
	}
}

// TestAllocs: steady-state Send and Recv allocate nothing, with and without offload, and on the
// portable path.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("race detector allocates")
	}
	for _, tc := range []struct {
		name          string
		off, portable bool
	}{{"offload", false, false}, {"no offload", true, false}, {"portable", false, true}} {
		tx := listen(t, "127.0.0.1:0", Options{DisableGSO: tc.off, Portable: tc.portable})
		rx := listen(t, "127.0.0.1:0", Options{DisableGRO: tc.off, Portable: tc.portable})
		pkts := numbered(64, func(int) int { return MaxDatagram })
		dst := rx.LocalAddr()
		got := 0
		fn := func(b []byte, from netip.AddrPort) { got += len(b) }
		deadline := time.Now().Add(time.Minute)
		round := func() {
			if err := tx.Send(dst, pkts); err != nil {
				t.Fatal(err)
			}
			for n := 0; n < len(pkts); {
				k, err := rx.Recv(deadline, fn)
				if err != nil {
					t.Fatal(err)
				}
				n += k
			}
		}
		round()
		sendAllocs := testing.AllocsPerRun(50, func() {
			if err := tx.Send(dst, pkts); err != nil {
				t.Fatal(err)
			}
		})
		// Drain what the measurement sent (51 rounds).
		for n := 0; n < 51*len(pkts); {
			k, err := rx.Recv(deadline, fn)
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		allocs := testing.AllocsPerRun(50, round)
		t.Logf("%s: Send %v allocs/call (64 packets), Send+Recv %v allocs/round", tc.name, sendAllocs, allocs)
		if sendAllocs != 0 || allocs != 0 {
			t.Errorf("%s: Send %v allocs, Send+Recv %v allocs; want 0", tc.name, sendAllocs, allocs)
		}
	}
}

// socketPaths: Linux has the batched path and, with Options.Portable, macOS's.
var socketPaths = []socketPath{{"batched", false}, {"portable", true}}

// setCopyMode sets the batched path's copy mode (the portable path has none).
func setCopyMode(c *Conn, on bool) {
	if c.tx != nil {
		c.tx.copyMode = on
	}
}

// cpuTime is the process's user+system CPU time: per-packet cost that holds up better than wall
// time when other processes share the machine.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDeliverTruncated fakes a recvmmsg result with MSG_TRUNC: a truncated GRO super-packet yields
// its whole segments, a truncated plain datagram nothing; both are counted.
func TestDeliverTruncated(t *testing.T) {
	c := listen(t, "127.0.0.1:0", Options{})
	r := c.rx
	var sa [unix.SizeofSockaddrInet6]byte
	binary.NativeEndian.PutUint16(sa[0:], unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], 7)
	copy(sa[4:], []byte{127, 0, 0, 1})
	fill := func(i, n, flags, gso int) {
		r.names[i] = sa
		r.hs[i].Len = uint32(n)
		r.hs[i].Hdr.Flags = int32(flags)
		oob := r.oob[i*rxOOBSize : (i+1)*rxOOBSize]
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_GRO
		h.SetLen(unix.CmsgLen(4))
		binary.NativeEndian.PutUint32(oob[unix.CmsgLen(0):], uint32(gso))
		r.hs[i].Hdr.SetControllen(unix.CmsgSpace(4))
	}
	fill(0, rxBufSize, unix.MSG_TRUNC, 1000) // 65 whole segments of 1000, one cut
	fill(1, rxBufSize, unix.MSG_TRUNC, 0)    // a plain datagram cut: nothing usable
	fill(2, 300, 0, 100)                     // intact: 3 segments
	r.n = 3
	var lens []int
	n := c.deliver(func(b []byte, from netip.AddrPort) {
		if from != netip.MustParseAddrPort("127.0.0.1:7") {
			t.Errorf("from %v", from)
		}
		lens = append(lens, len(b))
	})
	if n != 68 || len(lens) != 68 || lens[64] != 1000 || lens[65] != 100 {
		t.Fatalf("delivered %d: %v", n, lens)
	}
	if st := c.Stats(); st.RxTruncated != 2 || st.RecvDatagrams != 68 || st.RecvBytes != 65300 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRxTimestamps checks that kernel receive times arrive while switched on, lie between the
// send and the read, and stop when switched off.
func TestRxTimestamps(t *testing.T) {
	a := listen(t, "127.0.0.1:0", Options{})
	b := listen(t, "127.0.0.1:0", Options{})
	recvOne := func() time.Time {
		t.Helper()
		var at time.Time
		n, err := b.Recv(time.Now().Add(5*time.Second), func([]byte, netip.AddrPort) { at = b.RxTime() })
		if n != 1 || err != nil {
			t.Fatalf("Recv = %d, %v", n, err)
		}
		return at
	}
	if err := b.SetRxTimestamps(true); err != nil {
		t.Fatal(err)
	}
	// The kernel switches stamping on from a work queue: the first datagrams after the first
	// socket asks may still be stamped on the read.
	time.Sleep(50 * time.Millisecond)
	before := time.Now()
	if err := a.Send(b.LocalAddr(), [][]byte{[]byte("stamped")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the stamp is taken on arrival, not on the read
	at := recvOne()
	if at.Before(before.Add(-time.Millisecond)) || !at.Before(before.Add(15*time.Millisecond)) {
		t.Fatalf("receive time %v is not at the send (%v)", at.Sub(before), before)
	}
	if err := b.SetRxTimestamps(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(b.LocalAddr(), [][]byte{[]byte("plain")}); err != nil {
		t.Fatal(err)
	}
	if at := recvOne(); !at.IsZero() {
		t.Fatalf("receive time %v with timestamps off", at)
	}
}

// TestPending: a datagram waiting unread shows, and stops showing once read.
func TestPending(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{Buffer: 1 << 20})
	tx := listen(t, "127.0.0.1:0", Options{Buffer: 1 << 20})
	if rx.Pending() {
		t.Fatal("an empty socket has a datagram pending")
	}
	if err := tx.Send(rx.LocalAddr(), [][]byte{[]byte("hello")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !rx.Pending() {
		if time.Now().After(deadline) {
			t.Fatal("the datagram sent never showed as pending")
		}
		time.Sleep(time.Millisecond)
	}
	if n, err := rx.Recv(time.Now().Add(time.Second), func([]byte, netip.AddrPort) {}); n != 1 || err != nil {
		t.Fatalf("Recv: %d, %v", n, err)
	}
	if rx.Pending() {
		t.Fatal("still pending after it was read")
	}
}

// TestPortableChoice: Linux lanes are batched unless Options.Portable asks for the portable path;
// the first portable lane of a process says so once, through Options.Warn, and a batched one never.
func TestPortableChoice(t *testing.T) {
	old := portableNoted.Load()
	defer portableNoted.Store(old)
	portableNoted.Store(false)
	var said []string
	warn := func(m string) {
		if !strings.Contains(m, "capped") { // (the buffer warning, where the sysctls cap buffers)
			said = append(said, m)
		}
	}
	b := listen(t, "127.0.0.1:0", Options{Warn: warn})
	if b.Portable() || b.tx == nil || b.rx == nil || b.port != nil {
		t.Fatal("a lane without Options.Portable is not on the batched path")
	}
	if len(said) != 0 {
		t.Fatalf("a batched lane said %q", said)
	}
	for range 3 {
		p := listen(t, "127.0.0.1:0", Options{Portable: true, Warn: warn})
		if !p.Portable() || p.tx != nil || p.rx != nil {
			t.Fatal("Options.Portable did not give the portable path alone")
		}
		if r, s := p.Buffers(); r <= 0 || s <= 0 {
			t.Fatalf("portable lane's buffers: %d, %d", r, s)
		}
	}
	if len(said) != 1 || said[0] != PortableNotice {
		t.Fatalf("three portable lanes said %q, want the notice once", said)
	}
}

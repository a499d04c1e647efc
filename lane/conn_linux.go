//go:build linux

package lane

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// The two x/net message types are the same type; one send path serves both families.
var _ ipv6.Message = ipv4.Message{}

const (
	txBatch   = 64      // most datagrams (super-packets included) per sendmmsg
	rxBatch   = 8       // messages per recvmmsg; with GRO each can hold 45 datagrams
	rxBufSize = 1 << 16 // one receive buffer: the largest UDP datagram or GRO super-packet fits
	rxOOBSize = 96      // room for the UDP_GRO and SO_RXQ_OVFL (24 B each) and SO_TIMESTAMPNS (32 B) messages
)

// gsoCmsgSpace is the size of one UDP_SEGMENT control message (a uint16 gso_size).
var gsoCmsgSpace = unix.CmsgSpace(2)

// batchWriter is the part of ipv4.PacketConn / ipv6.PacketConn that Send uses; tests replace it
// with a fake (see fakeBatchWriter) to inject errors.
type batchWriter interface {
	WriteBatch(ms []ipv6.Message, flags int) (int, error)
}

// Conn is one UDP lane.
type Conn struct {
	uc    *net.UDPConn
	rc    syscall.RawConn
	stats counters

	rcvBuf, sndBuf int
	gro            bool // UDP_GRO is on (fixed at Listen)

	// port is the portable path (Options.Portable; nil: the batched path, tx and rx). Chosen at
	// Listen, it costs the batched path one comparison per Send and per Recv, not per datagram.
	port *portable
	tx   *sender
	rx   *receiver
}

// sender is the state of Send; only the goroutine in Send touches it, except gso (read by Offload).
type sender struct {
	w       batchWriter
	gso     atomic.Bool // UDP_SEGMENT in use; cleared for good after a send fails because of it
	maxSegs int
	// copyMode coalesces by copying into bufs instead of chaining the caller's buffers as iovecs.
	// On loopback (Linux 6.18) both cost the same, ~150 CPU-ns per 1452-byte packet sent, so the
	// default is iovecs: no copy and no 4 MiB of buffers per lane. Kept to re-measure on real NICs.
	copyMode bool

	addr  net.UDPAddr // the destination of the current Send, reused
	ip    [16]byte    // backing array of addr.IP
	msgs  []ipv6.Message
	spans []span
	oob   []byte      // txBatch UDP_SEGMENT control messages, gsoCmsgSpace bytes each
	bufs  [][]byte    // copyMode only: txBatch buffers of 64 KiB, made on first use
	one   [][1][]byte // copyMode only: Message.Buffers backing, one per message
}

// receiver is the state of Recv: mmsghdrs, iovecs, socket addresses and buffers built once, so that
// a recvmmsg call allocates nothing (x/net ReadBatch allocates a *net.UDPAddr per message).
type receiver struct {
	hs    [rxBatch]unix.Mmsghdr
	iov   [rxBatch]unix.Iovec
	names [rxBatch][unix.SizeofSockaddrInet6]byte
	oob   []byte // rxBatch × rxOOBSize, 8-byte aligned
	buf   []byte // rxBatch × rxBufSize

	read     func(fd uintptr) bool // r.recvmmsg, bound once
	n        int
	errno    syscall.Errno
	deadline time.Time // the read deadline last set on the socket

	stampNs int64 // kernel receive time of the datagram being delivered, unix ns (0: timestamps off)

	// zone cache for link-local senders: the last scope id and its zone name.
	zoneID   uint32
	zoneName string
}

// Listen opens a lane on addr ("198.18.0.1:0", "[::]:0", ":0").
func Listen(addr string, opt Options) (*Conn, error) {
	uc, err := listenUDP(addr)
	if err != nil {
		return nil, err
	}
	c, err := newConn(uc, opt)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

func newConn(uc *net.UDPConn, opt Options) (*Conn, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	if opt.Buffer <= 0 {
		opt.Buffer = DefaultBuffer
	}
	if opt.Portable {
		return newPortableConn(uc, rc, opt)
	}
	c := &Conn{uc: uc, rc: rc, tx: new(sender), rx: new(receiver)}

	var (
		family               int
		gsoOK, groOK         bool
		rcvCapped, sndCapped bool
	)
	wantGSO := !opt.DisableGSO && kernelAtLeast(5, 0)
	// wireguard-go enables UDP_GRO only from 5.12 (before it, getsockopt(UDP_GRO) is missing and
	// GRO had bugs: wireguard-go commit c92064f).
	wantGRO := !opt.DisableGRO && kernelAtLeast(5, 12)
	cerr := rc.Control(func(fd uintptr) {
		s := int(fd)
		family, err = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_DOMAIN)
		c.rcvBuf, rcvCapped = setBuffer(s, unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, opt.Buffer)
		c.sndBuf, sndCapped = setBuffer(s, unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, opt.Buffer)
		// Kernel drop counter on every received datagram; best effort.
		_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
		if wantGSO {
			// quic-go and wireguard-go probe TX offload this way: the option exists iff the
			// kernel understands UDP_SEGMENT.
			_, e := unix.GetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
			gsoOK = e == nil
		}
		if wantGRO {
			groOK = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	// The kernel reports twice the size asked for (the rest is its bookkeeping): compare halves.
	warnOnce(opt, bufferWarning(opt.Buffer, c.rcvBuf/2, c.sndBuf/2, rcvCapped, sndCapped))

	t := c.tx
	if family == unix.AF_INET6 {
		t.w = ipv6.NewPacketConn(uc)
	} else {
		t.w = ipv4.NewPacketConn(uc)
	}
	t.gso.Store(gsoOK)
	t.maxSegs = udpSegmentMaxDatagrams
	if opt.GSOSegments > 0 {
		t.maxSegs = min(opt.GSOSegments, udpSegmentMaxDatagramsNew)
	}
	t.msgs = make([]ipv6.Message, txBatch)
	t.spans = make([]span, 0, txBatch)
	t.oob = make([]byte, txBatch*gsoCmsgSpace)
	t.one = make([][1][]byte, txBatch)

	c.gro = groOK
	c.rx.init()
	return c, nil
}

// portableNoted makes the notice that lanes run the portable path appear once per process.
var portableNoted atomic.Bool

// newPortableConn makes uc a lane on the portable path (Options.Portable): socket buffers as the
// batched path sets them (so that a comparison of the two measures their system calls, not their
// buffers), then Send and Recv as off Linux, one datagram per system call; no offload, no
// receive timestamps, Pending always false.
func newPortableConn(uc *net.UDPConn, rc syscall.RawConn, opt Options) (*Conn, error) {
	c := &Conn{uc: uc, rc: rc, port: newPortable(uc)}
	var rcvCapped, sndCapped bool
	if err := rc.Control(func(fd uintptr) {
		c.rcvBuf, rcvCapped = setBuffer(int(fd), unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, opt.Buffer)
		c.sndBuf, sndCapped = setBuffer(int(fd), unix.SO_SNDBUF, unix.SO_SNDBUFFORCE, opt.Buffer)
	}); err != nil {
		return nil, err
	}
	warnOnce(opt, bufferWarning(opt.Buffer, c.rcvBuf/2, c.sndBuf/2, rcvCapped, sndCapped))
	noteOnce(&portableNoted, opt, PortableNotice)
	return c, nil
}

// setBuffer asks for want bytes of socket buffer (opt is SO_RCVBUF or SO_SNDBUF), trying the
// *FORCE variant first, which ignores net.core.[rw]mem_max but needs CAP_NET_ADMIN. It returns the
// size the kernel reports and whether it is below what was asked for. Linux doubles the value set
// to leave room for its bookkeeping, and reports the doubled value (socket(7)).
func setBuffer(fd, opt, force, want int) (got int, capped bool) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, want) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, want)
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	if err != nil {
		return 0, false
	}
	return got, got < 2*want
}

// kernelVersion parses the running kernel's release, e.g. "6.18.44-fc" → 6, 18.
func kernelVersion() (major, minor int) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return 0, 0
	}
	rel := u.Release[:]
	num := func() int {
		n := 0
		for len(rel) > 0 && rel[0] >= '0' && rel[0] <= '9' {
			n = n*10 + int(rel[0]-'0')
			rel = rel[1:]
		}
		if len(rel) > 0 && rel[0] == '.' {
			rel = rel[1:]
		}
		return n
	}
	major = num()
	minor = num()
	return major, minor
}

// kernelAtLeast reports whether the running kernel is major.minor or newer. quic-go requires 5.0
// for GSO after an Android 4.14 kernel accepted UDP_SEGMENT but stalled (quic-go #4446).
func kernelAtLeast(major, minor int) bool {
	ma, mi := kernelVersion()
	return ma > major || ma == major && mi >= minor
}

// LocalAddr is the socket's bound address.
func (c *Conn) LocalAddr() netip.AddrPort {
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Buffers reports the receive and send buffer sizes the kernel granted, as getsockopt returns
// them (Linux reports twice the payload bytes asked for; see socket(7)).
func (c *Conn) Buffers() (recv, send int) { return c.rcvBuf, c.sndBuf }

// Offload reports whether Send uses UDP GSO (false after a fallback) and Recv uses UDP GRO:
// never on the portable path.
func (c *Conn) Offload() (gso, gro bool) {
	if c.port != nil {
		return false, false
	}
	return c.tx.gso.Load(), c.gro
}

// Portable reports whether the lane runs the portable socket path (Options.Portable).
func (c *Conn) Portable() bool { return c.port != nil }

// Send writes each packet in pkts as one datagram to dst.
//
// Runs of equal-sized packets travel as GSO super-packets, many per sendmmsg. If the kernel refuses
// a super-packet (EIO: the egress device lacks checksum offload; EINVAL: a limit the probe did not
// reveal), GSO is switched off for this socket, the unsent packets are resent one datagram each, and
// Stats.GSOFallbacks counts it; Send then returns nil if the resend succeeds.
func (c *Conn) Send(dst netip.AddrPort, pkts [][]byte) error {
	if c.port != nil {
		return c.port.send(&c.stats, dst, pkts)
	}
	t := c.tx
	t.setAddr(dst)
	maxBytes := maxGSOBytes6
	if dst.Addr().Unmap().Is4() {
		maxBytes = maxGSOBytes4
	}
	var sentD, sentB, calls uint64
	var err error
	for len(pkts) > 0 {
		segs := 1
		if t.gso.Load() {
			segs = t.maxSegs
		}
		t.spans = coalesce(t.spans[:0], pkts, segs, maxBytes, len(t.msgs))
		msgs := t.build(pkts)
		var k, nc int
		k, nc, err = writeAll(t.w, msgs)
		calls += uint64(nc)
		for i, s := range t.spans[:k] {
			sentD += uint64(s.end - s.start)
			sentB += uint64(msgs[i].N)
		}
		if err != nil {
			if s := t.spans[k]; s.gso > 0 && s.end-s.start > udpSegmentMaxDatagrams && errors.Is(err, unix.EINVAL) {
				// Options.GSOSegments asked for more than this kernel's UDP_MAX_SEGMENTS:
				// step down to the old limit before giving up on GSO.
				t.maxSegs = udpSegmentMaxDatagrams
				pkts = pkts[s.start:]
				err = nil
				continue
			}
			if t.spans[k].gso > 0 && shouldDisableGSO(err) {
				t.gso.Store(false)
				c.stats.gsoFallbacks.Add(1)
				pkts = pkts[t.spans[k].start:]
				err = nil
				continue
			}
			break
		}
		pkts = pkts[t.spans[len(t.spans)-1].end:]
	}
	c.stats.sentD.Add(sentD)
	c.stats.sentB.Add(sentB)
	c.stats.txCalls.Add(calls)
	return err
}

// setAddr points t.addr at dst without allocating.
func (t *sender) setAddr(dst netip.AddrPort) {
	a := dst.Addr()
	if a.Is4() {
		b := a.As4()
		t.addr.IP = t.ip[:4]
		copy(t.addr.IP, b[:])
	} else {
		b := a.As16()
		t.addr.IP = t.ip[:16]
		copy(t.addr.IP, b[:])
	}
	t.addr.Port = int(dst.Port())
	t.addr.Zone = a.Zone()
}

// build fills t.msgs from t.spans and returns the used prefix.
func (t *sender) build(pkts [][]byte) []ipv6.Message {
	msgs := t.msgs[:len(t.spans)]
	for i, s := range t.spans {
		m := &msgs[i]
		if t.copyMode && s.gso > 0 {
			if t.bufs == nil {
				t.bufs = make([][]byte, txBatch)
				for j := range t.bufs {
					t.bufs[j] = make([]byte, 1<<16)
				}
			}
			n := 0
			for _, p := range pkts[s.start:s.end] {
				n += copy(t.bufs[i][n:], p)
			}
			t.one[i][0] = t.bufs[i][:n]
			m.Buffers = t.one[i][:]
		} else {
			m.Buffers = pkts[s.start:s.end]
		}
		m.OOB = nil
		if s.gso > 0 {
			m.OOB = putGSOSize(t.oob[i*gsoCmsgSpace:(i+1)*gsoCmsgSpace], s.gso)
		}
		m.Addr = &t.addr
		m.N, m.NN, m.Flags = 0, 0, 0
	}
	return msgs
}

// writeAll sends msgs, looping because sendmmsg may send only a prefix. It returns how many
// messages went out, how many system calls it made, and the error that stopped it; sendmmsg
// reports an error only for the first message of a call, so msgs[sent] is the one that failed.
func writeAll(w batchWriter, msgs []ipv6.Message) (sent, calls int, err error) {
	for sent < len(msgs) {
		n, err := w.WriteBatch(msgs[sent:], 0)
		calls++
		if err != nil {
			return sent, calls, err
		}
		if n <= 0 {
			return sent, calls, errors.New("lane: sendmmsg sent nothing")
		}
		sent += n
	}
	return sent, calls, nil
}

// shouldDisableGSO reports whether a failed GSO send should be retried without GSO. udp_send_skb
// returns EIO when the egress device cannot checksum in hardware, which UDP_SEGMENT requires
// (wireguard-go conn/errors_linux.go); EINVAL means a segment limit this kernel or route enforces
// (too many segments, or gso_size above the path MTU).
func shouldDisableGSO(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL)
}

// putGSOSize writes a UDP_SEGMENT control message carrying gso into b (gsoCmsgSpace bytes,
// 8-byte aligned) and returns it.
func putGSOSize(b []byte, gso int) []byte {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.SOL_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(gso))
	return b[:gsoCmsgSpace]
}

// parseCmsgs walks received control messages for the GRO segment size (0: not coalesced), the
// SO_RXQ_OVFL drop counter and the SO_TIMESTAMPNS receive time (0: none).
func parseCmsgs(oob []byte) (gso int, drops uint32, haveDrops bool, stampNs int64) {
	const align = int(unsafe.Sizeof(uintptr(0)))
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			gso = int(int32(binary.NativeEndian.Uint32(data)))
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			drops, haveDrops = binary.NativeEndian.Uint32(data), true
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_TIMESTAMPNS && len(data) >= 16:
			// struct timespec of a 64-bit kernel ABI (SO_TIMESTAMPNS_OLD on 64-bit is the same).
			stampNs = int64(binary.NativeEndian.Uint64(data))*1e9 + int64(binary.NativeEndian.Uint64(data[8:]))
		}
		sp := (l + align - 1) &^ (align - 1)
		if sp >= len(oob) {
			break
		}
		oob = oob[sp:]
	}
	return gso, drops, haveDrops, stampNs
}

func (r *receiver) init() {
	r.oob = make([]byte, rxBatch*rxOOBSize)
	r.buf = make([]byte, rxBatch*rxBufSize)
	for i := range r.hs {
		r.iov[i].Base = &r.buf[i*rxBufSize]
		r.iov[i].SetLen(rxBufSize)
		h := &r.hs[i].Hdr
		h.Name = &r.names[i][0]
		h.Iov = &r.iov[i]
		h.SetIovlen(1)
		h.Control = &r.oob[i*rxOOBSize]
	}
	r.read = r.recvmmsg
}

// recvmmsg is the RawConn.Read callback: false asks the runtime to wait for readability.
func (r *receiver) recvmmsg(fd uintptr) bool {
	for i := range r.hs {
		h := &r.hs[i]
		h.Len = 0
		h.Hdr.Namelen = unix.SizeofSockaddrInet6
		h.Hdr.SetControllen(rxOOBSize)
		h.Hdr.Flags = 0
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hs[0])), rxBatch, 0, 0, 0)
		switch e {
		case 0:
			r.n, r.errno = int(n), 0
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			r.n, r.errno = 0, e
			return true
		}
	}
}

// Recv waits for datagrams until deadline (zero: no deadline) and hands each to fn. It returns
// the number of datagrams handed over; ErrTimeout if the deadline passed first; net.ErrClosed
// after Close.
func (c *Conn) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	if c.port != nil {
		return c.port.recv(&c.stats, deadline, fn)
	}
	r := c.rx
	if !deadline.Equal(r.deadline) {
		if err := c.uc.SetReadDeadline(deadline); err != nil {
			return 0, recvErr(err)
		}
		r.deadline = deadline
	}
	for {
		if err := c.rc.Read(r.read); err != nil {
			return 0, recvErr(err)
		}
		if r.errno != 0 {
			return 0, os.NewSyscallError("recvmmsg", r.errno)
		}
		c.stats.rxCalls.Add(1)
		if n := c.deliver(fn); n > 0 {
			return n, nil
		}
		// Everything in this batch was truncated: wait for more.
	}
}

// deliver hands the datagrams of the last recvmmsg to fn, splitting GRO super-packets in place,
// and returns how many it handed over.
func (c *Conn) deliver(fn func(b []byte, from netip.AddrPort)) int {
	r := c.rx
	var count, bytes int
	for i := range r.n {
		h := &r.hs[i]
		gso, drops, ok, ns := parseCmsgs(r.oob[i*rxOOBSize : i*rxOOBSize+int(h.Hdr.Controllen)])
		if ok {
			c.stats.drops.Store(uint64(drops))
		}
		r.stampNs = ns
		b := r.buf[i*rxBufSize : i*rxBufSize+int(h.Len)]
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			// The datagram did not fit (pitfall with GRO and small buffers). Of a coalesced one,
			// the whole segments are intact; the cut one is lost.
			c.stats.trunc.Add(1)
			if gso <= 0 || len(b) < gso {
				continue
			}
			b = b[:len(b)/gso*gso]
		}
		from := r.addrPort(&r.names[i])
		for {
			var seg []byte
			seg, b = nextSegment(b, gso)
			fn(seg, from)
			count++
			bytes += len(seg)
			if len(b) == 0 {
				break
			}
		}
	}
	c.stats.recvD.Add(uint64(count))
	c.stats.recvB.Add(uint64(bytes))
	return count
}

// addrPort decodes a sockaddr_in or sockaddr_in6 written by the kernel. Like net.UDPConn, it keeps
// IPv4-mapped IPv6 addresses as they are.
func (r *receiver) addrPort(sa *[unix.SizeofSockaddrInet6]byte) netip.AddrPort {
	port := binary.BigEndian.Uint16(sa[2:4])
	switch binary.NativeEndian.Uint16(sa[0:2]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port)
	case unix.AF_INET6:
		a := netip.AddrFrom16([16]byte(sa[8:24]))
		if id := binary.NativeEndian.Uint32(sa[24:28]); id != 0 {
			if id != r.zoneID {
				r.zoneID, r.zoneName = id, zoneName(id)
			}
			a = a.WithZone(r.zoneName)
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

func zoneName(id uint32) string {
	if ifi, err := net.InterfaceByIndex(int(id)); err == nil {
		return ifi.Name
	}
	return itoa(id)
}

func itoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// SetRxTimestamps turns kernel receive timestamps (SO_TIMESTAMPNS) on or off; while on, RxTime
// reports them. They cost a control message per datagram, so they are meant for short
// measurements (the packet-train probe), not for bulk data. On the portable path it does nothing,
// as off Linux: RxTime stays zero.
func (c *Conn) SetRxTimestamps(on bool) error {
	if c.port != nil {
		return nil
	}
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := c.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, v)
	}); err != nil {
		return err
	}
	return serr
}

// Pending reports whether a datagram waits in the socket's receive queue, unread; on the portable
// path it does not tell (false), as off Linux.
func (c *Conn) Pending() bool {
	if c.port != nil {
		return false
	}
	n := 0
	_ = c.rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n > 0
}

// RxTime is the kernel's receive time of the datagram being handed to Recv's fn (valid only
// during that call), or the zero time when timestamps are off or the kernel gave none. The
// segments of one GRO super-packet share one time. Always zero on the portable path.
func (c *Conn) RxTime() time.Time {
	if c.port != nil || c.rx.stampNs == 0 {
		return time.Time{}
	}
	return time.Unix(0, c.rx.stampNs)
}

// Close closes the socket; a blocked Recv returns net.ErrClosed.
func (c *Conn) Close() error { return c.uc.Close() }

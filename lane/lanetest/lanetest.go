// Package lanetest is an in-memory network of lanes for tests: Conns that implement
// lane.PacketConn, joined by links with random loss, delay, jitter (reordering), a bottleneck rate
// with a drop-tail queue, and hooks to drop, observe or inject datagrams. It lets the session
// engine and whole copies run in-process, without sockets or root, and in virtual time under
// testing/synctest (it uses only time.Now, timers and channels).
package lanetest

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/lane"
)

// Link shapes the datagrams from one host to another. The zero value delivers everything at once.
type Link struct {
	Loss   float64       // fraction of datagrams dropped at random
	Delay  time.Duration // one-way delay
	Jitter time.Duration // extra delay drawn uniformly from [0, Jitter): reorders datagrams
	// Rate is the bottleneck in bits/s (0: none); datagrams queue behind each other at it, and a
	// datagram that would wait longer than Queue bytes take at Rate is dropped (drop-tail; Queue
	// 0: one bandwidth-delay product of Delay, at least 64 KiB).
	Rate  float64
	Queue int
	// Drop, if set, is asked about every datagram that survived Loss; true drops it.
	Drop func(from, to netip.AddrPort, b []byte) bool
	// MTU is the largest IP datagram the link carries, counted as Rate counts it (the UDP payload
	// and lane.IPv4UDPHeaders); a larger one is dropped, as a router drops a datagram with the
	// don't-fragment bit that does not fit its next hop (0: no limit but the network's SetMTU).
	MTU int
}

// Network joins Conns. Its methods are safe for concurrent use.
type Network struct {
	mu      sync.Mutex
	conns   map[netip.AddrPort]*Conn
	ports   map[netip.Addr]uint16
	links   map[[2]netip.Addr]*linkState
	def     Link
	rng     *rand.Rand
	seq     uint64
	tap     func(from, to netip.AddrPort, b []byte)
	mtu     int
	RecvBuf int           // bytes a Conn queues before it drops (the socket buffer; 0: 8 MiB)
	Dropped atomic.Uint64 // datagrams the links lost (random loss, Drop, a full queue, an MTU, no Conn)
}

type linkState struct {
	Link
	busy time.Time // when the bottleneck is free again
}

// New returns a network whose links are def unless SetLink says otherwise; seed makes its random
// choices repeatable.
func New(def Link, seed uint64) *Network {
	return &Network{conns: map[netip.AddrPort]*Conn{}, ports: map[netip.Addr]uint16{}, links: map[[2]netip.Addr]*linkState{},
		def: def, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), mtu: 65535}
}

// SetLink sets the link from host a to host b.
func (n *Network) SetLink(a, b netip.Addr, l Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[[2]netip.Addr{a, b}] = &linkState{Link: l}
}

// SetMTU drops datagrams longer than mtu bytes (default 65,535).
func (n *Network) SetMTU(mtu int) {
	n.mu.Lock()
	n.mtu = mtu
	n.mu.Unlock()
}

// Tap calls fn with every datagram sent by a Conn (before the link decides its fate), from the
// sending goroutine; b is valid only during the call. fn may call Inject.
func (n *Network) Tap(fn func(from, to netip.AddrPort, b []byte)) {
	n.mu.Lock()
	n.tap = fn
	n.mu.Unlock()
}

// Listen opens a Conn on host a with the next free port.
func (n *Network) Listen(a netip.Addr) (*Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for range 1 << 16 {
		p := n.ports[a] + 1
		if p < 1024 {
			p = 40000
		}
		n.ports[a] = p
		ap := netip.AddrPortFrom(a, p)
		if _, used := n.conns[ap]; !used {
			c := &Conn{net: n, addr: ap, wake: make(chan struct{}, 1)}
			n.conns[ap] = c
			return c, nil
		}
	}
	return nil, fmt.Errorf("lanetest: no free port on %s", a)
}

// Inject delivers b to the Conn at to as a datagram from from, bypassing links and taps (a forged
// or replayed datagram from anywhere). It reports whether a Conn is there.
func (n *Network) Inject(from, to netip.AddrPort, b []byte) bool {
	n.mu.Lock()
	c := n.conns[to]
	n.seq++
	seq := n.seq
	n.mu.Unlock()
	if c == nil {
		return false
	}
	return c.enqueue(&packet{at: time.Now(), seq: seq, from: from, b: append(make([]byte, 0, len(b)), b...)})
}

// route decides the fate of a datagram from from to to: its arrival time, or false if it is lost.
func (n *Network) route(from, to netip.AddrPort, b []byte) (c *Conn, at time.Time, seq uint64, ok bool) {
	n.mu.Lock()
	tap := n.tap
	n.mu.Unlock()
	if tap != nil {
		tap(from, to, b)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c = n.conns[to]
	if c == nil || len(b) > n.mtu {
		return nil, at, 0, false
	}
	l := n.links[[2]netip.Addr{from.Addr(), to.Addr()}]
	if l == nil {
		l = &linkState{Link: n.def}
		n.links[[2]netip.Addr{from.Addr(), to.Addr()}] = l
	}
	if l.MTU > 0 && len(b)+lane.IPv4UDPHeaders > l.MTU {
		return nil, at, 0, false // too large for the link: dropped before its loss and queue
	}
	if l.Loss > 0 && n.rng.Float64() < l.Loss {
		return nil, at, 0, false
	}
	if l.Drop != nil && l.Drop(from, to, b) {
		return nil, at, 0, false
	}
	now := time.Now()
	at = now
	if l.Rate > 0 {
		q := l.Queue
		if q <= 0 {
			q = max(int(l.Rate/8*l.Delay.Seconds()), 64<<10)
		}
		start := now
		if l.busy.After(now) {
			start = l.busy
		}
		if start.Sub(now) > time.Duration(float64(q)*8/l.Rate*float64(time.Second)) {
			return nil, at, 0, false // the queue is full
		}
		l.busy = start.Add(time.Duration(float64(len(b)+lane.IPv4UDPHeaders) * 8 / l.Rate * float64(time.Second)))
		at = l.busy
	}
	at = at.Add(l.Delay)
	if l.Jitter > 0 {
		at = at.Add(time.Duration(n.rng.Int64N(int64(l.Jitter))))
	}
	n.seq++
	return c, at, n.seq, true
}

func (n *Network) remove(c *Conn) {
	n.mu.Lock()
	if n.conns[c.addr] == c {
		delete(n.conns, c.addr)
	}
	n.mu.Unlock()
}

// Conn is one in-memory lane: it implements lane.PacketConn.
type Conn struct {
	net  *Network
	addr netip.AddrPort
	wake chan struct{}

	mu     sync.Mutex
	q      packetHeap
	qBytes int
	closed bool
	stamp  time.Time // arrival time of the datagram being handed to Recv's fn

	sentD, sentB, recvD, recvB, drops, calls atomic.Uint64
}

var _ lane.PacketConn = (*Conn)(nil)

type packet struct {
	at   time.Time
	seq  uint64
	from netip.AddrPort
	b    []byte
}

type packetHeap []*packet

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h packetHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x any)   { *h = append(*h, x.(*packet)) }
func (h *packetHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return p
}

// ErrNoRoute is returned by Send for a destination with no address (the zero AddrPort).
var ErrNoRoute = errors.New("lanetest: no destination address")

// Send implements lane.PacketConn: each packet is copied and routed.
func (c *Conn) Send(dst netip.AddrPort, pkts [][]byte) error {
	if !dst.IsValid() {
		return ErrNoRoute
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return net.ErrClosed
	}
	for _, b := range pkts {
		c.sentD.Add(1)
		c.sentB.Add(uint64(len(b)))
		to, at, seq, ok := c.net.route(c.addr, dst, b)
		if !ok {
			c.net.Dropped.Add(1)
			continue
		}
		to.enqueue(&packet{at: at, seq: seq, from: c.addr, b: append(make([]byte, 0, len(b)), b...)})
	}
	c.calls.Add(1)
	return nil
}

// enqueue adds p to c's queue, or drops it when the queue is full (counted as a receive-buffer
// overflow, like SO_RXQ_OVFL).
func (c *Conn) enqueue(p *packet) bool {
	limit := c.net.RecvBuf
	if limit <= 0 {
		limit = 8 << 20
	}
	c.mu.Lock()
	if c.closed || c.qBytes+len(p.b) > limit {
		c.mu.Unlock()
		c.drops.Add(1)
		return false
	}
	heap.Push(&c.q, p)
	c.qBytes += len(p.b)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// recvBatch is the most datagrams one Recv hands over, like a recvmmsg batch.
const recvBatch = 64

// Recv implements lane.PacketConn.
func (c *Conn) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	var ready [recvBatch]*packet
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		now := time.Now()
		n := 0
		for n < recvBatch && len(c.q) > 0 && !c.q[0].at.After(now) {
			p := heap.Pop(&c.q).(*packet)
			c.qBytes -= len(p.b)
			ready[n] = p
			n++
		}
		var next time.Time
		if len(c.q) > 0 {
			next = c.q[0].at
		}
		c.mu.Unlock()
		if n > 0 {
			for _, p := range ready[:n] {
				c.stamp = p.at
				c.recvD.Add(1)
				c.recvB.Add(uint64(len(p.b)))
				fn(p.b, p.from)
			}
			c.stamp = time.Time{}
			return n, nil
		}
		if !deadline.IsZero() && !now.Before(deadline) {
			return 0, lane.ErrTimeout
		}
		wait := time.Hour
		if !deadline.IsZero() {
			wait = deadline.Sub(now)
		}
		if !next.IsZero() && next.Sub(now) < wait {
			wait = next.Sub(now)
		}
		t := time.NewTimer(wait)
		select {
		case <-c.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// LocalAddr implements lane.PacketConn.
func (c *Conn) LocalAddr() netip.AddrPort { return c.addr }

// SetRxTimestamps implements lane.PacketConn: arrival times are always known here.
func (c *Conn) SetRxTimestamps(bool) error { return nil }

// RxTime implements lane.PacketConn: the arrival time of the datagram being handed over.
func (c *Conn) RxTime() time.Time { return c.stamp }

// Pending implements lane.PacketConn.
func (c *Conn) Pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q) > 0 && !c.q[0].at.After(time.Now())
}

// Stats implements lane.PacketConn.
func (c *Conn) Stats() lane.Stats {
	return lane.Stats{SentDatagrams: c.sentD.Load(), SentBytes: c.sentB.Load(), RecvDatagrams: c.recvD.Load(),
		RecvBytes: c.recvB.Load(), RxDropped: c.drops.Load(), TxSyscalls: c.calls.Load()}
}

// Close implements lane.PacketConn.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.q = nil
	c.mu.Unlock()
	c.net.remove(c)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

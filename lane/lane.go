// Package lane owns Farwing's UDP sockets: batched sends and receives, pacing, socket buffers and
// per-lane counters. It knows nothing of the protocol meaning of the bytes it carries.
//
// Contract (what the session layer relies on):
//   - A Conn is one UDP socket. Send and Recv may be called concurrently with each other, but Send
//     must not be called from two goroutines at once, nor Recv.
//   - Send transmits every packet in pkts to dst, in order, each as one UDP datagram. The caller
//     keeps ownership of the buffers; they may be reused as soon as Send returns.
//   - Recv blocks until at least one datagram is available (or the deadline / Close), then calls fn
//     once per datagram with a slice that is valid only during the call.
package lane

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// MaxDatagram is the largest UDP payload Farwing sends: it fits a 1500-byte MTU over IPv4 and IPv6
// (1500 - 40 IPv6 - 8 UDP).
const MaxDatagram = 1452

// Options configures a lane socket.
type Options struct {
	// Buffer is the wanted SO_RCVBUF/SO_SNDBUF in bytes (0: a default).
	Buffer int
}

// Stats are a lane's counters. Read them with Conn.Stats.
type Stats struct {
	SentDatagrams, SentBytes uint64
	RecvDatagrams, RecvBytes uint64
	RxDropped                uint64 // kernel receive-queue drops (SO_RXQ_OVFL)
}

// Conn is one UDP lane.
type Conn struct {
	uc    *net.UDPConn
	buf   []byte
	stats struct {
		sentD, sentB, recvD, recvB, drops atomic.Uint64
	}
}

// Listen opens a lane on addr ("198.18.0.1:0", "[::]:0", ":0").
func Listen(addr string, opt Options) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	if opt.Buffer == 0 {
		opt.Buffer = 8 << 20
	}
	_ = uc.SetReadBuffer(opt.Buffer)
	_ = uc.SetWriteBuffer(opt.Buffer)
	return &Conn{uc: uc, buf: make([]byte, 65536)}, nil
}

// LocalAddr is the socket's bound address.
func (c *Conn) LocalAddr() netip.AddrPort {
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Send writes each packet in pkts as one datagram to dst.
func (c *Conn) Send(dst netip.AddrPort, pkts [][]byte) error {
	for _, p := range pkts {
		if _, err := c.uc.WriteToUDPAddrPort(p, dst); err != nil {
			return err
		}
		c.stats.sentD.Add(1)
		c.stats.sentB.Add(uint64(len(p)))
	}
	return nil
}

// ErrTimeout is returned by Recv when its deadline passes with nothing received.
var ErrTimeout = errors.New("lane: receive timeout")

// Recv waits for datagrams until deadline (zero: no deadline) and hands each to fn.
func (c *Conn) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	_ = c.uc.SetReadDeadline(deadline)
	n, from, err := c.uc.ReadFromUDPAddrPort(c.buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, ErrTimeout
		}
		return 0, err
	}
	c.stats.recvD.Add(1)
	c.stats.recvB.Add(uint64(n))
	fn(c.buf[:n], from)
	return 1, nil
}

// Stats returns a snapshot of the lane's counters.
func (c *Conn) Stats() Stats {
	return Stats{
		SentDatagrams: c.stats.sentD.Load(), SentBytes: c.stats.sentB.Load(),
		RecvDatagrams: c.stats.recvD.Load(), RecvBytes: c.stats.recvB.Load(),
		RxDropped: c.stats.drops.Load(),
	}
}

// Close closes the socket; a blocked Recv returns net.ErrClosed.
func (c *Conn) Close() error { return c.uc.Close() }

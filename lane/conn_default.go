//go:build !linux

package lane

import (
	"net"
	"net/netip"
	"time"
)

// Conn is one UDP lane. Off Linux it runs the portable path (portable.go): one datagram per
// system call.
type Conn struct {
	uc             *net.UDPConn
	rcvBuf, sndBuf int
	stats          counters
	port           *portable
}

// Listen opens a lane on addr ("198.18.0.1:0", "[::]:0", ":0"). Options.Portable changes nothing
// here: the portable path is this platform's only one.
func Listen(addr string, opt Options) (*Conn, error) {
	uc, err := listenUDP(addr)
	if err != nil {
		return nil, err
	}
	if opt.Buffer <= 0 {
		opt.Buffer = DefaultBuffer
	}
	c := &Conn{uc: uc, port: newPortable(uc)}
	if uc.SetReadBuffer(opt.Buffer) == nil {
		c.rcvBuf = opt.Buffer
	}
	if uc.SetWriteBuffer(opt.Buffer) == nil {
		c.sndBuf = opt.Buffer
	}
	return c, nil
}

// LocalAddr is the socket's bound address.
func (c *Conn) LocalAddr() netip.AddrPort {
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Buffers reports the receive and send buffer sizes set (0 if setting failed); this platform
// cannot read them back.
func (c *Conn) Buffers() (recv, send int) { return c.rcvBuf, c.sndBuf }

// Offload reports whether Send uses UDP GSO and Recv UDP GRO: never on this platform.
func (c *Conn) Offload() (gso, gro bool) { return false, false }

// Portable reports whether the lane runs the portable socket path: always on this platform.
func (c *Conn) Portable() bool { return true }

// Send writes each packet in pkts as one datagram to dst.
func (c *Conn) Send(dst netip.AddrPort, pkts [][]byte) error {
	return c.port.send(&c.stats, dst, pkts)
}

// Recv waits for datagrams until deadline (zero: no deadline) and hands each to fn. It returns
// the number of datagrams handed over; ErrTimeout if the deadline passed first; net.ErrClosed
// after Close.
func (c *Conn) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	return c.port.recv(&c.stats, deadline, fn)
}

// SetRxTimestamps is a no-op here: RxTime is always zero.
func (c *Conn) SetRxTimestamps(on bool) error { return nil }

// RxTime returns the zero time: this platform's Recv takes no kernel timestamps.
func (c *Conn) RxTime() time.Time { return time.Time{} }

// Pending reports whether a datagram waits unread; not known on this platform (false).
func (c *Conn) Pending() bool { return false }

// Close closes the socket; a blocked Recv returns net.ErrClosed.
func (c *Conn) Close() error { return c.uc.Close() }

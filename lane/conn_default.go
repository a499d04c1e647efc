//go:build !linux

package lane

import (
	"net"
	"net/netip"
	"time"
)

// Conn is one UDP lane. Off Linux it sends and receives one datagram per system call.
type Conn struct {
	uc             *net.UDPConn
	buf            []byte
	rcvBuf, sndBuf int
	deadline       time.Time
	stats          counters
}

// Listen opens a lane on addr ("198.18.0.1:0", "[::]:0", ":0").
func Listen(addr string, opt Options) (*Conn, error) {
	uc, err := listenUDP(addr)
	if err != nil {
		return nil, err
	}
	if opt.Buffer <= 0 {
		opt.Buffer = DefaultBuffer
	}
	c := &Conn{uc: uc, buf: make([]byte, 1<<16)}
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

// Send writes each packet in pkts as one datagram to dst.
func (c *Conn) Send(dst netip.AddrPort, pkts [][]byte) error {
	var sentB, n uint64
	var err error
	for _, p := range pkts {
		if _, err = c.uc.WriteToUDPAddrPort(p, dst); err != nil {
			break
		}
		n++
		sentB += uint64(len(p))
	}
	c.stats.sentD.Add(n)
	c.stats.sentB.Add(sentB)
	c.stats.txCalls.Add(n)
	return err
}

// Recv waits for datagrams until deadline (zero: no deadline) and hands each to fn. It returns
// the number of datagrams handed over; ErrTimeout if the deadline passed first; net.ErrClosed
// after Close.
func (c *Conn) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	if !deadline.Equal(c.deadline) {
		if err := c.uc.SetReadDeadline(deadline); err != nil {
			return 0, recvErr(err)
		}
		c.deadline = deadline
	}
	n, from, err := c.uc.ReadFromUDPAddrPort(c.buf)
	if err != nil {
		return 0, recvErr(err)
	}
	c.stats.rxCalls.Add(1)
	c.stats.recvD.Add(1)
	c.stats.recvB.Add(uint64(n))
	fn(c.buf[:n], from)
	return 1, nil
}

// SetRxTimestamps is a no-op here: RxTime is always zero.
func (c *Conn) SetRxTimestamps(on bool) error { return nil }

// RxTime returns the zero time: this platform's Recv takes no kernel timestamps.
func (c *Conn) RxTime() time.Time { return time.Time{} }

// Pending reports whether a datagram waits unread; not known on this platform (false).
func (c *Conn) Pending() bool { return false }

// Close closes the socket; a blocked Recv returns net.ErrClosed.
func (c *Conn) Close() error { return c.uc.Close() }

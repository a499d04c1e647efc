package lane

import (
	"net"
	"net/netip"
	"time"
)

// portable is the socket path of platforms without sendmmsg, recvmmsg, GSO or GRO (macOS): one
// datagram per system call each way, through package net. It is the only path off Linux
// (conn_default.go), and Linux lanes take it with Options.Portable (conn_linux.go), so that the
// path macOS runs is tested and measured where CI runs. It allocates nothing per datagram.
type portable struct {
	uc       *net.UDPConn
	buf      []byte    // one receive buffer: the largest UDP datagram fits
	deadline time.Time // the read deadline last set on the socket
}

func newPortable(uc *net.UDPConn) *portable {
	return &portable{uc: uc, buf: make([]byte, 1<<16)}
}

// send writes each packet in pkts as one datagram to dst, one system call each, and counts them
// in st.
func (p *portable) send(st *counters, dst netip.AddrPort, pkts [][]byte) error {
	var sentB, n uint64
	var err error
	for _, b := range pkts {
		if _, err = p.uc.WriteToUDPAddrPort(b, dst); err != nil {
			break
		}
		n++
		sentB += uint64(len(b))
	}
	st.sentD.Add(n)
	st.sentB.Add(sentB)
	st.txCalls.Add(n)
	return err
}

// recv waits for one datagram until deadline (zero: no deadline), hands it to fn and counts it in
// st. It returns 1, or ErrTimeout if the deadline passed first, net.ErrClosed after Close.
func (p *portable) recv(st *counters, deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	if !deadline.Equal(p.deadline) {
		if err := p.uc.SetReadDeadline(deadline); err != nil {
			return 0, recvErr(err)
		}
		p.deadline = deadline
	}
	n, from, err := p.uc.ReadFromUDPAddrPort(p.buf)
	if err != nil {
		return 0, recvErr(err)
	}
	st.rxCalls.Add(1)
	st.recvD.Add(1)
	st.recvB.Add(uint64(n))
	fn(p.buf[:n], from)
	return 1, nil
}

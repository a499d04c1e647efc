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
//
// On Linux (conn_linux.go) Send batches with sendmmsg and coalesces runs of equal-sized packets into
// UDP GSO super-packets; Recv batches with recvmmsg and UDP GRO and splits the coalesced datagrams in
// place. Neither allocates in steady state. Elsewhere (conn_default.go) both use one system call
// per datagram (portable.go), and so do Linux lanes opened with Options.Portable. The datagrams on
// the wire are the same either way.
package lane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// IPv4UDPHeaders and IPv6UDPHeaders are what IP and UDP add to each datagram on the wire: 20 + 8
// and 40 + 8 bytes. Rates count IP bytes, as link capacities do.
const (
	IPv4UDPHeaders = 28
	IPv6UDPHeaders = 48
)

// MaxDatagram is the largest UDP payload Farwing sends: it fits a 1500-byte MTU over IPv4 and IPv6
// (1500 - 40 IPv6 - 8 UDP = 1452).
const MaxDatagram = 1500 - IPv6UDPHeaders

// DefaultBuffer is the socket buffer asked for when Options.Buffer is 0.
const DefaultBuffer = 8 << 20

// Options configures a lane socket. The zero value is a good default.
type Options struct {
	// Buffer is the wanted SO_RCVBUF/SO_SNDBUF in bytes (0: DefaultBuffer). Linux caps it at
	// net.core.rmem_max / net.core.wmem_max unless the process has CAP_NET_ADMIN; if it is capped,
	// Listen warns once per process (see Warn). Conn.Buffers reports what the kernel granted.
	Buffer int

	// DisableGSO turns UDP segmentation offload off for sends (FARWING_GSO=0, through
	// tuning.Settings). Useful against kernel or NIC bugs that cannot be detected at run time.
	DisableGSO bool
	// DisableGRO turns UDP receive coalescing off (FARWING_GRO=0).
	DisableGRO bool
	// Portable puts the lane on the portable socket path, the one macOS runs: Send and Recv make
	// one system call per datagram through package net (no sendmmsg, recvmmsg, GSO or GRO, no
	// receive timestamps). It matters on Linux only (FARWING_SOCKETS=portable, through
	// tuning.Settings), where it lets that path be tested and measured; elsewhere it is the only
	// path. Listen says so once per process, through Warn (PortableNotice).
	Portable bool
	// GSOSegments is the most datagrams one GSO super-packet may carry (0: 64, the kernel's
	// UDP_MAX_SEGMENTS before Linux 6.x; at most 128, which 6.18 accepts). If the kernel refuses
	// more than 64, Send steps down to 64 by itself. With MaxDatagram-sized packets the 64 KiB
	// datagram limit already stops at 45, so this only matters for packets under 1 KiB.
	GSOSegments int

	// Warn receives the one-per-process warning about capped socket buffers and the one notice
	// that lanes run the portable path (nil: print them to standard error). Set it to
	// func(string) {} to silence them.
	Warn func(msg string)
}

// Stats are a lane's counters. Read them with Conn.Stats.
type Stats struct {
	SentDatagrams, SentBytes uint64
	RecvDatagrams, RecvBytes uint64
	RxDropped                uint64 // kernel receive-queue drops (SO_RXQ_OVFL): skbs, so with GRO one may be a super-packet

	RxTruncated  uint64 // datagrams dropped because they did not fit the receive buffer (MSG_TRUNC)
	GSOFallbacks uint64 // sends that failed with GSO and were resent without it (then GSO stays off)
	TxSyscalls   uint64 // sendmmsg (or sendmsg) calls
	RxSyscalls   uint64 // successful recvmmsg (or recvmsg) calls
}

// PacketConn is what the session layer needs of a lane: the contract above. *Conn (a real UDP
// socket) implements it, and so does lanetest's in-memory lane, which lets the whole engine run
// over an emulated network in tests, without sockets or root.
type PacketConn interface {
	// Send writes each packet in pkts as one datagram to dst (see the package contract).
	Send(dst netip.AddrPort, pkts [][]byte) error
	// Recv waits until deadline for datagrams and hands each to fn; ErrTimeout when the deadline
	// passes with nothing received, net.ErrClosed after Close.
	Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error)
	// LocalAddr is the lane's own address.
	LocalAddr() netip.AddrPort
	// SetRxTimestamps turns receive timestamps on or off; RxTime is the receive time of the
	// datagram being handed to Recv's fn (zero when off or unknown).
	SetRxTimestamps(on bool) error
	RxTime() time.Time
	// Pending reports whether a datagram waits unread (false when it cannot tell).
	Pending() bool
	// Stats returns the lane's counters.
	Stats() Stats
	// Close closes the lane; a blocked Recv returns net.ErrClosed.
	Close() error
}

var _ PacketConn = (*Conn)(nil)

// ErrTimeout is returned by Recv when its deadline passes with nothing received.
var ErrTimeout = errors.New("lane: receive timeout")

// counters back Stats; every field is updated at most once per Send or Recv call.
type counters struct {
	sentD, sentB, recvD, recvB, drops atomic.Uint64
	trunc, gsoFallbacks, txCalls      atomic.Uint64
	rxCalls                           atomic.Uint64
}

func (s *counters) snapshot() Stats {
	return Stats{
		SentDatagrams: s.sentD.Load(), SentBytes: s.sentB.Load(),
		RecvDatagrams: s.recvD.Load(), RecvBytes: s.recvB.Load(),
		RxDropped:    s.drops.Load(),
		RxTruncated:  s.trunc.Load(),
		GSOFallbacks: s.gsoFallbacks.Load(),
		TxSyscalls:   s.txCalls.Load(),
		RxSyscalls:   s.rxCalls.Load(),
	}
}

// Stats returns a snapshot of the lane's counters.
func (c *Conn) Stats() Stats { return c.stats.snapshot() }

// PortableNotice is what a Linux process whose lanes run the portable path (Options.Portable)
// says once, through Options.Warn or on standard error: the line that tells, in a copy's -v
// output (which carries the remote peer's standard error), that an end really took that path.
const PortableNotice = "lane: UDP lanes on the portable socket path (macOS's): one datagram per system call, no sendmmsg, recvmmsg, GSO or GRO"

// bufferWarned makes the capped-buffer warning appear once per process, however many lanes open.
var bufferWarned atomic.Bool

// bufferWarning describes a socket buffer the kernel capped below want bytes, naming the sysctl
// that lifts the cap, or returns "" if neither was capped. rcv and snd are the sizes granted.
func bufferWarning(want, rcv, snd int, rcvCapped, sndCapped bool) string {
	switch {
	case rcvCapped && sndCapped:
		return fmt.Sprintf("lane: UDP socket buffers capped by the kernel (receive %d, send %d bytes; wanted %d); "+
			"raise them with: sysctl -w net.core.rmem_max=%d net.core.wmem_max=%d", rcv, snd, want, want, want)
	case rcvCapped:
		return fmt.Sprintf("lane: UDP receive buffer capped by the kernel at %d bytes (wanted %d); "+
			"raise it with: sysctl -w net.core.rmem_max=%d", rcv, want, want)
	case sndCapped:
		return fmt.Sprintf("lane: UDP send buffer capped by the kernel at %d bytes (wanted %d); "+
			"raise it with: sysctl -w net.core.wmem_max=%d", snd, want, want)
	}
	return ""
}

// warnOnce delivers msg through opt.Warn (or to standard error) the first time it is called in
// this process with a non-empty msg.
func warnOnce(opt Options, msg string) { noteOnce(&bufferWarned, opt, msg) }

// noteOnce delivers msg through opt.Warn (or to standard error) if msg is not empty and once is
// not yet set, and sets it.
func noteOnce(once *atomic.Bool, opt Options, msg string) {
	if msg == "" || !once.CompareAndSwap(false, true) {
		return
	}
	if opt.Warn != nil {
		opt.Warn(msg)
		return
	}
	fmt.Fprintln(os.Stderr, msg)
}

// listenUDP binds the plain socket that a platform's Listen then upgrades.
func listenUDP(addr string) (*net.UDPConn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	return net.ListenUDP("udp", ua)
}

// recvErr maps a socket's receive error to the package's: ErrTimeout for a deadline, net.ErrClosed
// for a closed socket.
func recvErr(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, net.ErrClosed):
		return net.ErrClosed
	}
	return err
}

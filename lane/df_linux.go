//go:build linux

package lane

import (
	"golang.org/x/sys/unix"
)

// SetDontFragment sends every datagram of the lane with the don't-fragment bit and never
// fragments one on this host (IP_PMTUDISC_PROBE, and IPV6_PMTUDISC_PROBE on an IPv6 socket): a
// datagram larger than the route's interface takes fails to send, and one larger than a later
// hop takes is dropped there, instead of arriving in fragments. The session asks for it on a
// path whose lanes are to prove, in the handshake, that they carry large datagrams
// (docs/PROTOCOL.md, "Hello"). Off gives the lane the kernel's default back
// (IP_PMTUDISC_WANT: fragment above the path MTU the kernel learned).
func (c *Conn) SetDontFragment(on bool) error {
	v4, v6 := unix.IP_PMTUDISC_WANT, unix.IPV6_PMTUDISC_WANT
	if on {
		v4, v6 = unix.IP_PMTUDISC_PROBE, unix.IPV6_PMTUDISC_PROBE
	}
	rc, err := c.uc.SyscallConn()
	if err != nil {
		return err
	}
	var e4, e6 error
	if err := rc.Control(func(fd uintptr) {
		e4 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, v4)
		e6 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, v6)
	}); err != nil {
		return err
	}
	if e4 != nil && e6 != nil { // an IPv4 socket refuses the IPv6 option, and an IPv6 one may refuse the IPv4 one
		return e4
	}
	return nil
}

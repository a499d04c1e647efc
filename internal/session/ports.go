package session

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/farwing/farwing/lane"
)

// HandshakeTimeout bounds the client's UDP handshake: without an answer on every lane by then, the
// copy fails naming the ports (NoUDPError). Hellos go out every 100 ms, so even a 300 ms path
// with some loss answers in well under a second; a firewall that drops UDP is reported in 5 s.
const HandshakeTimeout = 5 * time.Second

// PortRange is the range of UDP ports a peer binds its lanes in (farwing copy --port LO-HI); the
// zero value means any port the kernel gives.
type PortRange struct{ Lo, Hi int }

// IsZero reports whether r is unset (any port).
func (r PortRange) IsZero() bool { return r.Lo == 0 && r.Hi == 0 }

// Contains reports whether port lies in r; every port lies in the zero range.
func (r PortRange) Contains(port int) bool { return r.IsZero() || port >= r.Lo && port <= r.Hi }

func (r PortRange) String() string {
	if r.IsZero() {
		return "any"
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// ParsePortRange reads "LO-HI": 1 ≤ LO ≤ HI ≤ 65535, with room for the four lanes (HI−LO+1 ≥
// Lanes). "" is the zero range.
func ParsePortRange(s string) (PortRange, error) {
	if s == "" {
		return PortRange{}, nil
	}
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return PortRange{}, fmt.Errorf("--port %s: give the remote peer's UDP port range as LO-HI, at least %d ports (e.g. 40000-40003); the ssh port is -P", s, Lanes)
	}
	num := func(v string) (int, bool) {
		if v == "" || len(v) > 5 || strings.TrimLeft(v, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 1 && n <= 65535
	}
	l, okl := num(lo)
	h, okh := num(hi)
	switch {
	case !okl || !okh:
		return PortRange{}, fmt.Errorf("--port %s: ports are numbers from 1 to 65535, LO-HI", s)
	case l > h:
		return PortRange{}, fmt.Errorf("--port %s: the range's first port is above its last", s)
	case h-l+1 < Lanes:
		return PortRange{}, fmt.Errorf("--port %s: %d port(s), but the peer opens %d UDP lanes, one port each; give at least %d", s, h-l+1, Lanes, Lanes)
	}
	return PortRange{Lo: l, Hi: h}, nil
}

// ErrPortRange: a peer could not bind its four lanes inside the port range it was given.
var ErrPortRange = errors.New("no room for the UDP lanes in the port range")

// ListenUDPRange binds four UDP lanes as ListenUDP does, each on a port of r (the zero range: any
// port), the lowest free ones first. It fails with ErrPortRange when fewer than four ports of r
// can be bound (in use, or below 1024 without the privilege).
func ListenUDPRange(bind string, r PortRange, opt lane.Options) ([Lanes]lane.PacketConn, error) {
	if r.IsZero() {
		return ListenUDP(bind, opt)
	}
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return [Lanes]lane.PacketConn{}, err
	}
	var conns [Lanes]lane.PacketConn
	n := 0
	var last error
	for p := r.Lo; p <= r.Hi && n < Lanes; p++ {
		lc, err := lane.Listen(net.JoinHostPort(host, strconv.Itoa(p)), opt)
		if err != nil {
			last = err
			continue
		}
		conns[n] = lc
		n++
	}
	if n < Lanes {
		for _, c := range conns[:n] {
			c.Close()
		}
		why := ""
		if last != nil {
			why = fmt.Sprintf(" (%v)", last)
		}
		return [Lanes]lane.PacketConn{}, fmt.Errorf("%w: the remote peer could bind only %d of its %d UDP lanes in ports %s%s; choose a range with %d free ports with --port LO-HI",
			ErrPortRange, n, Lanes, r, why, Lanes)
	}
	return conns, nil
}

// NoUDPError is the client's handshake that got no answer in time: which server ports stayed
// silent, this end's ports, and what to do.
type NoUDPError struct {
	Server  netip.Addr
	Ports   []int // the server's four lane ports
	Silent  []int // those that never answered
	Local   []int // this end's lane ports
	Timeout time.Duration
}

func (e *NoUDPError) Error() string {
	which := portList(e.Silent)
	if len(e.Silent) < len(e.Ports) {
		which += " (of " + portList(e.Ports) + ")"
	}
	return fmt.Sprintf("no UDP reply from %s port(s) %s within %s (this end's ports %s): open UDP to port(s) %s on the remote host's firewall "+
		"and let the replies back to this end, or choose the remote's ports with --port LO-HI",
		e.Server, which, e.Timeout, portList(e.Local), portList(e.Ports))
}

// Unwrap makes a NoUDPError an ErrNoUDP.
func (e *NoUDPError) Unwrap() error { return ErrNoUDP }

// portList writes ports as a range "40001-40004" when they are consecutive and ascending, else
// separated by commas.
func portList(ports []int) string {
	if len(ports) == 0 {
		return "none"
	}
	consecutive := len(ports) > 1
	for i := 1; i < len(ports); i++ {
		if ports[i] != ports[i-1]+1 {
			consecutive = false
		}
	}
	if consecutive {
		return fmt.Sprintf("%d-%d", ports[0], ports[len(ports)-1])
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// Buffers are the socket buffers the kernel granted a lane, in bytes of data (getsockopt's value
// halved: Linux doubles what is set for its bookkeeping); 0 where the lanes cannot tell (not UDP
// sockets).
func (p *Path) Buffers() (recv, send int) {
	if c, ok := p.conn(0).(interface{ Buffers() (int, int) }); ok {
		r, s := c.Buffers()
		return r / 2, s / 2
	}
	return 0, 0
}

// LanesHeard (server) is how many lanes have received an authentic hello from the client, its
// address proven or not: with a client whose handshake failed, it tells a path that loses the
// client's datagrams from one that loses this end's answers.
func (p *Path) LanesHeard() int {
	n := 0
	for i := range p.helloHeard {
		if p.helloHeard[i].Load() {
			n++
		}
	}
	return n
}

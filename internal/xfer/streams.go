package xfer

// The way through where UDP is blocked (docs/PROTOCOL.md, "TCP streams"): a client whose UDP
// handshake got no answer says so and asks the server, on the control channel, for TCP streams
// ("streams"); the server listens (inside --port), answers with its port, and takes one stream
// per lane that authenticates with the session's key (session.Path.AcceptStreams); the client
// connects and runs the handshake again over them. Everything above the lanes is the same copy.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/internal/session"
)

// streamsWait bounds the client's wait for the server's answer and each connection.
const streamsWait = 10 * time.Second

// streamsAccept bounds the server's wait for the client's streams once it has answered.
const streamsAccept = 15 * time.Second

// fallback (client) moves the path to TCP streams after the UDP handshake to dst failed with
// udpErr, telling the user so in one warning, and returns the handshake's round trip over them.
// Where the streams cannot be had either, the error names both failures (exit 6, as without).
func (c *conn) fallback(ctx context.Context, o *Options, udpErr error, addr netip.Addr, dst []netip.AddrPort) (time.Duration, error) {
	why := udpErr.Error()
	var nu *session.NoUDPError
	if errors.As(udpErr, &nu) {
		why = fmt.Sprintf("no UDP reply from %s within %s", nu.Server, nu.Timeout)
	}
	if o.Warn != nil {
		o.Warn(fmt.Sprintf("%s: carrying the data over %d TCP streams instead, slower on a long or lossy path (open UDP to the remote's ports for full speed; --udp-only refuses TCP)",
			why, session.Lanes))
	}
	answer := make(chan Msg, 1)
	c.ctl.Aside(KindStreams, func(m Msg) {
		select {
		case answer <- m:
		default: // one answer is taken; more are the peer's noise
		}
	})
	if err := c.ctl.Send(Msg{T: KindStreams, Streams: session.Lanes}); err != nil {
		return 0, err
	}
	var m Msg
	select {
	case m = <-answer:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-time.After(streamsWait):
		return 0, fmt.Errorf("%w; %w: the remote peer did not answer the request for TCP streams within %s", udpErr, session.ErrStreams, streamsWait)
	}
	if m.Port < 1 || m.Port > 65535 || !o.Ports.Contains(m.Port) {
		return 0, fmt.Errorf("%w: the remote peer offered TCP port %d for the streams, outside --port %s", ErrProtocol, m.Port, o.Ports)
	}
	to := netip.AddrPortFrom(addr, uint16(m.Port))
	if err := c.path.DialStreams(ctx, to, streamsWait); err != nil {
		return 0, fmt.Errorf("%w; %w (open TCP port %d on the remote host's firewall, or UDP)", udpErr, err, m.Port)
	}
	c.res.Transport = TransportTCP
	rtt, err := c.path.Handshake(ctx, dst, session.HandshakeTimeout, false)
	if err != nil {
		return 0, fmt.Errorf("%w: no answer on the TCP streams to %s within %s", session.ErrStreams, to, session.HandshakeTimeout)
	}
	o.logf("lanes on %d TCP streams to %s, rtt %s", session.Lanes, to, rtt.Round(100*time.Microsecond))
	return rtt, nil
}

// The transports a copy's Result names.
const (
	TransportUDP = "udp"
	TransportTCP = "tcp"
)

// offerStreams (server) is the Aside of a copy's control channel for the client's request for
// streams: once per session, for one stream per lane, it listens on bind's address within ports,
// answers with the port and hands the listener to path.AcceptStreams. A second request, or one
// for another number of streams, breaks the protocol (fail).
func offerStreams(ctx context.Context, ctl *Control, path *session.Path, bind string, ports session.PortRange, fail func(error)) func(Msg) {
	var asked atomic.Bool
	return func(m Msg) {
		if m.Streams != session.Lanes || !asked.CompareAndSwap(false, true) {
			fail(fmt.Errorf("%w: control channel: a request for %d TCP streams; a client asks once, for %d", ErrProtocol, m.Streams, session.Lanes))
			return
		}
		go func() {
			ln, err := session.ListenTCPRange(bind, ports)
			if err != nil {
				fail(err)
				return
			}
			if err := ctl.Send(Msg{T: KindStreams, Port: ln.Addr().(*net.TCPAddr).Port}); err != nil {
				ln.Close()
				return
			}
			if err := path.AcceptStreams(ctx, ln, streamsAccept); err != nil && ctx.Err() == nil {
				fail(err)
			}
		}()
	}
}

package xfer

// The ways through where UDP is blocked (docs/PROTOCOL.md, "TCP streams"): a client whose UDP
// handshake got no answer says so and asks the server, on the control channel, for streams
// ("streams"); the server listens on a TCP port (inside --port) and on a local socket in a
// private directory, answers with both, and takes one stream per lane that authenticates with the
// session's key (session.Path.AcceptStreams); the client connects to the TCP port, or, where that
// is blocked too, starts one ssh session per lane that relays between its standard input and
// output and the local socket (`farwing serve --relay`, Relay), and runs the handshake again over
// them. Everything above the lanes is the same copy.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/privdir"
	"github.com/farwing/farwing/internal/session"
)

// streamsWait bounds the client's wait for the server's answer.
const streamsWait = 10 * time.Second

// connectWait bounds each TCP connection: SYNs lost at 1 s and 3 s still connect, and a port a
// firewall drops costs this long before the ssh relays are tried.
const connectWait = 5 * time.Second

// streamsAccept bounds the server's wait for the client's streams once it has answered: a
// blocked TCP port and the ssh sessions' start after it.
const streamsAccept = 30 * time.Second

// The relays' socket: relaySocket in a directory of its own named relayDir and more (MkdirTemp).
const (
	relayDir    = "farwing-relay-"
	relaySocket = "s"
)

// maxRelayPath bounds the server's local socket path in its answer (a Unix socket's path is
// at most 108 bytes on Linux, 104 on macOS).
const maxRelayPath = 108

// The transports a copy's Result names.
const (
	TransportUDP = "udp"
	TransportTCP = "tcp"
	TransportSSH = "ssh"
)

// Relayer is a Remote that can start more ssh sessions to the peer's host, each running `farwing
// serve --relay SOCKET` there: a connection to the server's local socket over ssh (sshRemote).
type Relayer interface {
	Relay(ctx context.Context, socket string) (net.Conn, error)
}

// fallback (client) moves the path to streams after the UDP handshake to dst failed with udpErr,
// telling the user so in one warning (and one more where TCP is blocked too and ssh carries
// them), and returns the handshake's round trip over them. Where no streams can be had either,
// the error names each failure (exit 6, as without).
func (c *conn) fallback(ctx context.Context, o *Options, udpErr error, addr netip.Addr, dst []netip.AddrPort) (time.Duration, error) {
	why := udpErr.Error()
	var nu *session.NoUDPError
	if errors.As(udpErr, &nu) {
		why = fmt.Sprintf("no UDP reply from %s within %s", nu.Server, nu.Timeout)
	}
	o.warn(fmt.Sprintf("%s: carrying the data over %d TCP streams instead, slower on a long or lossy path (open UDP to the remote's ports for full speed; --udp-only refuses TCP)",
		why, session.Lanes))
	m, tok, err := c.askStreams(ctx, o, udpErr)
	if err != nil {
		return 0, err
	}
	to := netip.AddrPortFrom(addr, uint16(m.Port))
	how := fmt.Sprintf("%d TCP streams to %s", session.Lanes, to)
	c.res.Transport = TransportTCP
	if err := c.path.DialStreams(ctx, to, connectWait, tok); err != nil {
		rl, ok := c.peer.(Relayer)
		if !ok || m.Relay == "" {
			return 0, fmt.Errorf("%w; %w (open TCP port %d on the remote host's firewall, or UDP)", udpErr, err, m.Port)
		}
		o.warn(fmt.Sprintf("no TCP connection to %s either: carrying the data over %d ssh sessions instead", to, session.Lanes))
		conns, rerr := relays(ctx, rl, m.Relay)
		if rerr != nil {
			return 0, fmt.Errorf("%w; %w; and over ssh: %w", udpErr, err, rerr)
		}
		if err := c.path.UseConns(conns, tok); err != nil {
			return 0, fmt.Errorf("%w; over ssh: %w", udpErr, err)
		}
		how, c.res.Transport = fmt.Sprintf("%d ssh sessions relaying to %s", session.Lanes, escape.Text(m.Relay)), TransportSSH
	}
	rtt, err := c.path.Handshake(ctx, dst, session.HandshakeTimeout, false)
	if err != nil {
		return 0, fmt.Errorf("%w: no answer over the %s within %s", session.ErrStreams, how, session.HandshakeTimeout)
	}
	o.logf("lanes on %s, rtt %s", how, rtt.Round(100*time.Microsecond))
	return rtt, nil
}

// askStreams sends the request for streams and returns the server's answer, checked: a port
// inside --port, a relay socket that is an absolute path of at most maxRelayPath bytes without
// control characters (it goes into the remote's command line, quoted), and the streams' token.
func (c *conn) askStreams(ctx context.Context, o *Options, udpErr error) (Msg, session.StreamToken, error) {
	var tok session.StreamToken
	answer := make(chan Msg, 1)
	c.ctl.Aside(KindStreams, func(m Msg) {
		select {
		case answer <- m:
		default: // one answer is taken; more are the peer's noise
		}
	})
	if err := c.ctl.Send(Msg{T: KindStreams, Streams: session.Lanes}); err != nil {
		return Msg{}, tok, err
	}
	var m Msg
	select {
	case m = <-answer:
	case <-ctx.Done():
		return Msg{}, tok, context.Cause(ctx)
	case <-time.After(streamsWait):
		return Msg{}, tok, fmt.Errorf("%w; %w: the remote peer did not answer the request for TCP streams within %s", udpErr, session.ErrStreams, streamsWait)
	}
	if m.Port < 1 || m.Port > 65535 || !o.Ports.Contains(m.Port) {
		return Msg{}, tok, fmt.Errorf("%w: the remote peer offered TCP port %d for the streams, outside --port %s", ErrProtocol, m.Port, o.Ports)
	}
	if r := m.Relay; r != "" && (!strings.HasPrefix(r, "/") || len(r) > maxRelayPath || strings.ContainsFunc(r, unicode.IsControl)) {
		return Msg{}, tok, fmt.Errorf("%w: the remote peer offered %s as its relay socket, not an absolute path of at most %d bytes", ErrProtocol, escape.Quote(r), maxRelayPath)
	}
	tok, err := session.ParseStreamToken(m.Token)
	if err != nil {
		return Msg{}, tok, fmt.Errorf("%w: the remote peer offered %s as the streams' token, %v", ErrProtocol, escape.Quote(m.Token), err)
	}
	return m, tok, nil
}

// relays starts one ssh relay per lane to socket, in parallel, for the session ctx: each runs
// until ctx ends or its lane closes it. Whether a relay got through shows in the handshake over
// them.
func relays(ctx context.Context, rl Relayer, socket string) ([session.Lanes]net.Conn, error) {
	var conns [session.Lanes]net.Conn
	errs := make([]error, session.Lanes)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() { conns[i], errs[i] = rl.Relay(ctx, socket) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return conns, err
	}
	return conns, nil
}

// warn delivers a warning the user must see (Warn), if anyone listens.
func (o *Options) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
	}
}

// offerStreams (server) is the Aside of a copy's control channel for the client's request for
// streams: once per session, for one stream per lane, it listens on bind's address within ports
// and on a local socket in a private directory of its own (for ssh relays), answers with both and
// a fresh token and hands the listeners to path.AcceptStreams. A second request, or one for another number of
// streams, breaks the protocol (fail).
func offerStreams(ctx context.Context, ctl *Control, path *session.Path, bind string, ports session.PortRange, fail func(error)) func(Msg) {
	var asked atomic.Bool
	return func(m Msg) {
		if m.Streams != session.Lanes || !asked.CompareAndSwap(false, true) {
			fail(fmt.Errorf("%w: control channel: a request for %d TCP streams; a client asks once, for %d", ErrProtocol, m.Streams, session.Lanes))
			return
		}
		path.ExpectStreams(streamsAccept + session.HandshakeTimeout)
		go func() {
			ln, err := session.ListenTCPRange(bind, ports)
			if err != nil {
				fail(err)
				return
			}
			lns := []net.Listener{ln}
			tok := session.NewStreamToken()
			answer := Msg{T: KindStreams, Port: ln.Addr().(*net.TCPAddr).Port, Token: tok.String()}
			if uln, dir := listenRelays(); uln != nil {
				defer os.RemoveAll(dir)
				lns = append(lns, uln)
				answer.Relay = uln.Addr().String()
			}
			if err := ctl.Send(answer); err != nil {
				for _, l := range lns {
					l.Close()
				}
				return
			}
			if err := path.AcceptStreams(ctx, streamsAccept, tok, lns...); err != nil && ctx.Err() == nil {
				fail(err)
			}
		}()
	}
}

// listenRelays listens on the relays' socket, in a directory only this user can enter
// (MkdirTemp: mode 0700), which the caller removes once done. Where it cannot (no room in the
// temporary directory, or one other users could replace it in, which the relays refuse), it
// returns nil: TCP only.
func listenRelays() (net.Listener, string) {
	dir, err := os.MkdirTemp("", relayDir)
	if err != nil {
		return nil, ""
	}
	ln, err := net.Listen("unix", filepath.Join(dir, relaySocket))
	if err == nil && checkRelaySocket(ln.Addr().String()) == nil {
		return ln, dir
	}
	if ln != nil {
		ln.Close()
	}
	os.RemoveAll(dir)
	return nil, ""
}

// Relay is `farwing serve --relay SOCKET`: it connects to the local socket of the copy's server
// (offerStreams) and copies what comes on r (its ssh session's standard input) to it and what it
// sends to w, until either side ends. The bytes are the lane's records, sealed end to end: the
// relay reads none of them. It connects only to such a socket (checkRelaySocket), whatever path it
// is given: the path comes from the server's answer, and the relay is no way to any other.
func Relay(ctx context.Context, socket string, r io.Reader, w io.Writer) error {
	if err := checkRelaySocket(socket); err != nil {
		return fmt.Errorf("relay: %w: %s is not a copy's relay socket: %v", ErrProtocol, escape.Quote(socket), err)
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer c.Close()
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(c, r)
		done <- err
	}()
	go func() {
		_, err := io.Copy(w, c)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return err
}

// checkRelaySocket reports whether socket is what offerStreams makes: a socket (not a link to
// one) named relaySocket in a directory named relayDir… that is this user's alone (not a link,
// mode 0700, no other user able to replace it: privdir.Check). Another program's socket, or one
// another user could have put in its place, is refused.
func checkRelaySocket(socket string) error {
	dir, name := filepath.Split(socket)
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(socket) || filepath.Clean(socket) != socket || name != relaySocket || !strings.HasPrefix(filepath.Base(dir), relayDir) {
		return fmt.Errorf("not an absolute path to %s in a directory %s…", relaySocket, relayDir)
	}
	if err := privdir.Check(dir); err != nil {
		return err
	}
	if fi, err := os.Lstat(dir); err != nil || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("its directory is not this user's alone (mode 0700)")
	}
	fi, err := os.Lstat(socket)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("not a socket but %v", fi.Mode().Type())
	}
	return nil
}

package session

// Lanes over TCP, where UDP is blocked (docs/PROTOCOL.md, "TCP streams"). The path keeps its
// logic: each lane's socket is replaced by a TCP stream that carries the same sealed datagrams as
// length-prefixed records (lane.Stream), and the handshake runs again over the streams. The
// server takes a stream only once its first record is an authentic datagram of this session for
// a lane that has none yet, within streamAuthWait, after the session's StreamToken; anything else
// is closed, never read further.

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/lane"
)

// StreamCC is the congestion control a stream's socket asks for where the kernel has it (the
// kernel's default otherwise): BBR holds a long path's rate under random loss far better than
// CUBIC, which is why UDP was wanted in the first place.
const StreamCC = "bbr"

// streamAuthWait is how long an accepted connection has to send its first record: a client sends
// its hellos as soon as it has connected.
const streamAuthWait = 5 * time.Second

// maxStrangers bounds the connections waiting to send their first record at once: beyond it the
// one that has waited longest among those without the token from the address with the most is
// closed unread, to make room for the new one. Refusing the new one instead let anyone who can
// reach the port keep the client's streams out with this many silent connections; and a flood
// from elsewhere pushes out only its own, never the client's (at most four from its address,
// which send the token at once).
const maxStrangers = 16

// acceptRetry is how long the server waits to accept again after an Accept failed other than
// for its listener's close.
const acceptRetry = 20 * time.Millisecond

// ErrStreams: the TCP streams could not be set up.
var ErrStreams = errors.New("no TCP streams")

// A StreamToken opens every stream, before its first record: the server makes it when the client
// asks for streams and tells only the client, over the control channel. Without it an eavesdropper
// who saw the client's UDP hellos (sent, and unanswered, before the streams) could replay one on a
// stream of its own ahead of the client's, and the lane taken by it would be lost to the copy.
type StreamToken [tcpbench.TokenLen]byte

// NewStreamToken is a fresh random token.
func NewStreamToken() StreamToken { return StreamToken(tcpbench.NewToken()) }

// ParseStreamToken reads a token in its text form (String): exactly 32 lowercase hex digits.
func ParseStreamToken(s string) (StreamToken, error) {
	var t StreamToken
	if len(s) != 2*len(t) || strings.ToLower(s) != s {
		return t, fmt.Errorf("not %d lowercase hex digits", 2*len(t))
	}
	if _, err := hex.Decode(t[:], []byte(s)); err != nil {
		return t, fmt.Errorf("not %d lowercase hex digits", 2*len(t))
	}
	return t, nil
}

// String is the token as lowercase hex, as the control channel carries it.
func (t StreamToken) String() string { return hex.EncodeToString(t[:]) }

// UseStream makes c (a lane.Stream) lane i's conn in place of its socket, which it closes, and
// forgets what the lane's handshake proved: the handshake runs again over the stream. From the
// first call on, the path is on streams (OnStreams).
func (p *Path) UseStream(i int, c lane.PacketConn) {
	p.onStreams.Store(true)
	p.trainSent.Store(true) // a packet train measures nothing over a stream
	p.resetLane(i)
	p.sendMu[i].Lock()
	old := p.conns[i].Swap(&connBox{c})
	p.sendMu[i].Unlock()
	if old != nil && old.PacketConn != nil {
		old.Close() // its lane goroutine goes on with c
	}
	if p.closed.Load() {
		c.Close()
	}
}

// OnStreams reports whether the lanes are TCP streams: the sender then leaves the rate to TCP's
// congestion control (up to the user's --rate) and sends no FEC parity.
func (p *Path) OnStreams() bool { return p.onStreams.Load() }

// resetLane forgets lane i's handshake: the server's proof of the client's address (and the
// address), the client's answers. The client keeps its peer, the server's address: a sender
// already running (data before the proof) goes on sending, now on the stream.
func (p *Path) resetLane(i int) {
	p.chunkMu.Lock()
	defer p.chunkMu.Unlock()
	if p.server {
		p.peers[i].Store(nil)
	}
	p.proven[i].Store(false)
	p.helloFrom[i].Store(nil)
	p.jumboFrom[i] = netip.AddrPort{}
	p.laneChunk[i] = 0
	p.helloAck[i].Store(false)
	p.haveCookie[i].Store(false)
	p.provenAck[i].Store(false)
	p.fullAck[i].Store(false)
	p.ackChunk[i].Store(0)
}

// distrust closes c if it is a stream: an honest peer never sends a record that fails to
// authenticate on one (a datagram may be anyone's; a stream is the peer's alone).
func (p *Path) distrust(c lane.PacketConn) {
	if s, ok := c.(*lane.Stream); ok {
		s.Close()
	}
}

// ListenTCPRange opens the server's listener for the streams on bind's address: on the lowest
// free port of r, or any port for the zero range.
func ListenTCPRange(bind string, r PortRange) (*net.TCPListener, error) {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, err
	}
	if r.IsZero() {
		return listenTCP(net.JoinHostPort(host, "0"))
	}
	var last error
	for port := r.Lo; port <= r.Hi; port++ {
		ln, err := listenTCP(net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return ln, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%w: no free TCP port in %s (%v); choose a range with a free port with --port LO-HI", ErrStreams, r, last)
}

func listenTCP(addr string) (*net.TCPListener, error) {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	return net.ListenTCP("tcp", a)
}

// setStreamCC asks for StreamCC on c, silently keeping the kernel's default where it lacks it,
// and keeps what the kernel holds of c unsent to streamUnsent bytes (setUnsentLimit).
func setStreamCC(c *net.TCPConn) {
	if tcpbench.CheckCC(StreamCC) == nil {
		tcpbench.SetCC(c, StreamCC) //nolint:errcheck // the default serves
	}
	c.SetNoDelay(true)
	setUnsentLimit(c, streamUnsent) //nolint:errcheck // without it the stream still works, behind a longer queue
}

// streamUnsent bounds the bytes a stream's socket holds that TCP has not sent yet
// (TCP_NOTSENT_LOWAT): a write waits until the kernel's queue is below it, so the sender feels
// TCP's rate at once instead of filling a send buffer that autotuning grows to tens of MiB. A
// quarter of a MiB is about 20 ms of a stream at 100 Mbit/s.
const streamUnsent = 256 << 10

// AcceptStreams (server) takes one stream per lane from the listeners (TCP, and the local
// socket ssh relays reach) within the given time and makes each its lane's conn (UseStream): a
// connection counts only once its first record, read within streamAuthWait, is an authentic
// datagram of this session for a lane that has no stream yet, after tok. Others (no token or
// another, a wrong key, garbage, an oversized record, a lane taken, silence) are closed and counted
// in StreamsRefused. It closes the listeners when done; it fails if not every lane has its stream
// in time.
func (p *Path) AcceptStreams(ctx context.Context, within time.Duration, tok StreamToken, lns ...net.Listener) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for _, ln := range lns {
		defer ln.Close()
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
	}
	var mu sync.Mutex
	var taken [Lanes]bool
	n := 0
	var waiting strangers
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
					if c != nil {
						c.Close()
					}
					return // closed: every lane has its stream, or the time is up
				}
				if err != nil { // for a moment (no file descriptor left): the client's may come after
					select {
					case <-ctx.Done():
					case <-time.After(acceptRetry):
					}
					continue
				}
				waiting.add(c)
				go func() {
					i, rec, ok := p.authStream(c, tok, &waiting)
					mu.Lock()
					last := false
					if ok = ok && !taken[i] && n < Lanes; ok {
						taken[i] = true
						n++
						last = n == Lanes
					}
					mu.Unlock()
					if !ok {
						p.StreamsRefused.Add(1)
						c.Close()
						return
					}
					if tc, isTCP := c.(*net.TCPConn); isTCP {
						setStreamCC(tc)
					}
					p.UseStream(i, lane.NewStream(c, rec))
					if last {
						cancel() // every lane has its stream: stop accepting
					}
				}()
			}
		}()
	}
	<-ctx.Done()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case n == Lanes:
		return nil
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return fmt.Errorf("%w: %d of %d streams came from the client within %s", ErrStreams, n, Lanes, within)
	}
	return context.Cause(ctx)
}

// strangers are the accepted connections that have not yet sent their first record, oldest
// first, at most maxStrangers; known are those that sent the token.
type strangers struct {
	mu    sync.Mutex
	conns []net.Conn
	known map[net.Conn]bool
}

// add takes c in, closing one waiting connection where there is no room (its reads then fail and
// it is refused): one without the token if there is one, the oldest from the address with the
// most of them; else the oldest that has the token (only who saw it can send it).
func (s *strangers) add(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == maxStrangers {
		k := s.crowded()
		s.conns[k].Close()
		delete(s.known, s.conns[k])
		s.conns = append(s.conns[:k], s.conns[k+1:]...)
	}
	s.conns = append(s.conns, c)
}

// crowded is the index of the connection add closes.
func (s *strangers) crowded() int {
	count := make(map[netip.Addr]int, len(s.conns))
	for _, c := range s.conns {
		if !s.known[c] {
			count[remoteIP(c)]++
		}
	}
	// before: c goes before d (the oldest goes where neither does).
	before := func(c, d net.Conn) bool {
		if s.known[c] != s.known[d] {
			return !s.known[c]
		}
		return !s.known[c] && count[remoteIP(c)] > count[remoteIP(d)]
	}
	k := 0
	for j, c := range s.conns {
		if before(c, s.conns[k]) {
			k = j
		}
	}
	return k
}

// know marks c as having sent the token, and reports whether it is still waiting: not pushed
// out by a newer connection.
func (s *strangers) know(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.conns, c) {
		return false
	}
	if s.known == nil {
		s.known = make(map[net.Conn]bool)
	}
	s.known[c] = true
	return true
}

// remove lets c out once its first record is read (or its time is up), and reports whether it
// was still waiting.
func (s *strangers) remove(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.known, c)
	for k, w := range s.conns {
		if w == c {
			s.conns = append(s.conns[:k], s.conns[k+1:]...)
			return true
		}
	}
	return false
}

// remoteIP is c's peer's address: zero for a local socket's (the ssh relays, all alike).
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// authStream reads c's token and first record within streamAuthWait and reports the lane it is
// for, if the token is tok and the record an authentic datagram of this session (opened on a
// copy: the path opens it again, and its replay window marks it then); rec is the record with its
// length prefix. c leaves waiting once its first record is read; with the right token it is
// pushed out only by others that have it; one pushed out is refused.
func (p *Path) authStream(c net.Conn, tok StreamToken, waiting *strangers) (int, []byte, bool) {
	c.SetReadDeadline(time.Now().Add(streamAuthWait))
	defer c.SetReadDeadline(time.Time{})
	var got StreamToken
	_, err := io.ReadFull(c, got[:])
	if err != nil || subtle.ConstantTimeCompare(got[:], tok[:]) != 1 || !waiting.know(c) {
		waiting.remove(c)
		return 0, nil, false
	}
	rec, err := lane.ReadRecord(c)
	if !waiting.remove(c) || err != nil {
		return 0, nil, false
	}
	pkt := append([]byte(nil), rec[lane.RecordHeader:]...)
	h, _, err := p.crypto.Open(pkt)
	if err != nil || int(h.Lane) >= Lanes {
		p.AuthFailures.Add(1)
		return 0, nil, false
	}
	return int(h.Lane), rec, true
}

// DialStreams (client) connects one TCP stream per lane to addr, each within timeout and asking
// for StreamCC, sends tok on each as soon as it is connected (until then the server counts it a
// stranger), and makes them the lanes' conns; Handshake then runs over them.
func (p *Path) DialStreams(ctx context.Context, addr netip.AddrPort, timeout time.Duration, tok StreamToken) error {
	d := net.Dialer{Timeout: timeout}
	var conns [Lanes]net.Conn
	errs := make([]error, Lanes)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			c, err := d.DialContext(ctx, "tcp", addr.String())
			if err != nil {
				errs[i] = err
				return
			}
			setStreamCC(c.(*net.TCPConn))
			conns[i] = c
			errs[i] = sendToken(c, tok)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
			return fmt.Errorf("%w: connect to %s: %v", ErrStreams, addr, err)
		}
	}
	p.useStreams(conns)
	return nil
}

// UseConns (client) sends tok on each of conns (TCP streams, or ssh sessions relaying to the
// server's local socket) and makes each its lane's conn, as streams. Where tok cannot be sent on
// one, it closes them all and fails.
func (p *Path) UseConns(conns [Lanes]net.Conn, tok StreamToken) error {
	for _, c := range conns {
		if err := sendToken(c, tok); err != nil {
			for _, c := range conns {
				c.Close()
			}
			return fmt.Errorf("%w: %v", ErrStreams, err)
		}
	}
	p.useStreams(conns)
	return nil
}

// useStreams makes each of conns, its token sent, its lane's conn.
func (p *Path) useStreams(conns [Lanes]net.Conn) {
	for i, c := range conns {
		p.UseStream(i, lane.NewStream(c, nil))
	}
}

// sendToken writes tok on c, first of all (within lane.StreamWriteTimeout).
func sendToken(c net.Conn, tok StreamToken) error {
	c.SetWriteDeadline(time.Now().Add(lane.StreamWriteTimeout))
	_, err := c.Write(tok[:])
	return err
}

// ExpectStreams (server) says the client asked for streams: WaitPeers waits for their proofs
// until within from now, beyond its own time where that is sooner.
func (p *Path) ExpectStreams(within time.Duration) {
	p.streamsBy.Store(time.Now().Add(within).UnixNano())
}

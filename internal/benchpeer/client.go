// Package benchpeer is farwing bench's remote peer, both ends of it: the client's side (Open, Peer:
// the host's facts, TCP tests, the HTTP row, the copy rows' files) and the peer's (Serve, which
// cmd/farwing's serve registers for the hello role xfer.RoleBench). It speaks xfer's control
// protocol (xfer.Session, xfer.Served; its messages are in internal/xfer/messages.go).
package benchpeer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/bootstrap"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/xfer"
)

// Peer is a remote peer started for `farwing bench` over ssh exactly as for a copy: it reports
// its host's facts and takes part in TCP tests against this end.
type Peer struct {
	s    *xfer.Session
	Addr netip.Addr // the remote host's address, as the lanes would use it
	// Uploaded says whether starting it installed the peer (a first contact).
	Uploaded bool
	Facts    hostinfo.Facts // as it reported them when it started
	// Dir is the directory on the host where the copy rows put their files (the peer removes it
	// when the bench ends).
	Dir string
	// Argv is the command that started the peer (ssh, with the remote command in its last
	// argument).
	Argv []string
	ssh  *bootstrap.SSH // how it was reached, where over the system's ssh
	host string
}

// Open starts the bench's remote peer on host.
func Open(ctx context.Context, o xfer.Options, host string) (*Peer, error) {
	s, err := xfer.StartSession(ctx, o, host, xfer.RoleBench)
	if err != nil {
		return nil, err
	}
	b := &Peer{s: s, Uploaded: s.Info().Uploaded, Argv: s.Info().Argv, host: host}
	if o.Start == nil {
		b.ssh = &o.SSH
	}
	if b.Addr, err = s.ServerAddr(ctx); err != nil {
		b.Close()
		return nil, err
	}
	m, err := s.Control().Expect(s.Context(), xfer.KindFacts, xfer.PeerIdle)
	if err == nil && (m.Facts == nil || !strings.HasPrefix(m.Dest, "/") || fcopy.ValidName(strings.TrimPrefix(m.Dest, "/")) != nil) {
		err = fmt.Errorf("%w: the bench peer's first message has no facts or no directory (%s)", xfer.ErrProtocol, escape.Quote(m.Dest))
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	b.Facts, b.Dir = *m.Facts, m.Dest
	b.Facts.Clean()
	return b, nil
}

// HostFacts asks the peer for its facts now (its load average before a run).
func (b *Peer) HostFacts(ctx context.Context) (hostinfo.Facts, error) {
	if err := b.s.Control().Send(xfer.Msg{T: xfer.KindFacts}); err != nil {
		return hostinfo.Facts{}, err
	}
	return b.facts(xfer.PeerIdle)
}

func (b *Peer) facts(within time.Duration) (hostinfo.Facts, error) {
	m, err := b.s.Control().Expect(b.s.Context(), xfer.KindFacts, within)
	if err != nil {
		return hostinfo.Facts{}, err
	}
	if m.Facts == nil {
		return hostinfo.Facts{}, fmt.Errorf("%w: a facts message without facts", xfer.ErrProtocol)
	}
	f := *m.Facts
	f.Clean()
	return f, nil
}

// TCP runs one test: t.Streams streams between this end and the peer for t.Seconds, this end
// sending (or receiving, with t.PeerSends). The result is the receiver's count with the sending
// sockets' congestion control and retransmissions. count, when not nil, is kept at the bytes this
// end has sent or received so far (for a progress line).
func (b *Peer) TCP(ctx context.Context, t xfer.TCPTest, count *atomic.Int64) (tcpbench.Result, error) {
	if err := checkTest(t); err != nil {
		return tcpbench.Result{}, err
	}
	if !t.PeerSends {
		if err := tcpbench.CheckCC(t.CC); err != nil {
			return tcpbench.Result{}, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.s.Context(), cancel) // the control channel's end ends the test
	defer stop()
	if err := b.s.Control().Send(xfer.Msg{T: xfer.KindTCP, TCPTest: &t}); err != nil {
		return tcpbench.Result{}, err
	}
	m, err := b.s.Control().Expect(ctx, xfer.KindListen, xfer.PeerIdle)
	if err != nil {
		return tcpbench.Result{}, err
	}
	token, terr := hex.DecodeString(m.Token)
	if m.Port < 1 || m.Port > 65535 || terr != nil || len(token) != tcpbench.TokenLen {
		return tcpbench.Result{}, fmt.Errorf("%w: the peer's bench listener is port %d, token of %d hex digits", xfer.ErrProtocol, m.Port, len(m.Token))
	}
	cc := t.CC
	if t.PeerSends {
		cc = "" // the receiving end's own congestion control plays no part
	}
	conns, err := tcpbench.Dial(ctx, net.JoinHostPort(b.Addr.String(), strconv.Itoa(m.Port)), t.Streams, cc, token)
	if err != nil {
		return tcpbench.Result{}, fmt.Errorf("bench streams to %s port %d: %w", b.Addr, m.Port, err)
	}
	defer tcpbench.Close(conns)
	d := time.Duration(t.Seconds) * time.Second
	var local tcpbench.Result
	if t.PeerSends {
		local, err = tcpbench.Receive(ctx, conns, time.Now().Add(d+acceptWithin), count)
	} else {
		local, err = tcpbench.Send(ctx, conns, d, count)
	}
	if err != nil {
		return tcpbench.Result{}, err
	}
	done, err := b.s.Control().Expect(ctx, xfer.KindTCPDone, d+2*acceptWithin)
	if err != nil {
		return tcpbench.Result{}, err
	}
	r := done.TCPResult
	if r == nil {
		return tcpbench.Result{}, fmt.Errorf("%w: a tcp-done message without its result", xfer.ErrProtocol)
	}
	if t.PeerSends {
		// The peer sent: its sockets' facts, this end's count.
		if len(r.CC) != t.Streams {
			return tcpbench.Result{}, fmt.Errorf("%w: the peer reports %d sending sockets for %d streams", xfer.ErrProtocol, len(r.CC), t.Streams)
		}
		local.CC, local.Retransmits = nil, r.Retransmits
		for _, s := range r.CC {
			local.CC = append(local.CC, escape.Text(hostinfo.Clip(s)))
		}
		return local, nil
	}
	// This end sent: the peer's count (within what the test could produce: no more than this end
	// wrote, and not in no time), these sockets' facts.
	if r.Streams != t.Streams || r.Bytes < 0 || r.Bytes > local.Bytes || r.Seconds < 0 || r.Bytes > 0 && r.Seconds <= 0 ||
		r.Seconds > (d+2*acceptWithin).Seconds() {
		return tcpbench.Result{}, fmt.Errorf("%w: the peer counted %d bytes in %.1f s on %d streams for a %d-stream, %d s test", xfer.ErrProtocol, r.Bytes, r.Seconds, r.Streams, t.Streams, t.Seconds)
	}
	local.Bytes, local.Seconds = r.Bytes, r.Seconds
	return local, nil
}

// Check asks the peer for the BLAKE3 (hex) of the copy rows' file name in Dir (of about size
// bytes), which it then removes.
func (b *Peer) Check(ctx context.Context, name string, size int64) (string, error) {
	if err := b.s.Control().Send(xfer.Msg{T: xfer.KindCheck, Name: name}); err != nil {
		return "", err
	}
	// Hashing takes a while for a large file: allow 20 MB/s beyond the usual silence.
	m, err := b.s.Control().Expect(ctx, xfer.KindChecked, xfer.PeerIdle+time.Duration(size/20e6)*time.Second)
	if err != nil {
		return "", err
	}
	if !xfer.IsDigest(m.Sum) {
		return "", fmt.Errorf("%w: the peer's digest %s is not 64 hex digits", xfer.ErrProtocol, escape.Quote(m.Sum))
	}
	return m.Sum, nil
}

// HTTP is the HTTP row: the peer serves a random file of size bytes (made once per bench) to one
// GET over a single TCP stream with the kernel's default congestion control; this end writes it
// to dst, hashing it as it arrives. It returns the time from the GET to the checked file, and an
// error for a file that did not arrive whole within limit (ErrOverLimit) or arrived wrong.
func (b *Peer) HTTP(ctx context.Context, size int64, dst string, limit time.Duration) (time.Duration, []string, error) {
	if err := b.s.Control().Send(xfer.Msg{T: xfer.KindHTTP, Size: size}); err != nil {
		return 0, nil, err
	}
	// The peer makes the file first (once per bench): allow 20 MB/s.
	m, err := b.s.Control().Expect(ctx, xfer.KindListen, xfer.PeerIdle+time.Duration(size/20e6)*time.Second)
	if err != nil {
		return 0, nil, err
	}
	if _, terr := hex.DecodeString(m.Token); m.Port < 1 || m.Port > 65535 || len(m.Token) != 2*tcpbench.TokenLen || terr != nil || !xfer.IsDigest(m.Sum) {
		b.s.Control().Send(xfer.Msg{T: xfer.KindHTTPStop}) // the peer's server goes, whatever it sent
		return 0, nil, fmt.Errorf("%w: the peer's HTTP server is port %d, path of %d bytes, digest of %d", xfer.ErrProtocol, m.Port, len(m.Token), len(m.Sum))
	}
	addr := net.JoinHostPort(b.Addr.String(), strconv.Itoa(m.Port))
	el, err := getChecked(ctx, addr, "/"+m.Token, dst, size, m.Sum, limit)
	if serr := b.s.Control().Send(xfer.Msg{T: xfer.KindHTTPStop}); serr == nil {
		_, serr = b.s.Control().Expect(ctx, xfer.KindHTTPStopped, xfer.PeerIdle)
		if err == nil {
			err = serr
		}
	}
	return el, []string{"GET", "http://" + addr + "/" + m.Token}, err
}

// ErrOverLimit: a bench copy that did not produce a checked file within its limit (the table's
// "stalled"; not session.ErrOverLimit, a transfer whose receiver stopped acknowledging).
var ErrOverLimit = errors.New("no checked file within the time limit")

func getChecked(ctx context.Context, addr, target, dst string, size int64, sum string, limit time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// No proxy: the bench measures the path to the host, nothing in between. No redirect either
	// (httpGet takes only a 200): the file comes from the peer's server or not at all.
	start := time.Now()
	body, err := httpGet(ctx, addr, target, size)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return 0, ErrOverLimit
		}
		return 0, err
	}
	defer body.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(dst)
	h := blake3.New()
	n, err := io.Copy(io.MultiWriter(f, h), body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	el := time.Since(start)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return el, ErrOverLimit
	case err != nil:
		return el, err
	case n != size:
		return el, fmt.Errorf("HTTP GET brought %d bytes of %d", n, size)
	case hex.EncodeToString(h.Sum(nil)) != sum:
		return el, fmt.Errorf("the HTTP copy's BLAKE3 differs from the file's")
	}
	return el, nil
}

// Source asks the peer for a file of size bytes in Dir for the pull direction: random (its BLAKE3
// returned; made once per bench) or sparse. It returns the file's name in Dir.
func (b *Peer) Source(ctx context.Context, size int64, sparse bool) (name, sum string, err error) {
	if err := b.s.Control().Send(xfer.Msg{T: xfer.KindSource, Size: size, Sink: sparse}); err != nil {
		return "", "", err
	}
	m, err := b.s.Control().Expect(ctx, xfer.KindMade, xfer.PeerIdle+time.Duration(size/20e6)*time.Second)
	if err != nil {
		return "", "", err
	}
	want := map[bool]string{true: "stream", false: "source"}[sparse]
	if m.Name != want || !sparse && !xfer.IsDigest(m.Sum) {
		return "", "", fmt.Errorf("%w: the peer made %s (digest %s) for a %s", xfer.ErrProtocol, escape.Quote(m.Name), escape.Quote(m.Sum), want)
	}
	return m.Name, m.Sum, nil
}

// Uncache removes the peer's build from the remote cache, so that the next copy installs it,
// and this user's record of having installed it there, so that the next copy treats the host as
// one it has not met (bootstrap's upload ahead).
func (b *Peer) Uncache(ctx context.Context) error {
	if err := b.s.Control().Send(xfer.Msg{T: xfer.KindUncache}); err != nil {
		return err
	}
	if _, err := b.s.Control().Expect(ctx, xfer.KindUncached, xfer.PeerIdle); err != nil {
		return err
	}
	if b.ssh == nil {
		return nil
	}
	id, err := bootstrap.Self()
	if err != nil {
		return err
	}
	return bootstrap.Forget(ctx, *b.ssh, b.host, id)
}

// Close says bye and stops the peer.
func (b *Peer) Close() {
	b.s.Control().Send(xfer.Msg{T: xfer.KindBye})
	b.s.Close(time.Second)
}

package xfer

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
)

// BenchPeer is a remote peer started for `farwing bench` over ssh exactly as for a copy: it
// reports its host's facts and takes part in TCP tests against this end.
type BenchPeer struct {
	c    *conn
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

// OpenBench starts the bench's remote peer on host.
func OpenBench(ctx context.Context, o Options, host string) (*BenchPeer, error) {
	res := &Result{}
	c, ready, err := start(ctx, &o, host, Msg{Role: RoleBench}, res)
	if err != nil {
		return nil, err
	}
	b := &BenchPeer{c: c, Uploaded: res.PeerUploaded, Argv: c.info.Argv, host: host}
	if o.Start == nil {
		b.ssh = &o.SSH
	}
	if b.Addr, err = serverAddr(ctx, host, c.info.HostName, ready.Addr); err != nil {
		b.Close()
		return nil, err
	}
	m, err := c.ctl.Expect(c.ctx, KindFacts, PeerIdle)
	if err == nil && (m.Facts == nil || !strings.HasPrefix(m.Dest, "/") || fcopy.ValidName(strings.TrimPrefix(m.Dest, "/")) != nil) {
		err = fmt.Errorf("%w: the bench peer's first message has no facts or no directory (%s)", ErrProtocol, escape.Quote(m.Dest))
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
func (b *BenchPeer) HostFacts(ctx context.Context) (hostinfo.Facts, error) {
	if err := b.c.ctl.Send(Msg{T: KindFacts}); err != nil {
		return hostinfo.Facts{}, err
	}
	return b.facts(PeerIdle)
}

func (b *BenchPeer) facts(within time.Duration) (hostinfo.Facts, error) {
	m, err := b.c.ctl.Expect(b.c.ctx, KindFacts, within)
	if err != nil {
		return hostinfo.Facts{}, err
	}
	if m.Facts == nil {
		return hostinfo.Facts{}, fmt.Errorf("%w: a facts message without facts", ErrProtocol)
	}
	f := *m.Facts
	f.Clean()
	return f, nil
}

// TCP runs one test: t.Streams streams between this end and the peer for t.Seconds, this end
// sending (or receiving, with t.PeerSends). The result is the receiver's count with the sending
// sockets' congestion control and retransmissions. count, when not nil, is kept at the bytes this
// end has sent or received so far (for a progress line).
func (b *BenchPeer) TCP(ctx context.Context, t TCPTest, count *atomic.Int64) (tcpbench.Result, error) {
	if err := t.check(); err != nil {
		return tcpbench.Result{}, err
	}
	if !t.PeerSends {
		if err := tcpbench.CheckCC(t.CC); err != nil {
			return tcpbench.Result{}, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.c.ctx, cancel) // the control channel's end ends the test
	defer stop()
	if err := b.c.ctl.Send(Msg{T: KindTCP, TCPTest: &t}); err != nil {
		return tcpbench.Result{}, err
	}
	m, err := b.c.ctl.Expect(ctx, KindListen, PeerIdle)
	if err != nil {
		return tcpbench.Result{}, err
	}
	token, terr := hex.DecodeString(m.Token)
	if m.Port < 1 || m.Port > 65535 || terr != nil || len(token) != tcpbench.TokenLen {
		return tcpbench.Result{}, fmt.Errorf("%w: the peer's bench listener is port %d, token of %d hex digits", ErrProtocol, m.Port, len(m.Token))
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
	done, err := b.c.ctl.Expect(ctx, KindTCPDone, d+2*acceptWithin)
	if err != nil {
		return tcpbench.Result{}, err
	}
	r := done.TCPResult
	if r == nil {
		return tcpbench.Result{}, fmt.Errorf("%w: a tcp-done message without its result", ErrProtocol)
	}
	if t.PeerSends {
		// The peer sent: its sockets' facts, this end's count.
		if len(r.CC) != t.Streams {
			return tcpbench.Result{}, fmt.Errorf("%w: the peer reports %d sending sockets for %d streams", ErrProtocol, len(r.CC), t.Streams)
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
		return tcpbench.Result{}, fmt.Errorf("%w: the peer counted %d bytes in %.1f s on %d streams for a %d-stream, %d s test", ErrProtocol, r.Bytes, r.Seconds, r.Streams, t.Streams, t.Seconds)
	}
	local.Bytes, local.Seconds = r.Bytes, r.Seconds
	return local, nil
}

// Check asks the peer for the BLAKE3 (hex) of the copy rows' file name in Dir (of about size
// bytes), which it then removes.
func (b *BenchPeer) Check(ctx context.Context, name string, size int64) (string, error) {
	if err := b.c.ctl.Send(Msg{T: KindCheck, Name: name}); err != nil {
		return "", err
	}
	// Hashing takes a while for a large file: allow 20 MB/s beyond the usual silence.
	m, err := b.c.ctl.Expect(ctx, KindChecked, PeerIdle+time.Duration(size/20e6)*time.Second)
	if err != nil {
		return "", err
	}
	if !isDigest(m.Sum) {
		return "", fmt.Errorf("%w: the peer's digest %s is not 64 hex digits", ErrProtocol, escape.Quote(m.Sum))
	}
	return m.Sum, nil
}

// isDigest reports whether s is a BLAKE3 digest in hex: 64 hex digits.
func isDigest(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// HTTP is the HTTP row: the peer serves a random file of size bytes (made once per bench) to one
// GET over a single TCP stream with the kernel's default congestion control; this end writes it
// to dst, hashing it as it arrives. It returns the time from the GET to the checked file, and an
// error for a file that did not arrive whole within limit (ErrOverLimit) or arrived wrong.
func (b *BenchPeer) HTTP(ctx context.Context, size int64, dst string, limit time.Duration) (time.Duration, []string, error) {
	if err := b.c.ctl.Send(Msg{T: KindHTTP, Size: size}); err != nil {
		return 0, nil, err
	}
	// The peer makes the file first (once per bench): allow 20 MB/s.
	m, err := b.c.ctl.Expect(ctx, KindListen, PeerIdle+time.Duration(size/20e6)*time.Second)
	if err != nil {
		return 0, nil, err
	}
	if _, terr := hex.DecodeString(m.Token); m.Port < 1 || m.Port > 65535 || len(m.Token) != 2*tcpbench.TokenLen || terr != nil || !isDigest(m.Sum) {
		b.c.ctl.Send(Msg{T: KindHTTPStop}) // the peer's server goes, whatever it sent
		return 0, nil, fmt.Errorf("%w: the peer's HTTP server is port %d, path of %d bytes, digest of %d", ErrProtocol, m.Port, len(m.Token), len(m.Sum))
	}
	addr := net.JoinHostPort(b.Addr.String(), strconv.Itoa(m.Port))
	el, err := getChecked(ctx, addr, "/"+m.Token, dst, size, m.Sum, limit)
	if serr := b.c.ctl.Send(Msg{T: KindHTTPStop}); serr == nil {
		_, serr = b.c.ctl.Expect(ctx, KindHTTPStopped, PeerIdle)
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
func (b *BenchPeer) Source(ctx context.Context, size int64, sparse bool) (name, sum string, err error) {
	if err := b.c.ctl.Send(Msg{T: KindSource, Size: size, Sink: sparse}); err != nil {
		return "", "", err
	}
	m, err := b.c.ctl.Expect(ctx, KindMade, PeerIdle+time.Duration(size/20e6)*time.Second)
	if err != nil {
		return "", "", err
	}
	want := map[bool]string{true: "stream", false: "source"}[sparse]
	if m.Name != want || !sparse && !isDigest(m.Sum) {
		return "", "", fmt.Errorf("%w: the peer made %s (digest %s) for a %s", ErrProtocol, escape.Quote(m.Name), escape.Quote(m.Sum), want)
	}
	return m.Name, m.Sum, nil
}

// Uncache removes the peer's build from the remote cache, so that the next copy installs it,
// and this user's record of having installed it there, so that the next copy treats the host as
// one it has not met (bootstrap's upload ahead).
func (b *BenchPeer) Uncache(ctx context.Context) error {
	if err := b.c.ctl.Send(Msg{T: KindUncache}); err != nil {
		return err
	}
	if _, err := b.c.ctl.Expect(ctx, KindUncached, PeerIdle); err != nil {
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
func (b *BenchPeer) Close() {
	b.c.ctl.Send(Msg{T: KindBye})
	b.c.close(time.Second)
}

package xfer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

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
}

// OpenBench starts the bench's remote peer on host.
func OpenBench(ctx context.Context, o Options, host string) (*BenchPeer, error) {
	res := &Result{}
	c, ready, err := start(ctx, &o, host, Msg{Role: "bench"}, res)
	if err != nil {
		return nil, err
	}
	b := &BenchPeer{c: c, Uploaded: res.PeerUploaded}
	if b.Addr, err = serverAddr(ctx, host, c.info.HostName, ready.Addr); err != nil {
		b.Close()
		return nil, err
	}
	if b.Facts, err = b.facts(PeerIdle); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// HostFacts asks the peer for its facts now (its load average before a run).
func (b *BenchPeer) HostFacts(ctx context.Context) (hostinfo.Facts, error) {
	if err := b.c.ctl.Send(Msg{T: "facts"}); err != nil {
		return hostinfo.Facts{}, err
	}
	return b.facts(PeerIdle)
}

func (b *BenchPeer) facts(within time.Duration) (hostinfo.Facts, error) {
	m, err := b.c.ctl.Expect(b.c.ctx, "facts", within)
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
// sockets' congestion control and retransmissions.
func (b *BenchPeer) TCP(ctx context.Context, t TCPTest) (tcpbench.Result, error) {
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
	if err := b.c.ctl.Send(Msg{T: "tcp", TCPTest: &t}); err != nil {
		return tcpbench.Result{}, err
	}
	m, err := b.c.ctl.Expect(ctx, "listen", PeerIdle)
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
		local, err = tcpbench.Receive(ctx, conns, time.Now().Add(d+acceptWithin))
	} else {
		local, err = tcpbench.Send(ctx, conns, d)
	}
	if err != nil {
		return tcpbench.Result{}, err
	}
	done, err := b.c.ctl.Expect(ctx, "tcp-done", d+2*acceptWithin)
	if err != nil {
		return tcpbench.Result{}, err
	}
	r := done.TCPResult
	if r == nil {
		return tcpbench.Result{}, fmt.Errorf("%w: a tcp-done message without its result", ErrProtocol)
	}
	if t.PeerSends {
		// The peer sent: its sockets' facts, this end's count.
		if len(r.CC) > t.Streams {
			return tcpbench.Result{}, fmt.Errorf("%w: the peer reports %d sending sockets for %d streams", ErrProtocol, len(r.CC), t.Streams)
		}
		local.CC, local.Retransmits = nil, r.Retransmits
		for _, s := range r.CC {
			local.CC = append(local.CC, escape.Text(hostinfo.Clip(s)))
		}
		return local, nil
	}
	// This end sent: the peer's count (within what the test could produce), these sockets' facts.
	if r.Streams != t.Streams || r.Bytes < 0 || r.Seconds < 0 || r.Seconds > (d+2*acceptWithin).Seconds() {
		return tcpbench.Result{}, fmt.Errorf("%w: the peer counted %d bytes in %.1f s on %d streams for a %d-stream, %d s test", ErrProtocol, r.Bytes, r.Seconds, r.Streams, t.Streams, t.Seconds)
	}
	local.Bytes, local.Seconds = r.Bytes, r.Seconds
	return local, nil
}

// Close says bye and stops the peer.
func (b *BenchPeer) Close() {
	b.c.ctl.Send(Msg{T: "bye"})
	b.c.close(time.Second)
}

// IsRemote reports whether err came from the peer (a test it refused or could not run).
func IsRemote(err error) bool {
	var re *RemoteError
	return errors.As(err, &re)
}

// Package xfertest runs the remote peer (xfer.Serve, or a double of it) in this process, for the
// tests of the roles that speak xfer's control protocol (internal/benchpeer, internal/doctorpeer):
// pipes stand for the ssh session, lanetest's in-memory network for the UDP path, as any user, on
// every go test. It is the small form of xfer's own harness (internal/xfer/inproc_test.go), which
// xfer's tests cannot import.
package xfertest

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/pipetest"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// The two hosts of the network: the client's and the remote peer's.
var (
	ClientHost = netip.MustParseAddr("198.18.0.1")
	ServerHost = netip.MustParseAddr("198.18.0.2")
)

// ServeFunc runs the remote end, as xfer.Serve does.
type ServeFunc func(ctx context.Context, r io.Reader, w io.Writer, pub string, so xfer.ServeOptions) error

// Env is one in-memory network with a client host and a server host.
type Env struct {
	t   *testing.T
	net *lanetest.Network
	// Serve runs the remote end (xfer.Serve, or a double).
	Serve ServeFunc
	// Roles are the remote end's roles besides a copy's (xfer.ServeOptions.Roles).
	Roles map[string]xfer.Role
	// SSHConn is the peer's SSH_CONNECTION (default: ClientHost to ServerHost).
	SSHConn string

	mu     sync.Mutex
	serves []*Remote
}

// New makes an environment whose link is link (lanetest.New with seed); the test ends with no
// remote end left running.
func New(t *testing.T, link lanetest.Link, seed uint64) *Env {
	e := &Env{t: t, net: lanetest.New(link, seed), Serve: xfer.Serve}
	t.Cleanup(e.wait)
	return e
}

// wait waits for every remote end to finish: a test ends with no peer left running.
func (e *Env) wait() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.serves {
		select {
		case <-r.done:
		case <-time.After(40 * time.Second):
			e.t.Errorf("the remote peer is still running 40 s after the test")
		}
	}
}

// Lanes opens four lanes on host a of the network.
func (e *Env) Lanes(a netip.Addr) xfer.LaneOpener {
	return func(string) (conns [session.Lanes]lane.PacketConn, err error) {
		for i := range conns {
			c, err := e.net.Listen(a)
			if err != nil {
				return conns, err
			}
			conns[i] = c
		}
		return conns, nil
	}
}

// Options are client options for a session through the environment.
func (e *Env) Options() xfer.Options {
	return xfer.Options{Start: e.start, Lanes: e.Lanes(ClientHost)}
}

// start is the Starter: the remote end in a goroutine on pipes.
func (e *Env) start(ctx context.Context, host string, args []string, preface []byte) (xfer.Remote, error) {
	// `farwing serve --pub KEY`, as the client builds it.
	if len(args) != 2 || args[0] != "--pub" {
		return nil, fmt.Errorf("serve args %q", args)
	}
	r := &Remote{in: pipetest.New(), out: pipetest.New(), done: make(chan struct{})}
	r.in.Write(preface)
	sshConn := e.SSHConn
	if sshConn == "" {
		sshConn = fmt.Sprintf("%s 50000 %s 22", ClientHost, ServerHost)
	}
	so := xfer.ServeOptions{SSHConnection: sshConn, Lanes: e.Lanes(ServerHost), Roles: e.Roles}
	e.mu.Lock()
	e.serves = append(e.serves, r)
	e.mu.Unlock()
	go func() {
		r.err = e.Serve(context.Background(), r.in, r.out, args[1], so)
		r.out.Close()
		close(r.done)
	}()
	return r, nil
}

// Ready is the ready message a double of the remote end sends first: a fresh public key (which the
// client's key exchange takes), four ports and addr.
func Ready(addr string) (xfer.Msg, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return xfer.Msg{}, err
	}
	return xfer.Msg{T: xfer.KindReady, Version: xfer.Version, Proto: xfer.Proto, Pub: base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes()),
		Ports: []int{9, 9, 9, 9}, Addr: addr}, nil
}

// Remote is an xfer.Remote whose peer runs in this process.
type Remote struct {
	in, out *pipetest.Pipe
	done    chan struct{}
	err     error // Serve's, once done is closed
}

// Remote is the i-th remote end the environment started (from 0).
func (e *Env) Remote(i int) *Remote {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.serves[i]
}

// Done is closed once the remote end has returned; Err is then what it returned.
func (r *Remote) Done() <-chan struct{} { return r.done }
func (r *Remote) Err() error            { return r.err }

func (r *Remote) Control() (io.Reader, io.WriteCloser) { return r.out, r.in }
func (r *Remote) Info() xfer.PeerInfo {
	return xfer.PeerInfo{Path: "in-process", RemoteOS: "test"}
}
func (r *Remote) Close(time.Duration) { r.in.Close() }
func (r *Remote) Ended(err error) error {
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("%w: the remote peer ended: %v", err, r.err)
		}
	case <-time.After(time.Second):
	}
	return err
}

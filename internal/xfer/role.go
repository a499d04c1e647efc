package xfer

import (
	"context"
	"net/netip"
	"time"

	"github.com/farwing/farwing/internal/session"
)

// Roles other than a copy's speak the control protocol through what this file exports: farwing
// bench's peer (internal/benchpeer) and farwing doctor's (internal/doctorpeer). The client starts
// the remote peer as a copy does (StartSession); the remote peer's Serve hands a hello of such a
// role to the Role registered for it in ServeOptions.Roles (cmd/farwing's serve registers both).
// Their messages are listed with the copy's in messages.go.

// Session is the client's side of a session of a role other than a copy's: the remote peer,
// started as a copy starts it, its control channel and, once OpenPath has opened them, its lanes.
type Session struct {
	c     *conn
	o     Options
	host  string
	ready Msg
}

// StartSession starts the remote peer on host (over ssh, installing it where needed, or o.Start)
// with a hello of role, and returns once the peer has said it is ready. Its UDP handshake
// (OpenPath) never falls back to TCP streams: those are a copy's (the doctor checks UDP itself).
func StartSession(ctx context.Context, o Options, host, role string) (*Session, error) {
	o.UDPOnly = true
	c, ready, err := start(ctx, &o, host, Msg{Role: role}, &Result{})
	if err != nil {
		return nil, err
	}
	return &Session{c: c, o: o, host: host, ready: ready}, nil
}

// Control is the session's control channel.
func (s *Session) Control() *Control { return s.c.ctl }

// Context ends with the control channel: the peer gone, or its error.
func (s *Session) Context() context.Context { return s.c.ctx }

// Ready is the peer's first message: its UDP ports and the address the ssh client reached.
func (s *Session) Ready() Msg { return s.ready }

// Info says how the peer was started.
func (s *Session) Info() PeerInfo { return s.c.info }

// ServerAddr is where the lanes would go: the address ssh connects to, or the one the peer saw.
func (s *Session) ServerAddr(ctx context.Context) (netip.Addr, error) {
	return serverAddr(ctx, s.host, s.c.info.HostName, s.ready.Addr)
}

// OpenPath opens this end's lanes and makes the UDP handshake with the peer's, with a packet
// train, as a copy makes it.
func (s *Session) OpenPath(ctx context.Context) error {
	return s.c.openPath(ctx, &s.o, s.host, s.ready, s.c.crypto, true, false)
}

// Path is this end's lanes (nil before OpenPath, or where it could not open them).
func (s *Session) Path() *session.Path { return s.c.path }

// RTT is the UDP handshake's round trip, once OpenPath has made it.
func (s *Session) RTT() time.Duration { return s.c.rtt }

// Close stops the peer, giving it grace to leave on its own.
func (s *Session) Close(grace time.Duration) { s.c.close(grace) }

// A Role is the remote peer's side of a session whose hello asks for a role other than a copy's
// (RoleRecv, RoleSend), registered in ServeOptions.Roles: Serve runs it once it has sent ready
// and read the hello, and returns what it returns.
type Role func(ctx context.Context, s *Served) error

// Served is what Serve hands a Role.
type Served struct {
	// Control is the control channel, the client's hello read.
	Control *Control
	// Path is this end's lanes, announced in ready: they answer the client's UDP handshake. A
	// role that needs none closes them.
	Path *session.Path
	// Client and Server are the ends of the ssh connection (ServeOptions.SSHConnection): the
	// client's address and the one it reached; invalid where it says nothing usable.
	Client, Server netip.Addr
}

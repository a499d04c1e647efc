package xfer

// A session's start, the client's side: the remote peer started (over ssh, or Options.Start)
// with the preface written as ssh starts, its ready and the key exchange (start), and the UDP
// path: the lanes, opened while ssh starts, and the handshake (openPath), beside the first data
// where the path is remembered (handshakeBeside).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/bootstrap"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// Starter starts the remote peer for a copy to or from host: `farwing serve` with serveArgs, the
// control channel on its standard input and output, preface written to its input at once.
type Starter func(ctx context.Context, host string, serveArgs []string, preface []byte) (Remote, error)

// LaneOpener opens the four lanes of one end of a path on bind ("0.0.0.0:0" or "[::]:0").
type LaneOpener func(bind string) ([session.Lanes]lane.PacketConn, error)

// udpLanes opens UDP lanes with t's lane options.
func udpLanes(t tuning.Settings) LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) { return session.ListenUDP(bind, t.Lane(0)) }
}

// Remote is a started remote peer: the ssh session that runs `farwing serve` (or, in tests, an
// in-process Serve over pipes).
type Remote interface {
	// Control returns the peer's standard output and input: the control channel.
	Control() (io.Reader, io.WriteCloser)
	// Info says what is known about the peer.
	Info() PeerInfo
	// Ended explains why the control channel closed: how ssh or the peer ended, with the peer's
	// last words (escaped), waiting briefly for it to exit; err is returned when nothing better
	// is known.
	Ended(err error) error
	// Close ends the session, giving it grace to leave on its own.
	Close(grace time.Duration)
}

// PeerInfo is what the start of a remote peer tells about it.
type PeerInfo struct {
	Uploaded bool     // this start installed the peer
	Path     string   // the peer's executable on the remote host
	RemoteOS string   // uname -s and -m
	HostName string   // the address ssh connects to ("" if unknown): where UDP goes
	Argv     []string // the command that started it, when there is one
	// Took is how long starting it took (the ssh session to the peer's start, with the install
	// when Uploaded); SentBytes how many bytes of peer were sent to install it, in Format
	// ("xz", "gzip" or "raw"), parts sent twice not counted (ResentBytes); UploadSessions the ssh
	// sessions the upload used (more than one where the first was slow).
	Took           time.Duration
	SentBytes      int64
	Format         string
	UploadSessions int
	ResentBytes    int64
}

// SSHStart starts the peer over the system's ssh with the options in s (bootstrap.Start).
func SSHStart(s bootstrap.SSH) Starter {
	return func(ctx context.Context, host string, serveArgs []string, preface []byte) (Remote, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this program's own executable: %w", err)
		}
		// Start hashes it while it reads ssh's configuration.
		p, err := bootstrap.Start(ctx, s, host, bootstrap.Identity{Exe: exe}, serveArgs, preface)
		if err != nil {
			return nil, err
		}
		return sshRemote{p}, nil
	}
}

type sshRemote struct{ p *bootstrap.Peer }

func (r sshRemote) Control() (io.Reader, io.WriteCloser) { return r.p.Stdout, r.p.Stdin }
func (r sshRemote) Info() PeerInfo {
	return PeerInfo{Uploaded: r.p.Uploaded, Path: r.p.Path, RemoteOS: r.p.RemoteOS, HostName: r.p.HostName, Argv: r.p.Args(),
		Took: r.p.Took, SentBytes: r.p.SentBytes, Format: r.p.Format, UploadSessions: r.p.UploadSessions, ResentBytes: r.p.ResentBytes}
}
func (r sshRemote) Ended(err error) error     { return r.p.Ended(err, 2*time.Second) }
func (r sshRemote) Close(grace time.Duration) { r.p.Close(grace) }
func (r sshRemote) Prefaced() <-chan struct{} { return r.p.Prefaced() }
func (r sshRemote) Relay(ctx context.Context, socket string) (net.Conn, error) {
	return r.p.Relay(ctx, socket)
}

// closeGrace is how long the client waits for ssh to exit once the transfer's outcome is known:
// not at all. What it still has to send (bye, an error) is already in ssh's pipe, and ssh delivers
// it and leaves on its own; with a shared connection the master even keeps ssh's stderr until the
// remote side has closed, a round trip later.
const closeGrace = 0

// conn is the client's side of a session: the remote peer, its control channel and the UDP path.
type conn struct {
	crypto *wire.Crypto
	peer   Remote
	info   PeerInfo
	ctl    *Control
	path   *session.Path
	rtt    time.Duration
	res    *Result
	ctx    context.Context // ends with the control channel
	cancel context.CancelCauseFunc
	// preface is what was written to the peer as ssh started: the hello and a short list, its
	// first messages; a copy (copy) has them copied on the lanes as they open (openPath).
	preface []byte
	copy    bool
	// early is the lanes being opened while the peer starts (bindEarly), for openPath; whoever
	// takes them (takeEarly) owns them.
	early atomic.Pointer[chan earlyLanes]
	// handshake is the UDP handshake openPath prepared (its lanes' round trip) to addr, and
	// jumbo says it proposes jumbo chunks. pathKey names the path's records (pathmem.go; "":
	// none kept).
	handshake func(context.Context) (time.Duration, error)
	addr      netip.Addr
	jumbo     bool
	pathKey   string
}

// takeEarly returns the lanes bindEarly opened, once; nil when there are none (left).
func (c *conn) takeEarly() chan earlyLanes {
	if ch := c.early.Swap(nil); ch != nil {
		return *ch
	}
	return nil
}

// earlyLanes is the lanes bindEarly opened, for the address they were opened for.
type earlyLanes struct {
	addr  netip.Addr
	conns [session.Lanes]lane.PacketConn
	err   error
}

func (c *conn) close(grace time.Duration) {
	if c.path != nil {
		c.path.Close()
	}
	if ch := c.takeEarly(); ch != nil { // opened, never used
		closeWhenOpened(ch)
	}
	if c.peer != nil {
		c.peer.Close(grace)
	}
	c.cancel(nil)
}

func start(ctx context.Context, o *Options, host string, hello Msg, res *Result) (*conn, Msg, error) {
	kex, err := newKex()
	if err != nil {
		return nil, Msg{}, err
	}
	clientPub := kex.PublicKey()
	// A copy's lanes are opened while ssh starts (tens of milliseconds of system calls that would
	// otherwise sit between the peer's ready and the first data): IPv4 ones, the likely family,
	// which bindEarly takes or closes once it knows the address.
	var v4 chan earlyLanes
	if hello.Role == RoleRecv || hello.Role == RoleSend {
		ch := make(chan earlyLanes, 1)
		v4 = ch
		go func() {
			var e earlyLanes
			e.conns, e.err = o.laneOpener()(bindFor(netip.IPv4Unspecified()))
			ch <- e
		}()
		defer func() {
			if v4 != nil { // not handed to bindEarly
				closeWhenOpened(v4)
			}
		}()
	}
	// A push's file list follows the hello in chunks (list.go), checked by the peer as it
	// arrives. A short list goes in the preface, right after the hello: the peer then looks at
	// its destination and answers "have" as it starts, a round trip before the lanes are open,
	// instead of as they open (where a lost TCP segment of that lone answer held the first data
	// 0.3 s at 3 % loss). A longer one is encoded while ssh starts and sent once the peer is ready.
	var chunks <-chan []byte
	var listErr <-chan error
	var listLines []byte
	if len(hello.Files) > 0 {
		hello.Entries = len(hello.Files)
		if err := checkListSize(hello.Files); err != nil {
			return nil, Msg{}, err
		}
		if len(hello.Files) <= prefaceEntries {
			listLines = prefaceList(hello.Files)
		}
		if listLines == nil {
			chunks, listErr = encodeList(hello.Files)
			defer func() {
				if chunks != nil { // not sent: let the encoder end
					go sendList(nil, chunks, listErr)
				}
			}()
		}
		hello.Files = nil
	}
	hello.T, hello.Version, hello.Proto = KindHello, Version, Proto
	hello.Debug = o.Tuning.Debug
	hello.MTU = o.MTU
	hello.Profile = o.Tuning.Profile
	preface, err := json.Marshal(hello)
	if err != nil {
		return nil, Msg{}, err
	}
	preface = append(append(preface, '\n'), listLines...)
	startPeer := o.Start
	if startPeer == nil {
		startPeer = SSHStart(o.SSH)
	}
	args := []string{"--pub", encodePub(clientPub)}
	if !o.Ports.IsZero() {
		args = append(args, "--port", o.Ports.String())
	}
	peer, err := startPeer(ctx, host, args, preface)
	if err != nil {
		return nil, Msg{}, err
	}
	info := peer.Info()
	res.PeerUploaded, res.PeerPath = info.Uploaded, escape.Text(info.Path)
	res.BootSeconds, res.BootBytes, res.BootFormat = info.Took.Seconds(), info.SentBytes, info.Format
	if info.Uploaded {
		res.BootSessions, res.BootResent = max(1, info.UploadSessions), info.ResentBytes
		o.logf("peer installed on %s (%s): %d bytes sent (%s) over %d ssh session(s), %.2f s from ssh's start to the peer's", host,
			escape.Text(info.RemoteOS), info.SentBytes, info.Format, max(1, info.UploadSessions), info.Took.Seconds())
	} else {
		o.logf("peer found on %s (%s), %.2f s from ssh's start", host, escape.Text(info.RemoteOS), info.Took.Seconds())
	}
	r, w := peer.Control()
	c := &conn{peer: peer, info: info, ctl: NewControl(r, w, peer.Ended), res: res, preface: preface}
	c.ctl.channelOnly = o.ChannelOnly
	// The preface's messages (the hello, a short list) are the first the peer reads: this end's
	// own count of the messages it sent starts after them (Control.Mirror numbers its copies).
	c.ctl.sent = uint32(bytes.Count(preface, []byte{'\n'}))
	// The session ends with its control channel: ssh gone, the peer gone.
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.ctl.Start(c.cancel)
	if hello.Role == RoleRecv || hello.Role == RoleSend {
		ch := c.bindEarly(c.ctx, o, host, v4)
		v4 = nil
		c.early.Store(&ch)
	}
	// The peer sends ready first thing, once ssh has started it (an upload is already done).
	ready, err := c.ctl.Expect(c.ctx, KindReady, PeerIdle)
	if err != nil {
		c.close(time.Second)
		return nil, Msg{}, err
	}
	o.logf("remote peer ready")
	if ready.Proto != Proto {
		c.close(time.Second)
		return nil, Msg{}, fmt.Errorf("the remote peer speaks control protocol %d, this farwing %d; the remote cache holds a different build", ready.Proto, Proto)
	}
	if err := checkReady(ready, o.Ports); err != nil {
		c.close(time.Second)
		return nil, Msg{}, err
	}
	spub, err := decodePub(ready.Pub)
	if err == nil {
		var key []byte
		var connID uint32
		if key, connID, err = sessionKey(kex, spub, clientPub.Bytes(), spub.Bytes()); err == nil {
			c.crypto, err = wire.NewCrypto(key, connID, wire.ClientToServer)
		}
	}
	if err != nil {
		c.close(time.Second)
		return nil, Msg{}, fmt.Errorf("key exchange with the remote peer failed: %w", err)
	}
	if chunks != nil {
		go func(chunks <-chan []byte) {
			// The preface (the hello) goes first: it is written as ssh starts, by another
			// goroutine, which may not be done yet.
			if p, ok := peer.(interface{ Prefaced() <-chan struct{} }); ok {
				select {
				case <-p.Prefaced():
				case <-c.ctx.Done():
				}
			}
			if err := sendList(c.ctl, chunks, listErr); err != nil && !errors.Is(err, ErrListLimit) {
				o.logf("sending the file list: %v", err)
			} else if err != nil {
				c.ctl.SendError(err)
				c.cancel(err)
			}
		}(chunks)
		chunks = nil
	}
	return c, ready, nil
}

// A push's list of at most prefaceEntries entries, whose "list" messages take at most
// prefaceListBytes, travels in the preface (start).
const (
	prefaceEntries   = 256
	prefaceListBytes = 64 << 10
)

// prefaceList returns files' "list" messages as sendList writes them, or nil where they would
// take more than prefaceListBytes.
func prefaceList(files []fcopy.File) []byte {
	var b bytes.Buffer
	chunks, errc := encodeList(files)
	if sendList(NewControl(nil, &b, nil), chunks, errc) != nil || b.Len() > prefaceListBytes {
		return nil
	}
	return b.Bytes()
}

// checkReady checks the server's first message: four UDP ports (within the range asked for with
// --port), an address if any.
func checkReady(m Msg, ports session.PortRange) error {
	if len(m.Ports) != session.Lanes {
		return fmt.Errorf("%w: the remote peer offered %d UDP ports, want %d", ErrProtocol, len(m.Ports), session.Lanes)
	}
	for _, p := range m.Ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("%w: the remote peer offered UDP port %d", ErrProtocol, p)
		}
		if !ports.Contains(p) {
			return fmt.Errorf("%w: the remote peer offered UDP port %d, outside --port %s", ErrProtocol, p, ports)
		}
	}
	if m.Addr != "" {
		if _, err := netip.ParseAddr(m.Addr); err != nil {
			return fmt.Errorf("%w: the remote peer reported a malformed address %s", ErrProtocol, escape.Quote(m.Addr))
		}
	}
	return nil
}

// bindEarly finds the address ssh goes to (c.info.HostName) and the lanes for it in the
// background, while the peer's ready is read and the session key derived: openPath takes them.
// For an IPv4 address they are v4's, opened while ssh started (start), which it closes otherwise.
// Where that name gives no address, openPath finds one as before.
func (c *conn) bindEarly(ctx context.Context, o *Options, host string, v4 chan earlyLanes) chan earlyLanes {
	ch := make(chan earlyLanes, 1)
	go func() {
		var e earlyLanes
		e.addr, e.err = serverAddr(ctx, host, c.info.HostName, "")
		switch pre := <-v4; {
		case e.err == nil && e.addr.Is4() && pre.err == nil:
			e.conns = pre.conns
		default:
			closeLanes(pre.conns)
			if e.err == nil {
				e.conns, e.err = o.laneOpener()(bindFor(e.addr))
			}
		}
		ch <- e
	}()
	return ch
}

// laneOpener is o.Lanes, or UDP lanes with o's tuning.
func (o *Options) laneOpener() LaneOpener {
	if o.Lanes != nil {
		return o.Lanes
	}
	return udpLanes(o.Tuning)
}

// bindFor is the wildcard address of addr's family, to bind lanes to.
func bindFor(addr netip.Addr) string {
	if addr.Is6() {
		return "[::]:0"
	}
	return "0.0.0.0:0"
}

func closeLanes(conns [session.Lanes]lane.PacketConn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// closeWhenOpened closes the lanes bindEarly opens on ch, in the background: its lookup may
// still be under way.
func closeWhenOpened(ch chan earlyLanes) {
	go func() { closeLanes((<-ch).conns) }()
}

// openPath opens the local lanes (or takes those bindEarly opened) and performs the UDP
// handshake with the server's ports.
// With lazy, it returns before the handshake, which c.handshake then performs.
func (c *conn) openPath(ctx context.Context, o *Options, host string, ready Msg, crypto *wire.Crypto, probe, lazy bool) error {
	var e earlyLanes
	name := c.info.HostName
	if ch := c.takeEarly(); ch != nil {
		select {
		case e = <-ch:
		case <-ctx.Done(): // the session ended while a name was being looked up
			closeWhenOpened(ch)
			return ctx.Err()
		}
		if !e.addr.IsValid() {
			name = "" // it gave no address: the one the server saw
		}
	}
	addr, conns := e.addr, e.conns
	if e.err != nil || !addr.IsValid() {
		var err error
		if !addr.IsValid() {
			if addr, err = serverAddr(ctx, host, name, ready.Addr); err != nil {
				return err
			}
		}
		if conns, err = o.laneOpener()(bindFor(addr)); err != nil {
			return err
		}
	}
	o.logf("UDP destination %s", addr)
	path := session.NewPath(conns, crypto, false)
	path.SetDebugLog(o.debugLog())
	c.path, c.addr = path, addr
	if o.PathMemory != "" {
		c.pathKey = pathKey(host, addr)
	}
	c.jumbo = o.Tuning.Jumbo(addr) || o.MTU >= session.JumboMTU && !o.Tuning.NoJumbo
	if c.jumbo {
		for i, p := range ready.Ports { // ProposeJumbo asks the lanes that go off this host for the don't-fragment bit
			path.SetPeer(i, netip.AddrPortFrom(addr, uint16(p)))
		}
		c.jumbo = path.ProposeJumbo()
	}
	var dst []netip.AddrPort
	for _, p := range ready.Ports {
		dst = append(dst, netip.AddrPortFrom(addr, uint16(p)))
	}
	if c.copy {
		c.copyControl(path, dst)
	}
	if lazy {
		// Data may go before the handshake does (handshakeBeside), to these ports.
		for i, a := range dst {
			path.SetPeer(i, a)
		}
	}
	c.handshake = func(ctx context.Context) (time.Duration, error) {
		// A path that gave no UDP before gets a shorter chance (recallNoUDP).
		wait, key := session.HandshakeTimeout, c.pathKey
		var before time.Time
		blocked := false
		if !o.UDPOnly {
			if before, blocked = recallNoUDP(o.PathMemory, key, time.Now()); blocked {
				wait = noUDPWait(c.info.Took)
			}
		}
		rtt, err := path.Handshake(ctx, dst, wait, probe)
		if errors.Is(err, session.ErrNoUDP) && !o.UDPOnly {
			if blocked {
				o.logf("UDP to %s gave no answer %s ago either: waited %s for it, not %s", addr, time.Since(before).Round(time.Minute), wait, session.HandshakeTimeout)
			}
			rtt, err = c.fallback(ctx, o, err, addr, dst)
			if err == nil {
				rememberNoUDP(o.PathMemory, key, time.Now())
			}
			return rtt, err
		}
		if err == nil && blocked {
			forgetRecord(o.PathMemory, key+noUDPSuffix)
		}
		if err == nil {
			o.logf("UDP lanes open to %s ports %v, rtt %s", addr, ready.Ports, rtt.Round(100*time.Microsecond))
			if c.jumbo {
				how := "not carried by every lane each way (the path's MTU), standard chunks"
				if path.ChunkSize() == wire.JumboChunkSize {
					how = "proven on every lane each way"
				}
				o.logf("UDP chunks of %d bytes: large datagrams %s", path.ChunkSize(), how)
			}
		}
		return rtt, err
	}
	if lazy {
		return nil
	}
	rtt, err := c.handshake(ctx)
	if err != nil {
		return err
	}
	c.rtt = rtt
	return nil
}

// besideHandshake is a UDP handshake running beside the data (handshakeBeside).
type besideHandshake struct {
	rate   float64 // the remembered rate the data starts at, bits/s
	cancel context.CancelFunc
	done   chan struct{}
	rtt    time.Duration
	err    error
}

// handshakeBeside starts the handshake openPath prepared in the background, for data that goes
// first at rec's rate, and sets c.rtt to rec's round trip. It returns once the handshake's hellos
// and packet train are out, so the train does not queue behind data. A handshake that fails ends
// the session with its error; one that fails, or measures a round trip under half or over twice
// rec's, forgets the record (key): the path is not the one remembered.
func (c *conn) handshakeBeside(ctx context.Context, o *Options, host string, rec pathRecord, key string) *besideHandshake {
	rate := rec.RateBps
	if o.Rate > 0 {
		rate = min(rate, o.Rate)
	}
	hctx, cancel := context.WithCancel(ctx)
	h := &besideHandshake{rate: rate, cancel: cancel, done: make(chan struct{})}
	c.rtt = rec.rtt()
	go func() {
		defer close(h.done)
		h.rtt, h.err = c.handshake(hctx)
		switch {
		case h.err != nil && hctx.Err() == nil:
			forgetPath(o.PathMemory, key)
			c.cancel(h.err)
		case h.err == nil && (h.rtt > 2*rec.rtt() || h.rtt < rec.rtt()/2):
			forgetPath(o.PathMemory, key)
		}
	}()
	select {
	case <-c.path.HandshakeSent():
	case <-h.done:
	}
	o.logf("data starts before the UDP handshake's answer, at %.0f Mbit/s and a round trip of %s: %s's last push sustained them %s ago",
		rate/1e6, c.rtt.Round(100*time.Microsecond), host, time.Since(time.Unix(rec.At, 0)).Round(time.Second))
	return h
}

// wait returns the handshake's round trip, or its error where it failed on its own (no UDP got
// through); one still under way once the data is done is ended (0, nil).
func (h *besideHandshake) wait() (time.Duration, error) {
	h.stop()
	if errors.Is(h.err, context.Canceled) {
		return 0, nil
	}
	return h.rtt, h.err
}

func (h *besideHandshake) stop() { h.cancel(); <-h.done }

// copyControl starts the copies of this end's control messages on the lanes to dst, before the
// handshake's first hellos (docs/PROTOCOL.md, "Control (7)"): the preface's now, those sent from
// now on as they are sent, and the server's taken from whichever copy comes first. Each copy is
// what matters most when ssh's TCP loses the segment that carries it: the preface goes alone, a
// round trip after the session's start (ssh sends standard input once its exec is answered), and
// at 3 % loss about one start in twenty waited for it or the server's have, 0.3-0.4 s.
func (c *conn) copyControl(path *session.Path, dst []netip.AddrPort) {
	path.OnControl(c.ctl.Offer)
	if c.ctl.channelOnly {
		return
	}
	for i, a := range dst {
		path.SetPeer(i, a)
	}
	seq := uint32(0)
	for line := range bytes.Lines(c.preface) { // each ends with its newline: the preface's do
		path.SendControl(seq, line)
		seq++
	}
	c.ctl.Mirror(path.SendControl)
}

// serverAddr picks the UDP destination: the address ssh connects to (name, from ssh -G), or the
// one the server saw.
func serverAddr(ctx context.Context, host, name, seen string) (netip.Addr, error) {
	if name != "" {
		if a, err := netip.ParseAddr(name); err == nil {
			return a.Unmap(), nil
		}
		if ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name); err == nil && len(ips) > 0 {
			for _, ip := range ips {
				if ip.Unmap().Is4() {
					return ip.Unmap(), nil
				}
			}
			return ips[0], nil
		}
	}
	if a, err := netip.ParseAddr(seen); err == nil {
		return a.Unmap(), nil
	}
	return netip.Addr{}, fmt.Errorf("%w: cannot find an address for %s", session.ErrNoUDP, host)
}

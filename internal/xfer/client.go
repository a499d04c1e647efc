package xfer

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
	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// Version is the build's version string, set by cmd/farwing.
var Version = "dev"

// Options are the client's settings for one copy.
type Options struct {
	SSH       bootstrap.SSH
	Rate      float64   // ceiling in bits/s (0: none)
	MinRate   float64   // floor in bits/s
	Policy    cc.Policy // fair, high, fixed, low
	FEC       fec.Mode  // parity: auto (zero value), off or K+M
	Window    int       // blocks; 0 = from rate and RTT
	Recursive bool
	Follow    bool // -L: send what symbolic links point to, not the links
	HardLinks bool // -H: files with several names are sent once, as hard links
	Preserve  bool
	Sink      bool // the receiving side verifies but does not write
	// Ports is the range the remote peer binds its four UDP lanes in (--port LO-HI; zero: any).
	Ports session.PortRange
	// Compare is what makes a destination file count as already there, and not sent: the same
	// size and mtime (zero value), BLAKE3 (--checksum), nothing (--ignore-times).
	Compare fcopy.Compare
	// NoResume (--no-resume): no partial file of an interrupted copy is resumed (those of this
	// copy's files are removed), and this copy leaves none for a resume if it is interrupted.
	NoResume bool
	// Log prints each step of the copy (-v; nil: none): a line per call, without its newline.
	Log func(format string, args ...any)
	// Tuning is the environment's switches, read once by cmd/farwing (tuning.FromEnv).
	Tuning tuning.Settings
	// PathMemory is the directory where a push keeps each path's sustained rate and round trip,
	// and from which the next push on it starts its data before the UDP handshake answers
	// (pathmem.go; "": none).
	PathMemory string
	// DebugLog is where the engines print their state when Tuning.Debug is on (FARWING_DEBUG; a
	// line per call, without its newline; nil: nowhere). The remote peer is asked to print its
	// own (on its standard error) in the hello.
	DebugLog func(format string, args ...any)
	// Warn prints a warning the user must see (what the sending side skipped); nil: none.
	Warn     func(msg string)
	Progress ProgressFunc
	// File, when set, is told of each file verified and in place at the destination, with its
	// digest: on a pull as this end renames it into place, on a push as the remote's
	// confirmation of it comes (a few times a second, while the data travels) and this end has
	// checked it against the digest it read. It may be called from another goroutine than
	// Progress.
	File func(fcopy.FileResult)
	// Skip, when set, is told of each regular file not sent because the destination has it
	// (Compare), before any data travels; on a push that is the remote's word.
	Skip func(name string, size int64)
	// LeftOut, when set, is told what the sending side left out (devices, sockets, FIFOs; link
	// loops with -L) when Warn is.
	LeftOut func(fcopy.Skipped)

	// Start starts the remote peer as `farwing serve ARGS` with preface on its standard input
	// (nil: over ssh, installing it first where needed: SSHStart).
	Start Starter
	// Lanes opens this end's four lanes on bind (nil: UDP sockets, session.ListenUDP with
	// Tuning's lane options).
	Lanes LaneOpener
	// CheckpointEvery is how much of a file this end's writer receives between two checkpoints
	// of its resume record (fcopy.WriterOptions.CheckpointEvery; 0: the writer's default). Tests
	// that interrupt copies of small files set it.
	CheckpointEvery int64
	// ChannelOnly keeps this end's control messages on the control channel, without their
	// copies on the lanes (Control.Mirror): tests that change them on their way there set it.
	ChannelOnly bool
}

// Starter starts the remote peer for a copy to or from host: `farwing serve` with serveArgs, the
// control channel on its standard input and output, preface written to its input at once.
type Starter func(ctx context.Context, host string, serveArgs []string, preface []byte) (Remote, error)

// LaneOpener opens the four lanes of one end of a path on bind ("0.0.0.0:0" or "[::]:0").
type LaneOpener func(bind string) ([session.Lanes]lane.PacketConn, error)

// udpLanes opens UDP lanes with t's lane options.
func udpLanes(t tuning.Settings) LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) { return session.ListenUDP(bind, t.Lane(0)) }
}

// debugLog is the debug logger the engines get: DebugLog when Tuning.Debug is on.
func (o *Options) debugLog() func(format string, args ...any) {
	if o.Tuning.Debug {
		return o.DebugLog
	}
	return nil
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
	// ("gzip" or "raw"), parts sent twice not counted (ResentBytes); UploadSessions the ssh
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

// Result is the outcome of a copy, as printed by --json.
type Result struct {
	Direction     string             `json:"direction"` // push or pull
	Host          string             `json:"host"`
	Files         []fcopy.FileResult `json:"files"`
	Dirs          int                `json:"dirs,omitempty"`       // directories created or kept
	Symlinks      int                `json:"symlinks,omitempty"`   // symbolic links made, as links
	HardLinks     int                `json:"hard_links,omitempty"` // hard links made (-H)
	Skipped       *fcopy.Skipped     `json:"skipped,omitempty"`    // what the sending side left out (devices, sockets, FIFOs; loops with -L)
	Compare       string             `json:"compare"`              // what counted as already there: size-mtime, checksum or none (--ignore-times)
	SkippedFiles  int                `json:"skipped_files"`        // regular files not sent: the receiver had them (on a push, the remote's word)
	SkippedBytes  int64              `json:"skipped_bytes"`        // their bytes
	ResumedFiles  int                `json:"resumed_files"`        // files resumed from an interrupted copy's partial file
	ResumedBytes  int64              `json:"resumed_bytes"`        // the bytes of theirs kept, not sent (each block checked against the source's digest)
	Bytes         int64              `json:"bytes"`                // bytes of the files sent (skipped ones not counted)
	Seconds       float64            `json:"seconds"`              // whole command: start to verified files
	DataSeconds   float64            `json:"data_seconds"`         // first data datagram to verified end
	GoodputBps    float64            `json:"goodput_bps"`          // file bits / data seconds
	DatagramsSent uint64             `json:"datagrams_sent"`
	DatagramsRecv uint64             `json:"datagrams_received"`
	Retransmitted uint64             `json:"retransmitted"` // datagrams sent because of a loss (data again or repair parity)
	Lost          uint64             `json:"lost,omitempty"`
	LostByTime    uint64             `json:"lost_by_time,omitempty"` // of which by the time threshold (the rest: three or more later datagrams acknowledged)
	WireBytes     uint64             `json:"wire_bytes,omitempty"`
	WireRatio     float64            `json:"wire_ratio,omitempty"` // wire_bytes / bytes
	FEC           string             `json:"fec"`                  // the mode: off, auto or K+M
	ParitySent    uint64             `json:"parity_sent"`          // parity datagrams, proactive and repair
	RepairParity  uint64             `json:"repair_parity"`        // parity sent as repairs (in retransmitted too)
	FECGroups     uint64             `json:"fec_groups"`           // FEC groups sent (auto: one per block)
	RepairGroups  uint64             `json:"repair_groups"`        // FEC groups that needed a repair round trip
	FECRebuilt    uint64             `json:"fec_rebuilt"`          // groups rebuilt at the receiver without a round trip
	FECRepaired   uint64             `json:"fec_repaired"`         // groups rebuilt with repair parity
	FECChunks     uint64             `json:"fec_chunks"`           // chunks rebuilt at the receiver
	TailSeconds   float64            `json:"tail_seconds"`         // last new data datagram to the verified end
	ControlCopied uint64             `json:"control_copied"`       // (push) the receiver's control messages taken from their copies on the lanes, which came before ssh brought them
	AuthFailures  uint64             `json:"auth_failures"`        // datagrams that failed authentication, at both ends
	Drops         Drops              `json:"drops"`                // datagrams this end refused, by reason
	PeerDrops     *Drops             `json:"peer_drops"`           // the same at the remote end (as it reported them)
	Duplicates    uint64             `json:"duplicates"`           // data datagrams the receiver already had (a loss declared too early)
	FeedbackHeld  uint64             `json:"feedback_held"`        // times the receiver held its feedback back for a stalled lane
	RxDropped     uint64             `json:"rx_dropped"`           // receive-buffer overflows at either end (SO_RXQ_OVFL: with GRO one may be a super-packet of many datagrams)
	Lanes         []LaneReport       `json:"lanes"`                // this end's lanes
	PeerLanes     []LaneReport       `json:"peer_lanes"`           // the remote end's lanes (empty if it did not report them)
	RTTms         float64            `json:"rtt_ms"`
	RateBps       float64            `json:"rate_bps"`
	CC            *RateStats         `json:"cc,omitempty"`
	ProbeBps      float64            `json:"probe_bps,omitempty"` // packet-train estimate of the path capacity
	StartBps      float64            `json:"start_bps,omitempty"` // the rate data started at before the handshake: what the last push on this path sustained (push, pathmem.go)
	MaxRSS        int64              `json:"max_rss_bytes"`       // this process's peak resident memory
	PeerMaxRSS    int64              `json:"peer_max_rss_bytes"`  // the remote peer's, as it reported it
	CPUSeconds    float64            `json:"cpu_seconds"`         // this process's user and system CPU time
	PeerCPU       float64            `json:"peer_cpu_seconds"`    // the remote peer's, as it reported it
	PeerUploaded  bool               `json:"peer_uploaded"`
	PeerPath      string             `json:"peer_path"`
	BootSeconds   float64            `json:"bootstrap_seconds"`                // starting the peer: the ssh session to its start, the install included when peer_uploaded
	BootBytes     int64              `json:"bootstrap_bytes"`                  // bytes of peer sent to install it (0: none)
	BootFormat    string             `json:"bootstrap_format,omitempty"`       // how they travelled: gzip or raw
	BootSessions  int                `json:"bootstrap_sessions,omitempty"`     // ssh sessions the upload used (more than 1 where the first was slow)
	BootResent    int64              `json:"bootstrap_resent_bytes,omitempty"` // bytes of peer sent twice (a slow session's range sent again)
	BLAKE3        string             `json:"blake3,omitempty"`                 // the digest when one file was copied
	Sink          bool               `json:"sink,omitempty"`
	Limiter       *Limiter           `json:"limiter,omitempty"` // what held the rate where it was
	Local, Remote map[string]any     `json:"-"`
	started       time.Time
}

// window is the receive window in blocks: --window's, or the one a path of round trip rtt needs
// at the rate ceiling (tuning.WindowBlocks; an unknown rtt is taken as 300 ms), within agreed
// (the one the hello already offered) — the memory it allows both ends.
func (o *Options) window(rtt time.Duration, agreed int) int {
	if o.Window != 0 {
		return o.Window
	}
	return min(tuning.WindowBlocks(o.Rate, rtt), agreed)
}

// compareName is how Result names o.Compare.
func (o *Options) compareName() string {
	if o.Compare == fcopy.QuickCheck {
		return "size-mtime"
	}
	return o.Compare.String()
}

// haveWithin bounds the wait for the receiver's report of what it has, of files of bytes bytes:
// with --checksum it hashes them first (allowed 20 MB/s, as the bench's hashing is).
func haveWithin(c fcopy.Compare, bytes int64) time.Duration {
	if c == fcopy.Checksum {
		return 2*PeerIdle + time.Duration(bytes/20e6)*time.Second
	}
	return 2 * PeerIdle
}

// takeHave applies the receiver's report of the files it already has to plan, checked: only
// what was asked (nothing with --ignore-times or --sink), regular files of the list, each once.
func takeHave(plan *fcopy.Plan, c fcopy.Compare, sink bool, have []int) error {
	if len(have) > 0 && (c == fcopy.IgnoreTimes || sink) {
		return fmt.Errorf("%w: the receiver reported %d file(s) already there, though nothing was to be skipped", ErrProtocol, len(have))
	}
	if err := plan.Skip(have); err != nil {
		return fmt.Errorf("%w: the receiver's report of the files it has: %v", ErrProtocol, err)
	}
	return nil
}

func (o *Options) collect() fcopy.CollectOptions {
	return fcopy.CollectOptions{Recursive: o.Recursive, Follow: o.Follow, HardLinks: o.HardLinks}
}

// skipped records and reports (Warn) what the sending side left out.
func (o *Options) skipped(res *Result, s fcopy.Skipped) {
	if s == (fcopy.Skipped{}) {
		return
	}
	res.Skipped = &s
	if o.LeftOut != nil {
		o.LeftOut(s)
	}
	if o.Warn != nil {
		o.Warn(s.Warning())
	}
}

// tellSkipped tells Skip of the plan's files the receiver has.
func (o *Options) tellSkipped(plan *fcopy.Plan) {
	if o.Skip == nil {
		return
	}
	for i, f := range plan.Files {
		if f.Regular() && plan.Skipped(i) {
			o.Skip(f.Name, f.Size)
		}
	}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
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
	// jumbo says it proposes jumbo chunks.
	handshake func(context.Context) (time.Duration, error)
	addr      netip.Addr
	jumbo     bool
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
	c.jumbo = o.Tuning.Jumbo(addr, o.FEC)
	if c.jumbo {
		path.ProposeJumbo()
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
		rtt, err := path.Handshake(ctx, dst, session.HandshakeTimeout, probe)
		if err == nil {
			o.logf("UDP lanes open to %s ports %v, rtt %s", addr, ready.Ports, rtt.Round(100*time.Microsecond))
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

// prepareSender makes the memory of a sender of window blocks in the background, while the
// handshake's round trip passes; the function returned waits for it. The window is a guess made
// before the round trip is measured (half of ssh's start, which took at least two round trips):
// too large, the sender takes part of it; too small, it makes its own
// (session.SenderConfig.Memory).
func prepareSender(window int) func() *session.SenderMemory {
	c := make(chan *session.SenderMemory, 1)
	go func() { c <- session.NewSenderMemory(window, wire.ChunkSize) }()
	return func() *session.SenderMemory { return <-c }
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

// Push copies local sources to host:dst.
func Push(ctx context.Context, o Options, srcs []string, host, dst string) (*Result, error) {
	res := &Result{Direction: "push", Host: host, RateBps: o.Rate, Sink: o.Sink, FEC: o.FEC.String(), Compare: o.compareName(), started: time.Now()}
	sources, err := fcopy.Collect(srcs, o.collect())
	if err != nil {
		return nil, err
	}
	o.skipped(res, sources.Skipped)
	if o.Compare == fcopy.Checksum && !o.Sink {
		o.logf("hashing %d file(s) for --checksum", len(sources.Files))
		if err := sources.AddSums(); err != nil {
			return nil, err
		}
	}
	plan, err := fcopy.NewPlan(sources.Files)
	if err != nil {
		return nil, err
	}
	window := o.window(0, 1<<30)
	// The file list travels with the hello, so the remote checks its destination while ssh is
	// still starting, and answers with its UDP ports in the same message.
	c, ready, err := start(ctx, &o, host, Msg{Role: RoleRecv, Dest: dst, Files: sources.Files, Compare: o.Compare.String(), NoResume: o.NoResume,
		Window: window, AutoWindow: o.Window == 0, Preserve: o.Preserve, Sink: o.Sink, Rate: o.Rate, MinRate: o.MinRate, Policy: o.Policy.String()}, res)
	if err != nil {
		return nil, err
	}
	defer func() { c.close(closeGrace) }()
	ctx = c.ctx
	c.copy = true
	// The lanes and the handshake are prepared first; a path remembered from an earlier push
	// (pathmem.go) then takes data before the handshake has answered, the handshake beside it.
	if err := c.openPath(ctx, &o, host, ready, c.crypto, true, true); err != nil {
		c.ctl.SendError(err)
		return nil, err
	}
	key := ""
	if o.PathMemory != "" {
		key = pathKey(host, c.addr)
	}
	rec, resume := recallPath(o.PathMemory, key, time.Now(), c.info.Took)
	resume = resume && !c.jumbo // the handshake settles jumbo chunks
	rttGuess := c.info.Took / 2
	if resume {
		rttGuess = rec.rtt()
	}
	mem := prepareSender(o.window(rttGuess, window))
	var hs *besideHandshake
	if resume {
		hs = c.handshakeBeside(ctx, &o, host, rec, key)
		defer hs.stop()
	} else {
		rtt, err := c.handshake(ctx)
		if err != nil {
			c.ctl.SendError(err)
			return nil, err
		}
		c.rtt = rtt
	}
	// The receiver says which files it already has (sent as soon as it has looked, so it is here
	// by now or soon); they leave the plan. Its word is taken only for files of this list.
	have, err := c.ctl.Expect(ctx, KindHave, haveWithin(o.Compare, plan.TotalBytes()))
	if err == nil {
		err = takeHave(plan, o.Compare, o.Sink, have.Have)
	}
	if err == nil && o.Sink && len(have.Resume) > 0 {
		err = fmt.Errorf("%w: the receiver offered to resume files, though it writes nothing (--sink)", ErrProtocol)
	}
	if err == nil {
		// Files an interrupted copy left at the remote: their blocks are checked against the
		// source now, and only those that match are not sent.
		err = resumeSend(ctx, c.ctl, plan, sources.Open(), have.Resume, o.NoResume)
	}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			c.ctl.SendError(err)
		}
		return nil, err
	}
	window = o.window(c.rtt, window) // now that the round trip is known
	if n, b := plan.ResumedFiles(); len(have.Resume) > 0 {
		o.logf("resuming %d of %d file(s) offered: %d bytes kept at the remote, checked against the source", n, len(have.Resume), b)
	}
	o.tellSkipped(plan)
	n, b := plan.SkippedFiles()
	o.logf("sending %d entries, %d bytes, window %d blocks; the remote has %d file(s), %d bytes, already", len(sources.Files), plan.TotalBytes(), window, n, b)
	cfg := session.SenderConfig{Rate: o.Rate, MinRate: o.MinRate, Policy: o.Policy, Window: window, InitialRTT: c.rtt, FEC: o.FEC, Memory: mem()}
	if hs != nil {
		cfg.ResumeBps = hs.rate
		res.StartBps = hs.rate
	}
	side, err := runSend(ctx, c.ctl, c.path, o.Tuning, plan, sources.Open(), cfg, o.Window == 0, o.Progress, o.File)
	if hs != nil {
		// The handshake's own error (no UDP gets through) says more than the session's end.
		if rtt, herr := hs.wait(); herr != nil && err != nil {
			err = herr
		} else if herr == nil && rtt > 0 {
			c.rtt = rtt
		}
	}
	if err != nil {
		return nil, err
	}
	o.logf("receiver confirmed every file")
	res.fill(side, c, plan)
	res.Retransmitted, res.Lost, res.WireBytes = side.sender.Retransmitted, side.sender.Lost, side.sender.WireBytes
	res.LostByTime = side.sender.LostByTime
	res.CC = rateStats(side.sender)
	res.ProbeBps = side.sender.ProbeBps
	res.ParitySent, res.RepairParity, res.RepairGroups = side.sender.Parity, side.sender.RepairParity, side.sender.RepairGroups
	res.FECGroups = side.sender.Groups
	res.TailSeconds = side.tailSeconds()
	res.ControlCopied = c.ctl.Copied.Load()
	if ps := side.peerStats; ps != nil {
		res.FECRebuilt, res.FECRepaired, res.FECChunks = ps.FECRebuilt, ps.FECRepaired, ps.FECChunks
		res.Duplicates, res.FeedbackHeld = ps.Duplicates, ps.Held
		res.setPeerLanes(ps.Lanes)
	}
	res.setWireRatio()
	peerCores := 0
	if ps := side.peerStats; ps != nil {
		peerCores = ps.Cores
	}
	res.setLimiter(true, side.sender.WindowFull.Seconds(), side.sender.SourceWait.Seconds(), peerCores)
	if hs != nil && side.sender.ProbeBps > 0 && side.sender.ProbeBps < hs.rate/2 {
		forgetPath(o.PathMemory, key) // the packet train read under half the remembered rate
	}
	if side.sender.CC.MinRTT > 0 && res.DataSeconds >= pathMemoryData.Seconds() && res.WireBytes > 0 {
		if err := rememberPath(o.PathMemory, key, pathRecord{At: time.Now().Unix(),
			RateBps: float64(res.WireBytes) * 8 / res.DataSeconds, MinRTTus: side.sender.CC.MinRTT.Microseconds()}); err != nil {
			o.logf("cannot keep this path's rate for the next copy: %v", err)
		}
	}
	return res, nil
}

// Pull copies host:srcs to the local dst.
func Pull(ctx context.Context, o Options, host string, srcs []string, dst string) (*Result, error) {
	res := &Result{Direction: "pull", Host: host, RateBps: o.Rate, Sink: o.Sink, FEC: o.FEC.String(), Compare: o.compareName(), started: time.Now()}
	window := o.window(0, 1<<30)
	c, ready, err := start(ctx, &o, host, Msg{Role: RoleSend, Paths: srcs, Window: window, Compare: o.Compare.String(), NoResume: o.NoResume,
		Recursive: o.Recursive, Follow: o.Follow, HardLinks: o.HardLinks, Rate: o.Rate, MinRate: o.MinRate, Policy: o.Policy.String(), FEC: o.FEC.String()}, res)
	if err != nil {
		return nil, err
	}
	ctx = c.ctx
	// The UDP handshake runs while the file list is on its way.
	hsCtx, hsCancel := context.WithCancel(ctx)
	hs := make(chan error, 1)
	c.copy = true
	go func() { hs <- c.openPath(hsCtx, &o, host, ready, c.crypto, false, false) }()
	defer func() {
		hsCancel()
		<-hs // c.path is set by then, so close sees it
		c.close(closeGrace)
	}()
	files, err := c.ctl.Expect(ctx, KindFiles, 0)
	if err != nil {
		return nil, err
	}
	// The list follows in chunks, each checked as it arrives.
	if files.Files, err = recvList(ctx, c.ctl, files.Entries); err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			c.ctl.SendError(err)
		}
		return nil, err
	}
	// The remote chooses the names of what this end writes: take only what was asked for.
	plan, err := fcopy.NewPlan(files.Files)
	var fresh []string // top-level names only the remote chose
	if err == nil {
		fresh, err = fcopy.MatchRequest(srcs, o.collect(), files.Files)
	}
	if err == nil && files.Skipped != nil {
		err = files.Skipped.Check()
	}
	if err != nil {
		err = fmt.Errorf("refusing the remote's file list: %w", err)
		c.ctl.Send(Msg{T: KindError, Err: err.Error(), Code: CodeProtocol})
		return nil, err
	}
	if files.Skipped != nil {
		o.skipped(res, *files.Skipped)
	}
	// This end is the receiver: it decides what it already has, and what it can resume.
	var target *fcopy.Target
	var have []int
	var parts *fcopy.Partials
	if !o.Sink {
		if target, have, err = fcopy.ResolveTargetHave(dst, files.Files, o.Compare); err == nil {
			err = target.Fresh(fresh)
		}
		if err != nil {
			what := "the client cannot write its destination"
			if errors.Is(err, fcopy.ErrName) {
				what, err = "refusing the remote's file list", fmt.Errorf("refusing the remote's file list: %w", err)
			}
			c.ctl.Send(Msg{T: KindError, Err: what, Code: CodeOf(err)})
			return nil, err
		}
		if err := plan.Skip(have); err != nil {
			return nil, err
		}
		parts = target.FindPartials(files.Files, have, o.NoResume)
		defer parts.Close(target)
		if len(parts.Offers()) > 0 {
			parts.Hash(plan) // while the offer travels
		}
		o.tellSkipped(plan)
		n, b := plan.SkippedFiles()
		o.logf("%d file(s), %d bytes, already here; receiving %d bytes", n, b, plan.TotalBytes())
	}
	// The window is sized once the handshake has measured the round trip: the accept reaches
	// the server about when the client's address is proven there (session/hello.go), so waiting
	// for it costs no time.
	if err := <-hs; err != nil {
		hs <- err // for the deferred wait
		c.ctl.SendError(err)
		return nil, err
	}
	hs <- nil
	window = o.window(c.rtt, window)
	if err := c.ctl.Send(Msg{T: KindAccept, Window: window, AutoWindow: o.Window == 0, Have: have, Resume: parts.Offers()}); err != nil {
		return nil, err
	}
	if err := resumeRecv(ctx, c.ctl, plan, parts); err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			c.ctl.SendError(err)
		}
		return nil, err
	}
	if n, b := plan.ResumedFiles(); len(parts.Offers()) > 0 {
		o.logf("resuming %d of %d file(s) found: %d bytes kept, checked against the remote's digests", n, len(parts.Offers()), b)
	}
	prog := o.Progress
	if prog != nil {
		// This end receives: the round trip it knows is the handshake's (the rate controller's
		// view is the sender's).
		prog = func(p Progress) {
			if p.SRTT == 0 {
				p.SRTT = c.rtt
			}
			o.Progress(p)
		}
	}
	side, err := runRecv(ctx, c.ctl, c.path, o.Tuning, plan, target, o.Tuning.Writer(fcopy.WriterOptions{Sink: o.Sink, Preserve: o.Preserve,
		Records: !o.NoResume, Resume: parts, Done: o.File, CheckpointEvery: o.CheckpointEvery}), window, o.Window == 0, true, prog)
	if err != nil {
		return nil, err
	}
	res.fill(side, c, plan)
	if ps := side.peerStats; ps != nil {
		res.Retransmitted, res.Lost, res.WireBytes, res.CC = ps.Retransmitted, ps.Lost, ps.WireBytes, ps.CC
		res.LostByTime = ps.LostByTime
		if res.CC != nil {
			res.CC.Verdicts = checkVerdicts(res.CC.Verdicts)
		}
		if res.CC != nil && res.CC.SRTTms > 0 {
			res.RTTms = res.CC.SRTTms
		}
		res.ParitySent, res.RepairParity, res.RepairGroups, res.TailSeconds = ps.Parity, ps.RepairParity, ps.RepairGroups, ps.TailSeconds
		res.FECGroups = ps.Groups
		res.ProbeBps = ps.ProbeBps
		res.setPeerLanes(ps.Lanes)
	}
	res.FECRebuilt, res.FECRepaired, res.FECChunks = side.receiver.FECRebuilt, side.receiver.FECRepaired, side.receiver.FECChunks
	res.Duplicates, res.FeedbackHeld = side.receiver.Duplicates, side.receiver.Held
	res.setWireRatio()
	if ps := side.peerStats; ps != nil {
		res.setLimiter(false, ps.WindowSeconds, ps.SourceSeconds, ps.Cores)
	}
	return res, nil
}

func (r *Result) setPeerLanes(ls []LaneReport) {
	if len(ls) > session.Lanes { // the peer's word: at most its four lanes
		ls = ls[:session.Lanes]
	}
	r.PeerLanes = ls
	for _, l := range ls {
		r.RxDropped += l.RxDropped
	}
}

func (r *Result) setWireRatio() {
	if r.Bytes > 0 {
		r.WireRatio = float64(r.WireBytes) / float64(r.Bytes)
	}
}

func (r *Result) fill(side *sideResult, c *conn, plan *fcopy.Plan) {
	r.Files = side.results
	for _, f := range plan.Files {
		switch {
		case f.Dir:
			r.Dirs++
		case f.Link != "":
			r.Symlinks++
		case f.Hard != "":
			r.HardLinks++
		}
	}
	r.Bytes = plan.TotalBytes()
	r.SkippedFiles, r.SkippedBytes = plan.SkippedFiles()
	r.ResumedFiles, r.ResumedBytes = plan.ResumedFiles()
	r.Seconds = time.Since(r.started).Seconds()
	r.DataSeconds = side.end.Sub(side.start).Seconds()
	if r.DataSeconds > 0 {
		r.GoodputBps = float64(r.Bytes) * 8 / r.DataSeconds
	}
	r.Lanes = laneReports(c.path)
	for _, l := range r.Lanes {
		r.DatagramsSent += l.Sent
		r.DatagramsRecv += l.Received
		r.RxDropped += l.RxDropped
	}
	invalid := side.sender.BadFeedback + side.receiver.Invalid // one of them is zero: this end's role
	r.Drops = pathDrops(c.path, invalid)
	r.AuthFailures = r.Drops.AuthFailures
	r.MaxRSS, r.CPUSeconds = maxRSS(), cpuSeconds()
	if ps := side.peerStats; ps != nil {
		r.PeerMaxRSS, r.PeerCPU = ps.MaxRSS, ps.CPUSeconds
		r.PeerDrops = ps.Drops
		r.AuthFailures += ps.AuthFailures
	}
	r.RTTms = float64(c.rtt) / 1e6
	if side.sender.SRTT > 0 {
		r.RTTms = float64(side.sender.SRTT) / 1e6
	}
	if len(r.Files) == 1 {
		r.BLAKE3 = r.Files[0].Sum
	}
}

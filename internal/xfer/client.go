package xfer

// The client's settings for a copy (Options), and the checks of the receiver's report of what it
// has that a push and a pull both make.

import (
	"fmt"
	"time"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
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
	// Filter leaves out what its rules exclude (--exclude, --include; nil: nothing), applied by
	// the sending side: this end's Collect on a push, the remote's on a pull.
	Filter *fcopy.Filter
	// FilesFrom (--files-from, not nil) lists the paths to send, relative to the one source
	// directory; they land below the destination directory under these names.
	FilesFrom []string
	// Delete (--delete, with Recursive): once every file is placed and verified, the receiver
	// removes what the destination's directories of the list hold and the list does not, except
	// what Filter excludes (fcopy.Target.Delete): the remote on a push, this end on a pull.
	Delete bool
	// Deleted, when set, is told of each entry a pull's --delete removes here (with DryRun, of
	// each entry a push or a pull would remove).
	Deleted func(fcopy.Deletion)
	// DryRun (--dry-run): the copy connects and learns what the destination has, reports what it
	// would send (WouldSend) and delete (Deleted), and sends and deletes nothing.
	DryRun bool
	// WouldSend, when set, is told of each regular file a DryRun copy would send.
	WouldSend func(name string, size int64)
	Preserve  bool
	Sink      bool // the receiving side verifies but does not write
	// Ports is the range the remote peer binds its four UDP lanes in (--port LO-HI; zero: any),
	// and its TCP listener for the streams where UDP is blocked.
	Ports session.PortRange
	// UDPOnly (--udp-only): a UDP handshake that gets no answer fails the copy (exit 6) instead
	// of carrying the lanes over TCP streams (streams.go).
	UDPOnly bool
	// MTU (--mtu) is the path MTU the user says the path carries, in bytes (0: not said). From
	// session.JumboMTU on, the client proposes large datagrams (wire.JumboChunkSize chunks), which the session uses only where every lane proves them each way in its handshake
	// (docs/PROTOCOL.md, "Hello"); otherwise standard chunks, as without it.
	MTU int
	// Compare is what makes a destination file count as already there, and not sent: the same
	// size and mtime (zero value), BLAKE3 (--checksum), nothing (--ignore-times).
	Compare fcopy.Compare
	// NoResume (--no-resume): no partial file of an interrupted copy is resumed (those of this
	// copy's files are removed), and this copy leaves none for a resume if it is interrupted.
	NoResume bool
	// WholeFile (--whole-file): a changed file is sent whole, not compared block by block with
	// what the destination has.
	WholeFile bool
	// Log prints each step of the copy (-v; nil: none): a line per call, without its newline.
	Log func(format string, args ...any)
	// Tuning is the environment's switches, read once by cmd/farwing (tuning.FromEnv).
	Tuning tuning.Settings
	// PathMemory is the directory where a push keeps each path's sustained rate and round trip,
	// and from which the next push on it starts its data before the UDP handshake answers; and
	// where any copy keeps that a path gave no UDP, so that the next waits less for it
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

// debugLog is the debug logger the engines get: DebugLog when Tuning.Debug is on.
func (o *Options) debugLog() func(format string, args ...any) {
	if o.Tuning.Debug {
		return o.DebugLog
	}
	return nil
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
	return fcopy.CollectOptions{Recursive: o.Recursive, Follow: o.Follow, HardLinks: o.HardLinks, Filter: o.Filter, FilesFrom: o.FilesFrom}
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

// logDelta logs what the comparison of changed files kept.
func (o *Options) logDelta(plan *fcopy.Plan) {
	if d := plan.DeltaStats(); d.Files > 0 {
		o.logf("compared %d changed file(s) block by block: %d block(s), %d bytes, kept at the receiver; %d block(s) to send",
			d.Files, d.KeptBlocks, d.KeptBytes, d.SentBlocks)
	}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// deleter is a pull's --delete for runRecv (nil without it).
func (o *Options) deleter(target *fcopy.Target, files []fcopy.File) func() (int, error) {
	return deleter(o.Delete && !o.Sink, target, files, o.Filter, o.Deleted)
}

// deleter is --delete for runRecv where on is set: what target's directories of files hold and
// files do not is removed, except what filter excludes (nil where on is not set).
func deleter(on bool, target *fcopy.Target, files []fcopy.File, filter *fcopy.Filter, done func(fcopy.Deletion)) func() (int, error) {
	if !on {
		return nil
	}
	return func() (int, error) { return target.Delete(files, filter, false, done) }
}

// CheckFlags refuses --delete where it would not be rsync's: without -r, with --files-from
// (whose directories above the listed paths are not the source's whole directories), or with
// --sink; on a pull of the remote paths pulled, with a pattern, which would let the remote choose
// which of the destination's directories it mirrors (and so empties); and --dry-run with --sink.
func (o *Options) CheckFlags(pulled []string) error {
	for _, p := range pulled {
		if o.Delete && fcopy.IsPattern(p) {
			return fmt.Errorf("--delete cannot take a pattern (%s): the remote would choose which directories of the destination to mirror; name them", escape.Text(p))
		}
	}
	switch {
	case o.DryRun && o.Sink:
		return fmt.Errorf("--dry-run and --sink cannot be given together")
	case !o.Delete:
	case !o.Recursive:
		return fmt.Errorf("--delete needs -r: it deletes what the copy's directories hold and the source does not")
	case o.FilesFrom != nil:
		return fmt.Errorf("--delete and --files-from cannot be given together")
	case o.Sink:
		return fmt.Errorf("--delete and --sink cannot be given together: --sink writes nothing")
	}
	return nil
}

// dryRun fills res with what a --dry-run copy of files would send: the regular files plan does
// not skip (the destination lacks them), each told to WouldSend.
func (o *Options) dryRun(res *Result, files []fcopy.File, plan *fcopy.Plan) {
	res.DryRun = true
	for i, f := range files {
		if f.Regular() && f.Hard == "" && !plan.Skipped(i) {
			res.WouldSendFiles++
			res.WouldSendBytes += f.Size
			if o.WouldSend != nil {
				o.WouldSend(f.Name, f.Size)
			}
		}
	}
}

package xfer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/farwing/farwing/bootstrap"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/session"
)

// Exit codes, documented in README and `farwing help`.
const (
	ExitOK          = 0
	ExitFail        = 1 // anything not listed below
	ExitUsage       = 2 // bad command line
	ExitSource      = 3 // a source is missing, unreadable or a directory without -r
	ExitDest        = 4 // the destination cannot be written
	ExitSSH         = 5 // ssh/scp failed: unknown host, refused, authentication
	ExitUDP         = 6 // no UDP path, or the path died mid-transfer
	ExitVerify      = 7 // a block or file failed verification
	ExitPlatform    = 8 // the remote OS/architecture cannot run this build
	ExitInterrupted = 130
)

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	var re *RemoteError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &re) && re.Code != 0:
		return re.Code
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, fcopy.ErrSource):
		return ExitSource
	case errors.Is(err, fcopy.ErrDest):
		return ExitDest
	case errors.Is(err, fcopy.ErrVerify):
		return ExitVerify
	case errors.Is(err, bootstrap.ErrPlatform):
		return ExitPlatform
	case errors.Is(err, bootstrap.ErrSSH), errors.Is(err, ErrPeerGone):
		return ExitSSH
	case errors.Is(err, session.ErrNoUDP), errors.Is(err, session.ErrNoFeedback), errors.Is(err, session.ErrStalled):
		return ExitUDP
	}
	return ExitFail
}

// sideResult is what one engine run measured.
type sideResult struct {
	results   []fcopy.FileResult
	sender    session.SenderStats
	receiver  session.ReceiverStats
	start     time.Time // first data datagram sent / engine start
	end       time.Time // verified end
	peerStats *PeerStats
}

// tailSeconds is the sender's time from its last new data datagram to the receiver's verdict.
func (r *sideResult) tailSeconds() float64 {
	if r.sender.LastNewDataAt.IsZero() || r.end.Before(r.sender.LastNewDataAt) {
		return 0
	}
	return r.end.Sub(r.sender.LastNewDataAt).Seconds()
}

// ProgressFunc receives a progress snapshot about twice a second, and once more (final true) at
// the end of the data phase.
type ProgressFunc func(p session.Progress, total int64, elapsed time.Duration, final bool)

func reportProgress(fn ProgressFunc, total int64, snap func() *session.Progress) (stop func()) {
	if fn == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				if p := snap(); p != nil {
					fn(*p, total, time.Since(start), true)
				}
				return
			case <-t.C:
				if p := snap(); p != nil {
					fn(*p, total, time.Since(start), false)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// loopbackWindow is the receive window on a loopback path unless --window says otherwise. The
// window is chosen before the round trip is known (300 ms assumed: 373 blocks); on loopback rate
// × RTT is a fraction of one block, and the window only has to cover the blocks being assembled
// and the receiver's writer falling behind for a moment. More costs memory the copy touches for
// the first time (a new block buffer, at either end, is zeroed and faulted in: ~1.3 ms of CPU
// per MiB on this project's VM) and cache. Interleaved loopback copies, medians of 6-8: window
// 373 9.3, 64 9.5-9.7, 48 9.7, 32 9.4-10.5, 24 10.1-10.8, 16 9.7 Gbit/s.
const loopbackWindow = 32

// receiveWindow is the window the receiver on path uses: the one agreed, or loopbackWindow on a
// loopback path when the window was not set by hand (auto).
func receiveWindow(path *session.Path, window int, auto bool) int {
	if auto && path.Loopback() {
		return min(window, loopbackWindow)
	}
	return window
}

// shareCPUs: on a loopback path both ends run on this machine, and the sender gives up half of
// its CPUs (GOMAXPROCS, unless the user set it) so that it cannot starve the receiver, whose four
// lanes drop what they cannot take in time. (The sender is then the busier end: its sends also
// run the receiving socket's side of the kernel.)
// On 2 CPUs, sender 1 and receiver 2 against 2 and 2: 10.3 against 9.4 Gbit/s median over 4
// loopback copies each, at 1.35-1.47 against 1.53-1.81 CPU s/GiB; a receiver at 1 was slower
// either way (7.4-9.1).
func shareCPUs(path *session.Path) {
	if path.Loopback() && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(runtime.NumCPU()/2, 1))
	}
}

// windowBlocks sizes the receive window: four round trips at the target rate plus slack, so that
// repairs never wait on the window, within 64 MiB … 1 GiB of memory per side.
func windowBlocks(rate float64, rtt time.Duration) int {
	if rtt <= 0 {
		rtt = 300 * time.Millisecond
	}
	if rate <= 0 {
		rate = 2.5e9 // no ceiling: size for a fast path; memory is taken only as data is in flight
	}
	w := int(4*rate/8*rtt.Seconds()/fcopy.BlockSize) + 16
	return min(max(w, 64), 1024)
}

// runSend reads the plan's files and sends them, then waits for the receiver's verdict. On a
// loopback path it applies the loopback rules first (shareCPUs, session.FECFor).
func runSend(ctx context.Context, ctl *Control, path *session.Path, plan *fcopy.Plan, open fcopy.Opener,
	cfg session.SenderConfig, autoWindow bool, prog ProgressFunc) (*sideResult, error) {
	// The receiver applies the same rule to the same path: the sender must not start beyond the
	// window the receiver has memory for (its feedback only tells it a few milliseconds in).
	cfg.Window = receiveWindow(path, cfg.Window, autoWindow)
	shareCPUs(path)
	cfg.FEC = session.FECFor(path, cfg.FEC)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := &sideResult{start: time.Now()}

	pool := fcopy.NewPool(cfg.Window + 4)
	blocks := make(chan *fcopy.Block, 4)
	readErr := make(chan error, 1)
	go func() {
		err := fcopy.Read(ctx, plan, open, pool, blocks, func(i int, sum [32]byte) {
			ctl.Send(Msg{T: "digest", File: i, Sum: hex.EncodeToString(sum[:])})
		})
		close(blocks)
		if err != nil {
			cancel(err)
		}
		readErr <- err
	}()
	s := session.NewSender(path, plan, pool, cfg)
	done := make(chan Msg, 1)
	go func() {
		m, err := ctl.Recv()
		if err == nil && m.T != "done" {
			err = fmt.Errorf("control channel: got %q, expected \"done\"", m.T)
		}
		if err != nil {
			cancel(err)
			return
		}
		done <- m
		s.PeerDone()
	}()

	stop := reportProgress(prog, plan.TotalBytes(), s.Progress)
	err := s.Run(ctx, blocks)
	stop()
	res.sender = s.Stats()
	if err == nil {
		select {
		case m := <-done:
			res.results, res.peerStats = m.Results, m.Stats
		case <-ctx.Done():
			err = context.Cause(ctx)
		case <-time.After(2 * time.Minute):
			err = errors.New("the receiver did not confirm the transfer within 2 minutes")
		}
	} else if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		err = c
	}
	if err == nil {
		select {
		case err = <-readErr:
		default:
		}
	}
	res.end = time.Now()
	if !res.sender.FirstDataAt.IsZero() {
		res.start = res.sender.FirstDataAt
	}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) && !errors.Is(err, ErrPeerGone) {
			ctl.Send(Msg{T: "error", Err: err.Error(), Code: ExitCode(err)})
		}
		return res, err
	}
	st := PeerStats{Datagrams: res.sender.Datagrams, Retransmitted: res.sender.Retransmitted, Lost: res.sender.Lost, LostByTime: res.sender.LostByTime,
		WireBytes: res.sender.WireBytes, AuthFailures: path.AuthFailures.Load(), Seconds: res.end.Sub(res.start).Seconds(),
		CC: rateStats(res.sender), Parity: res.sender.Parity, RepairParity: res.sender.RepairParity,
		Groups: res.sender.Groups, RepairGroups: res.sender.RepairGroups, TailSeconds: res.tailSeconds(),
		ProbeBps: res.sender.ProbeBps, Lanes: laneReports(path)}
	ctl.Send(Msg{T: "bye", Stats: &st})
	return res, nil
}

func rateStats(s session.SenderStats) *RateStats {
	c := s.CC
	return &RateStats{RateBps: c.PacingRate, BtlBwBps: c.BtlBw, SRTTms: float64(c.SRTT) / 1e6, MinRTTms: float64(c.MinRTT) / 1e6,
		RandomLoss: c.RandomLoss, LossBase: c.LossBase, CongestionEvents: c.CongestionEvents, SharedEvents: c.SharedEvents, SpuriousLosses: c.SpuriousLosses, Mode: c.Mode.String()}
}

// runRecv receives the plan's files into target (nil in sink mode) and reports the verdict. window
// is the agreed receive window in blocks; autoWindow says it was not set with --window, and then
// a loopback path uses loopbackWindow (receiveWindow).
func runRecv(ctx context.Context, ctl *Control, path *session.Path, plan *fcopy.Plan, target *fcopy.Target,
	o fcopy.WriterOptions, window int, autoWindow, waitBye bool, prog ProgressFunc) (*sideResult, error) {
	window = receiveWindow(path, window, autoWindow)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := &sideResult{start: time.Now()}
	dg := newDigests()
	bye := make(chan Msg, 1)
	go func() {
		for {
			m, err := ctl.Recv()
			if err != nil {
				dg.fail(err)
				cancel(err)
				return
			}
			switch m.T {
			case "digest":
				var sum [32]byte
				if b, err := hex.DecodeString(m.Sum); err == nil && len(b) == 32 && m.File >= 0 && m.File < len(plan.Files) {
					copy(sum[:], b)
					dg.put(m.File, sum)
				}
			case "bye":
				bye <- m
				return
			}
		}
	}()
	go func() { <-ctx.Done(); dg.fail(context.Cause(ctx)) }()
	o.Digest = func(ctx context.Context, i int) ([32]byte, error) { return dg.wait(i) }
	w := fcopy.NewWriter(plan, target, o)
	r := session.NewReceiver(path, plan, w, window)
	stop := reportProgress(prog, plan.TotalBytes(), r.Progress)
	err := r.Run(ctx)
	stop()
	res.receiver = r.Stats()
	res.results = w.Results()
	res.end = time.Now()
	if err != nil {
		w.Abort()
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
		var re *RemoteError
		if !errors.As(err, &re) && !errors.Is(err, ErrPeerGone) {
			ctl.Send(Msg{T: "error", Err: err.Error(), Code: ExitCode(err)})
		}
		return res, err
	}
	st := PeerStats{Datagrams: res.receiver.Datagrams, AuthFailures: path.AuthFailures.Load(), Seconds: res.end.Sub(res.start).Seconds(),
		FECRebuilt: res.receiver.FECRebuilt, FECRepaired: res.receiver.FECRepaired, FECChunks: res.receiver.FECChunks,
		Duplicates: res.receiver.Duplicates, Held: res.receiver.Held, Lanes: laneReports(path)}
	if err := ctl.Send(Msg{T: "done", Results: res.results, Stats: &st}); err != nil {
		return res, err
	}
	if waitBye {
		select {
		case m := <-bye:
			res.peerStats = m.Stats
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
	}
	return res, nil
}

// laneReports reads path's lane counters.
func laneReports(path *session.Path) []LaneReport {
	var r []LaneReport
	late := path.Late()
	for i, ls := range path.LaneStats() {
		r = append(r, LaneReport{Sent: ls.SentDatagrams, Received: ls.RecvDatagrams, RxDropped: ls.RxDropped, Late: late[i]})
	}
	return r
}

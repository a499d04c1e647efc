package xfer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
)

// PeerIdle is how long either end of a transfer goes on without hearing from the other (no
// authenticated datagram while data is due, no control message where one is due) before it gives
// up and removes its partial files. The sender pings a receiver it has nothing to send to once a
// second (session.PingEvery), so only a peer that is gone, or a path that has been dead for that
// long, is silent this long. 20 s rides out a route change or a roaming laptop and a receiver's
// stalled disk, and ends well inside the 30 s after which a vanished client must leave nothing
// behind; sshd's TCP keepalive would take about two hours.
const PeerIdle = 20 * time.Second

// sideResult is what one engine run measured.
type sideResult struct {
	results   []fcopy.FileResult
	sender    session.SenderStats
	receiver  session.ReceiverStats
	start     time.Time // first data datagram sent / engine start
	end       time.Time // verified end
	peerStats *PeerStats
	deleted   int // the receiver: entries --delete removed
}

// tailSeconds is the sender's time from its last new data datagram to the receiver's verdict.
func (r *sideResult) tailSeconds() float64 {
	if r.sender.LastNewDataAt.IsZero() || r.end.Before(r.sender.LastNewDataAt) {
		return 0
	}
	return r.end.Sub(r.sender.LastNewDataAt).Seconds()
}

// ProgressFunc receives a progress snapshot about twice a second, and once more (Final) at the
// end of the data phase.
type ProgressFunc func(Progress)

// Progress is one progress report: the engine's snapshot, the plan's size, the time since the
// data phase started, and the file the acknowledged (or written) bytes have reached.
type Progress struct {
	session.Progress
	Total   int64
	Elapsed time.Duration
	Final   bool
	// File is the name of the file in progress, as the file list gives it (from a pull's peer:
	// escape it before printing); FileIndex counts from 0 among the Files whose data travels;
	// FileBytes of its FileSize bytes are done.
	File                string
	FileIndex           int
	Files               int
	FileBytes, FileSize int64
}

func reportProgress(fn ProgressFunc, plan *fcopy.Plan, snap func() *session.Progress) (stop func()) {
	if fn == nil {
		return func() {}
	}
	ends := fileEnds(plan)
	report := func(p *session.Progress, el time.Duration, final bool) {
		r := Progress{Progress: *p, Total: plan.TotalBytes(), Elapsed: el, Final: final, Files: len(ends)}
		if len(ends) > 0 {
			// The first file whose end lies beyond the bytes done (the last one when all are).
			i := min(sort.Search(len(ends), func(i int) bool { return ends[i].end > p.Bytes }), len(ends)-1)
			f := plan.Files[ends[i].file]
			r.File, r.FileIndex, r.FileSize = f.Name, i, f.Size
			r.FileBytes = min(max(p.Bytes-(ends[i].end-f.Size), 0), f.Size)
		}
		fn(r)
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
					report(p, time.Since(start), true)
				}
				return
			case <-t.C:
				if p := snap(); p != nil {
					report(p, time.Since(start), false)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// fileEnd is where a file with data ends in the plan's byte order.
type fileEnd struct {
	end  int64
	file int
}

// fileEnds lists the plan's files whose data travels (not the ones the receiver had), with the
// running total of bytes at each one's end (the order blocks travel in).
func fileEnds(plan *fcopy.Plan) []fileEnd {
	var ends []fileEnd
	var sum int64
	for i, f := range plan.Files {
		if n := plan.SentBytes(i); f.Regular() && n > 0 {
			sum += n
			ends = append(ends, fileEnd{sum, i})
		}
	}
	return ends
}

// runSend reads the plan's files and sends them, then waits for the receiver's verdict. It
// applies tun's rules for the path first (the loopback window, CPU sharing and FEC; the GC). file
// (nil: none) is told of each file the receiver confirms, as the confirmation comes, once this
// end has checked it (confirmations.take).
func runSend(ctx context.Context, ctl *Control, path *session.Path, tun tuning.Settings, plan *fcopy.Plan, open fcopy.Opener,
	cfg session.SenderConfig, autoWindow bool, prog ProgressFunc, file func(fcopy.FileResult)) (*sideResult, error) {
	// The receiver applies the same rule to the same path: the sender must not start beyond the
	// window the receiver has memory for (its feedback only tells it a few milliseconds in).
	cfg.Window = tuning.ReceiveWindow(path.Loopback(), cfg.Window, autoWindow)
	tun.ShareCPUs(path.Loopback())
	tun.TuneGC()
	cfg.FEC = tuning.FEC(path.Loopback(), cfg.FEC)
	cfg.Stall = stallWithin(plan)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := &sideResult{start: time.Now()}
	// The receiver's messages come on the lanes too, whichever copy is first (Control.Offer);
	// this end's go on the control channel only from now on (its copies before the data phase
	// are what a lost segment would have held up: the hello, the list, a pull's files).
	path.OnControl(ctl.Offer)
	defer path.OnControl(nil)
	ctl.Mirror(nil)
	path.EndControlEarly()

	pool := fcopy.NewPool(cfg.Window + 4)
	blocks := make(chan *fcopy.Block, 4)
	readErr := make(chan error, 1)
	sums := newSourceSums(len(plan.Files))
	go func() {
		err := fcopy.Read(ctx, plan, open, pool, blocks, func(i int, sum [32]byte) {
			sums.set(i, sum) // before the receiver can know it, and confirm the file
			ctl.Send(Msg{T: KindDigest, File: i, Sum: hex.EncodeToString(sum[:])})
		})
		close(blocks)
		if err != nil {
			cancel(err)
		}
		readErr <- err
	}()
	if cfg.Idle == 0 {
		cfg.Idle = PeerIdle
	}
	s := session.NewSender(path, plan, pool, cfg)
	done := make(chan Msg, 1)
	conf := newConfirmations(plan, sums, file)
	recvEnded := make(chan struct{})
	go func() {
		defer close(recvEnded)
		m, err := recvDone(ctx, ctl, conf.sent, conf.take)
		if err != nil {
			cancel(err)
			return
		}
		done <- m
		s.PeerDone()
	}()
	// file is told nothing once this returns: a copy's last word (its error or summary) comes
	// after every file it reports.
	defer func() { cancel(nil); <-recvEnded }()

	stop := reportProgress(prog, plan, s.Progress)
	err := s.Run(ctx, blocks)
	stop()
	res.sender = s.Stats()
	if err == nil {
		acked := time.Now()
		var m Msg
		if m, err = awaitDone(ctx, path, done); err == nil {
			res.results, res.peerStats = m.Results, m.Stats
		}
		if dl := path.DebugLog(); dl != nil && !res.sender.LastNewDataAt.IsZero() {
			dl("sender: last new data, then all acknowledged %s later, the verdict %s later",
				acked.Sub(res.sender.LastNewDataAt).Round(time.Millisecond), time.Since(res.sender.LastNewDataAt).Round(time.Millisecond))
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
	if err == nil {
		err = conf.finish()
	}
	res.end = time.Now()
	if !res.sender.FirstDataAt.IsZero() {
		res.start = res.sender.FirstDataAt
	}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) && !errors.Is(err, ErrPeerGone) {
			ctl.SendError(err)
		}
		return res, err
	}
	debugMemory(path, "sender")
	st := PeerStats{Datagrams: res.sender.Datagrams, Retransmitted: res.sender.Retransmitted, Lost: res.sender.Lost, LostByTime: res.sender.LostByTime,
		WireBytes: res.sender.WireBytes, AuthFailures: path.AuthFailures.Load(), Drops: ptr(pathDrops(path, res.sender.BadFeedback)), Seconds: res.end.Sub(res.start).Seconds(), MaxRSS: maxRSS(), CPUSeconds: cpuSeconds(),
		CC: rateStats(res.sender), Parity: res.sender.Parity, RepairParity: res.sender.RepairParity,
		Groups: res.sender.Groups, RepairGroups: res.sender.RepairGroups, TailSeconds: res.tailSeconds(),
		ProbeBps: res.sender.ProbeBps, Lanes: laneReports(path), WindowSeconds: res.sender.WindowFull.Seconds(),
		SourceSeconds: res.sender.SourceWait.Seconds(), Cores: runtime.NumCPU()}
	ctl.Send(Msg{T: KindBye, Stats: &st})
	return res, nil
}

// stallWithin is how long the sender waits for progress while feedback comes (0: the session's
// 2 minutes): longer where the receiver copies blocks of changed files from their old versions
// between the blocks it receives (copy/delta.go), during which its window does not move: 2
// minutes plus 1 s per 20 MB kept (the allowance of the other waits for a peer's disk work,
// resumeWithin).
func stallWithin(plan *fcopy.Plan) time.Duration {
	if kept := plan.DeltaStats().KeptBytes; kept > 0 {
		return 2*time.Minute + time.Duration(kept/20e6)*time.Second
	}
	return 0
}

// doneIdle is how long awaitDone waits for a silent receiver (PeerIdle; a variable for tests).
var doneIdle = PeerIdle

// awaitDone waits for the receiver's verdict once every block is acknowledged: the receiver may
// still be writing the last window to its disk, and its feedback goes on while it does. It gives
// up when the receiver has been silent for doneIdle.
func awaitDone(ctx context.Context, path *session.Path, done <-chan Msg) (Msg, error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case m := <-done:
			return m, nil
		case <-ctx.Done():
			return Msg{}, context.Cause(ctx)
		case now := <-t.C:
			if since := now.Sub(path.Heard()); since > doneIdle {
				return Msg{}, fmt.Errorf("%w: the receiver acknowledged every block but has said nothing for %s, and never confirmed the files",
					session.ErrSilent, since.Round(time.Second))
			}
		}
	}
}

// maxResultPath bounds the destination path a receiver reports for a file (recvDone refuses a
// longer one): its destination directory, which it opens by its path (at most PATH_MAX, 4096
// bytes), a slash and the file's name (at most 4096 bytes, its first element perhaps replaced by
// the destination's own name, at most 255): some 8.4 KB, with room.
const maxResultPath = 3 * 4096

// sourceSums are the whole-file digests this end read of the files it sends: the receiver's
// confirmations, checked against them, come while the reader is still at work.
type sourceSums struct {
	mu   sync.Mutex
	sums [][32]byte
	read []bool
}

func newSourceSums(n int) *sourceSums {
	return &sourceSums{sums: make([][32]byte, n), read: make([]bool, n)}
}

func (s *sourceSums) set(i int, sum [32]byte) {
	s.mu.Lock()
	s.sums[i], s.read[i] = sum, true
	s.mu.Unlock()
}

// get returns the digest of file i, and whether it has been read yet.
func (s *sourceSums) get(i int) ([32]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sums[i], s.read[i]
}

// confirmations checks the receiver's confirmations against what this end sent, as they come
// (take), and at the end that every file was confirmed (finish): one result per file sent, in the
// plan's order, each with the file's name, size and the whole-file digest this end read. The
// receiver checked the same digest before it renamed each file into place; a confirmation that
// differs, that comes before this end has read the file, or that repeats one, is a receiver that
// is broken or lying, and the copy is not verified (fcopy.ErrVerify). Only a confirmation that
// passes is told to file.
type confirmations struct {
	plan *fcopy.Plan
	sums *sourceSums
	file func(fcopy.FileResult)
	sent int    // files whose data travels: the confirmations due
	n    int    // confirmed so far
	next int    // the plan index from which the next file sent is looked for
	last string // the name of the file confirmed last
}

func newConfirmations(plan *fcopy.Plan, sums *sourceSums, file func(fcopy.FileResult)) *confirmations {
	c := &confirmations{plan: plan, sums: sums, file: file}
	for i, f := range plan.Files {
		if f.Regular() && !plan.Skipped(i) {
			c.sent++
		}
	}
	return c
}

// take checks a chunk of confirmations, all of it before any is told to file; what passes has
// the path the receiver reported made safe to show. A confirmation refused leaves the check
// failed: nothing after it is taken.
func (c *confirmations) take(part []fcopy.FileResult) error {
	next, n, last := c.next, c.n, c.last
	for k := range part {
		r := &part[k]
		i := next
		for i < len(c.plan.Files) && (!c.plan.Files[i].Regular() || c.plan.Skipped(i)) {
			i++ // directories, links and files the receiver had have no bytes sent, and no result
		}
		if i == len(c.plan.Files) {
			return fmt.Errorf("%w: the receiver confirmed %s, one file more than the %d sent", fcopy.ErrVerify, escape.Quote(r.Name), c.sent)
		}
		f := c.plan.Files[i]
		sum, read := c.sums.get(i)
		switch {
		case n > 0 && r.Name == last:
			return fmt.Errorf("%w: the receiver confirmed %s twice", fcopy.ErrVerify, escape.Quote(r.Name))
		case r.Name != f.Name || r.Size != f.Size:
			return fmt.Errorf("%w: the receiver confirmed %s (%d bytes) where %s (%d bytes) was next", fcopy.ErrVerify,
				escape.Quote(r.Name), r.Size, escape.Quote(f.Name), f.Size)
		case !read:
			return fmt.Errorf("%w: the receiver confirmed %s before this end had read it", fcopy.ErrVerify, escape.Quote(r.Name))
		case r.Sum != hex.EncodeToString(sum[:]):
			return fmt.Errorf("%w: the receiver confirmed %s with BLAKE3 %s, this end read %x", fcopy.ErrVerify,
				escape.Quote(r.Name), escape.Quote(r.Sum), sum[:8])
		}
		// Where the receiver says it placed the file is its word, shown as it is in --json:
		// valid UTF-8, at most a path's length, nothing a terminal would act on.
		// (recvDone refused one longer than maxResultPath.)
		r.Path = escape.Text(strings.ToValidUTF8(r.Path, "?"))
		next, n, last = i+1, n+1, f.Name
	}
	c.next, c.n, c.last = next, n, last
	if c.file != nil {
		for _, r := range part {
			c.file(r)
		}
	}
	return nil
}

// finish checks, once the verdict is whole, that every file sent was confirmed.
func (c *confirmations) finish() error {
	if c.n != c.sent {
		return fmt.Errorf("%w: the receiver confirmed %d files of the %d sent", fcopy.ErrVerify, c.n, c.sent)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// debugMemory prints where this process's memory went through path's debug logger
// (FARWING_DEBUG).
func debugMemory(path *session.Path, side string) {
	dl := path.DebugLog()
	if dl == nil {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	dl("memory %s: peak rss %d MiB, heap in use %d MiB (sys %d, released %d, next GC %d), runtime %d MiB in all, block buffers %d MiB, GCs %d",
		side, maxRSS()>>20, ms.HeapInuse>>20, ms.HeapSys>>20, ms.HeapReleased>>20, ms.NextGC>>20, ms.Sys>>20, fcopy.BlockMemory()>>20, ms.NumGC)
}

// cpuSeconds is this process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func rateStats(s session.SenderStats) *RateStats {
	c := s.CC
	return &RateStats{RateBps: c.PacingRate, BtlBwBps: c.BtlBw, SRTTms: float64(c.SRTT) / 1e6, MinRTTms: float64(c.MinRTT) / 1e6,
		RandomLoss: c.RandomLoss, LossBase: c.LossBase, CongestionEvents: c.CongestionEvents, QueueEvents: c.QueueEvents, SharedEvents: c.SharedEvents, SpuriousLosses: c.SpuriousLosses, ProbeRTTs: c.ProbeRTTs, Mode: c.Mode.String(),
		Verdicts: verdicts(c)}
}

// verdicts lists the controller's recorded congestion verdicts, oldest first.
func verdicts(c cc.Stats) []Verdict {
	var vs []Verdict
	for _, v := range c.Verdicts {
		if v.Reason == "" {
			continue
		}
		vs = append(vs, Verdict{AtSeconds: v.At.Seconds(), Reason: v.Reason, State: v.Mode.String() + "/" + v.Phase.String(),
			Acked: v.Acked, Lost: v.Lost, MaxRun: v.MaxRun, LostHiQ: v.LostHiQ, AckedHiQ: v.AckedHiQ, LossBase: v.LossBase,
			QueueMS: float64(v.Queue) / 1e6, DeepCut: v.AtQueue})
	}
	return vs
}

// runRecv receives the plan's files into target (nil in sink mode), confirms each to the sender as
// it is placed (confirmer: in chunks, a few times a second) and ends with done. del (nil: none)
// is --delete's, run once every file is placed and verified and before done, which carries its
// count; its error ends the copy as failed. window
// is the agreed receive window in blocks; autoWindow says it was not set with --window, and then
// a loopback path uses tuning.LoopbackWindow (tuning.ReceiveWindow).
func runRecv(ctx context.Context, ctl *Control, path *session.Path, tun tuning.Settings, plan *fcopy.Plan, target *fcopy.Target,
	o fcopy.WriterOptions, window int, autoWindow, waitBye bool, prog ProgressFunc, del func() (int, error)) (*sideResult, error) {
	window = tuning.ReceiveWindow(path.Loopback(), window, autoWindow)
	tun.TuneGC()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := &sideResult{start: time.Now()}
	// What this end says from now on (the confirmations, done, an error) travels on the lanes as
	// well as on the control channel: the sender waits for it at the end of the copy. A server's
	// receiver may start before the client has proven its lanes (data before the proof,
	// session.Path.SendOne), so its copies follow SendControlEarly's rule, which is SendControl's
	// once a lane is proven; its messages before the data phase stay kept for lanes heard later.
	ctl.Mirror(path.SendControlEarly)
	defer ctl.Mirror(nil)
	dg := newDigests()
	bye := make(chan Msg, 1)
	var doneSent atomic.Bool // the sender's bye answers this end's done, and comes only after it
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			m, err := ctl.Next(ctx, 0)
			if err == nil {
				switch m.T {
				case KindDigest:
					err = dg.take(plan, m)
				case KindBye:
					if !doneSent.Load() {
						err = fmt.Errorf("%w: control channel: got bye before this end confirmed the files", ErrProtocol)
						break
					}
					bye <- m
					return
				default:
					err = fmt.Errorf("%w: control channel: got %s during the transfer", ErrProtocol, escape.Quote(string(m.T)))
				}
			}
			if err != nil {
				dg.fail(err)
				cancel(err)
				return
			}
		}
	}()
	go func() { <-ctx.Done(); dg.fail(context.Cause(ctx)) }()
	o.Digest = func(ctx context.Context, i int) ([32]byte, error) { return dg.wait(i) }
	// Each file is confirmed to the sender as it is placed, not only in the verdict at the end.
	conf := newConfirmer(ctl)
	if done := o.Done; done != nil {
		o.Done = func(r fcopy.FileResult) { conf.add(r); done(r) }
	} else {
		o.Done = conf.add
	}
	w := fcopy.NewWriter(plan, target, o)
	defer w.Close()
	r := session.NewReceiver(path, plan, w, window)
	r.Idle = PeerIdle
	stop := reportProgress(prog, plan, r.Progress)
	err := r.Run(ctx)
	stop()
	res.receiver = r.Stats()
	res.results = w.Results()
	res.end = time.Now()
	if err != nil {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
		if errors.Is(err, fcopy.ErrVerify) {
			w.Abort()
		} else {
			w.Interrupt() // what is synced and recorded stays for the next copy to resume
		}
		conf.close() // the files placed before the failure stay: the sender hears of them
		var re *RemoteError
		if !errors.As(err, &re) && !errors.Is(err, ErrPeerGone) {
			ctl.SendError(err)
		}
		return res, err
	}
	debugMemory(path, "receiver")
	st := PeerStats{Datagrams: res.receiver.Datagrams, AuthFailures: path.AuthFailures.Load(), Drops: ptr(pathDrops(path, res.receiver.Invalid)), Seconds: res.end.Sub(res.start).Seconds(), MaxRSS: maxRSS(), CPUSeconds: cpuSeconds(), Cores: runtime.NumCPU(),
		FECRebuilt: res.receiver.FECRebuilt, FECRepaired: res.receiver.FECRepaired, FECChunks: res.receiver.FECChunks,
		Duplicates: res.receiver.Duplicates, Held: res.receiver.Held, Lanes: laneReports(path)}
	if del != nil {
		// Deleting may take longer than the sender waits for a silent receiver: it hears the
		// receiver's last feedback again while it does.
		stop := make(chan struct{})
		go r.Linger(stop)
		res.deleted, err = del()
		close(stop)
		if err != nil {
			err = fmt.Errorf("every file is in place and verified, but --delete stopped: %w", err)
			conf.close()
			ctl.SendError(err)
			return res, err
		}
		st.Deleted = res.deleted
	}
	doneSent.Store(true)
	if err := conf.done(&st); err != nil {
		return res, err
	}
	if waitBye {
		select {
		case m := <-bye:
			res.peerStats = m.Stats
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
			// The sender leaves right after its bye, and the end of the channel may be seen
			// first: the bye, if it came, is taken once the reader has stopped.
			<-readerDone
			select {
			case m := <-bye:
				res.peerStats = m.Stats
			default:
			}
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

// resumeWithin bounds the wait for the other end's part of the resume exchange, which hashes
// the blocks offered (allowed 20 MB/s, as the hashing of --checksum is).
func resumeWithin(offers []fcopy.Offer) time.Duration {
	var n int64
	for _, o := range offers {
		n += int64(o.Blocks)
	}
	return 2*PeerIdle + time.Duration(n*fcopy.BlockSize/20e6)*time.Second
}

// resumeSend is the sender's side of the resume exchange (docs/PROTOCOL.md, "Resume"): the
// receiver's offers are checked against plan, the blocks offered are read and hashed from the
// source now and their digests sent, and the receiver's verdict (all of an offer or none) is
// taken into the plan.
func resumeSend(ctx context.Context, ctl *Control, plan *fcopy.Plan, open fcopy.Opener, offers []fcopy.Offer, noResume bool) error {
	if len(offers) == 0 {
		return nil
	}
	if err := fcopy.CheckOffers(plan, offers, noResume); err != nil {
		return fmt.Errorf("%w: the receiver's offer to resume: %v", ErrProtocol, err)
	}
	pre, err := fcopy.HashPrefixes(ctx, plan, open, offers)
	if err != nil {
		return err
	}
	for k, o := range offers {
		if err := ctl.Send(Msg{T: KindSums, File: o.File, Digests: pre.Digests(k)}); err != nil {
			return err
		}
	}
	m, err := ctl.Expect(ctx, KindResumed, resumeWithin(offers))
	if err != nil {
		return err
	}
	if err := pre.Apply(plan, m.Resume); err != nil {
		return fmt.Errorf("%w: the receiver's answer on resuming: %v", ErrProtocol, err)
	}
	return nil
}

// resumeRecv is the receiver's side of the resume exchange, once its offers (parts.Offers) are
// sent: the sender's digests of each offer, in order, are compared with this end's own of its
// partial files (a file is kept only if all match), the verdict is sent and taken into plan.
func resumeRecv(ctx context.Context, ctl *Control, plan *fcopy.Plan, parts *fcopy.Partials) error {
	offers := parts.Offers()
	if len(offers) == 0 {
		return nil
	}
	for _, o := range offers {
		m, err := ctl.Expect(ctx, KindSums, resumeWithin(offers))
		if err != nil {
			return err
		}
		if m.File != o.File {
			return fmt.Errorf("%w: block digests for file %d, expected them for file %d", ErrProtocol, m.File, o.File)
		}
		if err := parts.Verify(ctx, m.File, m.Digests); err != nil {
			return fmt.Errorf("%w: %v", ErrProtocol, err)
		}
	}
	kept := parts.Kept()
	if err := parts.Apply(plan); err != nil {
		return err
	}
	return ctl.Send(Msg{T: KindResumed, Resume: kept})
}

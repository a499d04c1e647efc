package xfer

// A push: local sources to the remote peer, which receives them (role recv).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
)

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

// Push copies local sources to host:dst.
func Push(ctx context.Context, o Options, srcs []string, host, dst string) (*Result, error) {
	res := newResult("push", host, &o)
	dst = intoDir(dst, o.FilesFrom)
	if err := o.CheckFlags(nil); err != nil {
		return nil, err
	}
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
	c, ready, err := start(ctx, &o, host, Msg{Role: RoleRecv, Dest: dst, Files: sources.Files, Compare: o.Compare.String(), NoResume: o.NoResume, WholeFile: o.WholeFile,
		Window: window, AutoWindow: o.Window == 0, Preserve: o.Preserve, Sink: o.Sink, Rate: o.Rate, MinRate: o.MinRate, Policy: o.Policy.String(),
		Delete: o.Delete, Filter: protecting(&o), DryRun: o.DryRun}, res)
	if err != nil {
		return nil, err
	}
	defer func() { c.close(closeGrace) }()
	ctx = c.ctx
	c.copy = true
	if o.DryRun {
		return dryPush(ctx, &o, c, res, sources.Files, plan)
	}
	// The lanes and the handshake are prepared first; a path remembered from an earlier push
	// (pathmem.go) then takes data before the handshake has answered, the handshake beside it.
	if err := c.openPath(ctx, &o, host, ready, c.crypto, true, true); err != nil {
		c.ctl.SendError(err)
		return nil, err
	}
	key := c.pathKey
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
	if err == nil {
		// Files the remote has in another version: only the blocks that differ are sent.
		err = deltaSend(ctx, c.ctl, plan, sources.Open(), have.Delta, o.WholeFile, o.Sink)
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
	o.logDelta(plan)
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
	res.fillSent(side, c, plan)
	if hs != nil && side.sender.ProbeBps > 0 && side.sender.ProbeBps < hs.rate/2 {
		forgetPath(o.PathMemory, key) // the packet train read under half the remembered rate
	}
	if res.Transport != TransportUDP {
		// No UDP got through: a remembered rate would send the next push's first data into a
		// blocked path, and what TCP carried says nothing of the UDP path.
		forgetPath(o.PathMemory, key)
	} else if side.sender.CC.MinRTT > 0 && res.DataSeconds >= pathMemoryData.Seconds() && res.WireBytes > 0 {
		if err := rememberPath(o.PathMemory, key, pathRecord{At: time.Now().Unix(),
			RateBps: float64(res.WireBytes) * 8 / res.DataSeconds, MinRTTus: side.sender.CC.MinRTT.Microseconds()}); err != nil {
			o.logf("cannot keep this path's rate for the next copy: %v", err)
		}
	}
	return res, nil
}

// dryPush is a --dry-run push once the hello and the list are on their way: no UDP, no data; the
// remote answers with what it has and, with --delete, what it would delete (its word, checked by
// checkDeleting, each name escaped where it is shown).
func dryPush(ctx context.Context, o *Options, c *conn, res *Result, files []fcopy.File, plan *fcopy.Plan) (*Result, error) {
	have, err := c.ctl.Expect(ctx, KindHave, haveWithin(o.Compare, plan.TotalBytes()))
	if err == nil {
		err = takeHave(plan, o.Compare, o.Sink, have.Have)
	}
	if err == nil && (len(have.Resume) > 0 || !o.Delete && len(have.Deleting) > 0) {
		err = fmt.Errorf("%w: the receiver answered a dry run with offers to resume or entries to delete it was not asked for", ErrProtocol)
	}
	if err == nil {
		err = checkDeleting(files, have.Deleting)
	}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			c.ctl.SendError(err)
		}
		return nil, err
	}
	o.dryRun(res, files, plan)
	res.Deleted = len(have.Deleting)
	if o.Deleted != nil {
		for _, name := range have.Deleting {
			o.Deleted(fcopy.Deletion{Name: name})
		}
	}
	return res, nil
}

// checkDeleting checks the entries a dry run's receiver says it would delete against what
// Target.Delete can delete for files: no longer than a path, of non-empty elements other than "."
// and "..", not an entry of files, and below one of its directories (an entry that names a control
// character is shown escaped, as a destination may hold one; one named twice is let be, as JSON
// gives two names of bytes that are not UTF-8 as the same text).
func checkDeleting(files []fcopy.File, names []string) error {
	dir := make(map[string]bool, len(files)) // a listed name: whether it is a directory
	for _, f := range files {
		dir[f.Name] = f.Dir
	}
	for _, name := range names {
		if name == "" || len(name) > maxResultPath {
			return fmt.Errorf("%w: the receiver would delete an entry of a name of %d bytes", ErrProtocol, len(name))
		}
		_, listed := dir[name]
		ok := !listed
		for _, e := range strings.Split(name, "/") {
			ok = ok && e != "" && e != "." && e != ".."
		}
		below := false
		for d, i := name, strings.LastIndexByte(name, '/'); ok && i > 0 && !below; i = strings.LastIndexByte(d, '/') {
			d = d[:i]
			below = dir[d]
		}
		if !ok || !below {
			return fmt.Errorf("%w: the receiver would delete %s, which is no entry below the copy's directories that the list leaves out", ErrProtocol, escape.Quote(name))
		}
	}
	return nil
}

// protecting are the rules a push's server needs: with --delete, those that protect what they
// exclude from deletion (nil otherwise: the rules are this end's).
func protecting(o *Options) []fcopy.Rule {
	if !o.Delete {
		return nil
	}
	return o.Filter.Rules()
}

package xfer

// A pull: the remote peer's files, which it sends (role send), to a local destination.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	fcopy "github.com/farwing/farwing/copy"
)

// Pull copies host:srcs to the local dst.
func Pull(ctx context.Context, o Options, host string, srcs []string, dst string) (*Result, error) {
	res := newResult("pull", host, &o)
	window := o.window(0, 1<<30)
	dst = intoDir(dst, o.FilesFrom)
	if err := o.CheckFlags(srcs); err != nil {
		return nil, err
	}
	hello := Msg{T: KindHello, Role: RoleSend, Paths: srcs, Window: window, Compare: o.Compare.String(), NoResume: o.NoResume,
		Recursive: o.Recursive, Follow: o.Follow, HardLinks: o.HardLinks, Rate: o.Rate, MinRate: o.MinRate, Policy: o.Policy.String(), FEC: o.FEC.String(),
		Filter: o.Filter.Rules(), FilesFrom: o.FilesFrom}
	if err := helloFits(hello); err != nil {
		return nil, err
	}
	c, ready, err := start(ctx, &o, host, hello, res)
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
	var deltas *fcopy.Deltas // changed files, compared block by block
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
		if o.DryRun {
			o.dryRun(res, files.Files, plan)
			if o.Delete {
				res.Deleted, err = target.Delete(files.Files, o.Filter, true, o.Deleted)
			}
			return res, err
		}
		parts = target.FindPartials(files.Files, have, o.NoResume)
		defer parts.Close(target)
		if len(parts.Offers()) > 0 {
			parts.Hash(plan) // while the offer travels
		}
		deltas = target.FindDeltas(files.Files, have, o.WholeFile, o.Preserve)
		deltas.Hash(ctx, plan)
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
	if err := c.ctl.Send(Msg{T: KindAccept, Window: window, AutoWindow: o.Window == 0, Have: have, Resume: parts.Offers(), Delta: deltas.Offers()}); err != nil {
		return nil, err
	}
	err = resumeRecv(ctx, c.ctl, plan, parts)
	if err == nil {
		err = deltaRecv(ctx, c.ctl, plan, deltas)
	}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			c.ctl.SendError(err)
		}
		return nil, err
	}
	if n, b := plan.ResumedFiles(); len(parts.Offers()) > 0 {
		o.logf("resuming %d of %d file(s) found: %d bytes kept, checked against the remote's digests", n, len(parts.Offers()), b)
	}
	o.logDelta(plan)
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
		Records: !o.NoResume, Resume: parts, Delta: deltas, Done: o.File, CheckpointEvery: o.CheckpointEvery}), window, o.Window == 0, true, prog, o.deleter(target, files.Files))
	if err != nil {
		return nil, err
	}
	res.fillReceived(side, c, plan)
	return res, nil
}

// intoDir is the destination dst of a copy with a --files-from list (listed not nil): a
// directory, which receives the listed paths under their names (as if dst ended in "/": it must
// exist). dst is unchanged without a list, and when it is "" (the remote home directory).
func intoDir(dst string, listed []string) string {
	if listed == nil || dst == "" || strings.HasSuffix(dst, "/") {
		return dst
	}
	return dst + "/"
}

// helloFits refuses a pull's request that the remote would refuse as too long: its paths, filter
// rules and --files-from list travel in the one hello line.
func helloFits(hello Msg) error {
	b, err := json.Marshal(hello)
	if err == nil && len(b) > maxHelloLine {
		err = fmt.Errorf("the request (its paths, filter rules and --files-from list) takes %d bytes, more than the %d one pull may send; split the list", len(b), maxHelloLine)
	}
	return err
}

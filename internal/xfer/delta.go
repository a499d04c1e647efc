package xfer

// The comparison of changed files block by block (docs/PROTOCOL.md, "Changed files"): after
// have/accept and any resume, the receiver sends its digests of each offered file's old blocks
// ("hashes"), the sender answers which blocks it sends ("changed"), and both take the outcome
// into their plans before any data moves.

import (
	"context"
	"fmt"

	fcopy "github.com/farwing/farwing/copy"
)

// hashesAhead bounds the digests the receiver sends before the sender has answered them, so that
// the sender, hashing its own files as they come, never holds more than that unread.
const hashesAhead = 32 << 20

// deltaSend is the sender's side: the receiver's offers are checked against plan (after Skip and
// the resume), each offered file's digests are compared with this end's of its source as they
// come, and its answer sent; the outcomes go into plan.
func deltaSend(ctx context.Context, ctl *Control, plan *fcopy.Plan, open fcopy.Opener, offers []fcopy.Offer, whole, sink bool) error {
	if len(offers) == 0 {
		return nil
	}
	if err := fcopy.CheckDeltas(plan, offers, whole, sink); err != nil {
		return fmt.Errorf("%w: the receiver's offer to compare changed files: %v", ErrProtocol, err)
	}
	ds := make([]*fcopy.Delta, 0, len(offers))
	for _, o := range offers {
		m, err := ctl.Expect(ctx, KindHashes, resumeWithin(offers))
		if err != nil {
			return err
		}
		if m.File != o.File || len(m.Digests) != 32*int(o.Blocks) {
			return fmt.Errorf("%w: %d bytes of block digests for file %d, expected %d for file %d", ErrProtocol, len(m.Digests), m.File, 32*o.Blocks, o.File)
		}
		d, err := fcopy.CompareBlocks(ctx, plan, open, o, m.Digests)
		if err != nil {
			return err
		}
		if err := ctl.Send(Msg{T: KindChanged, File: o.File, Send: d.Send}); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	return plan.ApplyDeltas(ds)
}

// deltaRecv is the receiver's side, once its offers (deltas.Offers) are sent: it sends its
// digests of each offered file as they are computed (at most hashesAhead of them unanswered),
// takes the sender's answers, checked, and puts them into plan.
func deltaRecv(ctx context.Context, ctl *Control, plan *fcopy.Plan, deltas *fcopy.Deltas) error {
	offers := deltas.Offers()
	if len(offers) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan int, len(offers)) // the digest bytes of each offer answered
	sent := make(chan error, 1)
	go func() {
		ahead := 0
		for k, o := range offers {
			sums, err := deltas.Digests(ctx, k)
			for err == nil && ahead > 0 && ahead+len(sums) > hashesAhead {
				select {
				case n := <-answered:
					ahead -= n
				case <-ctx.Done():
					err = context.Cause(ctx)
				}
			}
			if err == nil {
				err = ctl.Send(Msg{T: KindHashes, File: o.File, Digests: sums})
			}
			if err != nil {
				sent <- err
				return
			}
			ahead += len(sums)
		}
		sent <- nil
	}()
	ds := make([]*fcopy.Delta, 0, len(offers))
	for k, o := range offers {
		m, err := ctl.Expect(ctx, KindChanged, resumeWithin(offers))
		if err != nil {
			return err
		}
		d, err := deltas.Answer(k, m.File, m.Send)
		if err != nil {
			return fmt.Errorf("%w: the sender's answer on changed files: %v", ErrProtocol, err)
		}
		ds = append(ds, d)
		answered <- 32 * int(o.Blocks)
	}
	if err := <-sent; err != nil {
		return err
	}
	return plan.ApplyDeltas(ds)
}

package session

// The sender's half that listens: the receiver's feedback (what arrived on each lane, the
// cursor and the FEC groups it still needs), the acknowledgements it carries (RTT samples for cc),
// and loss detection (a gap behind the newest datagram reported on a lane, by packet count or by
// time), which queues repairs. Sending, scheduling and the window are in sender.go.

import (
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/internal/wire"
)

// onFeedback handles one feedback datagram: it is checked against what this end sent, then
// acknowledges, releases blocks the receiver has placed and detects losses.
func (s *Sender) onFeedback(pt []byte, now time.Time) {
	// The receiver's word is bounded by what this end sent: its cursor cannot pass the first block
	// whose digest was never sent, which no receiver can have verified (a cursor near 2^32 made
	// the release loop below spin for seconds; one up to the blocks read released blocks still
	// being framed, whose buffers went back to the pool twice), its lanes are four.
	if err := wire.ParseFeedback(pt, &s.fb); err != nil || len(s.fb.Lanes) != Lanes || s.fb.Cursor > s.firstUnsent() {
		s.stats.BadFeedback++
		return
	}
	s.stats.Feedback++
	s.stats.LastAckAt = now
	s.noteReport(int64(now.Sub(s.start)))
	s.cc.OnFeedback(now)
	cursor, window := s.cursor, s.window
	if s.fb.Cursor > s.cursor {
		s.cursor = s.fb.Cursor
		// Every block below the cursor is verified and written: release it even if some of its
		// chunks were never acknowledged (FEC rebuilt them at the receiver).
		for ; s.lowID < s.cursor; s.lowID++ {
			if b := s.blocks[s.lowID]; b != nil {
				s.release(b)
			}
		}
	}
	if s.fb.Window > 0 {
		s.window = min(s.fb.Window, uint32(s.cfg.Window)) // it may shrink the agreed window, never widen it
	}
	if s.cursor != cursor || s.window != window {
		s.end = s.windowEnd()
	}
	tnow := int64(now.Sub(s.start))
	for i := range s.fb.Lanes {
		la := &s.fb.Lanes[i]
		l := &s.lanes[i]
		if len(la.Ranges) == 0 || la.Largest > l.next || l.lowest == 0 {
			continue
		}
		var rtt time.Duration
		if la.Largest > l.largest {
			// RTT sample from the newest datagram, less the receiver's hold time. It goes to the
			// rate controller with the datagram's ack (ackSeq): the controller keeps the one RTT
			// estimate, which the loss timers and FEC read back.
			if p := l.at(la.Largest); p.state == stInflight || p.state == stLost {
				rtt = time.Duration(tnow-atomic.LoadInt64(&p.at)) - time.Duration(la.AckDelay)*time.Microsecond
			}
			l.largest = la.Largest
		}
		floor := la.Largest
		for _, r := range la.Ranges {
			floor = r.Lo
			lo := max(r.Lo, l.lowest)
			for q := lo; q <= r.Hi && r.Hi >= lo; q++ {
				var sample time.Duration
				if q == la.Largest {
					sample = max(rtt, 0)
				}
				s.ackSeq(now, i, l, q, sample)
			}
		}
		// Packet threshold: an unacknowledged datagram three or more below an acknowledged one on
		// the same lane, inside the range the report covers, is lost. Lanes never reorder with
		// each other in this logic.
		for q := max(l.lowest, floor); q+3 <= la.Largest; q++ {
			if p := l.at(q); p.state == stInflight {
				s.lose(now, i, q, p)
			}
		}
		s.advance(l)
	}
}

// firstUnsent is the lowest block whose digest, the last of its datagrams, has never been
// framed: every block below it has left sendable, and it has not.
func (s *Sender) firstUnsent() uint32 {
	if len(s.sendable) > 0 {
		return s.sendable[0].id
	}
	return s.nextID
}

// noteReport records the arrival of a feedback report at t (ns since start) for the tail rule.
// The receiver sends each report twice, on two lanes, back to back: a copy that arrives within
// half a feedback interval of the newest is the same report.
func (s *Sender) noteReport(t int64) {
	if s.reportAt[0] != 0 && t-s.reportAt[0] < int64(FeedbackInterval/2) {
		return
	}
	s.reportAt = [2]int64{t, s.reportAt[0]}
}

func (s *Sender) ackSeq(now time.Time, lane int, l *laneTx, q uint64, rtt time.Duration) {
	p := l.at(q)
	wasInflight := p.state == stInflight
	if !wasInflight && p.state != stLost {
		return
	}
	p.state = stAcked
	s.cc.OnAck(now, lane, q, int(p.size), rtt)
	b := s.blocks[p.block]
	if b == nil {
		return
	}
	c := int(p.chunk)
	if b.k == 0 || c == b.nChunks {
		if b.ack(c) && (b.nAcked == b.nChunks+1 || s.rebuildable(b)) {
			s.release(b)
		}
		return
	}
	gr := &b.groups[c/b.k]
	if wasInflight {
		gr.inflight--
	}
	fresh := false
	if p.par == 0 {
		if fresh = b.ack(c); fresh {
			gr.dataAcked++
		}
	} else if bit := uint64(1) << (p.par - 1); gr.parAcked&bit == 0 {
		gr.parAcked |= bit
		fresh = true
	}
	if fresh && !gr.done && gr.acked() >= int(gr.k) {
		gr.done = true
		b.groupsDone++
		gr.dropParity() // a later repair (rebuildGrace) codes it again
	}
	if !fresh && wasInflight && !gr.done && !gr.queued {
		// A shard the receiver already had (a spurious loss's copy): the group is one shard
		// shorter than planRepairs counted on while this one was in flight, so look again.
		gr.queued = true
		s.evalq = append(s.evalq, chunkRef{block: b.id, chunk: uint16(c / b.k)})
	}
	// A block whose chunks are rebuilt is never acknowledged chunk by chunk: it is released once
	// the receiver holds all it needs (rebuildable), or when the receiver's cursor passes it.
	if fresh && (b.nAcked == b.nChunks+1 || s.rebuildable(b)) {
		s.release(b)
	}
}

// rebuildable reports whether the receiver holds everything it needs to rebuild and verify b,
// by the acknowledgements: k distinct shards of every group, and the digest. Such a block is
// released at once, unless it is the block at the cursor, which checkRebuilt still watches.
// (Kept until the cursor passed, blocks waiting at the receiver behind a repair of an earlier
// one held the sender's memory too: 48 MiB of block buffers at 620 Mbit/s and 60 ms.)
func (s *Sender) rebuildable(b *txBlock) bool {
	return b.k > 0 && b.groupsDone == len(b.groups) && b.isAcked(b.nChunks) && b.id != s.cursor
}

func (s *Sender) lose(now time.Time, lane int, q uint64, p *sentPkt) {
	p.state = stLost
	s.cc.OnLoss(now, lane, q, int(p.size)) // FEC may recover it, but cc still counts it lost
	s.stats.Lost++
	b := s.blocks[p.block]
	if b == nil {
		return
	}
	c := int(p.chunk)
	if b.k == 0 || c == b.nChunks {
		if !b.isAcked(c) {
			s.retx.push(chunkRef{block: p.block, chunk: p.chunk})
		}
		return
	}
	g := c / b.k
	gr := &b.groups[g]
	gr.inflight--
	if gr.done {
		return // the receiver rebuilds the group: nothing to re-send
	}
	if gr.repaired && atomic.LoadInt64(&p.at) < gr.lastRepair {
		gr.urgent = true // counted on when the last repair was sized
	}
	if !gr.queued {
		gr.queued = true
		s.evalq = append(s.evalq, chunkRef{block: b.id, chunk: uint16(g)})
	}
}

// advance moves a lane's lowest past resolved datagrams.
func (s *Sender) advance(l *laneTx) {
	for l.lowest != 0 && l.lowest <= l.next {
		p := l.at(l.lowest)
		if p.state == stInflight {
			return
		}
		p.state = stFree
		l.lowest++
	}
}

// detectTimeLoss declares lost what has waited too long for an acknowledgement, in two cases.
// Behind the newest datagram the receiver reported on the lane, a gap that the packet threshold
// has not settled is lost after 9/8 of a round trip: lanes do not reorder, so a later arrival
// already says it is gone. Beyond it, at the tail of a lane where nothing later can tell, only
// once reports have kept coming for well over a round trip after it was sent: two feedback
// datagrams must have arrived after that time. A receiver that stops reporting (descheduled for
// tens of milliseconds on a busy machine, which on loopback happened in most 2 GiB copies) has
// not lost what it has not yet read; counting from the clock alone declared thousands of such
// datagrams lost, all of them duplicates when re-sent. Both rules measure the round trip as the
// largest of srtt, the newest sample and the lane's newest sample (the rate controller's): while a
// queue builds (STARTUP) each datagram's round trip is longer than the last, and a threshold of
// srtt plus a margin declared thousands of datagrams lost that were still in the queue.
func (s *Sender) detectTimeLoss(now time.Time) {
	tnow := int64(now.Sub(s.start))
	reported := s.reportAt[1] // the older of the two newest reports
	srtt, rttvar, latest := s.cc.SRTT(), s.cc.RTTVar(), s.cc.LatestRTT()
	streams := s.path.OnStreams()
	for i := range s.lanes {
		l := &s.lanes[i]
		if l.lowest == 0 {
			continue
		}
		// The lane's own newest sample counts too: a receiving lane that falls behind the others
		// shows it in its round trips first.
		rtt := max(srtt, latest, s.cc.LaneRTT(i))
		behind := int64(rtt + rtt/8 + time.Millisecond)
		tail := int64(rtt + rtt/4 + max(4*rttvar, 20*time.Millisecond) + 20*time.Millisecond)
		if streams {
			// TCP loses nothing it delivers in order, and its queues move the round trip by
			// hundreds of milliseconds within one (four BBR streams filling the lab's one-BDP
			// queue: 264-772 ms measured on a 140 ms path, and 42,000-58,000 datagrams of a
			// 256 MiB copy declared lost by 9/8 of it, all of them there). What is missing
			// there was refused by the receiver: give it twice the round trip and a second.
			behind = 2*int64(rtt) + int64(time.Second)
			tail = behind
		}
		for q := l.lowest; q <= l.next; q++ {
			p := l.at(q)
			if p.state != stInflight {
				continue
			}
			// Send times grow with q: the first datagram that is not yet lost ends the scan, and
			// so does the first one still waiting for the lane's sealer; on a stream, only until
			// it has waited there as long as one sent is given (at is when it was framed): TCP
			// is holding its stream back, and the datagram goes on another (readyStream), its
			// copy here arriving later as a duplicate.
			at := atomic.LoadInt64(&p.at)
			if q > l.largest {
				if q > l.sent.Load() {
					if !streams || tnow-at <= behind {
						break
					}
				} else if reported-at <= tail {
					break
				}
			} else if tnow-at <= behind {
				break
			}
			s.stats.LostByTime++
			if s.path.debugging() && s.stats.LostByTime%500 == 1 {
				s.path.debugf("timeloss lane %d q=%d largest=%d next=%d sent=%d age=%.2fms rtt=%.2fms srtt=%.2fms behind=%v t=%.3f reports %.2f/%.2f ms ago", i, q, l.largest, l.next, l.sent.Load(), float64(tnow-at)/1e6, float64(rtt)/1e6, float64(srtt)/1e6, q < l.largest, float64(tnow)/1e9, float64(tnow-s.reportAt[0])/1e6, float64(tnow-s.reportAt[1])/1e6)
			}
			s.lose(now, i, q, p)
		}
		s.advance(l)
	}
}

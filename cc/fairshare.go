package cc

// fair share (policy fair): evidence of a loss-based flow overflowing the queue, the capacity
// estimate and the cap at fairShare of it (docs/CC.md, "Sharing with other flows"; D28, D29).

import "math"

// noteOverflow records a loss verdict at an overflowing queue (see fairShare): when we were not
// probing (a probe's losses can still arrive in the first rounds of the DOWN that ended it),
// another flow filled the queue.
func (c *Controller) noteOverflow(t int64) {
	if c.pol != Fair || c.mode != ProbeBW ||
		!(c.compete || c.phase == Cruise || (c.phase == Down && c.phaseRounds >= 2)) {
		return
	}
	if !c.shared {
		c.st.SharedEvents++
	}
	c.shared, c.sharedAt = true, t
}

// shareAfterRound runs the fair-share bookkeeping at the end of each round: it lifts the cap once
// the evidence is shareHold old, keeps the capacity estimate, and, after an uncongested round in
// which a queue stood throughout (standing), paces at the delivered rate if that is clearly less
// than what we paced.
func (c *Controller) shareAfterRound(t int64, standing bool) {
	if c.shared && t-c.sharedAt > shareHold {
		c.shared = false
	}
	// The capacity estimate is the largest BtlBw of the last capBuckets×capBucket of PROBE_BW
	// while not sharing. While shared it is frozen: BtlBw then measures our share, and learning
	// from it would shrink the cap round after round.
	if !c.shared && c.mode == ProbeBW {
		if c.capBktStart == 0 || t-c.capBktStart >= capBucket {
			copy(c.capBkt[1:], c.capBkt[:capBuckets-1])
			c.capBkt[0], c.capBktStart = 0, t
		}
		c.capBkt[0] = math.Max(c.capBkt[0], c.btlbw)
	}
	if capB := c.capacity(); standing && capB > 0 && c.pol == Fair && c.mode == ProbeBW && c.phase == Cruise &&
		c.bwLatest > 0 && c.bwLatest < shareTrack*(1-c.thin)*c.bw() {
		// Part of what we send only lengthens a queue another flow shares (an RTT step delivers
		// what we pace; a competitor's growth does not). Pace at what is delivered, down to half
		// the capacity. Without this, with the delay signal disarmed by undrained DOWNs, a nearly
		// full queue can stand for many seconds while a window-limited CUBIC flow gets only its
		// window per the inflated round trip (departs from the starting algorithm: docs/CC.md D29).
		c.bwLo = math.Max(shareFloor*capB, math.Min(c.bwLo, c.bwLatest))
	}
}

// capacity is the estimate behind the fair-share cap, bytes/s: the larger of the packet-train
// estimate and the largest BtlBw in capBkt (0 without a train estimate: no cap).
func (c *Controller) capacity() float64 {
	if c.seedBw <= 0 {
		return 0
	}
	b := c.seedBw
	for _, v := range c.capBkt {
		b = math.Max(b, v)
	}
	return b
}

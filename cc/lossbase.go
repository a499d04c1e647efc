package cc

// loss baseline: the random-loss rate measured from packets sent at low rate (docs/CC.md,
// "loss base").

import (
	"math"
	"time"
)

// lowRateNow says whether a packet sent now measures the random-loss baseline.
func (c *Controller) lowRateNow() bool {
	switch c.mode {
	case Startup:
		return c.startupPkts < warmupPkts
	case Drain:
		// The first round of DRAIN still meets STARTUP's overshoot queue; in a shallow buffer those
		// drops are congestive, so only later DRAIN packets are counted.
		return c.rounds > c.drainRound
	case ProbeRTT:
		return true
	}
	return c.phase == Down && c.downVerify == 0
}

// maybeCommitBase closes a low-rate episode once we are no longer sending at low rate and all its
// packets have resolved, pushing its loss rate as one baseline sample if it is large enough (else
// it merges with the next episode).
//
// Improvement over the note: the note attributes a round's losses to the round in which they are
// detected, so the first DOWN round mostly counts packets sent during UP; here each packet carries
// a flag saying whether it was sent at low rate, and only those packets form the sample.
func (c *Controller) maybeCommitBase(t int64) {
	if c.lowRes < baseMinPkts || c.lowRateNow() {
		return
	}
	// Wait until every low-rate packet has a fate: losses are declared a reorder window after the
	// acks around them, so closing the episode at the first later ack would miss the losses of its
	// last few milliseconds and bias the baseline low. (Fallback for packets whose fate the session
	// never reports: 4 srtt + 1 s.)
	if c.lowOut > 0 && t-c.lowLastSent < 4*c.srtt+int64(time.Second) {
		return
	}
	c.lowOut = 0
	n, l := c.lowRes, c.lowLost
	hiq := c.lowLostHiQ
	c.lowRes, c.lowLost, c.lowLostHiQ = 0, 0, 0
	L := float64(l) / float64(n)
	if L > lossCeil {
		return // clearly congestive (or a path failure): not a random-loss sample
	}
	if l >= 3 && 2*hiq >= l && c.startupWarmCommitted {
		return // losses clustered at a full queue: self-inflicted, not random
	}
	c.startupWarmCommitted = true
	c.base[c.baseNext] = L
	c.baseNext = (c.baseNext + 1) % baseSamples
	if c.nBase < baseSamples {
		c.nBase++
	}
	s := c.sorted[:c.nBase]
	copy(s, c.base[:c.nBase])
	for i := 1; i < len(s); i++ { // insertion sort: at most 16 values, no allocation
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	var m float64
	if k := len(s); k%2 == 1 {
		m = s[k/2]
	} else {
		m = (s[k/2-1] + s[k/2]) / 2
	}
	c.lossBase = math.Min(m, baseMax)
}

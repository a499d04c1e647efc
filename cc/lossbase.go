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
// This departs from the starting algorithm (docs/CC.md D6), which attributes a round's losses to
// the round in which they are detected, so the first DOWN round mostly counts packets sent during
// UP; here each packet carries a flag saying whether it was sent at low rate, and only those
// packets form the sample.
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
	hiq, hiqN := c.lowLostHiQ, c.lowLostHiQ+c.lowAckedHiQ
	c.lowRes, c.lowLost, c.lowLostHiQ, c.lowAckedHiQ = 0, 0, 0, 0
	L := float64(l) / float64(n)
	if L > lossCeil {
		return // clearly congestive (or a path failure): not a random-loss sample
	}
	// Losses clustered at a full queue are self-inflicted, not random: most of the losses met a
	// high queue, and those packets were lost at well above the baseline. The second condition
	// departs from the starting algorithm (docs/CC.md D7): a DOWN's packets mostly meet the queue
	// its UP left, so with random loss most of their losses are "at a queue" too, and on the first
	// condition alone most DOWN samples were dropped, leaving the baseline to few samples, the
	// noisy warm-up among them (TestRandomLossSeeds).
	if l >= 3 && 2*hiq >= l && c.startupWarmCommitted &&
		float64(hiq) > (c.lossBase+c.lossExcess)*float64(hiqN) {
		return
	}
	c.startupWarmCommitted = true
	c.base[c.baseNext] = baseSample{loss: L, n: n}
	c.baseNext = (c.baseNext + 1) % baseSamples
	if c.nBase < baseSamples {
		c.nBase++
	}
	c.lossBase = math.Min(weightedMedian(c.sorted[:c.nBase], c.base[:c.nBase]), baseMax)
	c.baseN = 0
	for _, b := range c.base[:c.nBase] {
		c.baseN += b.n
	}
	c.setThinning()
}

// baseSample is one low-rate episode's loss rate and the packets it was measured on.
type baseSample struct {
	loss float64
	n    int
}

// weightedMedian returns the median of samples' loss rates, each weighted by its packet count up
// to twice the median count, using s (as long as samples) to sort them in: the rate at which half
// the weight lies on either side (the mean of the two rates where the halves meet exactly on a
// boundary).
//
// This departs from the starting algorithm's plain median (docs/CC.md D8), which gives STARTUP's
// warm-up sample of ~500 packets the same say as a DOWN round's thousands: with two or three
// samples early in a copy a warm-up that read low holds the baseline low for seconds, which makes
// every round's random losses look like an excess. The cap keeps one long episode (an undrained
// DOWN of many rounds, the kind most likely to hold congestion losses) from being the median by
// its size alone.
func weightedMedian(s, samples []baseSample) float64 {
	if len(samples) == 0 {
		return 0
	}
	copy(s, samples)
	// The median count, by a sort on counts first (at most 16 values, no allocation).
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].n < s[j-1].n; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	wmax := 2 * s[len(s)/2].n
	for i := 1; i < len(s); i++ { // then by loss rate
		for j := i; j > 0 && s[j].loss < s[j-1].loss; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	w := func(v baseSample) int { return min(v.n, wmax) }
	total := 0
	for _, v := range s {
		total += w(v)
	}
	acc := 0
	for i, v := range s {
		acc += w(v)
		switch {
		case 2*acc == total && i+1 < len(s):
			return (v.loss + s[i+1].loss) / 2
		case 2*acc >= total:
			return v.loss
		}
	}
	return 0
}

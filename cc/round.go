package cc

// rounds: per-round accounting, the congestion verdicts at the end of each round (docs/CC.md,
// "Congestion verdicts") and the cuts they make.

import (
	"math"
	"time"
)

// Kinds of congestion verdict.
const (
	congLoss = iota
	congQueue
)

type roundAcc struct {
	acked, lost int
	lostHiQ     int // losses, and acks, met while the lane's latest RTT showed a high queue
	ackedHiQ    int
	maxRun      int
	qmin        int64
}

// lostAtQueue says the round's losses, three or more, came mostly while a queue stood: a full
// drop-tail buffer, not random loss.
func (r *roundAcc) lostAtQueue() bool { return r.lost >= 3 && 2*r.lostHiQ >= r.lost }

// runThreshold is the per-lane loss-run length that i.i.d. loss at rate base produces in n
// packets with probability below ~1e-3. This departs from the starting algorithm's fixed
// max(3, 2·run_base) (docs/CC.md D11): at a high random loss and a high rate a round holds
// thousands of losses, a fixed threshold is then reached by chance in a fair share of rounds, and
// every false verdict costs 30 % of the rate until the next probe.
func runThreshold(n int, base float64) int {
	if base < 1e-4 || n <= 0 {
		return 3
	}
	r := int(math.Log(1e-3/float64(n))/math.Log(base)) + 1
	return min(max(r, 3), 32)
}

func (c *Controller) endRound(t int64) {
	c.rounds++
	r := &c.rnd
	n := r.acked + r.lost
	Q := c.prevQ
	if r.qmin != math.MaxInt64 {
		Q = max(r.qmin, 0)
	}
	qh := c.qHigh()
	verdict := -1
	reason := "queue"
	over := c.cruiseGain > 1 // this round was paced above the model (cruiseRound)
	sig := false
	if n > 0 && c.pol != Fixed {
		base := c.lossBase
		L := float64(r.lost) / float64(n)
		nf := float64(n)
		// The baseline is itself a measurement: early in a transfer it rests on STARTUP's
		// 500-packet warm-up alone, which is noisy at a few per cent of loss. Departing from the
		// starting algorithm (docs/CC.md D10), a round must exceed it by its own noise and twice
		// the baseline's (baseSigma) as well. Without that, a warm-up that read low turned the
		// random losses of later rounds into loss cuts (TestRandomLossSeeds).
		u := 2 * c.baseSigma()
		sig = float64(r.lost) > nf*(base+u)+lossZ*math.Sqrt(nf*base*(1-base))+1
		excess := sig && L > base+u+c.lossExcess
		burst := sig && r.maxRun >= runThreshold(n, base)
		hiq := sig && r.lostAtQueue() && L > base+u+c.lossExcess/2
		hard := r.lost >= 3 && L > lossCeil
		// No loss verdicts before the warm-up baseline sample exists (its packets resolve about
		// one round after they were sent, so counting sent packets is not enough).
		warm := !c.startupWarmCommitted
		if c.mode == Startup {
			// Departs from the starting algorithm (docs/CC.md D12): STARTUP leaves on loss only
			// when the loss is clearly ours (a STARTUP overshoot is massive or comes with a queue).
			// The warm-up baseline comes from ~500 packets and is noisy, so an "excess" verdict
			// against it can end STARTUP at a fraction of the capacity, and PROBE_BW then needs
			// ~1.25x per 2–3 s cycle to climb back.
			excess, burst = false, false
		}
		if hard || (!warm && (excess || burst || hiq)) {
			verdict = congLoss
			switch {
			case hard:
				reason = "loss-hard"
			case excess:
				reason = "loss-excess"
			case burst:
				reason = "loss-burst"
			default:
				reason = "loss-at-queue"
			}
		}
	}
	// The queue verdict: a queue above qv in this round and the previous one, in PROBE_BW
	// outside DOWN. Disarmed (a DOWN ended with a queue still standing, which may be another
	// flow's), the delay signal still bounds a queue that keeps growing while we cruise: above
	// half the base RTT. Without that bound CRUISE over a BtlBw a little high (the max filter of
	// noisy samples) can grow a one-BDP queue until it overflows, and the round's losses cut the
	// rate to 0.7 (departs from the starting algorithm: docs/CC.md D23; TestDisarmedQueueBound). A
	// loss-based flow that keeps the queue standing is what competitive mode is for; until it is
	// on, the bound yields to such a flow a little sooner.
	qv, inPhase := qh, c.phase != Down
	if !c.queueArmed {
		qv, inPhase = c.rtprop/2, c.phase == Cruise
	}
	if verdict < 0 && c.pol != Fixed && !c.compete && c.mode == ProbeBW && inPhase && Q > qv && c.prevQ > qv {
		verdict = congQueue
	}
	if verdict < 0 && n > 0 && c.mode != Startup && !r.lostAtQueue() && !over && !sig {
		// A round judged free of congestion (and whose losses did not cluster at a full queue):
		// its losses are random ones. Summed over many rounds this measures the random-loss rate
		// far more precisely than the low-rate baseline samples. Not a round that CRUISE paced
		// above the model, nor one whose losses were significant over the base without a verdict:
		// in a buffer shallower than Q_LOW an overflow never shows as a queue and can stay under
		// the verdicts' margin, and counting it would have FEC send parity on a path with no random
		// loss (docs/CC.md D9; TestShallowerThanQLow). Random losses alone are significant in about
		// one round in a thousand.
		c.rlN += float64(n)
		c.rlLost += float64(r.lost)
		if c.rlN > randomLossSpan {
			c.rlN, c.rlLost = c.rlN/2, c.rlLost/2
		}
		c.setThinning()
	}
	if verdict >= 0 {
		// A full drop-tail queue loses far more than the random rate while it is full.
		atQueue := r.lostHiQ >= 3 && r.lostAtQueue() &&
			float64(r.lostHiQ) > (c.lossBase+c.lossExcess)*float64(r.lostHiQ+r.ackedHiQ)
		if verdict == congLoss && atQueue {
			c.noteOverflow(t)
		}
		if !c.congThisRound {
			v := &c.st.Verdicts
			copy(v[:], v[1:])
			v[len(v)-1] = Verdict{At: time.Duration(t), Reason: reason, Mode: c.mode, Phase: c.phase,
				Acked: r.acked, Lost: r.lost, MaxRun: r.maxRun, LostHiQ: r.lostHiQ, AckedHiQ: r.ackedHiQ,
				LossBase: c.lossBase, Queue: time.Duration(Q), AtQueue: atQueue}
		}
		c.onCongestion(t, verdict, atQueue)
	}
	c.shareAfterRound(t, verdict < 0 && Q > qh)
	if c.recovering {
		if c.congThisRound {
			c.recovering = false
		} else if c.bwLo *= 2; c.bwLo >= math.Min(c.btlbw, c.bwHi) {
			c.bwLo = math.Inf(1)
			c.recovering = false
		}
	}
	c.updateWeights()
	c.cruiseRound(Q, sig, over)
	c.advance(t, Q)
	c.prevQ = Q
	*r = roundAcc{qmin: math.MaxInt64}
	c.bwLatest = 0
	c.congThisRound = false
	c.rndMinRTT = math.MaxInt64
}

// onCongestion applies a verdict of kind; atQueue says the round's losses came with an
// overflowing queue at well above the random-loss rate.
func (c *Controller) onCongestion(t int64, kind int, atQueue bool) {
	if c.congThisRound {
		return
	}
	c.congThisRound = true
	c.st.CongestionEvents++
	beta := c.betaQueue
	if kind == congLoss {
		beta = c.betaLoss
		c.st.LossEvents++
	} else {
		c.st.QueueEvents++
	}
	c.recovering = false
	switch {
	case c.mode == Startup:
		if kind == congLoss {
			c.bwHi = math.Max(c.bwLatest, beta*c.btlbw)
			c.enterDrain(t)
		}
		return
	case c.mode == ProbeBW && (c.phase == Refill || c.phase == Up):
		// Our probe overshot: remember the safe level, drain, no further cut.
		c.bwHi = math.Max(c.bwLatest, beta*c.probeBw0)
		if c.compete && kind == congLoss {
			// A probe into a queue shared with a loss-based flow: back off as that flow does.
			c.bwHi = beta * c.bwLatest
		}
		c.enterDown(t)
		return
	}
	// A delay-only cut stands even when the DOWN it starts shows that the queue is not ours (it
	// used to be undone then). That is what leaves a loss-based flow room: undoing it left CUBIC
	// clearly less of the link (docs/CC.md D15). The ratchet is bounded: an undrained DOWN
	// disarms the delay signal (no queue verdicts until a DOWN drains again), and COMPETE_DOWNS of
	// them in a row switch to competitive mode.
	floor := c.bwLatest // never below the measured delivery rate (our current share)
	if kind == congLoss && (c.compete || atQueue) {
		// Departs from the starting algorithm (docs/CC.md D13): in competitive mode the queue is
		// shared with a loss-based flow and our delivered rate is simply what we send, so "never
		// below the delivery rate" would make the loss response a no-op and starve the
		// competitor. There, a loss verdict is a plain multiplicative decrease of the delivered
		// rate (AIMD, as Copa's competitive mode); probing adds back. The same holds, outside
		// competitive mode, for losses that came with a full queue at well above the random-loss
		// rate: a drop-tail queue overflowing, which a loss-based flow sharing it fills (the
		// delay-based detection of competitive mode need not fire against such a flow).
		floor *= beta
	}
	c.bwLo = math.Max(floor, beta*math.Min(c.bwLo, c.btlbw))
	// Also bound bw_hi (departs from the starting algorithm: docs/CC.md D3). With only bw_lo cut,
	// which REFILL resets to ∞, every probe cycle after a capacity drop restarts from the stale
	// max-filtered BtlBw (up to two cycles old) and re-floods the smaller link. bw_hi is raised
	// again by any uncongested sample above it, so a false verdict costs at most until the next UP.
	c.bwHi = math.Min(c.bwHi, math.Max(floor, beta*math.Min(c.bwHi, c.btlbw)))
	if c.mode == ProbeBW && c.phase != Down {
		// Drain what we queued instead of cruising at 0.99× on top of it, which leaves a full
		// drop-tail buffer standing after a capacity drop (departs from the starting algorithm:
		// docs/CC.md D14); DOWN is also the queue-ownership test.
		c.enterDown(t)
	}
}

// Cruise gain steps: while a CRUISE round's queue never rose above Q_LOW the gain grows by
// cruiseStep per round up to cruiseGainMax; a round whose queue stayed above it sets it back to 1.
const (
	cruiseStep    = 0.005
	cruiseGainMax = 1.03
)

// cruiseRound adapts CRUISE's pacing gain to the round's queue Q (its minimum) and whether its
// losses were significant over the loss base (sig). CRUISE paces at 0.99 × the bandwidth model,
// and with loss before the bottleneck the model is the capacity over (1 − the measured loss):
// where the model reads a little low (a loss base that reads low, a max filter that caught no
// high sample) the queue empties and every datagram lost at an empty queue leaves the link idle
// for its slot. (Where the max filter reads high instead, from ack jitter, CRUISE mostly stands
// on a queue and this changes nothing.) A round whose minimum queue is below Q_LOW has had the
// link run dry or nearly: the gain steps up, a little per round, until a few milliseconds of
// queue stand, and falls back to 1 as soon as they do. A round with significant losses (sig)
// holds it at 1 for the rest of CRUISE, and where that round was paced above 1 (over) for the
// rest of the transfer: a buffer shallower than Q_LOW overflows before any queue shows, and a
// gain left at its cap would overfill it all the while (TestShallowerThanQLow). Only in CRUISE,
// and only where the queue is known to be ours (armed, not competing, not sharing): a standing
// queue that belongs to another flow keeps the gain at 1, as before. The starting algorithm's
// CRUISE gain is 1; what this gained, and where: docs/CC.md D25.
func (c *Controller) cruiseRound(Q int64, sig, over bool) {
	c.cruiseOff = c.cruiseOff || sig && over
	if c.mode != ProbeBW || c.phase != Cruise || c.pol == Fixed || c.compete || c.shared || !c.queueArmed ||
		c.cruiseOff || c.cruiseHeld || sig {
		c.cruiseGain = 1
		c.cruiseHeld = c.cruiseHeld || sig && c.mode == ProbeBW && c.phase == Cruise
		return
	}
	if Q < c.qLow() {
		c.cruiseGain = min(c.cruiseGain+cruiseStep, cruiseGainMax)
	} else {
		c.cruiseGain = 1
	}
}

// baseSigma is the standard error of the loss baseline: binomial, over the packets of the samples
// it was taken from (0 before any, or on a path that has lost nothing).
func (c *Controller) baseSigma() float64 {
	if c.baseN <= 0 || c.lossBase <= 0 {
		return 0
	}
	return math.Sqrt(c.lossBase * (1 - c.lossBase) / float64(c.baseN))
}

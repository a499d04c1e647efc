package cc

// state machine: STARTUP, DRAIN, PROBE_BW (DOWN, CRUISE, REFILL, UP) and PROBE_RTT, their
// transitions and what each entry resets (docs/CC.md, "States").

import "math"

func (c *Controller) advance(t int64, Q int64) {
	c.phaseRounds++
	switch c.mode {
	case Startup:
		if b := c.bw(); b >= 1.25*c.fullBw {
			c.fullBw, c.fullCnt = b, 0
		} else if c.appLimitedUntil == 0 {
			c.fullCnt++
		}
		// A seeded STARTUP that has delivered the estimate (fullBw at least seedConfirm of it)
		// paces the next round at 1.25 × it; if that round's delivery rate stays under
		// seedConfirmHi × the estimate, the pipe is full at the estimate, and one round without
		// growth ends STARTUP, not three: each further round at 1.25 × adds a quarter of a BDP
		// to the queue, which DRAIN then takes out at a third of the rate (departs from the
		// starting algorithm: docs/CC.md D30). A low estimate delivers its 1.25 × (over
		// seedConfirmHi) and grows as before; a high one never delivers seedConfirm of it.
		confirmed := c.seedBw > 0 && c.resumeBps == 0 && c.fullCnt >= 1 &&
			c.fullBw >= seedConfirm*c.seedBw && c.btlbw < seedConfirmHi*c.seedBw
		if c.fullCnt >= 3 || confirmed || Q > max(c.qHigh(), c.rtprop/4) {
			c.enterDrain(t)
		}
	case ProbeBW:
		switch c.phase {
		case Down:
			// RTT samples lag the queue by up to an RTT: judge only once they can reflect DOWN.
			if c.phaseRounds >= 2 && t-c.phaseStart >= c.rtprop+c.srtt {
				// Keep draining while the queue is visibly shrinking (our own queue after a capacity
				// drop can take many rounds); declare "undrained" only when it does not respond to
				// our rate cut (departs from the starting algorithm: docs/CC.md D22).
				// Inflight beyond one BDP is by definition our own data sitting in a queue, and
				// unlike the RTT samples it does not lag; shrinking samples also count.
				if c.phaseRounds < maxDownRnds &&
					(float64(c.inflight) > 1.1*c.bdp(c.bw()) || Q < c.downQ0*7/10) {
					c.downQ0 = min(c.downQ0, Q)
					break
				}
				c.downEnd(t, false)
			}
		case Refill:
			if c.phaseRounds >= 1 {
				c.enterUp(t)
			}
		case Up:
			// Growth threshold 1.1, not the starting algorithm's 1.25 (docs/CC.md D26). UP paces
			// at 1.25x (less the 1 % margin), so real headroom shows as ~1.24x per round and a
			// 1.25 test ends every probe after one step; the queue and loss exits stop UP at the
			// ceiling instead.
			if b := c.bw(); b >= 1.1*c.fullBw {
				c.fullBw, c.fullCnt = b, 0
			} else {
				c.fullCnt++
			}
			if c.fullCnt >= 2 {
				c.enterDown(t)
			}
		}
	}
}

// downEnd leaves DOWN without the queue having emptied. responded says the queue shrank clearly
// while we slowed (ours, at least partly); otherwise the DOWN counts as undrained: the delay
// signal is disarmed (docs/CC.md D23), and after COMPETE_DOWNS in a row we compete.
func (c *Controller) downEnd(t int64, responded bool) {
	switch {
	case min(c.lastQ, c.rnd.qmin) < c.qHigh():
		// Neither drained below Q_LOW nor standing above Q_HIGH: no evidence either way.
	case responded:
		c.downsUndrained = 0
		c.queueArmed = true
	default:
		c.downsUndrained++
		c.queueArmed = false
		if c.mayCompete && c.downsUndrained >= competeDowns {
			c.compete = true
		}
	}
	c.enterPhase(t, Cruise)
}

// checkState runs the per-ack and timer transitions.
func (c *Controller) checkState(t int64) {
	switch c.mode {
	case Drain:
		if float64(c.inflight) <= c.bdp(c.btlbw) {
			c.enterProbeBW(t, Down)
		}
	case ProbeRTT:
		cap := c.probeRTTCap()
		if c.probeRTTDone == 0 && float64(c.inflight) <= cap {
			c.probeRTTDone = t + max(probeRTTTime, c.rtprop)
			c.probeRTTRound = c.rounds
		} else if c.probeRTTDone != 0 && t >= c.probeRTTDone && c.rounds > c.probeRTTRound {
			c.setRtprop(t, min(c.rtprop, c.rndMinRTT))
			c.rtpropStamp = t
			c.enterProbeBW(t, Cruise)
		}
	case ProbeBW:
		switch c.phase {
		case Down:
			// DOWN lasts at least one rtprop even when nothing is queued (departs from the starting
			// algorithm: docs/CC.md D20). Leaving DOWN as soon as inflight <= BDP, which after a
			// short UP is a few milliseconds, means its low-rate rounds never gather enough packets
			// for a baseline sample. A full round at 0.9x costs ~0.5 % of a 2–3 s cycle.
			if t-c.phaseStart >= c.rtprop {
				if c.lastQ < c.qLow() {
					// The queue emptied when we slowed: it was ours. (A capacity drop also
					// overflows the queue while we cruise; this is what tells it from a loss-based
					// flow, which keeps the queue standing through our DOWN.)
					c.downsUndrained = 0
					c.compete = false
					c.shared = false
					c.queueArmed = true
					c.enterPhase(t, Cruise)
				} else if c.downVerify == 0 && float64(c.inflight) <= c.bdp(c.bw()) {
					// Our inflight is back to one BDP but a queue is still reported. The starting
					// algorithm counts this as "drained" (docs/CC.md D21), but inflight <= bw·rtprop
					// also holds when rtprop itself has been inflated by a competitor's standing
					// queue, and then competitive mode is left after every probe. RTT samples lag
					// the queue by up to an RTT, so hold the rate (gain 1) for one srtt and judge by
					// what the samples then show.
					c.downVerify = t
				} else if c.downVerify != 0 && t-c.downVerify >= c.srtt {
					c.downEnd(t, c.lastQ < c.downQ0*7/10)
				}
			}
		case Cruise:
			// Probe again after PROBE_WAIT (2–3 s), or after probeMaxRounds round trips when
			// those pass sooner (BBRv2's Reno-coexistence bound, min(BDP in packets, 63) rounds):
			// on a short path the clock alone holds a copy at the cut rate for seconds after one
			// loss event (departs from the starting algorithm: docs/CC.md D24;
			// TestCruiseProbesAfterRounds).
			if !c.timeoutActive && (t-c.phaseStart >= c.probeWaitDur ||
				c.phaseRounds >= min(probeMaxRounds, max(int(c.bdp(c.bw())/float64(c.mss)), 1))) {
				c.enterRefill(t)
			}
		case Up:
			// End the probe as soon as it builds a queue (latest sample, or inflight beyond BDP +
			// Q_HIGH's worth), not at the end of a round on the round's minimum, which in a deep
			// buffer leaves a large part of a BDP queued per probe (departs from the starting
			// algorithm: docs/CC.md D27).
			if !c.compete {
				b := c.bw()
				// Pacing at 1.25x alone puts 1.25 BDP in flight; only more than that is queue.
				lim := upGain*c.bdp(b)*(1+1.5*c.lossBase) + b*float64(c.qHigh())/1e9
				if c.lastQ > c.qHigh() || float64(c.inflight) > lim {
					c.enterDown(t)
				}
			}
		}
	}
}

func (c *Controller) probeRTTCap() float64 {
	return math.Max(0.5*c.bdp(c.bw()), float64(4*c.mss))
}

func (c *Controller) enterDrain(t int64) {
	c.mode, c.modeStart = Drain, t
	c.drainRound = c.rounds // marks DRAIN's first round (see lowRateNow)
	c.phaseRounds = 0
}

func (c *Controller) enterProbeBW(t int64, ph Phase) {
	c.mode, c.modeStart = ProbeBW, t
	if ph == Down {
		c.enterDown(t)
		return
	}
	c.enterPhase(t, ph)
}

func (c *Controller) enterPhase(t int64, ph Phase) {
	c.phase, c.phaseStart, c.phaseRounds = ph, t, 0
	c.downVerify = 0
	if ph == Cruise {
		c.cruiseGain, c.cruiseHeld = 1, false
		c.probeWaitDur = probeWait + int64(c.rand01()*float64(probeJitter))
	}
}

func (c *Controller) enterDown(t int64) {
	c.enterPhase(t, Down)
	c.downQ0 = max(c.lastQ, 0)
}

func (c *Controller) enterRefill(t int64) {
	c.enterPhase(t, Refill)
	c.bwLo = math.Inf(1)
	// New probe cycle: the max filter keeps this cycle and the previous one (BBRv3), not the
	// starting algorithm's 10 rounds (docs/CC.md D1): below a 200 ms round trip ten rounds are
	// shorter than PROBE_WAIT (2–3 s), so BtlBw would decay to CRUISE samples (0.99× each cycle,
	// less under loss) between probes.
	c.bwSlot[1], c.bwSlot[0] = c.bwSlot[0], 0
	c.btlbw = c.bwSlot[1]
}

func (c *Controller) enterUp(t int64) {
	c.enterPhase(t, Up)
	c.probeBw0 = c.bw()
	c.fullBw, c.fullCnt = c.probeBw0, 0
}

func (c *Controller) enterProbeRTT(t int64) {
	c.mode, c.modeStart = ProbeRTT, t
	c.st.ProbeRTTs++
	c.probeRTTDone = 0
	c.rtpropStamp = t // the filter restarts from the samples taken in PROBE_RTT
	if w := c.windowMinRTT(); w < math.MaxInt64 {
		c.rtprop = w
	}
}

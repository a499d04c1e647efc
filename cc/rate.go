package cc

// rate: the pacing rate and the inflight cap, from the state's gain and the bandwidth model.

import (
	"math"
	"time"
)

// downPacingGain: the starting algorithm's DOWN is 0.90× for one round. When a standing queue
// above Q_HIGH is visible (after a capacity drop or an overshoot) drain it in about one round
// instead, as BBRv1's 0.75 does, but never deeper than 0.75 (docs/CC.md D19).
func (c *Controller) downPacingGain() float64 {
	if c.lastQ > c.qHigh() && c.rtprop > 0 {
		return math.Max(downGainMin, math.Min(downGain, 1-float64(c.lastQ)/float64(c.rtprop)))
	}
	return downGain
}

func (c *Controller) setRate() {
	var gain float64
	switch c.mode {
	case Startup:
		gain = startupGain
	case Drain:
		gain = drainGain
	case ProbeRTT:
		gain = 1
	default:
		switch c.phase {
		case Down:
			gain = c.downPacingGain()
			if c.downVerify != 0 {
				gain = 1
			}
		case Up:
			gain = upGain
		case Cruise:
			gain = max(c.cruiseGain, 1)
		default:
			gain = 1
		}
	}
	b := c.bw()
	r := gain * b * (1 - pacingMargin) * 8
	if c.mode == Startup && c.seedBw > 0 {
		// With a measured capacity STARTUP need not grow blindly: it may exceed the estimate by a
		// quarter, which keeps the overshoot to a fraction of a BDP of queue instead of the 1.77
		// BDP a 2.77× round can leave there. Once the path has delivered clearly more than the
		// estimate, the estimate was low: STARTUP then doubles per round from what it delivered
		// (a quarter per round climbs slowly from a low estimate on a long path; docs/CC.md D17).
		if c.btlbw < seedProven*c.seedBw {
			r = math.Min(r, 1.25*c.seedBw*8)
		} else {
			r = math.Min(r, 2*c.btlbw*8)
		}
	}
	if c.shared {
		if b := c.capacity(); b > 0 {
			r = math.Min(r, fairShare*b*8)
		}
	}
	var capB float64
	if c.mode == ProbeRTT {
		capB = c.probeRTTCap()
	} else {
		capB = cwndGain * c.bdp(b)
		if c.mode == Startup {
			if c.seedBw > 0 {
				// The window must not hold a seeded STARTUP below its pacing rate: cwndGain × a bw
				// of a third of the estimate held the first round well under it (docs/CC.md D17).
				capB = math.Max(capB, seedCwnd*r/8*float64(c.rtprop)/1e9)
			}
			capB = math.Max(capB, float64(iwPkts*c.mss))
		}
	}
	if c.pol == Fixed && c.cfg.MaxRate > 0 {
		r = c.cfg.MaxRate
		// Hold the rate regardless of signals: the window must never be what limits it.
		capB = math.Max(capB, 4*r/8*float64(max(c.srtt, c.rtprop))/1e9)
	}
	if c.cfg.MaxRate > 0 && r > c.cfg.MaxRate {
		r = c.cfg.MaxRate
	}
	if r < c.cfg.MinRate {
		r = c.cfg.MinRate
		capB = math.Max(capB, 2*r/8*float64(max(c.srtt, c.rtprop))/1e9)
	}
	floor := float64(4*c.mss) * 8 / (float64(max(c.rtprop, int64(time.Millisecond))) / 1e9)
	if r < floor {
		r = floor
	}
	c.pacing = r
	c.cap = int(math.Max(capB, float64(4*c.mss)))
}

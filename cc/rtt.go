package cc

// RTT: the smoothed round trip, rtprop (the min filter, re-taken by PROBE_RTT or from the 10 s
// window) and the standing-queue thresholds Q_HIGH and Q_LOW.

import (
	"math"
	"time"
)

// qHigh and qLow are the standing-queue thresholds Q_HIGH and Q_LOW in ns (docs/CC.md, "Signals").
func (c *Controller) qHigh() int64 {
	if c.pol == Low {
		return c.qHighFloor
	}
	return max(c.qHighFloor, c.rtprop*15/100)
}

func (c *Controller) qLow() int64 {
	q := max(int64(2*time.Millisecond), c.rtprop*3/100)
	return min(q, c.qHigh()/2)
}

func (c *Controller) onRTT(t int64, ln *laneState, rtt int64) {
	ln.lastRTT = rtt
	c.latestRTT = rtt
	if ln.srtt == 0 {
		ln.srtt, ln.rttvar = rtt, rtt/2
	} else {
		ln.rttvar += (abs64(ln.srtt-rtt) - ln.rttvar) / 4
		ln.srtt += (rtt - ln.srtt) / 8
	}
	if c.rtpropStamp < 0 {
		c.srtt, c.rttvar = rtt, rtt/2
	} else {
		c.rttvar += (abs64(c.srtt-rtt) - c.rttvar) / 4
		c.srtt += (rtt - c.srtt) / 8
	}
	if rtt < c.rndMinRTT {
		c.rndMinRTT = rtt
	}
	if t-c.rttBktStart >= rtpropWin/4 {
		copy(c.rttBkt[1:], c.rttBkt[:3])
		c.rttBkt[0] = math.MaxInt64
		c.rttBktStart = t
	}
	if rtt < c.rttBkt[0] {
		c.rttBkt[0] = rtt
	}
	if c.rtpropStamp < 0 || rtt <= c.rtprop {
		c.rtprop, c.rtpropStamp = rtt, t
	} else if rtt <= c.rtprop+c.qLow() && c.mode != ProbeRTT {
		// Departs from the starting algorithm's strict "<=" (docs/CC.md D4): a sample within
		// Q_LOW of rtprop confirms it (the path's round trip has not risen by more than Q_LOW),
		// so the filter's window restarts without PROBE_RTT. rtprop itself stays the measured
		// minimum, so confirmations never drift it upwards. The strict test narrowly missed after
		// most DOWNs that drained our queue, and each PROBE_RTT it then ran (half a BDP in flight
		// for 200 ms and a round) cost the transfer link time every 10 s
		// (TestRtpropConfirmedWithinQLow).
		c.rtpropStamp = t
	} else if t-c.rtpropStamp > rtpropWin && (c.mode != ProbeRTT || c.compete) {
		if c.mayProbeRTT() {
			c.enterProbeRTT(t)
		} else {
			// Without PROBE_RTT (competitive or Fixed) re-seed rtprop from the min over the last
			// 10 s (2.5 s buckets), not from one arbitrary sample (departs from the starting
			// algorithm: docs/CC.md D5).
			c.setRtprop(t, c.windowMinRTT())
		}
	}
	q := rtt - c.rtprop
	c.lastQ = q
	// STARTUP watches every sample, not the round's minimum (departs from the starting algorithm:
	// docs/CC.md D16). A round at 2.77× builds a queue of 1.77 round trips' worth of the excess
	// before the round-end check can see it; a run of samples over the threshold ends STARTUP
	// within a few feedback intervals instead.
	if c.mode == Startup && c.rtpropStamp >= 0 {
		if q > max(c.qHigh(), c.rtprop/4) {
			if c.startupHighQ++; c.startupHighQ >= startupQSamples {
				c.enterDrain(t)
				c.setRate()
			}
		} else {
			c.startupHighQ = 0
		}
	}
	if q < c.rnd.qmin {
		c.rnd.qmin = q
	}
	if q < ln.qmin {
		ln.qmin = q
	}
}

func (c *Controller) setRtprop(t, v int64) {
	if v >= math.MaxInt64/2 {
		return
	}
	// Raising rtprop does not reset the queue-ownership state: a competitor's standing queue
	// inflates rtprop exactly like a path change does, and only a DOWN that drains (measured against
	// the new value) re-arms the delay signal.
	c.rtprop, c.rtpropStamp = v, t
}

func (c *Controller) mayProbeRTT() bool { return !c.compete && c.pol != Fixed }

// windowMinRTT is the min RTT over the last 7.5–10 s.
func (c *Controller) windowMinRTT() int64 {
	m := c.rttBkt[0]
	for _, v := range c.rttBkt[1:] {
		m = min(m, v)
	}
	return m
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

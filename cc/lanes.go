package cc

// lanes: the per-lane state and the lane weights (docs/CC.md, "Lanes").

import "math"

type laneState struct {
	r        ring
	srtt     int64
	rttvar   int64
	lastRTT  int64
	lastLost uint64
	run      int
	// per round
	acked, lost int
	qmin        int64
	badRounds   int
}

func (c *Controller) updateWeights() {
	nl := len(c.lanes)
	if nl < 2 {
		for i := range c.lanes {
			c.lanes[i].acked, c.lanes[i].lost, c.lanes[i].qmin = 0, 0, math.MaxInt64
		}
		return
	}
	// Median loss and queue over lanes (insertion sort in the fixed scratch array).
	var ls, qs [64]float64
	k := 0
	for i := range c.lanes {
		ln := &c.lanes[i]
		if n := ln.acked + ln.lost; n > 0 && k < len(ls) {
			ls[k] = float64(ln.lost) / float64(n)
			q := ln.qmin
			if q == math.MaxInt64 {
				q = 0
			}
			qs[k] = float64(q)
			k++
		}
	}
	if k >= 2 {
		mL, mQ := median(ls[:k]), median(qs[:k])
		qh := float64(c.qHigh())
		sum := 0.0
		for i := range c.lanes {
			ln := &c.lanes[i]
			n := ln.acked + ln.lost
			bad := false
			if n > 0 {
				nf := float64(n)
				L := float64(ln.lost) / nf
				exc := L-mL > c.lossExcess && float64(ln.lost) > nf*mL+lossZ*math.Sqrt(nf*mL*(1-mL))+1
				q := ln.qmin
				if q == math.MaxInt64 {
					q = 0
				}
				bad = exc || float64(q)-mQ > qh
			}
			if bad {
				ln.badRounds++
			} else {
				ln.badRounds = 0
			}
			if ln.badRounds >= 3 {
				c.w[i] = math.Max(weightFloor, 0.9*c.w[i])
			} else {
				c.w[i] += 0.02 * (1/float64(nl) - c.w[i])
			}
			sum += c.w[i]
		}
		for i := range c.w {
			c.w[i] /= sum
		}
	}
	for i := range c.lanes {
		c.lanes[i].acked, c.lanes[i].lost, c.lanes[i].qmin = 0, 0, math.MaxInt64
	}
}

func median(s []float64) float64 {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	k := len(s)
	if k%2 == 1 {
		return s[k/2]
	}
	return (s[k/2-1] + s[k/2]) / 2
}

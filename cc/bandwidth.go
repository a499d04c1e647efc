package cc

// bandwidth: the delivery-rate samples and the bandwidth model built from them (BtlBw, bw_hi,
// bw_lo), and the BDP.

import "math"

// bw is the bandwidth the rate is built on (bytes/s).
func (c *Controller) bw() float64 {
	if c.mode == Startup {
		return math.Max(c.btlbw, c.initBw)
	}
	b := math.Min(c.btlbw, math.Min(c.bwHi, c.bwLo))
	if b <= 0 {
		b = c.initBw
	}
	return b
}

func (c *Controller) bdp(bw float64) float64 { return bw * float64(c.rtprop) / 1e9 }

// rateSample takes the delivery-rate sample of the newly acked packet p (draft-cheng §3.3) and
// feeds the bandwidth model with it: bw_latest, the BtlBw max filter and bw_hi.
func (c *Controller) rateSample(t int64, p *pkt) {
	sendEl := p.sentAt - p.firstSentAt
	ackEl := t - p.deliveredAt
	c.firstSentAt = p.sentAt
	// A sample over a short interval reads high when its acks came in a burst (the receiver's
	// feedback held for a stalled lane, a path that stalls and then releases what it held): over
	// half a round trip, a 10 ms burst reads 14 % high at 140 ms, and BtlBw is a max filter of
	// them. Outside STARTUP, whose samples must follow a rate that doubles each round, only
	// intervals of a whole round trip count.
	minIv := c.rtprop
	if c.mode == Startup {
		minIv = c.rtprop / 2
	}
	if iv := max(sendEl, ackEl); iv > 0 && (c.rtpropStamp < 0 || iv >= minIv) {
		rate := float64(c.delivered-p.delivered) / (float64(iv) / 1e9)
		// Undo random thinning (docs/CC.md, "Signals"): with loss before the bottleneck a sender
		// at rate R delivers R(1-p), so this is the send rate that the delivered rate corresponds
		// to.
		cr := rate / (1 - c.thin)
		if cr > c.bwLatest {
			c.bwLatest = cr
		}
		if p.flags&flAppLimited == 0 || cr > c.btlbw {
			if cr > c.bwSlot[0] {
				c.bwSlot[0] = cr
				c.btlbw = math.Max(c.bwSlot[0], c.bwSlot[1])
			}
		}
		if !c.congThisRound && cr > c.bwHi {
			c.bwHi = cr // a higher level proven safe
		}
	}
}

// setThinning sets thin, the random-loss rate that the delivery-rate samples are corrected by
// (once per acked packet, so it is kept rather than worked out there; its inputs change at a
// round's end and at a baseline sample, which call this): RandomLoss,
// the loss rate of the congestion-free rounds once they hold enough packets, within twice the
// loss base's standard error of the base (else the base). This departs from the starting
// algorithm, which corrects by the base itself (docs/CC.md D2): the base is the median of a few
// low-rate samples and reads further off the random rate than the rounds do, and whatever it
// reads high puts BtlBw that much above the capacity, a queue that grows while CRUISE lasts and
// draws a queue cut. The bound keeps congestion losses that no verdict caught (which the rounds'
// rate would take in) from raising BtlBw, which would overfill the queue further.
func (c *Controller) setThinning() {
	u := 2 * c.baseSigma()
	c.thin = math.Min(math.Max(c.RandomLoss(), c.lossBase-u), math.Min(c.lossBase+u, baseMax))
}

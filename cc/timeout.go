package cc

// feedback timeout: no feedback for max(4 srtt, 1 s) with data in flight halves the rate
// (TFRC-style); recovery doubles it back per round (endRound).

func (c *Controller) feedback(t int64) {
	c.lastFeedback = t
	if c.timeoutActive {
		c.timeoutActive = false
		c.recovering = true
	}
}

func (c *Controller) onTimeout(t int64) {
	if c.pol == Fixed {
		return
	}
	c.st.FeedbackTimeouts++
	c.lastTimeout = t
	c.timeoutActive = true
	c.recovering = false
	if c.mode == Startup || c.mode == Drain {
		c.enterProbeBW(t, Cruise)
	}
	c.bwLo = 0.5 * c.bw()
}

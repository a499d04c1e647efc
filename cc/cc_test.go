package cc

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestParsePolicy(t *testing.T) {
	for s, want := range map[string]Policy{"fair": Fair, "HIGH": High, " fixed ": Fixed, "low": Low, "": Fair} {
		got, err := ParsePolicy(s)
		if err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", s, got, err, want)
		}
		if s != "" && s != " fixed " && s != "HIGH" && got.String() != s {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if _, err := ParsePolicy("turbo"); err == nil {
		t.Error("ParsePolicy(turbo) succeeded")
	}
}

// drive runs a simple closed loop: one packet per lane per step, acked one RTT later, every
// lossEvery-th packet lost.
func drive(c *Controller, steps int, rtt time.Duration, lossEvery uint64) time.Time {
	l := &loop{c: c, now: t0, rtt: rtt, lossEvery: lossEvery}
	l.steps(steps)
	return l.now
}

// loop is drive's state, for tests that change the controller between stretches of it.
type loop struct {
	c         *Controller
	now       time.Time
	rtt       time.Duration
	lossEvery uint64
	seq       [4]uint64
	q         []loopPkt
}

type loopPkt struct {
	lane int
	seq  uint64
	at   time.Time
}

// steps runs n steps of 100 µs.
func (l *loop) steps(n int) {
	c := l.c
	for i := 0; i < n; i++ {
		l.now = l.now.Add(100 * time.Microsecond)
		for ln := 0; ln < 4; ln++ {
			if c.Inflight()+1500 <= c.InflightCap() {
				c.OnSent(l.now, ln, l.seq[ln], 1500, false)
				l.q = append(l.q, loopPkt{ln, l.seq[ln], l.now})
				l.seq[ln]++
			}
		}
		for len(l.q) > 0 && l.now.Sub(l.q[0].at) >= l.rtt {
			p := l.q[0]
			l.q = l.q[1:]
			if l.lossEvery > 0 && p.seq%l.lossEvery == l.lossEvery-1 {
				c.OnLoss(l.now, p.lane, p.seq, 1500)
			} else {
				c.OnAck(l.now, p.lane, p.seq, 1500, l.now.Sub(p.at))
			}
		}
		if i%10 == 0 {
			c.Tick(l.now)
		}
	}
}

func TestPerPacketNoAllocs(t *testing.T) {
	c := New(Config{MSS: 1500, Lanes: 4, InitialRTT: 50 * time.Millisecond, Seed: 1}, t0)
	now := drive(c, 20000, 50*time.Millisecond, 50)
	var seq uint64 = 1 << 20
	allocs := testing.AllocsPerRun(2000, func() {
		now = now.Add(10 * time.Microsecond)
		c.OnSent(now, 1, seq, 1500, false)
		c.OnSent(now, 1, seq+1, 1500, false)
		c.OnAck(now.Add(time.Millisecond), 1, seq, 1500, 50*time.Millisecond)
		c.OnLoss(now.Add(time.Millisecond), 1, seq+1, 1500)
		c.Tick(now)
		seq += 2
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per OnSent+OnAck+OnLoss+Tick, want 0", allocs)
	}
}

func TestRingGrowsAndAccounts(t *testing.T) {
	c := New(Config{MSS: 1500, Lanes: 2, RingSize: 1024, Seed: 1}, t0)
	now := t0
	const n = 10000 // ten times the initial ring, all outstanding
	for i := uint64(0); i < n; i++ {
		c.OnSent(now, 0, i, 1500, false)
	}
	if got := c.Inflight(); got != n*1500 {
		t.Fatalf("inflight %d, want %d", got, n*1500)
	}
	now = now.Add(100 * time.Millisecond)
	for i := uint64(0); i < n; i++ {
		if i%100 == 0 {
			c.OnLoss(now, 0, i, 1500)
		} else {
			c.OnAck(now, 0, i, 1500, 100*time.Millisecond)
		}
	}
	if got := c.Inflight(); got != 0 {
		t.Fatalf("inflight %d after all resolved, want 0", got)
	}
	// Duplicate ack, late ack of a lost packet, unknown lane/seq: no double counting.
	c.OnAck(now, 0, 5, 1500, 0)
	c.OnAck(now, 0, 100, 1500, 0)
	c.OnAck(now, 1, 77, 1500, 0)
	c.OnLoss(now, 0, 6, 1500)
	c.OnAck(now, 9, 1, 1500, 0)
	s := c.Stats()
	if c.Inflight() != 0 || s.SpuriousLosses != 1 || s.LostPkts != n/100 {
		t.Fatalf("inflight %d spurious %d lost %d", c.Inflight(), s.SpuriousLosses, s.LostPkts)
	}
}

func TestFixedHoldsMaxRate(t *testing.T) {
	c := New(Config{MSS: 1500, Lanes: 4, Policy: Fixed, MaxRate: 100e6, InitialRTT: 20 * time.Millisecond, Seed: 1}, t0)
	drive(c, 20000, 20*time.Millisecond, 5) // 20 % loss
	if r := c.PacingRate(); r != 100e6 {
		t.Fatalf("fixed pacing %v, want 100e6", r)
	}
	c.OnFeedbackTimeout(t0.Add(time.Hour))
	if r := c.PacingRate(); r != 100e6 {
		t.Fatalf("fixed pacing after timeout %v", r)
	}
}

func TestRateBounds(t *testing.T) {
	c := New(Config{MSS: 1500, Lanes: 4, MaxRate: 50e6, MinRate: 20e6, InitialRTT: 20 * time.Millisecond, Seed: 1}, t0)
	now := drive(c, 30000, 20*time.Millisecond, 0)
	if r := c.PacingRate(); r > 50e6 {
		t.Fatalf("pacing %v above MaxRate", r)
	}
	// Feedback stops: timeouts halve, but never below MinRate.
	for i := 0; i < 20; i++ {
		now = now.Add(500 * time.Millisecond)
		c.Tick(now)
		if r := c.PacingRate(); r < 20e6 {
			t.Fatalf("pacing %v below MinRate", r)
		}
	}
	if c.Stats().FeedbackTimeouts < 3 {
		t.Fatalf("timeouts %d", c.Stats().FeedbackTimeouts)
	}
}

func TestFeedbackTimeoutHalves(t *testing.T) {
	c := New(Config{MSS: 1500, Lanes: 4, InitialRTT: 20 * time.Millisecond, Seed: 1}, t0)
	now := drive(c, 30000, 20*time.Millisecond, 0)
	r0 := c.PacingRate()
	if c.Inflight() == 0 {
		c.OnSent(now, 0, 1<<30, 1500, false)
	}
	c.Tick(now.Add(1100 * time.Millisecond))
	r1 := c.PacingRate()
	c.Tick(now.Add(2200 * time.Millisecond))
	r2 := c.PacingRate()
	if math.Abs(r1/r0-0.5) > 0.06 || math.Abs(r2/r1-0.5) > 0.06 {
		t.Fatalf("rates %.1f -> %.1f -> %.1f Mbit/s, want halving", r0/1e6, r1/1e6, r2/1e6)
	}
}

func TestLaneWeightsSumToOne(t *testing.T) {
	c := New(Config{MSS: 1500, Lanes: 4, Seed: 1}, t0)
	drive(c, 5000, 20*time.Millisecond, 0)
	w := c.LaneWeights()
	s := 0.0
	for _, v := range w {
		s += v
	}
	if len(w) != 4 || math.Abs(s-1) > 1e-9 {
		t.Fatalf("weights %v", w)
	}
}

func TestRunThreshold(t *testing.T) {
	// At 5 % i.i.d. loss in 5000 packets a run of 4 is common, so the threshold must be above it.
	if r := runThreshold(5000, 0.05); r < 6 {
		t.Fatalf("runThreshold(5000, 5%%) = %d", r)
	}
	if r := runThreshold(5000, 0); r != 3 {
		t.Fatalf("runThreshold(5000, 0) = %d", r)
	}
}

// BenchmarkOnSentOnAck is the per-packet cost: one OnSent and one OnAck (with an RTT sample and a
// delivery-rate sample) per iteration, in steady state.
func BenchmarkOnSentOnAck(b *testing.B) {
	c := New(Config{MSS: 1500, Lanes: 4, InitialRTT: 50 * time.Millisecond, Seed: 1}, t0)
	now := drive(c, 20000, 50*time.Millisecond, 0)
	const lag = 4096 // packets in flight
	var seq [4]uint64
	for i := 0; i < lag; i++ {
		l := i & 3
		c.OnSent(now, l, seq[l], 1500, false)
		seq[l]++
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(2 * time.Microsecond)
		l := i & 3
		c.OnSent(now, l, seq[l], 1500, false)
		c.OnAck(now, l, seq[l]-lag/4, 1500, 50*time.Millisecond)
		seq[l]++
	}
}

// TestCruiseProbesAfterRounds: after a loss event leaves CRUISE capped at bwLo, a short path
// probes again (REFILL lifts bwLo) within probeMaxRounds round trips, long before PROBE_WAIT; a
// long one still waits for the clock.
func TestCruiseProbesAfterRounds(t *testing.T) {
	for _, c := range []struct {
		rtt   time.Duration
		after time.Duration // how long to run once capped
		lift  bool
	}{
		{time.Millisecond, 150 * time.Millisecond, true},
		{140 * time.Millisecond, 1500 * time.Millisecond, false},
	} {
		cc := New(Config{MSS: 1500, Lanes: 4, InitialRTT: c.rtt, Seed: 1}, t0)
		l := &loop{c: cc, now: t0, rtt: c.rtt}
		run := func(d time.Duration) { l.steps(int(d / (100 * time.Microsecond))) }
		run(20 * c.rtt) // out of STARTUP
		if cc.mode != ProbeBW {
			t.Fatalf("rtt %v: mode %v after 20 round trips, want PROBE_BW", c.rtt, cc.mode)
		}
		// What a loss event leaves behind: CRUISE, capped at bwLo.
		cc.bwLo = cc.bw() / 2
		cc.enterPhase(cc.ts(l.now), Cruise)
		run(c.after)
		lifted := math.IsInf(cc.bwLo, 1)
		if lifted != c.lift {
			t.Errorf("rtt %v: %v after the cap, bwLo lifted %v (phase %v, %d rounds in it), want %v",
				c.rtt, c.after, lifted, cc.phase, cc.phaseRounds, c.lift)
		}
	}
}

// A round trip that stays within Q_LOW of rtprop confirms it without PROBE_RTT; one that rose by
// more (a longer route) still expires it after 10 s, and PROBE_RTT re-takes it.
func TestRtpropConfirmedWithinQLow(t *testing.T) {
	cc := New(Config{MSS: 1500, Lanes: 4, InitialRTT: 140 * time.Millisecond, Seed: 1}, t0)
	l := &loop{c: cc, now: t0, rtt: 140 * time.Millisecond}
	run := func(d time.Duration) { l.steps(int(d / (100 * time.Microsecond))) }
	run(3 * time.Second)
	if got := cc.Stats().MinRTT; got != 140*time.Millisecond {
		t.Fatalf("rtprop %v after 3 s at 140 ms", got)
	}
	l.rtt = 140*time.Millisecond + time.Duration(cc.qLow())/2
	run(25 * time.Second)
	if s := cc.Stats(); s.ProbeRTTs != 0 || s.MinRTT != 140*time.Millisecond {
		t.Errorf("round trip %v for 25 s: %d PROBE_RTTs, rtprop %v; want none, 140ms", l.rtt, s.ProbeRTTs, s.MinRTT)
	}
	l.rtt = 150 * time.Millisecond
	run(12 * time.Second)
	if s := cc.Stats(); s.ProbeRTTs != 1 || s.MinRTT != 150*time.Millisecond {
		t.Errorf("round trip 150ms for 12 s: %d PROBE_RTTs, rtprop %v; want 1, 150ms", s.ProbeRTTs, s.MinRTT)
	}
}

// The controller keeps the session's one RTT estimate: the handshake's value until the first
// sample, which replaces it, then RFC 6298's averages; the newest sample of any lane and of each.
func TestRTTEstimate(t *testing.T) {
	ms := time.Millisecond
	c := New(Config{MSS: 1500, Lanes: 4, InitialRTT: 500 * ms, Seed: 1}, t0)
	check := func(when string, srtt, rttvar, latest time.Duration, lanes [4]time.Duration) {
		t.Helper()
		if c.SRTT() != srtt || c.RTTVar() != rttvar || c.LatestRTT() != latest {
			t.Errorf("%s: srtt %v, rttvar %v, latest %v; want %v, %v, %v", when, c.SRTT(), c.RTTVar(), c.LatestRTT(), srtt, rttvar, latest)
		}
		for i, want := range lanes {
			if got := c.LaneRTT(i); got != want {
				t.Errorf("%s: lane %d's newest %v, want %v", when, i, got, want)
			}
		}
		if c.LaneRTT(-1) != 0 || c.LaneRTT(4) != 0 {
			t.Errorf("%s: a lane out of range has a round trip", when)
		}
		if s := c.Stats(); s.SRTT != srtt {
			t.Errorf("%s: Stats().SRTT %v, SRTT() %v", when, s.SRTT, srtt)
		}
	}
	check("before any sample", 500*ms, 250*ms, 0, [4]time.Duration{})
	c.OnAck(t0.Add(10*ms), 2, 0, 0, 100*ms) // only the sample: no packet 0 was sent
	check("first sample", 100*ms, 50*ms, 100*ms, [4]time.Duration{2: 100 * ms})
	c.OnAck(t0.Add(20*ms), 0, 0, 0, 180*ms)
	// rttvar += (|100-180| - 50)/4, then srtt += (180-100)/8.
	check("second sample", 110*ms, 57500*time.Microsecond, 180*ms, [4]time.Duration{0: 180 * ms, 2: 100 * ms})
	c.OnAck(t0.Add(30*ms), 1, 0, 0, 0) // no sample
	check("an ack without a sample", 110*ms, 57500*time.Microsecond, 180*ms, [4]time.Duration{0: 180 * ms, 2: 100 * ms})
}

// Disarmed, the delay signal still bounds the queue: a queue between Q_HIGH and half the base
// RTT draws no verdict while cruising (it may be another flow's), one above half the base RTT
// for two rounds draws the mild queue cut before it can fill a one-BDP buffer.
func TestDisarmedQueueBound(t *testing.T) {
	const base = 140 * time.Millisecond
	cc := New(Config{MSS: 1500, Lanes: 4, InitialRTT: base, Seed: 1}, t0)
	l := &loop{c: cc, now: t0, rtt: base}
	run := func(d time.Duration) { l.steps(int(d / (100 * time.Microsecond))) }
	run(20 * base)
	if cc.mode != ProbeBW {
		t.Fatalf("mode %v after 20 round trips, want PROBE_BW", cc.mode)
	}
	cc.queueArmed = false
	cc.enterPhase(cc.ts(l.now), Cruise)
	ev := cc.Stats().CongestionEvents
	l.rtt = base + 40*time.Millisecond // above Q_HIGH (21 ms), below half the base RTT
	run(time.Second)
	if s := cc.Stats(); s.CongestionEvents != ev || s.Phase != Cruise || s.QueueArmed {
		t.Fatalf("a 40 ms queue, disarmed: %d congestion events (had %d), phase %v, armed %v; want none, CRUISE, disarmed",
			s.CongestionEvents, ev, s.Phase, s.QueueArmed)
	}
	l.rtt = base + 90*time.Millisecond
	run(time.Second)
	s := cc.Stats()
	v := s.Verdicts[len(s.Verdicts)-1]
	if s.CongestionEvents == ev || v.Reason != "queue" || v.AtQueue {
		t.Errorf("a 90 ms queue, disarmed, for 1 s: %d congestion events (had %d), last verdict %q (deep %v); want a queue cut",
			s.CongestionEvents, ev, v.Reason, v.AtQueue)
	}
}

// The loss base is the median of its samples weighted by their packets: a 500-packet warm-up
// that read low does not pull it below what thousands of packets measured.
func TestWeightedMedian(t *testing.T) {
	for _, tc := range []struct {
		samples []baseSample
		want    float64
	}{
		{[]baseSample{{0.010, 500}}, 0.010},
		{[]baseSample{{0.010, 500}, {0.031, 5000}}, 0.031},
		{[]baseSample{{0.031, 5000}, {0.010, 500}, {0.029, 4000}}, 0.031}, // 4,500 of 9,500 packets at or below 0.029
		{[]baseSample{{0.02, 1000}, {0.04, 1000}}, 0.03},                  // the halves meet on a boundary
		{[]baseSample{{0.05, 100}, {0.01, 100}, {0.03, 100}}, 0.03},
		// A congestive outlier with many packets counts as twice the median sample at most.
		{[]baseSample{{0.03, 4000}, {0.031, 4000}, {0.14, 9000}, {0.029, 4000}}, 0.031},
		{[]baseSample{{0.03, 1000}, {0.031, 1000}, {0.029, 1000}, {0.10, 50000}}, 0.031},
		{nil, 0},
	} {
		s := make([]baseSample, len(tc.samples))
		if got := weightedMedian(s, tc.samples); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("weightedMedian(%v) = %v, want %v", tc.samples, got, tc.want)
		}
	}
}

// CRUISE's gain rises by a step per round whose queue stayed below Q_LOW, up to its cap, falls
// back to 1 after a round with a queue, and stays 1 where the queue may be another flow's.
func TestCruiseGain(t *testing.T) {
	const base = 140 * time.Millisecond
	c := New(Config{MSS: 1500, Lanes: 4, InitialRTT: base, Seed: 1}, t0)
	l := &loop{c: c, now: t0, rtt: base}
	l.steps(int(20 * base / (100 * time.Microsecond)))
	if c.mode != ProbeBW {
		t.Fatalf("mode %v after 20 round trips, want PROBE_BW", c.mode)
	}
	c.queueArmed = true
	c.enterPhase(c.ts(l.now), Cruise)
	if c.cruiseGain != 1 {
		t.Fatalf("entering CRUISE: gain %v, want 1", c.cruiseGain)
	}
	for i := 1; i <= 8; i++ {
		c.cruiseRound(0, false, false)
		if want := math.Min(1+float64(i)*cruiseStep, cruiseGainMax); math.Abs(c.cruiseGain-want) > 1e-9 {
			t.Fatalf("after %d empty rounds: gain %v, want %v", i, c.cruiseGain, want)
		}
	}
	bw := c.bw()
	c.setRate()
	if want := cruiseGainMax * bw * (1 - pacingMargin) * 8; math.Abs(c.PacingRate()-want) > 1 {
		t.Errorf("pacing %.0f bit/s at gain %v, want %.0f", c.PacingRate(), c.cruiseGain, want)
	}
	c.cruiseRound(c.qLow(), false, false)
	if c.cruiseGain != 1 {
		t.Errorf("after a round with Q_LOW of queue: gain %v, want 1", c.cruiseGain)
	}
	// A round with significant losses holds the gain at 1 for the rest of this CRUISE (a buffer
	// shallower than Q_LOW overflows before a queue shows), until the next CRUISE.
	c.cruiseRound(0, false, false)
	c.cruiseRound(0, true, false)
	c.cruiseRound(0, false, false)
	if c.cruiseGain != 1 || !c.cruiseHeld {
		t.Errorf("after a round with significant losses and an empty one: gain %v (held %v), want 1, held", c.cruiseGain, c.cruiseHeld)
	}
	c.enterPhase(c.ts(l.now), Cruise)
	c.cruiseRound(0, false, false)
	if c.cruiseGain <= 1 {
		t.Errorf("in the next CRUISE, after an empty round: gain %v, want above 1", c.cruiseGain)
	}
	// Significant losses in a round paced above 1: no gain for the rest of the transfer.
	c.cruiseRound(0, true, true)
	c.enterPhase(c.ts(l.now), Cruise)
	c.cruiseRound(0, false, false)
	if c.cruiseGain != 1 {
		t.Errorf("after losses in a round paced above 1, in a later CRUISE: gain %v, want 1", c.cruiseGain)
	}
	c.cruiseOff = false
	for _, tc := range []struct {
		name string
		set  func()
	}{
		{"disarmed", func() { c.queueArmed = false }},
		{"competing", func() { c.compete = true }},
		{"sharing", func() { c.shared = true }},
		{"in UP", func() { c.phase = Up }},
	} {
		c.queueArmed, c.compete, c.shared, c.phase = true, false, false, Cruise
		c.cruiseRound(0, false, false)
		tc.set()
		c.cruiseRound(0, false, false)
		if c.cruiseGain != 1 {
			t.Errorf("%s: gain %v after an empty round, want 1", tc.name, c.cruiseGain)
		}
	}
}

// Package cc is Farwing's rate controller: LTRC, the loss-tolerant BBR-style algorithm described
// as built in docs/CC.md (states, signals, verdicts and why). Where the code departs from the
// algorithm it started from, the comment says so and names the departure ("docs/CC.md D7"): that
// entry of docs/CC.md gives what the starting algorithm does and the measurement behind the
// change. It owns no sockets and no clocks: the session layer reports what it sent, what was
// acked and what it declared lost (per lane, by per-lane sequence number), calls Tick every few
// milliseconds, and reads PacingRate and InflightCap back. Every method takes the current time, so
// the controller runs identically under a real clock and in the virtual-time simulator of package
// cc/simnet.
//
// One controller serves all lanes of a session (coupled: four lanes take one flow's share at a
// shared bottleneck). Loss detection is the session's job and must be per lane: cross-lane order
// never implies loss.
//
// Units: rates are bits per second at the API and bytes per second inside; times are nanoseconds
// since New inside. The per-packet methods (OnSent, OnAck, OnLoss) do not allocate.
//
// A Controller is not safe for concurrent use.
package cc

import (
	"math"
	"time"
)

// Config configures a Controller.
type Config struct {
	MaxRate    float64       // bits/s ceiling (--rate); 0 = unlimited
	MinRate    float64       // bits/s floor (--min-rate)
	Policy     Policy        // Fixed = hold MaxRate regardless of signals
	MSS        int           // bytes per full datagram on the wire (e.g. 1500 incl. IP/UDP)
	Lanes      int           // number of lanes (default 4)
	InitialRTT time.Duration // from the control-channel handshake (default 100 ms)

	// Seed makes the PROBE_BW wait jitter reproducible; 0 derives it from the start time.
	Seed uint64
	// RingSize is the initial per-lane packet-state ring size (rounded up to a power of two; it
	// grows on demand). 0 sizes it from MaxRate and InitialRTT.
	RingSize int
}

// Constants (docs/CC.md), in the units used here. Where a value departs from the starting
// algorithm, the comment says why and names the departure.
const (
	iwPkts       = 32
	startupGain  = 2.77
	drainGain    = 1 / 2.77
	upGain       = 1.25
	downGain     = 0.90
	downGainMin  = 0.75 // deeper DOWN when a real queue is standing; see downPacingGain
	cwndGain     = 2.0
	pacingMargin = 0.01

	rtpropWin      = int64(10 * time.Second)
	probeRTTTime   = int64(200 * time.Millisecond)
	probeWait      = int64(2 * time.Second)
	probeJitter    = int64(time.Second)
	probeMaxRounds = 63

	betaLoss     = 0.70
	betaQueue    = 0.90
	lossExcess   = 0.02
	lossZ        = 3.0
	lossCeil     = 0.15
	baseMax      = 0.10
	baseSamples  = 16
	baseMinPkts  = 500
	warmupPkts   = 500
	competeDowns = 3
	maxDownRnds  = 12

	seedProven      = 1.2 // STARTUP's seeded cap lifts once the delivery rate beats the estimate by this
	seedConfirm     = 0.9 // a seeded STARTUP that delivered this much of the estimate, then
	seedConfirmHi   = 1.1 // under this much of it in a round paced at 1.25 ×, ends (D30)
	seedCwnd        = 1.0 // a seeded STARTUP keeps at most this many round trips of its pacing rate in flight
	startupQSamples = 8   // consecutive high-queue RTT samples that end STARTUP (≈ 2 feedback frames over 4 lanes)

	// Fair share (policy fair). A drop-tail queue that overflows while we cruise (not probing) is
	// being filled by another flow, a loss-based one: CUBIC fills the queue until it drops. Paced
	// datagrams are rarely the ones a full drop-tail queue drops, so such a flow takes nearly all
	// the losses and backs off while we keep our rate, and gets far less than its share. While that
	// evidence is recent, the rate is capped at fairShare of the path's capacity: the packet-train
	// estimate or the largest BtlBw measured while not sharing, whichever is larger. Without a train
	// estimate there is no cap: BtlBw alone underestimates the capacity when the other flow was
	// there from the start (then it is our share, and a cap from it starves us). The starting
	// algorithm has no such cap: docs/CC.md D28.
	fairShare  = 0.6
	shareHold  = int64(20 * time.Second) // outlasts CUBIC's own cycle on a long fat path (docs/CC.md D28)
	shareTrack = 0.92                    // delivered below this share of the paced rate (random loss aside) with a standing queue
	shareFloor = 0.5                     // ... paces at the delivered rate, but not below this share of the capacity
	capBuckets = 3
	capBucket  = int64(10 * time.Second) // capacity = max BtlBw over 30 s of not sharing

	noFeedbackMin = int64(time.Second)
	weightFloor   = 0.05
)

// Stats is a snapshot of the controller's model.
type Stats struct {
	Mode        Mode
	Phase       Phase   // meaningful in ProbeBW only
	Compete     bool    // Copa-style competitive mode: delay signal off
	QueueArmed  bool    // the standing-queue verdict is armed (off after a DOWN that left the queue standing)
	Shared      bool    // a loss-based flow overflows the queue: rate capped at the fair share
	Capacity    float64 // bits/s: the capacity estimate behind the fair-share cap (0: none)
	PacingRate  float64
	BtlBw       float64 // bits/s, max-filtered delivery rate corrected for random loss
	BwHi, BwLo  float64 // bits/s; +Inf when unset
	SRTT        time.Duration
	MinRTT      time.Duration // rtprop
	QueueDelay  time.Duration // standing queue (min RTT over the last round - rtprop)
	LossBase    float64       // measured random-loss rate (fraction)
	RandomLoss  float64       // RandomLoss(): the loss rate of congestion-free rounds
	BaseSamples int           // low-rate episodes behind LossBase (at most 16 kept)
	Inflight    int           // bytes
	InflightCap int           // bytes
	Rounds      uint64

	CongestionEvents uint64 // LossEvents + QueueEvents
	LossEvents       uint64
	SharedEvents     uint64 // times the fair-share cap went on (a loss-based flow overflowing the queue)
	QueueEvents      uint64
	FeedbackTimeouts uint64
	SpuriousLosses   uint64 // OnLoss followed by an OnAck for the same packet
	ProbeRTTs        uint64 // times PROBE_RTT was entered

	SentPkts, AckedPkts, LostPkts uint64

	// Verdicts holds the latest congestion verdicts, newest last (at most len(Verdicts); the
	// rest are zero): the evidence for each event, for -v traces and the copy's JSON summary.
	Verdicts [4]Verdict
}

// Verdict is the evidence behind one congestion event: the round it ended and why.
type Verdict struct {
	At     time.Duration // since the controller started
	Reason string        // "loss-excess", "loss-burst", "loss-at-queue", "loss-hard" or "queue"
	Mode   Mode
	Phase  Phase
	// The round's counts: packets acked and lost, the longest per-lane loss run, and the losses
	// and acks met while a queue stood.
	Acked, Lost, MaxRun int
	LostHiQ, AckedHiQ   int
	LossBase            float64
	Queue               time.Duration // the round's standing queue
	AtQueue             bool          // judged an overflowing queue: the deeper cut
}

// Controller is one session's LTRC rate controller.
type Controller struct {
	cfg   Config
	start time.Time
	mss   int
	pol   Policy

	// policy-dependent parameters
	lossExcess float64
	betaLoss   float64
	betaQueue  float64
	qHighFloor int64
	mayCompete bool

	lanes []laneState
	w     []float64

	inflight int

	// delivery-rate estimator (connection state)
	delivered       int64
	deliveredAt     int64
	firstSentAt     int64
	appLimitedUntil int64 // C.app_limited: delivered mark, 0 = not app-limited

	// rounds
	nextRoundDelivered int64
	rounds             uint64
	rnd                roundAcc
	bwLatest           float64
	congThisRound      bool
	prevQ              int64

	// RTT
	rtprop      int64
	rtpropStamp int64
	rndMinRTT   int64
	rttBkt      [4]int64 // min RTT per 2.5 s bucket: a 10 s windowed min for rtprop re-seeding
	rttBktStart int64
	srtt        int64
	rttvar      int64
	latestRTT   int64 // the newest sample of any lane (0: none yet)
	lastQ       int64 // latest sample - rtprop

	// bandwidth model, bytes/s
	bwSlot       [2]float64 // max delivery rate in the current and the previous probe cycle
	btlbw        float64
	bwHi         float64
	bwLo         float64
	initBw       float64
	seedBw       float64 // packet-train estimate (bytes/s); caps STARTUP's overshoot, see setRate
	iwBw         float64 // initBw from the initial window alone
	resumeBps    float64 // a remembered rate (ResumeBandwidth, bits/s) that initBw and seedBw hold until the first measurement; 0: none
	startupHighQ int     // consecutive RTT samples with a queue over the STARTUP exit threshold
	fullBw       float64
	fullCnt      int
	probeBw0     float64
	cruiseGain   float64 // CRUISE's pacing gain: 1, raised while the link idles (see cruiseRound)
	cruiseHeld   bool    // a round of this CRUISE had significant losses: the gain stays 1
	cruiseOff    bool    // a round paced above 1 had significant losses: no gain for this transfer

	// random-loss baseline
	lossBase             float64
	rlN, rlLost          float64 // packets and losses of congestion-free rounds (RandomLoss)
	thin                 float64 // the delivery rate's thinning correction (setThinning)
	base                 [baseSamples]baseSample
	nBase, baseNext      int
	baseN                int // packets of the samples in base
	lowRes, lowLost      int
	lowLostHiQ           int
	lowAckedHiQ          int
	lowOut               int
	lowLastSent          int64
	sorted               [baseSamples]baseSample
	startupPkts          int
	startupWarmCommitted bool

	// state machine
	mode           Mode
	phase          Phase
	modeStart      int64
	phaseStart     int64
	phaseRounds    int
	probeWaitDur   int64
	downQ0         int64
	compete        bool
	shared         bool                // fair-share cap on (see fairShare)
	sharedAt       int64               // last evidence of a loss-based competitor
	capBkt         [capBuckets]float64 // max BtlBw per capBucket while not shared (bytes/s)
	capBktStart    int64
	downsUndrained int
	queueArmed     bool
	downVerify     int64 // DOWN: inflight drained at this time; waiting for the RTT samples
	probeRTTDone   int64
	probeRTTRound  uint64
	drainRound     uint64

	// feedback timeout
	lastFeedback  int64
	lastTimeout   int64
	timeoutActive bool
	recovering    bool

	rng uint64

	pacing float64 // bits/s
	cap    int

	st Stats
}

// New returns a controller for cfg, started at now.
func New(cfg Config, now time.Time) *Controller {
	if cfg.MSS <= 0 {
		cfg.MSS = 1500
	}
	if cfg.Lanes <= 0 {
		cfg.Lanes = 4
	}
	if cfg.InitialRTT <= 0 {
		cfg.InitialRTT = 100 * time.Millisecond
	}
	if cfg.MinRate < 0 {
		cfg.MinRate = 0
	}
	if cfg.MaxRate > 0 && cfg.MinRate > cfg.MaxRate {
		cfg.MinRate = cfg.MaxRate
	}
	c := &Controller{cfg: cfg, start: now, mss: cfg.MSS, pol: cfg.Policy}
	c.lossExcess, c.betaLoss, c.betaQueue = lossExcess, betaLoss, betaQueue
	c.qHighFloor = int64(10 * time.Millisecond)
	c.mayCompete = true
	switch cfg.Policy {
	case High:
		c.lossExcess, c.betaLoss = 0.04, 0.85
	case Low:
		c.qHighFloor = int64(5 * time.Millisecond)
		c.mayCompete = false
	}
	rs := cfg.RingSize
	if rs <= 0 {
		rs = 4096
		if cfg.MaxRate > 0 {
			// 3 BDP at the ceiling, split over the lanes.
			pk := 3 * cfg.MaxRate / 8 * cfg.InitialRTT.Seconds() / float64(cfg.MSS) / float64(cfg.Lanes)
			if pk > float64(rs) {
				rs = int(math.Min(pk, 1<<18))
			}
		}
	}
	c.lanes = make([]laneState, cfg.Lanes)
	c.w = make([]float64, cfg.Lanes)
	for i := range c.lanes {
		c.lanes[i].r = newRing(rs)
		c.lanes[i].qmin = math.MaxInt64
		c.w[i] = 1 / float64(cfg.Lanes)
	}
	c.rng = cfg.Seed
	if c.rng == 0 {
		c.rng = uint64(now.UnixNano()) | 1
	}
	c.rtprop = int64(cfg.InitialRTT)
	c.rtpropStamp = -1 // handshake value: replaced by the first real sample
	c.rndMinRTT = math.MaxInt64
	for i := range c.rttBkt {
		c.rttBkt[i] = math.MaxInt64
	}
	c.srtt = int64(cfg.InitialRTT)
	c.rttvar = c.srtt / 2
	c.bwHi, c.bwLo = math.Inf(1), math.Inf(1)
	c.initBw = float64(iwPkts*cfg.MSS) / cfg.InitialRTT.Seconds()
	c.iwBw = c.initBw
	c.rnd.qmin = math.MaxInt64
	c.queueArmed = true
	c.mode = Startup
	c.setRate()
	return c
}

func (c *Controller) ts(now time.Time) int64 { return int64(now.Sub(c.start)) }

// SeedBandwidth gives STARTUP an estimate of the path's capacity in bits/s (from a packet-train
// probe), so that its first rounds start near the capacity instead of ramping from the initial
// window. It only ever raises the starting point, except over a remembered rate
// (ResumeBandwidth), which it replaces, lower or higher; it does nothing once STARTUP is over:
// the controller's own delivery-rate samples take over from there.
func (c *Controller) SeedBandwidth(now time.Time, bps float64) {
	if c.mode != Startup || !(bps > 0) || math.IsInf(bps, 0) {
		return
	}
	if c.resumeBps > 0 {
		// The first measurement replaces a remembered rate, lower or higher; but a train that
		// reads over four times the rate this path sustained came in compressed (its datagrams
		// bunched on the way, and the start's overshoot would cost loss verdicts): the remembered
		// rate stays, and STARTUP grows from what the path delivers where it really is faster now
		// (docs/CC.md D18; TestResumedStartup).
		if bps > 4*c.resumeBps {
			bps = c.resumeBps
		}
		c.resumeBps, c.initBw, c.seedBw = 0, c.iwBw, 0
	}
	// STARTUP paces at startupGain × bw: seed so that the next round paces at the estimate. A
	// train reads the rate that reaches the receiver (after any loss on the way, and under the
	// link's rate where the arrival is bursty), itself under what the sender may send, so pacing
	// at a fraction of it would leave part of the link idle for the first round trips (departs
	// from the starting algorithm, which has no estimate: docs/CC.md D17; TestSeededStartup).
	if b := bps / 8 / startupGain; b > c.initBw {
		c.initBw = b
	}
	c.seedBw = math.Max(c.seedBw, bps/8)
	c.setRate()
}

// ResumeBandwidth seeds STARTUP as SeedBandwidth does, but with the rate an earlier transfer on
// this path delivered (the client's memory of it, bits/s), before anything of this one is measured:
// STARTUP's first round trip paces at it, and keeps at most a round trip of it in flight
// (seedCwnd), so that the data can start before the packet train's estimate is back. That
// estimate, when it comes (SeedBandwidth), replaces it, lower or higher.
func (c *Controller) ResumeBandwidth(now time.Time, bps float64) {
	if c.mode != Startup || !(bps > 0) || math.IsInf(bps, 0) || c.seedBw > 0 {
		return
	}
	c.SeedBandwidth(now, bps)
	c.resumeBps = bps
}

func (c *Controller) rand01() float64 {
	c.rng ^= c.rng << 13
	c.rng ^= c.rng >> 7
	c.rng ^= c.rng << 17
	return float64(c.rng>>11) / (1 << 53)
}

// OnSent records a packet sent on lane with the lane's sequence number seq. appLimited says the
// sender had nothing more to send (the delivery-rate sample it starts will not raise BtlBw).
func (c *Controller) OnSent(now time.Time, lane int, seq uint64, bytes int, appLimited bool) {
	if lane < 0 || lane >= len(c.lanes) {
		return
	}
	t := c.ts(now)
	if c.inflight == 0 {
		c.firstSentAt, c.deliveredAt = t, t
	}
	ln := &c.lanes[lane]
	p, ev := ln.r.slot(seq)
	c.inflight -= ev
	var fl uint8
	if c.lowRateNow() {
		fl |= flLowRate
		c.lowOut++
		c.lowLastSent = t
	}
	if c.appLimitedUntil > 0 {
		fl |= flAppLimited
	}
	*p = pkt{seq: seq, sentAt: t, delivered: c.delivered, deliveredAt: c.deliveredAt,
		firstSentAt: c.firstSentAt, bytes: int32(bytes), state: stOutstanding, flags: fl}
	c.inflight += bytes
	if appLimited {
		c.appLimitedUntil = max(c.delivered+int64(c.inflight), 1)
	}
	if c.mode == Startup {
		c.startupPkts++
	}
	c.st.SentPkts++
}

// OnFeedback records that a feedback frame arrived, even one that acked nothing new.
func (c *Controller) OnFeedback(now time.Time) {
	c.feedback(c.ts(now))
}

// OnAck records one newly acked packet. rtt is the RTT sample already corrected for the receiver's
// ack delay (0 = no sample).
func (c *Controller) OnAck(now time.Time, lane int, seq uint64, bytes int, rtt time.Duration) {
	if lane < 0 || lane >= len(c.lanes) {
		return
	}
	t := c.ts(now)
	c.feedback(t)
	ln := &c.lanes[lane]
	if rtt > 0 {
		c.onRTT(t, ln, int64(rtt))
	}
	p := ln.r.lookup(seq)
	if p == nil || p.state == stAcked {
		return
	}
	wasLost := p.state == stLost
	if wasLost {
		c.st.SpuriousLosses++
	} else {
		c.inflight -= int(p.bytes)
		c.rnd.acked++
		ln.acked++
		hiq := ln.lastRTT-c.rtprop > c.qHigh()
		if hiq {
			c.rnd.ackedHiQ++
		}
		if p.flags&flLowRate != 0 {
			c.lowRes++
			c.lowOut--
			if hiq {
				c.lowAckedHiQ++
			}
		}
		c.maybeCommitBase(t)
	}
	p.state = stAcked
	c.st.AckedPkts++
	c.delivered += int64(p.bytes)
	c.deliveredAt = t
	if c.appLimitedUntil > 0 && c.delivered > c.appLimitedUntil {
		c.appLimitedUntil = 0
	}

	// Delivery-rate sample (draft-cheng §3.3), one per acked packet.
	c.rateSample(t, p)

	if p.delivered >= c.nextRoundDelivered {
		c.nextRoundDelivered = c.delivered
		c.endRound(t)
	}
	c.checkState(t)
	c.setRate()
}

// OnLoss records one packet declared lost (also when FEC later recovers it).
func (c *Controller) OnLoss(now time.Time, lane int, seq uint64, bytes int) {
	if lane < 0 || lane >= len(c.lanes) {
		return
	}
	t := c.ts(now)
	ln := &c.lanes[lane]
	p := ln.r.lookup(seq)
	if p == nil || p.state != stOutstanding {
		return
	}
	p.state = stLost
	c.inflight -= int(p.bytes)
	c.st.LostPkts++
	c.rnd.lost++
	ln.lost++
	hiq := ln.lastRTT-c.rtprop > c.qHigh()
	if hiq {
		c.rnd.lostHiQ++
	}
	if p.flags&flLowRate != 0 {
		c.lowRes++
		c.lowLost++
		c.lowOut--
		if hiq {
			c.lowLostHiQ++
		}
	}
	c.maybeCommitBase(t)
	if seq == ln.lastLost+1 && ln.run > 0 {
		ln.run++
	} else {
		ln.run = 1
	}
	ln.lastLost = seq
	if ln.run > c.rnd.maxRun {
		c.rnd.maxRun = ln.run
	}
	c.checkState(t)
	c.setRate()
}

// OnFeedbackTimeout applies the no-feedback response now (TFRC-style halving). Tick detects the
// timeout by itself; call this only if the session has its own timer.
func (c *Controller) OnFeedbackTimeout(now time.Time) {
	c.onTimeout(c.ts(now))
	c.setRate()
}

// Tick runs timers; call it every 1–10 ms.
func (c *Controller) Tick(now time.Time) {
	t := c.ts(now)
	to := max(4*c.srtt, noFeedbackMin)
	if c.inflight > 0 && t-c.lastFeedback > to && t-c.lastTimeout >= to {
		c.onTimeout(t)
	}
	c.checkState(t)
	c.setRate()
}

// PacingRate is the session's pacing rate in bits/s (lanes split it by LaneWeights).
func (c *Controller) PacingRate() float64 { return c.pacing }

// InflightCap is the most bytes the session may have in flight (sent, neither acked nor lost).
func (c *Controller) InflightCap() int { return c.cap }

// Inflight is the bytes currently in flight as the controller counts them.
func (c *Controller) Inflight() int { return c.inflight }

// SRTT is the smoothed round trip (RFC 6298's, from samples with the ack delay removed):
// Config.InitialRTT until the first sample, which replaces it. The controller is the one owner of
// the RTT estimate: the session's loss timers and FEC read it here.
func (c *Controller) SRTT() time.Duration { return time.Duration(c.srtt) }

// RTTVar is the round trip's mean deviation (half of Config.InitialRTT until the first sample,
// then half of that sample, then RFC 6298's average).
func (c *Controller) RTTVar() time.Duration { return time.Duration(c.rttvar) }

// LatestRTT is the newest RTT sample of any lane (0 before the first).
func (c *Controller) LatestRTT() time.Duration { return time.Duration(c.latestRTT) }

// LaneRTT is the newest RTT sample of lane i (0 before its first).
func (c *Controller) LaneRTT(i int) time.Duration {
	if i < 0 || i >= len(c.lanes) {
		return 0
	}
	return time.Duration(c.lanes[i].lastRTT)
}

// LossBase is the measured random-loss rate (the FEC layer sizes parity from it).
func (c *Controller) LossBase() float64 { return c.lossBase }

// randomLossSpan is about how many packets RandomLoss remembers: the counts halve when they pass
// it, so older rounds fade.
const randomLossSpan = 200_000

// randomLossMin is how many packets of congestion-free rounds RandomLoss needs before it trusts
// them over the baseline.
const randomLossMin = 5_000

// RandomLoss returns the random-loss rate for sizing forward error correction (and, within the
// baseline's error, for correcting the delivery-rate samples: thinning): the loss fraction of the
// rounds since STARTUP that drew no verdict, whose losses did not cluster at a queue or stand out
// over the baseline, and that CRUISE did not pace above the model, once they hold randomLossMin
// packets, and the low-rate baseline (LossBase) before that. Congestion losses that stay under
// all of these tests would count. The starting algorithm sizes FEC from the baseline itself; how
// closely this reads the random rate: docs/CC.md D9 (TestRandomLoss, TestShallowerThanQLow).
func (c *Controller) RandomLoss() float64 {
	if c.rlN >= randomLossMin {
		return c.rlLost / c.rlN
	}
	return c.lossBase
}

// LaneWeights returns a copy of the per-lane share of the pacing rate; the weights sum to 1.
func (c *Controller) LaneWeights() []float64 {
	w := make([]float64, len(c.w))
	copy(w, c.w)
	return w
}

// LaneWeight returns lane i's share of the pacing rate without allocating.
func (c *Controller) LaneWeight(i int) float64 {
	if i < 0 || i >= len(c.w) {
		return 0
	}
	return c.w[i]
}

// Acked is the number of datagrams acknowledged so far (Stats().AckedPkts, without building the
// rest of Stats).
func (c *Controller) Acked() uint64 { return c.st.AckedPkts }

// Stats returns a snapshot of the model.
func (c *Controller) Stats() Stats {
	s := c.st
	s.Mode, s.Phase, s.Compete, s.Shared, s.Capacity = c.mode, c.phase, c.compete, c.shared, c.capacity()*8
	s.QueueArmed = c.queueArmed
	s.PacingRate = c.pacing
	s.BtlBw = c.btlbw * 8
	s.BwHi, s.BwLo = c.bwHi*8, c.bwLo*8
	s.SRTT = time.Duration(c.srtt)
	s.MinRTT = time.Duration(c.rtprop)
	s.QueueDelay = time.Duration(c.prevQ)
	s.LossBase = c.lossBase
	s.RandomLoss = c.RandomLoss()
	s.BaseSamples = c.nBase
	s.Inflight, s.InflightCap = c.inflight, c.cap
	s.Rounds = c.rounds
	return s
}

// Package cc is Farwing's rate controller: LTRC, the loss-tolerant BBR-style algorithm described
// as built in docs/CC.md (states, signals, verdicts and why). It started from the project's research
// note (congestion-control.md §2, outside this repository): "the note" in the comments below, and
// "Improvement" marks where the code departs from it. It owns no sockets and no clocks: the session layer
// reports what it sent, what was acked and what it declared lost (per lane, by per-lane sequence
// number), calls Tick every few milliseconds, and reads PacingRate and InflightCap back. Every
// method takes the current time, so the controller runs identically under a real clock and in the
// virtual-time simulator of package cc/simnet.
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

// Constants (docs/CC.md; the note's §2.2), in the units used here. Where a value differs from the note, the comment says
// why.
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
	seedCwnd        = 1.0 // a seeded STARTUP keeps at most this many round trips of its pacing rate in flight
	startupQSamples = 8   // consecutive high-queue RTT samples that end STARTUP (≈ 2 feedback frames over 4 lanes)

	// Fair share (policy fair). A drop-tail queue that overflows while we cruise (not probing) is
	// being filled by another flow, a loss-based one: CUBIC fills the queue until it drops. Paced
	// datagrams are rarely the ones a full drop-tail queue drops, so such a flow takes nearly all
	// the losses and backs off while we keep our rate (lab, 400 Mbit/s, 140 ms, one BDP: CUBIC
	// held 110–135–205 Mbit/s over 10 runs against us). While that evidence is recent, the rate is
	// capped at fairShare of the path's capacity: the packet-train estimate or the largest BtlBw
	// measured while not sharing, whichever is larger. Without a train estimate there is no cap:
	// BtlBw alone underestimates the capacity when the other flow was there from the start (then
	// it is our share, and a cap from it starved us to 27 % in the virtual-time test).
	fairShare  = 0.6
	shareHold  = int64(20 * time.Second) // CUBIC's own cycle at 140 ms and 200 Mbit/s is ~12 s
	shareTrack = 0.92                    // delivered below this share of the paced rate (random loss aside) with a standing queue
	shareFloor = 0.5                     // ... paces at the delivered rate, but not below this share of the capacity
	capBuckets = 3
	capBucket  = int64(10 * time.Second) // capacity = max BtlBw over 30 s of not sharing

	noFeedbackMin = int64(time.Second)
	weightFloor   = 0.05
)

// Kinds of congestion verdict.
const (
	congLoss = iota
	congQueue
)

// Stats is a snapshot of the controller's model.
type Stats struct {
	Mode        Mode
	Phase       Phase   // meaningful in ProbeBW only
	Compete     bool    // Copa-style competitive mode: delay signal off
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
	lastQ       int64 // latest sample - rtprop

	// bandwidth model, bytes/s
	bwSlot       [2]float64 // max delivery rate in the current and the previous probe cycle
	btlbw        float64
	bwHi         float64
	bwLo         float64
	initBw       float64
	seedBw       float64 // packet-train estimate (bytes/s); caps STARTUP's overshoot, see setRate
	startupHighQ int     // consecutive RTT samples with a queue over the STARTUP exit threshold
	fullBw       float64
	fullCnt      int
	probeBw0     float64

	// random-loss baseline
	lossBase             float64
	rlN, rlLost          float64 // packets and losses of congestion-free rounds (RandomLoss)
	base                 [baseSamples]float64
	nBase, baseNext      int
	lowRes, lowLost      int
	lowLostHiQ           int
	lowOut               int
	lowLastSent          int64
	sorted               [baseSamples]float64
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
	c.rnd.qmin = math.MaxInt64
	c.queueArmed = true
	c.mode = Startup
	c.setRate()
	return c
}

func (c *Controller) ts(now time.Time) int64 { return int64(now.Sub(c.start)) }

// SeedBandwidth gives STARTUP an estimate of the path's capacity in bits/s (from a packet-train
// probe), so that its first rounds start near the capacity instead of ramping from the initial
// window. It only ever raises the starting point, and does nothing once STARTUP is over: the
// controller's own delivery-rate samples take over from there.
func (c *Controller) SeedBandwidth(now time.Time, bps float64) {
	if c.mode != Startup || !(bps > 0) || math.IsInf(bps, 0) {
		return
	}
	// STARTUP paces at startupGain × bw: seed so that the next round paces at ~90 % of the estimate.
	if b := bps / 8 * 0.9 / startupGain; b > c.initBw {
		c.initBw = b
	}
	c.seedBw = math.Max(c.seedBw, bps/8)
	c.setRate()
}

func (c *Controller) rand01() float64 {
	c.rng ^= c.rng << 13
	c.rng ^= c.rng >> 7
	c.rng ^= c.rng << 17
	return float64(c.rng>>11) / (1 << 53)
}

// qHigh and qLow are the standing-queue thresholds of §2.2 in ns.
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

func (c *Controller) feedback(t int64) {
	c.lastFeedback = t
	if c.timeoutActive {
		c.timeoutActive = false
		c.recovering = true
	}
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
		if ln.lastRTT-c.rtprop > c.qHigh() {
			c.rnd.ackedHiQ++
		}
		if p.flags&flLowRate != 0 {
			c.lowRes++
			c.lowOut--
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
	sendEl := p.sentAt - p.firstSentAt
	ackEl := t - p.deliveredAt
	c.firstSentAt = p.sentAt
	if iv := max(sendEl, ackEl); iv > 0 && (c.rtpropStamp < 0 || iv >= c.rtprop/2) {
		rate := float64(c.delivered-p.delivered) / (float64(iv) / 1e9)
		// Undo random thinning (§2.1.3): with loss before the bottleneck a sender at rate R
		// delivers R(1-p), so this is the send rate that the delivered rate corresponds to.
		cr := rate / (1 - c.lossBase)
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

func (c *Controller) onRTT(t int64, ln *laneState, rtt int64) {
	ln.lastRTT = rtt
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
		// Improvement: a sample within Q_LOW of rtprop confirms it (the path's round trip has
		// not risen by more than Q_LOW), so the filter's window restarts without PROBE_RTT.
		// rtprop itself stays the measured minimum, so confirmations never drift it upwards. The
		// note's strict "<=" missed by a millisecond after most DOWNs that drained our queue, and
		// each PROBE_RTT (half a BDP in flight for 200 ms and a round) cost a 1 GiB lab copy at
		// 400 Mbit/s, 140 ms about 0.17 s, every 10 s.
		c.rtpropStamp = t
	} else if t-c.rtpropStamp > rtpropWin && (c.mode != ProbeRTT || c.compete) {
		if c.mayProbeRTT() {
			c.enterProbeRTT(t)
		} else {
			// Improvement: without PROBE_RTT (competitive or Fixed) re-seed rtprop from the min
			// over the last 10 s (2.5 s buckets), not from one arbitrary sample.
			c.setRtprop(t, c.windowMinRTT())
		}
	}
	q := rtt - c.rtprop
	c.lastQ = q
	// Improvement: STARTUP watches every sample, not the round's minimum. A round at 2.77× builds
	// a queue of 1.77 round trips' worth of the excess before the round-end check can see it; a run
	// of samples over the threshold ends STARTUP within a few feedback intervals instead.
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

// maybeCommitBase closes a low-rate episode once we are no longer sending at low rate and all its
// packets have resolved, pushing its loss rate as one baseline sample if it is large enough (else
// it merges with the next episode).
//
// Improvement over the note: the note attributes a round's losses to the round in which they are
// detected, so the first DOWN round mostly counts packets sent during UP; here each packet carries
// a flag saying whether it was sent at low rate, and only those packets form the sample.
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
	hiq := c.lowLostHiQ
	c.lowRes, c.lowLost, c.lowLostHiQ = 0, 0, 0
	L := float64(l) / float64(n)
	if L > lossCeil {
		return // clearly congestive (or a path failure): not a random-loss sample
	}
	if l >= 3 && 2*hiq >= l && c.startupWarmCommitted {
		return // losses clustered at a full queue: self-inflicted, not random
	}
	c.startupWarmCommitted = true
	c.base[c.baseNext] = L
	c.baseNext = (c.baseNext + 1) % baseSamples
	if c.nBase < baseSamples {
		c.nBase++
	}
	s := c.sorted[:c.nBase]
	copy(s, c.base[:c.nBase])
	for i := 1; i < len(s); i++ { // insertion sort: at most 16 values, no allocation
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	var m float64
	if k := len(s); k%2 == 1 {
		m = s[k/2]
	} else {
		m = (s[k/2-1] + s[k/2]) / 2
	}
	c.lossBase = math.Min(m, baseMax)
}

// runThreshold is the per-lane loss-run length that i.i.d. loss at rate base produces in n
// packets with probability below ~1e-3. Improvement: the note's fixed max(3, 2·run_base) fires in a
// few per cent of rounds at 5 % random loss (thousands of losses per round at 400 Mbit/s), and every
// false verdict costs 30 % of the rate until the next probe.
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
	if n > 0 && c.pol != Fixed {
		base := c.lossBase
		L := float64(r.lost) / float64(n)
		nf := float64(n)
		sig := float64(r.lost) > nf*base+lossZ*math.Sqrt(nf*base*(1-base))+1
		excess := sig && L > base+c.lossExcess
		burst := sig && r.maxRun >= runThreshold(n, base)
		hiq := sig && r.lostAtQueue() && L > base+c.lossExcess/2
		hard := r.lost >= 3 && L > lossCeil
		// No loss verdicts before the warm-up baseline sample exists (its packets resolve about
		// one round after they were sent, so counting sent packets is not enough).
		warm := !c.startupWarmCommitted
		if c.mode == Startup {
			// Improvement: STARTUP leaves on loss only when the loss is clearly ours (a
			// STARTUP overshoot is massive or comes with a queue). The warm-up baseline comes from
			// ~500 packets and is noisy (at 3 % loss its 1-sigma is 0.8 %), so an "excess" verdict
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
	if verdict < 0 && c.pol != Fixed && !c.compete && c.queueArmed && Q > qh && c.prevQ > qh &&
		c.mode == ProbeBW && c.phase != Down {
		verdict = congQueue
	}
	if verdict < 0 && n > 0 && c.mode != Startup && !r.lostAtQueue() {
		// A round judged free of congestion (and whose losses did not cluster at a full queue):
		// its losses are random ones. Summed over many rounds this measures the random-loss rate
		// far more precisely than the low-rate baseline samples.
		c.rlN += float64(n)
		c.rlLost += float64(r.lost)
		if c.rlN > randomLossSpan {
			c.rlN, c.rlLost = c.rlN/2, c.rlLost/2
		}
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
	c.advance(t, Q)
	c.prevQ = Q
	*r = roundAcc{qmin: math.MaxInt64}
	c.bwLatest = 0
	c.congThisRound = false
	c.rndMinRTT = math.MaxInt64
}

// noteOverflow records a loss verdict at an overflowing queue (see fairShare): when we were not
// probing (a probe's losses can still arrive in the first rounds of the DOWN that ended it),
// another flow filled the queue.
func (c *Controller) noteOverflow(t int64) {
	if c.pol != Fair || c.mode != ProbeBW ||
		!(c.compete || c.phase == Cruise || (c.phase == Down && c.phaseRounds >= 2)) {
		return
	}
	if !c.shared {
		c.st.SharedEvents++
	}
	c.shared, c.sharedAt = true, t
}

// shareAfterRound runs the fair-share bookkeeping at the end of each round: it lifts the cap once
// the evidence is shareHold old, keeps the capacity estimate, and, after an uncongested round in
// which a queue stood throughout (standing), paces at the delivered rate if that is clearly less
// than what we paced.
func (c *Controller) shareAfterRound(t int64, standing bool) {
	if c.shared && t-c.sharedAt > shareHold {
		c.shared = false
	}
	// The capacity estimate is the largest BtlBw of the last capBuckets×capBucket of PROBE_BW
	// while not sharing. While shared it is frozen: BtlBw then measures our share, and learning
	// from it would shrink the cap round after round.
	if !c.shared && c.mode == ProbeBW {
		if c.capBktStart == 0 || t-c.capBktStart >= capBucket {
			copy(c.capBkt[1:], c.capBkt[:capBuckets-1])
			c.capBkt[0], c.capBktStart = 0, t
		}
		c.capBkt[0] = math.Max(c.capBkt[0], c.btlbw)
	}
	if capB := c.capacity(); standing && capB > 0 && c.pol == Fair && c.mode == ProbeBW && c.phase == Cruise &&
		c.bwLatest > 0 && c.bwLatest < shareTrack*(1-c.lossBase)*c.bw() {
		// Part of what we send only lengthens a queue another flow shares (an RTT step delivers
		// what we pace; a competitor's growth does not). Pace at what is delivered, down to half
		// the capacity. Without this, with the delay signal disarmed by undrained DOWNs, a nearly
		// full queue stood for 11 s in the lab while a window-limited CUBIC got W/RTT at twice the
		// base RTT (63-105 Mbit/s of 400).
		c.bwLo = math.Max(shareFloor*capB, math.Min(c.bwLo, c.bwLatest))
	}
}

// capacity is the estimate behind the fair-share cap, bytes/s: the larger of the packet-train
// estimate and the largest BtlBw in capBkt (0 without a train estimate: no cap).
func (c *Controller) capacity() float64 {
	if c.seedBw <= 0 {
		return 0
	}
	b := c.seedBw
	for _, v := range c.capBkt {
		b = math.Max(b, v)
	}
	return b
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
	// used to be undone then). That is what leaves a loss-based flow room: against CUBIC in the
	// lab, undoing it kept CUBIC at 63-102-186 Mbit/s of 400 over 10 runs, keeping it 110-134-205.
	// The ratchet is bounded: an undrained DOWN disarms the delay signal (no queue verdicts until a
	// DOWN drains again), and COMPETE_DOWNS of them in a row switch to competitive mode.
	floor := c.bwLatest // never below the measured delivery rate (our current share)
	if kind == congLoss && (c.compete || atQueue) {
		// Improvement: in competitive mode the queue is shared with a loss-based flow and our
		// delivered rate is simply what we send, so "never below the delivery rate" would make the
		// loss response a no-op and starve the competitor (measured: 94 % vs CUBIC). There, a loss
		// verdict is a plain multiplicative decrease of the delivered rate (AIMD, as Copa's
		// competitive mode); probing adds back. The same holds, outside competitive mode, for
		// losses that came with a full queue at well above the random-loss rate: a drop-tail
		// queue overflowing, which a loss-based flow sharing it fills (the delay-based
		// detection of competitive mode did not fire against CUBIC in the lab, which then held
		// 70-167 Mbit/s of 400).
		floor *= beta
	}
	c.bwLo = math.Max(floor, beta*math.Min(c.bwLo, c.btlbw))
	// Improvement: also bound bw_hi. The note cuts only bw_lo, which REFILL resets to ∞, so after a
	// capacity drop every probe cycle restarts from the stale max-filtered BtlBw (up to two cycles
	// old) and re-floods the smaller link. bw_hi is raised again by any uncongested sample above it,
	// so a false verdict costs at most until the next UP.
	c.bwHi = math.Min(c.bwHi, math.Max(floor, beta*math.Min(c.bwHi, c.btlbw)))
	if c.mode == ProbeBW && c.phase != Down {
		// Improvement: drain what we queued instead of cruising at 0.99× on top of it (the note
		// leaves a full drop-tail buffer standing after a capacity drop); DOWN is also the queue-
		// ownership test.
		c.enterDown(t)
	}
}

func (c *Controller) advance(t int64, Q int64) {
	c.phaseRounds++
	switch c.mode {
	case Startup:
		if b := c.bw(); b >= 1.25*c.fullBw {
			c.fullBw, c.fullCnt = b, 0
		} else if c.appLimitedUntil == 0 {
			c.fullCnt++
		}
		if c.fullCnt >= 3 || Q > max(c.qHigh(), c.rtprop/4) {
			c.enterDrain(t)
		}
	case ProbeBW:
		switch c.phase {
		case Down:
			// RTT samples lag the queue by up to an RTT: judge only once they can reflect DOWN.
			if c.phaseRounds >= 2 && t-c.phaseStart >= c.rtprop+c.srtt {
				// Improvement: keep draining while the queue is visibly shrinking (our own queue
				// after a capacity drop can take many rounds); declare "undrained" only when it does
				// not respond to our rate cut.
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
			// Improvement: growth threshold 1.1, not 1.25. UP paces at 1.25x (less the 1 %
			// margin), so real headroom shows as ~1.24x per round and a 1.25 test ends every probe
			// after one step; the queue and loss exits stop UP at the ceiling instead.
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
// signal is disarmed, and after COMPETE_DOWNS in a row we compete.
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
			// Improvement: DOWN lasts at least one rtprop even when nothing is queued. The note
			// leaves DOWN as soon as inflight <= BDP, which after a short UP is a few milliseconds,
			// and then its low-rate rounds never gather enough packets for a baseline sample. A
			// full round at 0.9x costs ~0.5 % of a 2–3 s cycle.
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
					// Our inflight is back to one BDP but a queue is still reported. Improvement:
					// the note counts this as "drained", but inflight <= bw·rtprop also holds when
					// rtprop itself has been inflated by a competitor's standing queue, and then
					// competitive mode is left after every probe. RTT samples lag the queue by up
					// to an RTT, so hold the rate (gain 1) for one srtt and judge by what the
					// samples then show.
					c.downVerify = t
				} else if c.downVerify != 0 && t-c.downVerify >= c.srtt {
					c.downEnd(t, c.lastQ < c.downQ0*7/10)
				}
			}
		case Cruise:
			// Probe again after PROBE_WAIT (2–3 s), or after probeMaxRounds round trips when
			// those pass sooner (BBRv2's Reno-coexistence bound, min(BDP in packets, 63) rounds):
			// on a short path the clock alone left a copy at 70 % of its rate for seconds after
			// one loss event (loopback: 6.7 of 9 Gbit/s for the rest of a 2 s copy).
			if !c.timeoutActive && (t-c.phaseStart >= c.probeWaitDur ||
				c.phaseRounds >= min(probeMaxRounds, max(int(c.bdp(c.bw())/float64(c.mss)), 1))) {
				c.enterRefill(t)
			}
		case Up:
			// Improvement: end the probe as soon as it builds a queue (latest sample, or inflight
			// beyond BDP + Q_HIGH's worth), not at the end of a round on the round's minimum: with
			// a deep buffer the round-based exit leaves ~0.5 BDP of queue per probe.
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
	// New probe cycle: the max filter keeps this cycle and the previous one (BBRv3). Improvement
	// over the note's 10-round window: at 139 ms ten rounds (1.4 s) are shorter than PROBE_WAIT
	// (2–3 s), so BtlBw would decay to CRUISE samples (0.99× each cycle, less under loss) between
	// probes.
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

// windowMinRTT is the min RTT over the last 7.5–10 s.
func (c *Controller) windowMinRTT() int64 {
	m := c.rttBkt[0]
	for _, v := range c.rttBkt[1:] {
		m = min(m, v)
	}
	return m
}

// downPacingGain: the note's DOWN is 0.90× for one round. When a standing queue well above Q_HIGH
// is visible (after a capacity drop or an overshoot) drain it in about one round instead, as
// BBRv1's 0.75 does, but never deeper than 0.75.
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
		// (a quarter per round took seconds to climb from a low estimate at 140 ms).
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
				// The window must not hold a seeded STARTUP below its pacing rate: from a bw of a
				// third of the estimate it held the first round to 65 % of it.
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

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// PacingRate is the session's pacing rate in bits/s (lanes split it by LaneWeights).
func (c *Controller) PacingRate() float64 { return c.pacing }

// InflightCap is the most bytes the session may have in flight (sent, neither acked nor lost).
func (c *Controller) InflightCap() int { return c.cap }

// Inflight is the bytes currently in flight as the controller counts them.
func (c *Controller) Inflight() int { return c.inflight }

// LossBase is the measured random-loss rate (the FEC layer sizes parity from it).
func (c *Controller) LossBase() float64 { return c.lossBase }

// randomLossSpan is about how many packets RandomLoss remembers: the counts halve when they pass
// it, so older rounds fade.
const randomLossSpan = 200_000

// randomLossMin is how many packets of congestion-free rounds RandomLoss needs before it trusts
// them over the baseline.
const randomLossMin = 5_000

// RandomLoss returns the random-loss rate for sizing forward error correction: the loss fraction
// of the rounds judged free of congestion since STARTUP, once they hold randomLossMin packets,
// and the low-rate baseline (LossBase) before that. Congestion losses never count.
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

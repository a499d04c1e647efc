// Package simnet is a deterministic, discrete-event, virtual-time network for testing package cc.
//
// Model (one path, both directions):
//
//	sender ──(paced at cc.PacingRate over the lanes, ≤ cc.InflightCap in flight)──▶
//	  random loss (Bernoulli, before the queue) ──▶ drop-tail byte queue ──▶ link at Rate ──▶
//	  one-way delay RTT/2 (+ steps) ──▶ receiver
//	receiver ──(one feedback frame every FeedbackEvery, frame loss, blackouts)── RTT/2 ──▶ sender
//
// Feedback frames carry, per received packet, its lane, per-lane sequence number and receive time,
// like the session's per-lane ack ranges with receive timestamps. A frame covers every packet the
// receiver has not yet seen confirmed, so a lost frame is repaired by the next one, the way ack
// ranges are repeated until acked. Simplification (optimistic by half an RTT): the receiver learns
// that a frame arrived the moment it arrives, instead of from an ack-of-ack.
//
// The sender does per-lane RACK (RFC 8985): a packet is lost once a packet sent later on the same
// lane has been acked and rack_rtt + REO_WND has elapsed since it was sent. RTT samples passed to the
// controller are corrected for the receiver's ack delay (frame send time − packet receive time).
//
// An optional competing TCP flow (CUBIC window growth, beta 0.7, Reno-friendly region, slow start,
// 3-dupack loss detection with one reduction per window, RTO) shares the queue. It acks every
// packet immediately over a loss-free return path.
//
// Every packet is a full datagram; nothing is aggregated. All randomness comes from Config.Seed.
package simnet

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/farwing/farwing/cc"
)

// Event changes the path at a point in virtual time.
type Event struct {
	At         time.Duration
	Rate       float64       // new bottleneck rate in bits/s (0 = unchanged)
	ExtraDelay time.Duration // if non-zero: forward one-way delay becomes RTT/2 + ExtraDelay
	Blackout   time.Duration // drop every feedback frame sent in [At, At+Blackout)
}

// Cross configures a competing TCP flow.
type Cross struct {
	Start   time.Duration
	PktSize int // default 1500
}

// Config describes one simulation run.
type Config struct {
	Seed          uint64
	Rate          float64       // bottleneck bits/s
	RTT           time.Duration // base two-way propagation delay
	Buffer        int           // drop-tail queue in bytes
	Loss          float64       // forward random loss, before the queue
	AckLoss       float64       // feedback-frame loss
	PktSize       int           // bytes per datagram (default 1500)
	Duration      time.Duration // simulated time
	Warmup        time.Duration // measurements (histograms, loss counts) start here (default 3 s)
	CC            cc.Config     // controller config (MSS defaults to PktSize, Lanes to 4)
	Events        []Event
	Cross         *Cross
	FeedbackEvery time.Duration // default 10 ms
	TickEvery     time.Duration // default 1 ms
	Bin           time.Duration // time-series bin (default 100 ms)
	// ProbeBps, if set, is handed to the controller's SeedBandwidth at ProbeAt (0: the start),
	// as a packet-train estimate of the capacity (right or wrong) would be.
	ProbeBps float64
	ProbeAt  time.Duration
	// ResumeBps, if set, is handed to the controller's ResumeBandwidth at the start: the rate a
	// client remembers from an earlier transfer (right or wrong), before its probe comes back.
	ResumeBps float64
}

// Result holds the measurements of a run.
type Result struct {
	Bin          time.Duration
	Goodput      []float64  // bits/s of distinct packets of our flow delivered, per bin
	CrossGoodput []float64  // same for the competing flow
	PacingMax    []float64  // highest pacing rate seen in each bin
	PacingMin    []float64  // lowest pacing rate seen in each bin
	QueueMax     []float64  // largest queueing delay (s) met by a packet of ours in each bin
	Stats        []cc.Stats // controller snapshot at the end of each bin

	// Counts from Warmup on.
	Sent, RandDrops, QueueDrops uint64 // our packets
	DeclaredLost, Spurious      uint64 // OnLoss calls; of those, packets that had in fact arrived
	qhist                       []uint64

	Final cc.Stats
}

// MeanGoodput is the mean goodput of our flow (bits/s) over [from, to).
func (r *Result) MeanGoodput(from, to time.Duration) float64 { return mean(r.Goodput, r.Bin, from, to) }

// MeanCross is the mean goodput of the competing flow (bits/s) over [from, to).
func (r *Result) MeanCross(from, to time.Duration) float64 {
	return mean(r.CrossGoodput, r.Bin, from, to)
}

func mean(s []float64, bin, from, to time.Duration) float64 {
	a, b := int(from/bin), int(to/bin)
	b = min(b, len(s))
	if a >= b {
		return 0
	}
	sum := 0.0
	for _, v := range s[a:b] {
		sum += v
	}
	return sum / float64(b-a)
}

// QueueDelayQuantile is the q-quantile of the queueing delay met by our packets after Warmup.
func (r *Result) QueueDelayQuantile(q float64) time.Duration {
	var tot uint64
	for _, v := range r.qhist {
		tot += v
	}
	if tot == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(tot)))
	var acc uint64
	for i, v := range r.qhist {
		acc += v
		if acc >= want {
			return time.Duration(i+1) * qhistRes
		}
	}
	return time.Duration(len(r.qhist)) * qhistRes
}

// LossRate is the fraction of our packets dropped (random and queue) after Warmup.
func (r *Result) LossRate() float64 {
	if r.Sent == 0 {
		return 0
	}
	return float64(r.RandDrops+r.QueueDrops) / float64(r.Sent)
}

const qhistRes = 500 * time.Microsecond

// ---------------------------------------------------------------------------------------------

type deque[T any] struct {
	buf  []T
	head int
	n    int
}

func (d *deque[T]) push(v T) {
	if d.n == len(d.buf) {
		nb := make([]T, max(64, 2*len(d.buf)))
		for i := 0; i < d.n; i++ {
			nb[i] = d.buf[(d.head+i)&(len(d.buf)-1)]
		}
		d.buf, d.head = nb, 0
	}
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = v
	d.n++
}
func (d *deque[T]) front() *T { return &d.buf[d.head] }
func (d *deque[T]) at(i int) *T {
	return &d.buf[(d.head+i)&(len(d.buf)-1)]
}
func (d *deque[T]) pop() {
	var z T
	d.buf[d.head] = z
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
}

type fwdPkt struct {
	depart float64 // ns
	delay  int64
	arrive int64
	seq    uint64
	sentAt int64
	size   int32
	lane   uint8
	flow   uint8
}

type sPkt struct {
	sentAt  int64
	size    int32
	state   uint8 // 0 outstanding, 1 acked, 2 lost
	dropped bool
}

type sLane struct {
	nextSeq  uint64
	frontSeq uint64
	q        deque[sPkt]
	rackSent int64
	rackRTT  int64
	credit   float64
}

type rEntry struct {
	seq    uint64
	recvAt int64
	lane   uint8
}

type frame struct {
	arrive, sentAt int64
	from, to       int
}

type tcpPkt struct {
	sentAt int64
	state  uint8
}

type tcpAck struct {
	arrive int64
	seq    uint64
	sentAt int64
}

type tcpFlow struct {
	start      int64
	size       int
	cwnd       float64
	ssthresh   float64
	wmax, k    float64
	epoch      int64
	nextSeq    uint64
	frontSeq   uint64
	out        deque[tcpPkt]
	inflight   int
	highAcked  uint64
	recoverSeq uint64
	srtt       int64
	lastAck    int64
	started    bool
}

// Sim is one run in progress.
type Sim struct {
	cfg    Config
	probed bool // ProbeBps handed over at ProbeAt
	base   time.Time
	now    int64
	rng    *rand.Rand
	c      *cc.Controller
	res    *Result

	rate      float64 // bytes/ns
	busyUntil float64
	owd       int64
	extra     int64
	fwd       deque[fwdPkt]

	rlog      []rEntry
	rbase     int
	confirmed int
	nextFrame int64
	ret       deque[frame]
	blackouts [][2]int64

	lanes     []sLane
	nextSend  float64
	blocked   bool
	minRTT    int64
	nextTick  int64
	nextEvent int
	nextBin   int64

	tcp   *tcpFlow
	tacks deque[tcpAck]

	binBytes, binCross float64
	binPMax, binPMin   float64
	binQMax            float64
}

// Run simulates cfg and returns the measurements.
func Run(cfg Config) *Result {
	s := newSim(cfg)
	s.run()
	return s.res
}

func newSim(cfg Config) *Sim {
	if cfg.PktSize <= 0 {
		cfg.PktSize = 1500
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = 3 * time.Second
	}
	if cfg.FeedbackEvery <= 0 {
		cfg.FeedbackEvery = 10 * time.Millisecond
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = time.Millisecond
	}
	if cfg.Bin <= 0 {
		cfg.Bin = 100 * time.Millisecond
	}
	if cfg.CC.MSS == 0 {
		cfg.CC.MSS = cfg.PktSize
	}
	if cfg.CC.Lanes == 0 {
		cfg.CC.Lanes = 4
	}
	if cfg.CC.InitialRTT == 0 {
		cfg.CC.InitialRTT = cfg.RTT
	}
	if cfg.CC.Seed == 0 {
		cfg.CC.Seed = cfg.Seed*2654435761 + 1
	}
	s := &Sim{cfg: cfg, base: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.rng = rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	s.c = cc.New(cfg.CC, s.base)
	if cfg.ResumeBps > 0 {
		s.c.ResumeBandwidth(s.base, cfg.ResumeBps)
	}
	if cfg.ProbeBps > 0 && cfg.ProbeAt <= 0 {
		s.c.SeedBandwidth(s.base, cfg.ProbeBps)
	}
	s.rate = cfg.Rate / 8 / 1e9
	s.owd = int64(cfg.RTT / 2)
	s.lanes = make([]sLane, cfg.CC.Lanes)
	s.minRTT = math.MaxInt64
	s.nextFrame = int64(cfg.FeedbackEvery)
	s.nextTick = int64(cfg.TickEvery)
	s.nextBin = int64(cfg.Bin)
	for _, e := range cfg.Events {
		if e.Blackout > 0 {
			s.blackouts = append(s.blackouts, [2]int64{int64(e.At), int64(e.At + e.Blackout)})
		}
	}
	if cfg.Cross != nil {
		sz := cfg.Cross.PktSize
		if sz <= 0 {
			sz = 1500
		}
		s.tcp = &tcpFlow{start: int64(cfg.Cross.Start), size: sz, cwnd: 10, ssthresh: math.Inf(1)}
	}
	nb := int(cfg.Duration/cfg.Bin) + 1
	s.res = &Result{Bin: cfg.Bin, qhist: make([]uint64, 4000)}
	s.res.Goodput = make([]float64, 0, nb)
	s.binPMin = math.Inf(1)
	return s
}

func (s *Sim) at(t int64) time.Time { return s.base.Add(time.Duration(t)) }

func (s *Sim) run() {
	end := int64(s.cfg.Duration)
	const inf = int64(math.MaxInt64)
	for {
		t, which := inf, -1
		if !s.blocked {
			if ns := int64(math.Ceil(s.nextSend)); ns < t {
				t, which = ns, 0
			}
		}
		if s.fwd.n > 0 {
			if a := s.fwd.front().arrive; a < t {
				t, which = a, 1
			}
		}
		if s.ret.n > 0 {
			if a := s.ret.front().arrive; a < t {
				t, which = a, 2
			}
		}
		if s.tacks.n > 0 {
			if a := s.tacks.front().arrive; a < t {
				t, which = a, 3
			}
		}
		if s.nextFrame < t {
			t, which = s.nextFrame, 4
		}
		if s.nextTick < t {
			t, which = s.nextTick, 5
		}
		if s.nextEvent < len(s.cfg.Events) {
			if a := int64(s.cfg.Events[s.nextEvent].At); a < t {
				t, which = a, 6
			}
		}
		if s.tcp != nil && !s.tcp.started && s.tcp.start < t {
			t, which = s.tcp.start, 7
		}
		if s.nextBin <= t {
			s.now = s.nextBin
			s.closeBin()
			continue
		}
		if t > end {
			break
		}
		s.now = t
		switch which {
		case 0:
			s.send()
		case 1:
			p := *s.fwd.front()
			s.fwd.pop()
			s.receive(&p)
		case 2:
			f := *s.ret.front()
			s.ret.pop()
			s.onFrame(&f)
		case 3:
			a := *s.tacks.front()
			s.tacks.pop()
			s.tcpOnAck(&a)
		case 4:
			s.sendFrame()
			s.nextFrame += int64(s.cfg.FeedbackEvery)
		case 5:
			s.tick()
			s.nextTick += int64(s.cfg.TickEvery)
		case 6:
			s.applyEvent(s.cfg.Events[s.nextEvent])
			s.nextEvent++
		case 7:
			s.tcp.started = true
			s.tcp.lastAck = s.now
			s.tcpSend()
		}
	}
	s.res.Final = s.c.Stats()
}

func (s *Sim) measuring() bool { return s.now >= int64(s.cfg.Warmup) }

func (s *Sim) closeBin() {
	sec := s.cfg.Bin.Seconds()
	s.res.Goodput = append(s.res.Goodput, s.binBytes*8/sec)
	s.res.CrossGoodput = append(s.res.CrossGoodput, s.binCross*8/sec)
	p := s.c.PacingRate()
	if math.IsInf(s.binPMin, 1) {
		s.binPMin, s.binPMax = p, p
	}
	s.res.PacingMax = append(s.res.PacingMax, math.Max(s.binPMax, p))
	s.res.PacingMin = append(s.res.PacingMin, math.Min(s.binPMin, p))
	s.res.QueueMax = append(s.res.QueueMax, s.binQMax)
	s.res.Stats = append(s.res.Stats, s.c.Stats())
	s.binBytes, s.binCross, s.binQMax = 0, 0, 0
	s.binPMax, s.binPMin = 0, math.Inf(1)
	s.nextBin += int64(s.cfg.Bin)
}

func (s *Sim) applyEvent(e Event) {
	if e.Rate > 0 {
		nr := e.Rate / 8 / 1e9
		now := float64(s.now)
		// Packets still queued leave at the new rate: rescale their departure times.
		for i := 0; i < s.fwd.n; i++ {
			p := s.fwd.at(i)
			if p.depart > now {
				p.depart = now + (p.depart-now)*s.rate/nr
				p.arrive = int64(p.depart) + p.delay
			}
		}
		if s.busyUntil > now {
			s.busyUntil = now + (s.busyUntil-now)*s.rate/nr
		}
		s.rate = nr
	}
	if e.ExtraDelay != 0 {
		s.extra = int64(e.ExtraDelay)
	}
}

// enqueue puts a packet on the bottleneck; it reports whether the packet was dropped.
func (s *Sim) enqueue(p fwdPkt, ours bool) bool {
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		if ours && s.measuring() {
			s.res.RandDrops++
		}
		return true
	}
	now := float64(s.now)
	if s.busyUntil < now {
		s.busyUntil = now
	}
	backlog := (s.busyUntil - now) * s.rate
	if backlog+float64(p.size) > float64(s.cfg.Buffer) {
		if ours && s.measuring() {
			s.res.QueueDrops++
		}
		return true
	}
	if ours {
		qd := (s.busyUntil - now) / 1e9
		if qd > s.binQMax {
			s.binQMax = qd
		}
		if s.measuring() {
			i := int(qd * 1e9 / float64(qhistRes))
			if i >= len(s.res.qhist) {
				i = len(s.res.qhist) - 1
			}
			s.res.qhist[i]++
		}
	}
	s.busyUntil += float64(p.size) / s.rate
	p.depart = s.busyUntil
	p.delay = s.owd + s.extra
	p.arrive = int64(p.depart) + p.delay
	if s.fwd.n > 0 && p.arrive < s.fwd.at(s.fwd.n-1).arrive {
		p.arrive = s.fwd.at(s.fwd.n - 1).arrive // FIFO path: never overtake (only on a delay drop)
	}
	s.fwd.push(p)
	return false
}

func (s *Sim) pickLane() int {
	best, bi := math.Inf(-1), 0
	for i := range s.lanes {
		l := &s.lanes[i]
		l.credit += s.c.LaneWeight(i)
		if l.credit > best {
			best, bi = l.credit, i
		}
	}
	s.lanes[bi].credit--
	return bi
}

func (s *Sim) send() {
	size := s.cfg.PktSize
	if s.c.Inflight()+size > s.c.InflightCap() {
		s.blocked = true
		return
	}
	li := s.pickLane()
	l := &s.lanes[li]
	seq := l.nextSeq
	l.nextSeq++
	now := s.at(s.now)
	s.c.OnSent(now, li, seq, size, false)
	dropped := s.enqueue(fwdPkt{seq: seq, sentAt: s.now, size: int32(size), lane: uint8(li)}, true)
	l.q.push(sPkt{sentAt: s.now, size: int32(size), dropped: dropped})
	if s.measuring() {
		s.res.Sent++
	}
	r := s.c.PacingRate()
	if r > s.binPMax {
		s.binPMax = r
	}
	if r < s.binPMin {
		s.binPMin = r
	}
	iv := float64(size) * 8 / r * 1e9
	s.nextSend = math.Max(s.nextSend+iv, float64(s.now)) // no credit saved up while waiting
}

func (s *Sim) unblock() {
	if s.blocked && s.c.Inflight()+s.cfg.PktSize <= s.c.InflightCap() {
		s.blocked = false
		s.nextSend = math.Max(s.nextSend, float64(s.now))
	}
}

func (s *Sim) receive(p *fwdPkt) {
	if p.flow == 1 {
		s.binCross += float64(p.size)
		s.tacks.push(tcpAck{arrive: s.now + int64(s.cfg.RTT/2), seq: p.seq, sentAt: p.sentAt})
		return
	}
	s.binBytes += float64(p.size)
	s.rlog = append(s.rlog, rEntry{seq: p.seq, recvAt: s.now, lane: p.lane})
}

func (s *Sim) inBlackout(t int64) bool {
	for _, b := range s.blackouts {
		if t >= b[0] && t < b[1] {
			return true
		}
	}
	return false
}

func (s *Sim) sendFrame() {
	end := s.rbase + len(s.rlog)
	if end <= s.confirmed {
		return
	}
	if s.inBlackout(s.now) || (s.cfg.AckLoss > 0 && s.rng.Float64() < s.cfg.AckLoss) {
		return
	}
	s.ret.push(frame{arrive: s.now + int64(s.cfg.RTT/2), sentAt: s.now, from: s.confirmed, to: end})
}

func (s *Sim) onFrame(f *frame) {
	now := s.at(s.now)
	s.c.OnFeedback(now)
	for i := f.from; i < f.to; i++ {
		if i < s.rbase {
			continue
		}
		e := &s.rlog[i-s.rbase]
		l := &s.lanes[e.lane]
		if e.seq < l.frontSeq {
			continue
		}
		sp := l.q.at(int(e.seq - l.frontSeq))
		if sp.state == 1 {
			continue
		}
		raw := s.now - sp.sentAt
		rtt := raw - (f.sentAt - e.recvAt)
		if rtt < s.minRTT {
			s.minRTT = rtt
		}
		s.c.OnAck(now, int(e.lane), e.seq, int(sp.size), time.Duration(rtt))
		sp.state = 1
		if sp.sentAt >= l.rackSent {
			l.rackSent, l.rackRTT = sp.sentAt, raw
		}
	}
	if f.to > s.confirmed {
		s.confirmed = f.to
	}
	// Compact the receive log below what every frame still in flight may need.
	low := s.confirmed
	if s.ret.n > 0 {
		low = min(low, s.ret.front().from)
	}
	if k := low - s.rbase; k > 4096 && k > len(s.rlog)/2 {
		n := copy(s.rlog, s.rlog[k:])
		s.rlog = s.rlog[:n]
		s.rbase += k
	}
	s.detectLoss()
	s.unblock()
}

func (s *Sim) detectLoss() {
	reo := int64(25 * time.Millisecond)
	if s.minRTT != math.MaxInt64 {
		reo = min(reo, s.minRTT/4)
	}
	now := s.at(s.now)
	for li := range s.lanes {
		l := &s.lanes[li]
		for l.q.n > 0 {
			f := l.q.front()
			if f.state == 0 {
				if f.sentAt < l.rackSent && s.now >= f.sentAt+l.rackRTT+reo {
					s.c.OnLoss(now, li, l.frontSeq, int(f.size))
					if s.measuring() {
						s.res.DeclaredLost++
						if !f.dropped {
							s.res.Spurious++
						}
					}
				} else {
					break
				}
			}
			l.q.pop()
			l.frontSeq++
		}
	}
}

func (s *Sim) tick() {
	if s.cfg.ProbeBps > 0 && s.cfg.ProbeAt > 0 && !s.probed && s.now >= int64(s.cfg.ProbeAt) {
		s.probed = true
		s.c.SeedBandwidth(s.at(s.now), s.cfg.ProbeBps)
	}
	s.c.Tick(s.at(s.now))
	s.detectLoss()
	s.unblock()
	if t := s.tcp; t != nil && t.started && t.inflight > 0 && s.now-t.lastAck > max(int64(time.Second), 3*t.srtt) {
		s.tcpRTO()
	}
}

// ---------------------------------------------------------------------------------------------
// Competing TCP (CUBIC-like).

func (s *Sim) tcpSend() {
	t := s.tcp
	for float64(t.inflight) < t.cwnd {
		seq := t.nextSeq
		t.nextSeq++
		t.out.push(tcpPkt{sentAt: s.now})
		t.inflight++
		s.enqueue(fwdPkt{seq: seq, sentAt: s.now, size: int32(t.size), flow: 1}, false)
	}
}

func (s *Sim) tcpOnAck(a *tcpAck) {
	t := s.tcp
	t.lastAck = s.now
	if a.seq < t.frontSeq {
		return
	}
	p := t.out.at(int(a.seq - t.frontSeq))
	if p.state != 0 {
		return
	}
	p.state = 1
	t.inflight--
	rtt := s.now - a.sentAt
	if t.srtt == 0 {
		t.srtt = rtt
	} else {
		t.srtt += (rtt - t.srtt) / 8
	}
	if a.seq+1 > t.highAcked {
		t.highAcked = a.seq + 1
	}
	// 3-dupack equivalent: a packet is lost once three later packets were acked.
	lossEvent := false
	for t.out.n > 0 {
		f := t.out.front()
		if f.state == 0 {
			if t.frontSeq+3 < t.highAcked {
				f.state = 2
				t.inflight--
				if t.frontSeq >= t.recoverSeq {
					lossEvent = true
				}
			} else {
				break
			}
		}
		t.out.pop()
		t.frontSeq++
	}
	if lossEvent {
		t.recoverSeq = t.nextSeq
		t.cubicReduce(s.now)
	} else if a.seq >= t.recoverSeq {
		t.cubicGrow(s.now)
	}
	s.tcpSend()
}

func (t *tcpFlow) cubicReduce(now int64) {
	t.wmax = t.cwnd
	t.cwnd = math.Max(2, t.cwnd*0.7)
	t.ssthresh = t.cwnd
	t.k = math.Cbrt(t.wmax * 0.3 / 0.4)
	t.epoch = now
}

func (t *tcpFlow) cubicGrow(now int64) {
	if t.cwnd < t.ssthresh {
		t.cwnd++
		return
	}
	el := float64(now-t.epoch) / 1e9
	target := 0.4*math.Pow(el-t.k, 3) + t.wmax
	rtt := math.Max(float64(t.srtt)/1e9, 1e-3)
	west := t.wmax*0.7 + 3*0.3/1.7*el/rtt
	tgt := math.Max(target, west)
	if tgt > t.cwnd {
		t.cwnd += math.Min(tgt-t.cwnd, t.cwnd) / t.cwnd
	} else {
		t.cwnd += 0.01 / t.cwnd
	}
}

func (s *Sim) tcpRTO() {
	t := s.tcp
	for t.out.n > 0 {
		t.out.pop()
		t.frontSeq++
	}
	t.inflight = 0
	t.wmax = t.cwnd
	t.ssthresh = math.Max(2, t.cwnd*0.7)
	t.k = math.Cbrt(t.wmax * 0.3 / 0.4)
	t.epoch = s.now
	t.cwnd = 1
	t.recoverSeq = t.nextSeq
	t.lastAck = s.now
	s.tcpSend()
}

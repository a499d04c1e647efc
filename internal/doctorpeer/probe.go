package doctorpeer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/internal/xfer"
)

// The capacity probe. The copy's packet train (internal/session, train.go) is one reading each
// way, taken once: read through a lossy or loaded path it is weak evidence (on the lab at 400
// Mbit/s, 140 ms and 1 % loss doctor once read "390.0 Mbit/s to the host, 166.7 Mbit/s from it";
// issue 40). So doctor sends probeTrains trains each way after the handshake ("probe",
// docs/PROTOCOL.md), reads each on its own and names a capacity only where they agree (Judge):
// Quorum of them within ±agreeWithin of their median, and little loss among them. Otherwise
// it says what it knows: at least the lowest reading, or why it cannot tell.
//
// Arrivals are timed by receive batch (the path's handler sees one clock read per batch; the
// kernel's timestamps are the copy's train's alone). A reading (reading) is a lower bound of the
// path's capacity wherever the arrivals are not compressed after the bottleneck: the datagrams
// after the first batch not read out of a backlog all arrived between that batch's time and the
// last one's not read late, so the path delivered them at least that fast. A receiver that stalls
// inside a train makes it read lower; a hop that holds the train and releases it at once (the
// lab's emulator on a busy machine) makes it read higher, and that is what the other trains
// outvote.
const (
	probeTrains  = 6                     // trains each way
	Quorum       = 4                     // readings that must agree for a capacity to be named
	minAtLeast   = 3                     // readings an "at least" needs (the lowest of them)
	agreeWithin  = 0.10                  // of the median
	maxProbeLoss = 0.10                  // of the datagrams sent: more, and no figure is named
	trainLossMax = 0.20                  // of a train's datagrams: more, and it is not read
	probeSpan    = 4 * time.Millisecond  // what a train should take at the bottleneck's rate
	minReadSpan  = time.Millisecond      // a train spread over less is not timed (the receive loop's jitter is tens of µs)
	backlogGap   = 50 * time.Microsecond // full batches closer than this were read out of a backlog (reading)
	minProbeLen  = 48                    // datagrams in a train, at least (1.4 ms at 400 Mbit/s)
	maxProbeLen  = 1024                  // at most (1.5 MB: 4 ms at 3 Gbit/s)
	defaultRate  = 100e6                 // sizes the trains where the handshake's trains gave no estimate
	maxBurst     = 2 << 20               // bytes of trains each way beyond which they are spaced for the slower estimate
	// What a peer may ask for or report.
	maxProbeTrains = 8
	maxProbeGap    = 100 * time.Millisecond
	maxArrival     = 10 * time.Second // the most a train's arrivals may spread over
)

// probeMagic opens every probe datagram's plaintext: then the train (one byte) and the datagram's
// index in it (two bytes).
var probeMagic = [4]byte{'F', 'W', 'D', 'P'}

// probeHeader is the plaintext's header: magic, train, index.
const probeHeader = 7

// probeDatagram is a probe datagram's size in bytes: the largest farwing sends.
const probeDatagram = wire.MaxDatagramV6

// Capacity is one direction's probe as doctor judged it: what was sent and what arrived, each
// train's reading, and the verdict.
type Capacity struct {
	Trains   int       `json:"trains"`            // trains sent
	Len      int       `json:"train_len"`         // datagrams in each
	Sent     int       `json:"datagrams_sent"`    // Trains × Len
	Arrived  int       `json:"datagrams_arrived"` // of them
	Readings []float64 `json:"readings_bps"`      // each train's reading in IP bits/s; 0: not read (lost, or too close together to time)
	// The verdict: Bps, the capacity the trains agree on (Agreed of them within ±10 % of their
	// median); or AtLeastBps, the lowest reading, where they disagree; or neither, and Why says why.
	Bps        float64 `json:"bps,omitempty"`
	AtLeastBps float64 `json:"at_least_bps,omitempty"`
	Agreed     int     `json:"agreed"`
	Why        string  `json:"why"` // agreed, disagreed, lossy, untimed, none (no trains came)
}

// The verdicts of a Capacity (Why).
const (
	CapAgreed    = "agreed"
	CapDisagreed = "disagreed"
	CapLossy     = "lossy"
	CapUntimed   = "untimed"
	CapNone      = "none"
)

// Judge names a capacity from readings (0: a train not read) where the evidence bears it out:
// at most maxProbeLoss of the sent datagrams lost, and Quorum readings within ±agreeWithin of
// the median of those read; the figure is the median of the agreeing ones. Otherwise, with loss
// in bounds and at least minAtLeast trains read, the lowest reading is what the path carried at
// least; with fewer, it cannot tell (one train the lab's emulator released bunched read 1.16
// Gbit/s on 400 Mbit/s: a lower bound only where some reading is not compressed).
func Judge(c Capacity) Capacity {
	c.Bps, c.AtLeastBps, c.Agreed = 0, 0, 0
	c.Arrived = min(max(c.Arrived, 0), c.Sent) // no more arrived than were sent: a loss is never negative
	var read []float64
	for _, r := range c.Readings {
		if r > 0 {
			read = append(read, r)
		}
	}
	slices.Sort(read)
	switch {
	case c.Arrived == 0:
		c.Why = CapNone
		return c
	case float64(c.Sent-c.Arrived) > maxProbeLoss*float64(c.Sent):
		c.Why = CapLossy
		return c
	case len(read) == 0:
		c.Why = CapUntimed
		return c
	}
	med := median(read)
	var agree []float64
	for _, r := range read {
		if math.Abs(r-med) <= agreeWithin*med {
			agree = append(agree, r)
		}
	}
	c.Agreed = len(agree)
	if len(agree) >= Quorum {
		c.Why, c.Bps = CapAgreed, median(agree)
		return c
	}
	if len(read) < minAtLeast {
		c.Why = CapUntimed // too few read to say even what the path carried at least
		return c
	}
	c.Why, c.AtLeastBps = CapDisagreed, read[0]
	return c
}

// median of sorted values: the lower middle one of an even count.
func median(sorted []float64) float64 { return sorted[(len(sorted)-1)/2] }

// reading is one train's rate in bits/s from its arrival offsets (ascending; datagrams read in one
// receive batch share a time) and ipSize, the IP bytes of each datagram; 0 when it cannot be read:
// fewer than 1-trainLossMax of its n datagrams came, or they cannot be timed over minReadSpan.
//
// A receiver that was behind reads full batches (the train's largest) back to back, less than
// backlogGap apart, of datagrams that came long before: such a batch, and the one read right after
// it, carry late times. (Batches of a hop that forwards in clumps are as large, but come as far
// apart as the clumps.) The reading times from the first batch not read out of a backlog to the
// last batch whose time is not late, and counts the datagrams after the first up to the end of the
// last: they all arrived in that time, so the path carried them at least that fast. A train read
// out of a backlog whole cannot be timed.
func reading(at []time.Duration, n, ipSize int) float64 {
	if len(at) == 0 || float64(len(at)) < (1-trainLossMax)*float64(n) {
		return 0
	}
	var ends []int // where each batch ends
	for i := 1; i <= len(at); i++ {
		if i == len(at) || at[i] != at[i-1] {
			ends = append(ends, i)
		}
	}
	largest, prev := 0, 0
	for _, e := range ends {
		largest, prev = max(largest, e-prev), e
	}
	behind := make([]bool, len(ends))
	prev = 0
	for b, e := range ends {
		behind[b] = e-prev == largest && largest > 1 && e < len(at) && at[e]-at[e-1] < backlogGap
		prev = e
	}
	first, last := -1, -1 // batches
	for b := range ends {
		if !behind[b] && first < 0 {
			first = b
		}
		if !behind[b] && (b == 0 || !behind[b-1]) {
			last = b
		}
	}
	if first < 0 || last <= first {
		return 0
	}
	from, to := ends[first]-1, ends[last]-1 // their last datagrams
	span := at[to] - at[from]
	if span < minReadSpan {
		return 0
	}
	return float64((to-from)*ipSize) * 8 / span.Seconds()
}

// trainsFor sizes one direction's trains for a path estimated at bps (0: unknown): long enough to
// take probeSpan at that rate, within minProbeLen…maxProbeLen, and as far apart as a train takes
// at it; where the trains hold more than maxBurst in all, as far apart as one takes at pace (the
// slower of the handshake's readings, 0: none), so that they do not pile up in the bottleneck's
// queue when bps was read from a compressed train (on the lab, 1024-datagram trains sized for 10.8
// Gbit/s and 1 ms apart lost 11 % of their datagrams in a one-BDP queue at 400 Mbit/s).
func trainsFor(bps, pace float64, ipSize int) xfer.DoctorTrains {
	if !(bps > 0) {
		bps = defaultRate
	}
	n := int(min(max(math.Ceil(bps*probeSpan.Seconds()/float64(8*ipSize)), minProbeLen), maxProbeLen))
	spacing := bps
	if probeTrains*n*ipSize > maxBurst && pace > 0 {
		spacing = min(bps, pace)
	}
	gap := max(time.Duration(float64(n*ipSize*8)/spacing*float64(time.Second)), time.Millisecond)
	return xfer.DoctorTrains{Trains: probeTrains, Len: n, GapMicros: int(min(gap, maxProbeGap) / time.Microsecond)}
}

// checkTrains bounds what a peer asks an end to send or expect.
func checkTrains(t xfer.DoctorTrains) error {
	if t.Trains < 1 || t.Trains > maxProbeTrains || t.Len < minProbeLen || t.Len > maxProbeLen || t.GapMicros < 0 || t.GapMicros > int(maxProbeGap/time.Microsecond) {
		return fmt.Errorf("%w: a probe of %d trains of %d datagrams, %d µs apart", xfer.ErrProtocol, t.Trains, t.Len, t.GapMicros)
	}
	return nil
}

// sendTrains sends t's trains on lane 0 of p to its peer.
func sendTrains(ctx context.Context, p *session.Path, t xfer.DoctorTrains) error {
	pt := make([]byte, probeDatagram-wire.Overhead)
	copy(pt, probeMagic[:])
	for k := range t.Trains {
		if k > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(t.GapMicros) * time.Microsecond):
			}
		}
		pkts := make([][]byte, t.Len) // sealed before the first leaves, so that the train goes back to back
		for i := range pkts {
			pt[4] = byte(k)
			binary.BigEndian.PutUint16(pt[5:], uint16(i))
			pkts[i] = p.Seal(make([]byte, 0, probeDatagram), wire.TypeFeedback, 0, p.NextSeq(0), pt)
		}
		if err := p.Send(0, pkts); err != nil {
			return err
		}
	}
	return nil
}

// probeRx records the arrivals of the peer's probe trains: it is the path's Handler on both
// ends of a doctor session (no engine is attached there). It keeps each (train, index) the first
// time it comes, within the trains it expects (expect; until then within maxProbeTrains ×
// maxProbeLen, for a peer's trains may come before its request): the peer's count is not trusted,
// and what lies beyond the request counts neither as an arrival nor towards wait's end.
type probeRx struct {
	stamped bool // time arrivals by the lanes' kernel receive times where they give them
	mu      sync.Mutex
	want    xfer.DoctorTrains // the trains expected (zero: not yet known)
	at      [maxProbeTrains][]probeArrival
	seen    [maxProbeTrains][maxProbeLen]bool
	n       int           // arrivals within want
	last    time.Time     // the latest of them
	arrived chan struct{} // a datagram came (buffered, one)
}

// probeArrival is one datagram of a train: its index and when it came.
type probeArrival struct {
	i  int
	at time.Time
}

func newProbeRx() *probeRx { return &probeRx{arrived: make(chan struct{}, 1)} }

// within reports whether train k's datagram i is one of t's (t zero: one of the most a peer may
// send).
func within(t xfer.DoctorTrains, k, i int) bool {
	if t.Trains == 0 {
		return k < maxProbeTrains && i < maxProbeLen
	}
	return k < min(t.Trains, maxProbeTrains) && i < min(t.Len, maxProbeLen)
}

// expect bounds the arrivals to t's trains: those kept beyond them are dropped.
func (r *probeRx) expect(t xfer.DoctorTrains) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want, r.n, r.last = t, 0, time.Time{}
	for k := range r.at {
		kept := r.at[k][:0]
		for _, a := range r.at[k] {
			if within(t, k, a.i) {
				kept = append(kept, a)
				r.n++
				if a.at.After(r.last) {
					r.last = a.at
				}
			} else {
				r.seen[k][a.i] = false
			}
		}
		r.at[k] = kept
	}
}

// Datagram records an authentic probe datagram at now (its receive batch's time).
func (r *probeRx) Datagram(laneIdx int, h wire.Header, pt []byte, now time.Time) {
	r.StampedDatagram(laneIdx, h, pt, now, time.Time{})
}

// StampedDatagram records an authentic probe datagram at its kernel receive time rx where there
// is one and r is stamped, at now (its receive batch's time) otherwise (session.StampedHandler).
func (r *probeRx) StampedDatagram(_ int, h wire.Header, pt []byte, now, rx time.Time) {
	if h.Type != wire.TypeFeedback || len(pt) < probeHeader || [4]byte(pt[:4]) != probeMagic {
		return
	}
	k, i := int(pt[4]), int(binary.BigEndian.Uint16(pt[5:]))
	if r.stamped && !rx.IsZero() {
		now = rx
	}
	r.mu.Lock()
	if !within(r.want, k, i) || r.seen[k][i] {
		r.mu.Unlock()
		return
	}
	r.seen[k][i] = true
	r.at[k] = append(r.at[k], probeArrival{i, now})
	r.n++
	if now.After(r.last) {
		r.last = now
	}
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

// wait returns once t's trains have all arrived, or quiet after from or the last arrival,
// whichever is later, or at deadline. r expects t (expect).
func (r *probeRx) wait(ctx context.Context, t xfer.DoctorTrains, from time.Time, deadline time.Time) {
	quiet := 30*time.Millisecond + 2*time.Duration(t.GapMicros)*time.Microsecond
	for {
		r.mu.Lock()
		n, last := r.n, r.last
		r.mu.Unlock()
		if last.Before(from) {
			last = from
		}
		end := last.Add(quiet)
		if deadline.Before(end) {
			end = deadline
		}
		if n >= t.Trains*t.Len || !time.Now().Before(end) {
			return
		}
		tm := time.NewTimer(time.Until(end))
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-r.arrived:
		case <-tm.C:
		}
		tm.Stop()
	}
}

// arrivals returns the arrival offsets of t's trains, each from its train's first arrival: at
// most t.Len a train, of the datagrams t sent alone.
func (r *probeRx) arrivals(t xfer.DoctorTrains) [][]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]time.Duration, max(0, min(t.Trains, maxProbeTrains)))
	for k := range out {
		var first time.Time
		for _, a := range r.at[k] {
			if !within(t, k, a.i) || len(out[k]) >= t.Len {
				continue
			}
			if first.IsZero() {
				first = a.at
			}
			out[k] = append(out[k], a.at.Sub(first))
		}
	}
	return out
}

// toGaps writes arrival offsets as the probe answer carries them: µs since the previous arrival.
func toGaps(at [][]time.Duration) [][]int64 {
	out := make([][]int64, len(at))
	for k, a := range at {
		out[k] = make([]int64, len(a))
		prev := int64(0)
		for i, d := range a {
			us := d.Microseconds()
			out[k][i], prev = us-prev, us
		}
	}
	return out
}

// fromGaps reads a peer's probe answer back into offsets, refusing what t's trains cannot have
// produced: more trains or arrivals than were sent, a negative gap, a train spread over more than
// maxArrival.
func fromGaps(gaps [][]int64, t xfer.DoctorTrains) ([][]time.Duration, error) {
	if len(gaps) > t.Trains {
		return nil, fmt.Errorf("%w: the doctor peer reports %d trains of the %d sent", xfer.ErrProtocol, len(gaps), t.Trains)
	}
	out := make([][]time.Duration, t.Trains)
	for k, g := range gaps {
		if len(g) > t.Len {
			return nil, fmt.Errorf("%w: the doctor peer reports %d arrivals of a train of %d", xfer.ErrProtocol, len(g), t.Len)
		}
		sum := int64(0)
		for _, us := range g {
			if us < 0 || us > maxArrival.Microseconds() || sum+us > maxArrival.Microseconds() {
				return nil, fmt.Errorf("%w: the doctor peer reports arrivals %d µs apart", xfer.ErrProtocol, us)
			}
			sum += us
			out[k] = append(out[k], time.Duration(sum)*time.Microsecond)
		}
	}
	return out, nil
}

// capacity reads and judges one direction's trains t from their arrivals.
func capacity(t xfer.DoctorTrains, at [][]time.Duration, ipSize int) *Capacity {
	c := Capacity{Trains: t.Trains, Len: t.Len, Sent: t.Trains * t.Len, Readings: make([]float64, t.Trains)}
	for k := range t.Trains {
		if k < len(at) {
			a := at[k][:min(len(at[k]), t.Len)] // no more arrivals than datagrams sent
			c.Arrived += len(a)
			c.Readings[k] = reading(a, t.Len, ipSize)
		}
	}
	c.Arrived = min(c.Arrived, c.Sent)
	c = Judge(c)
	return &c
}

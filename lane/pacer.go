package lane

import (
	"math"
	"time"
)

// pacerQuantum is credit the cap always leaves room for on top of rate × burst: one GSO
// super-packet, the largest unit a lane sends. Without it a sender that waits for a full 64 KiB of
// credit would wait forever below 64 KiB / burst (262 Mbit/s at 2 ms), and one whose wakeups land
// just after the credit reached the cap would lose the overshoot (about 3 % at 10 Mbit/s).
const pacerQuantum = 64 << 10

// maxPacerWait bounds Wait when the rate is zero, so a paused sender still looks again.
const maxPacerWait = 100 * time.Millisecond

// maxPacerRate bounds SetRate (bits per second) so credit arithmetic stays finite.
const maxPacerRate = 1e13

// Pacer releases send credit at a rate in bits per second. Credit accrues as rate × elapsed time and
// is capped at rate × burst (plus one 64 KiB super-packet) so that an idle period never turns into a
// line-rate burst. Go timers cannot sleep below ~1 ms, so the sender wakes about once a millisecond
// and sends what the credit allows, either
//
//   - whole packets while Budget(now) >= len(next packet), then sleeps Wait(now, len(next)); or
//   - packets while Budget(now) > 0, overdrawing by at most one packet, then sleeps Wait(now, 1).
//
// Both hold the long-run rate within a fraction of a percent for wakeups up to burst apart. The
// zero value is not usable; use NewPacer. Not safe for concurrent use.
type Pacer struct {
	rate   float64 // bytes per second
	burst  time.Duration
	credit float64 // bytes; negative after an overdraft
	last   time.Time
}

// NewPacer returns a pacer at bitsPerSecond with a burst cap of burst (0: 2 ms).
func NewPacer(bitsPerSecond float64, burst time.Duration) *Pacer {
	if burst <= 0 {
		burst = 2 * time.Millisecond
	}
	p := &Pacer{burst: burst}
	p.SetRate(bitsPerSecond)
	return p
}

// SetRate changes the rate; credit already earned is kept (within the new cap). Time since the
// last Budget, Wait or Consume call is credited at the new rate. A rate that is not positive
// pauses sending.
func (p *Pacer) SetRate(bitsPerSecond float64) {
	switch {
	case !(bitsPerSecond > 0): // also NaN
		bitsPerSecond = 0
	case bitsPerSecond > maxPacerRate:
		bitsPerSecond = maxPacerRate
	}
	p.rate = bitsPerSecond / 8
	if max := p.max(); p.credit > max {
		p.credit = max
	}
}

// Rate is the current rate in bits per second.
func (p *Pacer) Rate() float64 { return p.rate * 8 }

// max is the credit cap in bytes.
func (p *Pacer) max() float64 {
	if p.rate <= 0 {
		return 0
	}
	return p.rate*p.burst.Seconds() + pacerQuantum
}

// advance accrues credit up to now. The first call starts the clock with half the cap.
func (p *Pacer) advance(now time.Time) {
	if p.last.IsZero() {
		p.last = now
		p.credit = p.max() / 2
		return
	}
	if dt := now.Sub(p.last); dt > 0 {
		p.credit += p.rate * dt.Seconds()
		p.last = now
	}
	if max := p.max(); p.credit > max {
		p.credit = max
	}
}

// Budget returns how many bytes may be sent at now.
func (p *Pacer) Budget(now time.Time) int {
	p.advance(now)
	switch {
	case p.credit <= 0:
		return 0
	case p.credit >= math.MaxInt: // 32-bit platforms at extreme rates
		return math.MaxInt
	}
	return int(p.credit)
}

// Consume records n bytes sent. Credit may go negative by at most one packet.
func (p *Pacer) Consume(n int) { p.credit -= float64(n) }

// Wait is how long until at least n bytes of credit will be available. n above the cap is treated
// as the cap. With a zero rate it returns a short poll interval (100 ms) rather than forever.
func (p *Pacer) Wait(now time.Time, n int) time.Duration {
	p.advance(now)
	if p.rate <= 0 {
		return maxPacerWait
	}
	need := math.Min(float64(n), p.max()) - p.credit
	if need <= 0 {
		return 0
	}
	// Round up, plus 1 ns against float rounding, so that Budget(now+Wait) >= n.
	return time.Duration(math.Ceil(need/p.rate*float64(time.Second))) + 1
}

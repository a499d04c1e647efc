package lane

import "time"

// Pacer releases send credit at a rate in bits per second. Credit accrues as rate × elapsed time and
// is capped at Burst worth of time so that an idle period never turns into a line-rate burst. Go
// timers cannot sleep below ~1 ms, so the sender wakes about once a millisecond and sends what the
// credit allows. The zero value is not usable; use NewPacer. Not safe for concurrent use.
type Pacer struct {
	rate   float64 // bytes per second
	burst  time.Duration
	credit float64 // bytes
	last   time.Time
}

// NewPacer returns a pacer at bitsPerSecond with a burst cap of burst (0: 2 ms).
func NewPacer(bitsPerSecond float64, burst time.Duration) *Pacer {
	if burst <= 0 {
		burst = 2 * time.Millisecond
	}
	return &Pacer{rate: bitsPerSecond / 8, burst: burst}
}

// SetRate changes the rate; credit already earned is kept (within the cap).
func (p *Pacer) SetRate(bitsPerSecond float64) { p.rate = bitsPerSecond / 8 }

// Rate is the current rate in bits per second.
func (p *Pacer) Rate() float64 { return p.rate * 8 }

// Budget returns how many bytes may be sent at now.
func (p *Pacer) Budget(now time.Time) int {
	if p.last.IsZero() {
		p.last = now
		p.credit = p.rate * p.burst.Seconds() / 2
	}
	if dt := now.Sub(p.last); dt > 0 {
		p.credit += p.rate * dt.Seconds()
		p.last = now
	}
	if max := p.rate * p.burst.Seconds(); p.credit > max {
		p.credit = max
	}
	if p.credit < 0 {
		return 0
	}
	return int(p.credit)
}

// Consume records n bytes sent. Credit may go negative by at most one packet.
func (p *Pacer) Consume(n int) { p.credit -= float64(n) }

// Wait is how long until at least n bytes of credit will be available.
func (p *Pacer) Wait(now time.Time, n int) time.Duration {
	need := float64(n) - p.credit
	if need <= 0 || p.rate <= 0 {
		return 0
	}
	return time.Duration(need / p.rate * float64(time.Second))
}

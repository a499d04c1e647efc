package lane

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// simulate drives a pacer in virtual time for d, as a sender would: it wakes up, sends what the
// credit allows, and sleeps. A Go sleep lasts at least ~1 ms (timers go through epoll_wait's
// millisecond resolution), so each sleep is max(Wait, 1 ms) plus up to 1 ms of jitter. With
// overdraft it sends while Budget > 0, letting credit go negative by one packet; otherwise it sends
// only whole packets that fit. It returns the achieved rate in bits per second.
func simulate(rate float64, pkt int, overdraft bool, d time.Duration, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 0))
	p := NewPacer(rate, 0)
	now := t0
	end := t0.Add(d)
	sent := int64(0)
	for now.Before(end) {
		for {
			b := p.Budget(now)
			if overdraft && b <= 0 || !overdraft && b < pkt {
				break
			}
			p.Consume(pkt)
			sent += int64(pkt)
		}
		need := pkt
		if overdraft {
			need = 1
		}
		sleep := max(p.Wait(now, need), time.Millisecond)
		now = now.Add(sleep + time.Duration(rng.Int64N(int64(time.Millisecond))))
	}
	return float64(sent) * 8 / now.Sub(t0).Seconds()
}

// TestPacerAccuracy: within ±3 % from 10 Mbit/s to 10 Gbit/s, for 1472-byte packets and 64 KiB GSO
// bursts, with jittery ~1 ms wakeups.
func TestPacerAccuracy(t *testing.T) {
	d := 10 * time.Second
	if testing.Short() {
		d = 2 * time.Second
	}
	for _, rate := range []float64{10e6, 50e6, 100e6, 250e6, 1e9, 2.5e9, 10e9} {
		for _, pkt := range []int{1472, 45 * 1452, 64 << 10} {
			for _, od := range []bool{false, true} {
				dd := d
				if rate >= 2.5e9 && pkt == 1472 {
					dd = d / 5 // millions of packets; enough for 0.1 % resolution
				}
				got := simulate(rate, pkt, od, dd, uint64(rate)+uint64(pkt))
				errPct := (got/rate - 1) * 100
				name := fmt.Sprintf("%.0f Mbit/s, %d B, overdraft=%v", rate/1e6, pkt, od)
				if math.Abs(errPct) > 3 {
					t.Errorf("%s: %.2f Mbit/s (%+.2f%%)", name, got/1e6, errPct)
				} else if testing.Verbose() {
					t.Logf("%s: %+.3f%%", name, errPct)
				}
			}
		}
	}
}

// TestPacerBurstCap: an idle period never turns into more than rate × burst + one super-packet.
func TestPacerBurstCap(t *testing.T) {
	for _, rate := range []float64{10e6, 1e9, 10e9} {
		p := NewPacer(rate, 2*time.Millisecond)
		first := p.Budget(t0)
		cap := rate/8*0.002 + pacerQuantum
		if math.Abs(float64(first)-cap/2) > 1 {
			t.Errorf("%v: initial budget %d, want half the cap %.0f", rate, first, cap/2)
		}
		b := p.Budget(t0.Add(time.Minute))
		if math.Abs(float64(b)-cap) > 1 {
			t.Errorf("%v: budget after idle %d, want cap %.0f", rate, b, cap)
		}
	}
}

func TestPacerSetRate(t *testing.T) {
	p := NewPacer(10e9, 0)
	p.Budget(t0)
	if b := p.Budget(t0.Add(time.Second)); b < 2_500_000 {
		t.Fatalf("budget %d", b)
	}
	p.SetRate(10e6)
	if p.Rate() != 10e6 {
		t.Fatal(p.Rate())
	}
	// Credit earned at 10 Gbit/s must not survive as a 2 s burst at 10 Mbit/s.
	if b := p.Budget(t0.Add(time.Second)); b > 2500+pacerQuantum {
		t.Fatalf("budget %d after slowing down", b)
	}
	for _, bad := range []float64{-1, 0, math.NaN()} {
		p.SetRate(bad)
		if p.Rate() != 0 {
			t.Fatalf("SetRate(%v): rate %v", bad, p.Rate())
		}
		if b := p.Budget(t0.Add(2 * time.Second)); b != 0 {
			t.Fatalf("paused pacer budget %d", b)
		}
		if w := p.Wait(t0.Add(2*time.Second), 1); w <= 0 || w > time.Second {
			t.Fatalf("paused pacer Wait = %v", w)
		}
	}
	p.SetRate(math.Inf(1))
	if p.Rate() != maxPacerRate {
		t.Fatal(p.Rate())
	}
	if b := p.Budget(t0.Add(3 * time.Second)); b <= 0 {
		t.Fatalf("budget %d at max rate", b)
	}
}

// TestPacerWait: after sleeping Wait(now, n), n bytes are available, and not much earlier.
func TestPacerWait(t *testing.T) {
	for _, rate := range []float64{10e6, 1e9, 10e9} {
		for _, n := range []int{1, 1472, 64 << 10} {
			p := NewPacer(rate, 0)
			now := t0
			p.Budget(now)
			p.Consume(p.Budget(now) + 10000) // overdrawn
			w := p.Wait(now, n)
			if w <= 0 {
				t.Fatalf("rate %v n %d: Wait %v", rate, n, w)
			}
			if rate < 1e9 {
				if b := p.Budget(now.Add(w * 999 / 1000)); b >= n {
					t.Errorf("rate %v n %d: %d bytes already before Wait %v", rate, n, b, w)
				}
			}
			if b := p.Budget(now.Add(w)); b < n {
				t.Errorf("rate %v n %d: budget %d after Wait %v", rate, n, b, w)
			}
		}
	}
	// n above the cap waits for the cap, not forever.
	p := NewPacer(10e6, 0)
	p.Budget(t0)
	if w := p.Wait(t0, 1<<30); w <= 0 || w > time.Second {
		t.Fatalf("Wait beyond cap = %v", w)
	}
}

// TestPacerClockBackwards: a non-monotonic now neither adds nor removes credit.
func TestPacerClockBackwards(t *testing.T) {
	p := NewPacer(1e9, 0)
	b1 := p.Budget(t0.Add(time.Second))
	if b2 := p.Budget(t0); b2 != b1 {
		t.Fatalf("budget %d after clock went back, was %d", b2, b1)
	}
}

func BenchmarkPacer(b *testing.B) {
	p := NewPacer(10e9, 0)
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			now = now.Add(10 * time.Microsecond)
		}
		if p.Budget(now) > 0 {
			p.Consume(1472)
		}
	}
}

package simnet

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/farwing/farwing/cc"
)

// The cells of the LTRC test matrix (shared/research/congestion-control.md §3) that a single-path
// virtual-time model can check. Every cell is deterministic (fixed seed); the bounds are model
// checks, not wall-clock timing.

const (
	mbit    = 1e6
	baseRTT = 140 * time.Millisecond
)

func bdpBytes(rate float64, rtt time.Duration) int { return int(rate / 8 * rtt.Seconds()) }

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	r := Run(cfg)
	return r
}

func fmtStats(s cc.Stats) string {
	return fmt.Sprintf("mode=%v/%v pace=%.1fM btl=%.1fM base=%.4f(%d) minrtt=%v cong=%d(loss %d, queue %d) timeouts=%d compete=%v shared=%v capacity=%.1fM",
		s.Mode, s.Phase, s.PacingRate/mbit, s.BtlBw/mbit, s.LossBase, s.BaseSamples, s.MinRTT,
		s.CongestionEvents, s.LossEvents, s.QueueEvents, s.FeedbackTimeouts, s.Compete, s.Shared, s.Capacity/mbit)
}

func bin(r *Result, at time.Duration) int { return min(int(at/r.Bin), len(r.Goodput)-1) }

// A1/A2: random loss 0–5 % at 400 Mbit/s, 140 ms, 1 BDP buffer.
func TestRandomLoss(t *testing.T) {
	for _, p := range []float64{0, 0.001, 0.01, 0.03, 0.05} {
		t.Run(fmt.Sprintf("p=%g", p), func(t *testing.T) {
			t.Parallel()
			C := 400 * mbit
			dur := 25 * time.Second
			r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Loss: p, Duration: dur})
			g := r.MeanGoodput(3*time.Second, dur)
			lb := r.Final.LossBase
			t.Logf("goodput %.1f Mbit/s (%.1f %% of C), loss_base %.4f (truth %.4f), wire loss %.4f, spurious %d/%d, p95 queue %v; %s",
				g/mbit, 100*g/C, lb, p, r.LossRate(), r.Spurious, r.DeclaredLost, r.QueueDelayQuantile(0.95), fmtStats(r.Final))
			want := 0.9
			if p > 0.03 {
				want = 0.8
			}
			if g < want*C {
				t.Errorf("goodput %.1f Mbit/s < %.0f %% of C", g/mbit, 100*want)
			}
			if tol := 0.15*p + 0.001; math.Abs(lb-p) > tol {
				t.Errorf("loss_base %.4f not within %.4f of %.4f", lb, tol, p)
			}
			// The congestion-free rounds' loss rate, which FEC plans with, is the finer measure.
			if rl, tol := r.Final.RandomLoss, 0.05*p+0.0005; math.Abs(rl-p) > tol {
				t.Errorf("random loss %.4f not within %.4f of %.4f", rl, tol, p)
			} else {
				t.Logf("random loss %.5f", rl)
			}
		})
	}
}

// A1/A2 over twelve seeds: random loss alone draws no loss cuts (the baseline's first sample is
// STARTUP's 500-packet warm-up, which at 3 % loss read 1.0-2.2 % in three of these seeds and made
// the random losses of later rounds look like an excess: 14 loss cuts in all before the
// verdicts allowed for the baseline's own error; 1 with it), the baseline keeps samples coming
// from DOWN rounds (2-4 in 25 s before, when random losses at the UP's queue discarded them),
// and CRUISE keeps the link busy (99.1 % of the capacity at every level before its gain).
func TestRandomLossSeeds(t *testing.T) {
	for _, p := range []float64{0, 0.01, 0.03} {
		t.Run(fmt.Sprintf("p=%g", p), func(t *testing.T) {
			t.Parallel()
			C := 400 * mbit
			dur := 25 * time.Second
			var cuts uint64
			var g, minSamples float64
			minSamples = math.Inf(1)
			const seeds = 12
			for seed := uint64(1); seed <= seeds; seed++ {
				r := run(t, Config{Seed: seed, Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Loss: p, Duration: dur})
				cuts += r.Final.LossEvents
				g += r.MeanGoodput(3*time.Second, dur) / seeds
				minSamples = math.Min(minSamples, float64(r.Final.BaseSamples))
			}
			t.Logf("%d loss cuts in %d seeds, mean goodput %.1f Mbit/s (%.2f %% of C), fewest baseline samples %.0f", cuts, seeds, g/mbit, 100*g/C, minSamples)
			if cuts > 2 {
				t.Errorf("%d loss cuts from random loss alone in %d seeds, want at most 2", cuts, seeds)
			}
			if g < 0.994*C {
				t.Errorf("mean goodput %.2f %% of C, want at least 99.4 %%", 100*g/C)
			}
			if p > 0 && minSamples < 6 {
				t.Errorf("a 25 s run kept %.0f baseline samples, want at least 6", minSamples)
			}
		})
	}
}

// C2': a buffer shallower than Q_LOW (BDP/50, 2.8 ms at 140 ms) overflows before any queue shows:
// CRUISE must not keep raising its gain into it, and those overflows must not count as random
// loss (before the fix a review found: RandomLoss 0.5 % with no random loss and 3.7-3.8 % at 3 %,
// BtlBw 1 % high, 30 loss cuts where 21 had been, and FEC parity sent on a loss-free path).
func TestShallowerThanQLow(t *testing.T) {
	for _, p := range []float64{0, 0.03} {
		t.Run(fmt.Sprintf("p=%g", p), func(t *testing.T) {
			t.Parallel()
			C := 400 * mbit
			dur := 25 * time.Second
			r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT) / 50, Loss: p, Duration: dur})
			f := r.Final
			t.Logf("goodput %.1f Mbit/s, random loss %.4f, BtlBw %.1f Mbit/s; %s", r.MeanGoodput(3*time.Second, dur)/mbit, f.RandomLoss, f.BtlBw/mbit, fmtStats(f))
			if math.Abs(f.RandomLoss-p) > 0.1*p+0.0005 {
				t.Errorf("random loss %.4f, want %.4f: overflow counted as random", f.RandomLoss, p)
			}
			if want := C / (1 - p); f.BtlBw > 1.005*want {
				t.Errorf("BtlBw %.1f Mbit/s, more than 0.5 %% over %.1f", f.BtlBw/mbit, want/mbit)
			}
			if f.LossEvents > 24 {
				t.Errorf("%d loss cuts, want at most 24 (21 before CRUISE's gain)", f.LossEvents)
			}
		})
	}
}

// C1: capacity halves mid-transfer (with and without 2 % random loss).
func TestCapacityHalves(t *testing.T) {
	for _, p := range []float64{0, 0.02} {
		t.Run(fmt.Sprintf("p=%g", p), func(t *testing.T) {
			t.Parallel()
			C, C2 := 400*mbit, 200*mbit
			at := 10 * time.Second
			dur := 20 * time.Second
			r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Loss: p, Duration: dur,
				Events: []Event{{At: at, Rate: C2}}})
			// First time the pacing rate is at or below 1.1 x the new capacity, and the first time
			// the queue is below Q_HIGH (0.15 rtprop = 21 ms) for good (ignoring UP probes).
			qHigh := 0.15 * baseRTT.Seconds()
			var tRate, tQueue time.Duration = -1, -1
			for i := bin(r, at); i < len(r.Goodput); i++ {
				if tRate < 0 && r.PacingMin[i] <= 1.1*C2 {
					tRate = time.Duration(i)*r.Bin - at
				}
				if tQueue < 0 && r.QueueMax[i] < qHigh {
					tQueue = time.Duration(i)*r.Bin - at
				}
			}
			// Mean pacing rate once adapted (probes included).
			var pm float64
			a, b := bin(r, at+3*time.Second), len(r.PacingMax)
			for _, v := range r.PacingMin[a:b] {
				pm += v
			}
			pm /= float64(b - a)
			g := r.MeanGoodput(at+3*time.Second, dur)
			t.Logf("rate <= 1.1 C_new after %v (%.1f RTTs), queue < Q_HIGH after %v (%.1f RTTs), mean pacing after %.1f Mbit/s, goodput after %.1f Mbit/s; %s",
				tRate, tRate.Seconds()/baseRTT.Seconds(), tQueue, tQueue.Seconds()/baseRTT.Seconds(), pm/mbit, g/mbit, fmtStats(r.Final))
			if tRate < 0 || tRate > 15*baseRTT {
				t.Errorf("pacing rate not <= 1.1 C_new within 15 RTTs (%v)", tRate)
			}
			if tQueue < 0 || tQueue > 20*baseRTT {
				t.Errorf("queue not < Q_HIGH within 20 RTTs (%v)", tQueue)
			}
			if pm > 1.1*C2 {
				t.Errorf("mean pacing after the drop %.1f Mbit/s > 1.1 C_new", pm/mbit)
			}
			if g < 0.85*C2 {
				t.Errorf("goodput after the drop %.1f Mbit/s < 0.85 C_new", g/mbit)
			}
		})
	}
}

// C2: shallow buffer (0.1 BDP), no random loss.
func TestShallowBuffer(t *testing.T) {
	t.Parallel()
	C := 400 * mbit
	dur := 25 * time.Second
	r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT) / 10, Duration: dur})
	g := r.MeanGoodput(3*time.Second, dur)
	t.Logf("utilisation %.1f %%, loss %.3f %% (after 3 s), spurious %d/%d; %s", 100*g/C, 100*r.LossRate(), r.Spurious, r.DeclaredLost, fmtStats(r.Final))
	if r.LossRate() > 0.03 {
		t.Errorf("loss %.3f %% > 3 %%", 100*r.LossRate())
	}
	if g < 0.85*C {
		t.Errorf("utilisation %.1f %% < 85 %%", 100*g/C)
	}
}

// A5/C3: deep buffer (4 BDP): the queue we keep stays small.
func TestDeepBuffer(t *testing.T) {
	t.Parallel()
	C := 400 * mbit
	dur := 25 * time.Second
	r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: 4 * bdpBytes(C, baseRTT), Duration: dur})
	g := r.MeanGoodput(3*time.Second, dur)
	p95 := r.QueueDelayQuantile(0.95)
	bound := baseRTT/4 + 10*time.Millisecond
	t.Logf("p95 queueing delay %v (bound %v), p50 %v, utilisation %.1f %%; %s", p95, bound, r.QueueDelayQuantile(0.5), 100*g/C, fmtStats(r.Final))
	if p95 > bound {
		t.Errorf("p95 queueing delay %v > %v", p95, bound)
	}
	if g < 0.9*C {
		t.Errorf("utilisation %.1f %% < 90 %%", 100*g/C)
	}
}

// F2: 3 s feedback blackout.
func TestFeedbackBlackout(t *testing.T) {
	t.Parallel()
	C := 400 * mbit
	at, dur := 10*time.Second, 20*time.Second
	out := 3 * time.Second
	r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Duration: dur,
		Events: []Event{{At: at, Blackout: out}}})
	before := r.PacingMax[bin(r, at)-1]
	// Feedback frames sent in the blackout are lost; the last ack arrives RTT/2 after it starts.
	p1 := r.PacingMin[bin(r, at+out-100*time.Millisecond)]
	var tRec time.Duration = -1
	end := at + out + baseRTT/2
	for i := bin(r, end); i < len(r.Goodput); i++ {
		if r.Goodput[i] >= 0.8*C && r.PacingMin[i] >= 0.8*C {
			tRec = time.Duration(i+1)*r.Bin - end
			break
		}
	}
	timeouts := r.Stats[bin(r, at+out-100*time.Millisecond)].FeedbackTimeouts
	t.Logf("pacing before %.1f, at end of blackout %.1f Mbit/s, %d timeouts; >= 0.8 C again %v after feedback resumed; %s",
		before/mbit, p1/mbit, timeouts, tRec, fmtStats(r.Final))
	if timeouts < 2 {
		t.Errorf("%d feedback timeouts in a 3 s blackout, want >= 2", timeouts)
	}
	if want := before * math.Pow(0.5, float64(timeouts)) * 1.05; p1 > want {
		t.Errorf("pacing %.1f Mbit/s at the end of the blackout, want <= %.1f (halved per timeout)", p1/mbit, want/mbit)
	}
	if tRec < 0 || tRec > 3*time.Second {
		t.Errorf("not back to 80 %% of C within 3 s (%v)", tRec)
	}
}

// F3: path RTT steps up by 50 ms.
func TestRTTStep(t *testing.T) {
	t.Parallel()
	C := 400 * mbit
	at, dur := 6*time.Second, 20*time.Second
	r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Duration: dur,
		Events: []Event{{At: at, ExtraDelay: 50 * time.Millisecond}}})
	newRTT := baseRTT + 50*time.Millisecond
	var tTrack time.Duration = -1
	for i := bin(r, at); i < len(r.Stats); i++ {
		if m := r.Stats[i].MinRTT; m >= newRTT-time.Millisecond && m <= newRTT+5*time.Millisecond {
			tTrack = time.Duration(i+1)*r.Bin - at
			break
		}
	}
	minBtl := math.Inf(1)
	for _, s := range r.Stats[bin(r, at):] {
		minBtl = math.Min(minBtl, s.BtlBw)
	}
	g := r.MeanGoodput(at, dur)
	t.Logf("min RTT tracks the new %v after %v; lowest BtlBw after the step %.1f Mbit/s; goodput after %.1f Mbit/s; %s",
		newRTT, tTrack, minBtl/mbit, g/mbit, fmtStats(r.Final))
	if tTrack < 0 || tTrack > 12*time.Second {
		t.Errorf("min RTT did not track within RTPROP_WIN + 2 s (%v)", tTrack)
	}
	if minBtl < 0.8*C {
		t.Errorf("BtlBw collapsed to %.1f Mbit/s", minBtl/mbit)
	}
	if g < 0.85*C {
		t.Errorf("goodput after the step %.1f Mbit/s < 0.85 C", g/mbit)
	}
}

// Policy fixed holds MaxRate under 3 % loss; fair respects the MaxRate ceiling and MinRate floor.
func TestPolicyFixedAndBounds(t *testing.T) {
	t.Parallel()
	C := 400 * mbit
	dur := 15 * time.Second
	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		max := 300 * mbit
		r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Loss: 0.03, Duration: dur,
			CC: cc.Config{Policy: cc.Fixed, MaxRate: max}})
		g := r.MeanGoodput(3*time.Second, dur)
		lo, hi := math.Inf(1), 0.0
		for i := range r.PacingMin {
			lo, hi = math.Min(lo, r.PacingMin[i]), math.Max(hi, r.PacingMax[i])
		}
		t.Logf("pacing %.1f..%.1f Mbit/s, goodput %.1f Mbit/s; %s", lo/mbit, hi/mbit, g/mbit, fmtStats(r.Final))
		if lo != max || hi != max {
			t.Errorf("fixed pacing moved: %.1f..%.1f", lo/mbit, hi/mbit)
		}
		if g < 0.95*max*(1-0.03) {
			t.Errorf("fixed goodput %.1f Mbit/s < 95 %% of MaxRate·(1-p)", g/mbit)
		}
	})
	t.Run("ceiling", func(t *testing.T) {
		t.Parallel()
		max := 250 * mbit
		r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Loss: 0.01, Duration: dur,
			CC: cc.Config{MaxRate: max}})
		g := r.MeanGoodput(3*time.Second, dur)
		hi := 0.0
		for _, v := range r.PacingMax {
			hi = math.Max(hi, v)
		}
		t.Logf("max pacing %.1f Mbit/s, goodput %.1f Mbit/s; %s", hi/mbit, g/mbit, fmtStats(r.Final))
		if hi > max {
			t.Errorf("pacing %.1f Mbit/s above MaxRate", hi/mbit)
		}
		if g < 0.9*max*(1-0.01) {
			t.Errorf("goodput %.1f Mbit/s < 90 %% of MaxRate", g/mbit)
		}
	})
	t.Run("floor", func(t *testing.T) {
		t.Parallel()
		min := 150 * mbit
		// A blackout and a capacity drop both push the rate down; it must stay >= MinRate.
		r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Duration: dur,
			CC:     cc.Config{MinRate: min},
			Events: []Event{{At: 5 * time.Second, Blackout: 3 * time.Second}, {At: 10 * time.Second, Rate: 100 * mbit}}})
		lo := math.Inf(1)
		for _, v := range r.PacingMin {
			lo = math.Min(lo, v)
		}
		t.Logf("min pacing %.1f Mbit/s; %s", lo/mbit, fmtStats(r.Final))
		if lo < min {
			t.Errorf("pacing %.1f Mbit/s below MinRate", lo/mbit)
		}
	})
}

// D3 (subset): one competing CUBIC-like flow, no random loss, 1 BDP buffer, 100 Mbit/s, 140 ms.
func TestVsCubic(t *testing.T) {
	t.Parallel()
	C := 100 * mbit
	dur := 40 * time.Second
	r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Duration: dur,
		Cross: &Cross{Start: 0}, ProbeBps: C})
	from := 10 * time.Second
	us, them := r.MeanGoodput(from, dur), r.MeanCross(from, dur)
	t.Logf("Farwing %.1f Mbit/s (%.0f %%), CUBIC %.1f Mbit/s (%.0f %%), p95 queue %v; %s",
		us/mbit, 100*us/C, them/mbit, 100*them/C, r.QueueDelayQuantile(0.95), fmtStats(r.Final))
	if us < 0.3*C || them < 0.3*C {
		t.Errorf("share below 30 %%: Farwing %.0f %%, CUBIC %.0f %%", 100*us/C, 100*them/C)
	}
}

// A capacity drop overflows the queue while Farwing cruises, as a loss-based competitor does; the
// DOWN that follows drains it (the queue was ours), which lifts the fair-share cap. Otherwise,
// when the capacity comes back, Farwing would stay capped at 60 % of it for the 20 s hold.
func TestCapacityDropIsNotACompetitor(t *testing.T) {
	t.Parallel()
	C, C2 := 400*mbit, 200*mbit
	down, up, dur := 6*time.Second, 12*time.Second, 22*time.Second
	r := run(t, Config{Rate: C, RTT: baseRTT, Buffer: bdpBytes(C, baseRTT), Duration: dur, ProbeBps: C,
		Events: []Event{{At: down, Rate: C2}, {At: up, Rate: C}}})
	g := r.MeanGoodput(up+5*time.Second, dur)
	t.Logf("goodput from 5 s after the capacity came back %.1f Mbit/s; %s", g/mbit, fmtStats(r.Final))
	if g < 0.85*C {
		t.Errorf("goodput after the capacity came back %.1f Mbit/s < 0.85 C (capped as if shared?)", g/mbit)
	}
}

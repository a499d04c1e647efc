package fec

import (
	"math"
	"strings"
	"testing"
)

// TestPlanResearchTable checks Plan against the exact-binomial table in
// research/congestion-control.md §1.5 (P_fail <= 10 % for body, <= 0.1 % for tail).
func TestPlanResearchTable(t *testing.T) {
	for _, c := range []struct {
		loss       float64
		k          int
		body, tail int // tail -1: not in the table
	}{
		{0.005, 32, 1, -1},
		{0.01, 32, 1, -1},
		{0.02, 32, 2, -1},
		{0.03, 32, 2, -1},
		{0.05, 32, 3, -1},
		{0.005, 64, 1, 3},
		{0.01, 64, 2, 4},
		{0.02, 64, 3, 6},
		{0.03, 64, 4, 8},
		{0.05, 64, 6, 11},
	} {
		body, tail := Plan(c.loss, c.k)
		if body != c.body || c.tail >= 0 && tail != c.tail {
			t.Errorf("Plan(%v, %d) = %d, %d; table says %d, %d", c.loss, c.k, body, tail, c.body, c.tail)
		}
	}
}

func TestPlanShape(t *testing.T) {
	for _, k := range []int{1, 4, 8, 10, 16, 32, 64} {
		if body, tail := Plan(0, k); body != 0 || tail != 1 {
			t.Errorf("Plan(0, %d) = %d, %d; want 0, 1", k, body, tail)
		}
		prevB, prevT := 0, 1
		for i := 0; i <= 1000; i++ {
			loss := float64(i) / 1000 * 0.3
			body, tail := Plan(loss, k)
			if body < prevB || tail < prevT {
				t.Fatalf("k=%d: Plan not monotone at loss %v: %d,%d after %d,%d", k, loss, body, tail, prevB, prevT)
			}
			if body > MaxBodyParity || tail > MaxTailParity || tail < body {
				t.Fatalf("k=%d loss %v: body %d tail %d", k, loss, body, tail)
			}
			// The answer meets its target (or is the cap) and one less would not.
			if body < MaxBodyParity && binomTail(k+body, loss, body) > BodyTarget && loss > 0 {
				t.Fatalf("k=%d loss %v: body %d misses target", k, loss, body)
			}
			if body > 0 && binomTail(k+body-1, loss, body-1) <= BodyTarget {
				t.Fatalf("k=%d loss %v: body %d is not minimal", k, loss, body)
			}
			if tail > 1 && binomTail(k+tail-1, loss, tail-1) <= TailTarget {
				t.Fatalf("k=%d loss %v: tail %d is not minimal", k, loss, tail)
			}
			prevB, prevT = body, tail
		}
	}
	if body, tail := Plan(1, 10); body != MaxBodyParity || tail != MaxTailParity {
		t.Errorf("Plan(1, 10) = %d, %d; want the caps", body, tail)
	}
	if body, tail := Plan(math.NaN(), 10); body != 0 || tail != 1 {
		t.Errorf("Plan(NaN) = %d, %d", body, tail)
	}
	if body, tail := Plan(-0.5, 10); body != 0 || tail != 1 {
		t.Errorf("Plan(-0.5) = %d, %d", body, tail)
	}
	if body, _ := Plan(0.01, 0); body != 0 {
		t.Errorf("Plan(0.01, 0) = %d; k<1 is k=1, and P(1 shard lost) = 1%% <= 10%%", body)
	}
}

// TestBinomTail compares the log-space sum against a direct product for small n.
// BodyMix mixes Plan's body count with one less so that groups fail BodyTarget of the time on
// average: exactly the target where it mixes, Plan's count where it cannot.
func TestBodyMix(t *testing.T) {
	for _, c := range []struct {
		loss      float64
		k         int
		m         int
		fewerNear float64 // -1: not checked
	}{
		{0.01, 187, 4, 0.70},
		{0.03, 187, 9, 0.44},
		{0.001, 187, 1, 0.54},
		{0.01, 32, 1, -1},
		{0.05, 64, 6, -1},
		{0.2, 187, -1, -1},
	} {
		m, _ := Plan(c.loss, c.k)
		fewer := BodyMix(c.loss, c.k, m)
		if c.m >= 0 && m != c.m {
			t.Errorf("Plan(%v, %d)'s body = %d, want %d", c.loss, c.k, m, c.m)
		}
		if fewer < 0 || fewer >= 1 {
			t.Fatalf("BodyMix(%v, %d) fewer = %v, outside [0, 1)", c.loss, c.k, fewer)
		}
		if c.fewerNear >= 0 && math.Abs(fewer-c.fewerNear) > 0.01 {
			t.Errorf("BodyMix(%v, %d) fewer = %.3f, want about %.2f", c.loss, c.k, fewer, c.fewerNear)
		}
		if m == 0 || m >= MaxBodyParity {
			if fewer != 0 {
				t.Errorf("BodyMix(%v, %d) = %d, %v: nothing to mix", c.loss, c.k, m, fewer)
			}
			continue
		}
		mean := fewer*binomTail(c.k+m-1, c.loss, m-1) + (1-fewer)*binomTail(c.k+m, c.loss, m)
		if math.Abs(mean-BodyTarget) > 1e-9 {
			t.Errorf("BodyMix(%v, %d) = %d, %.4f: groups fail %.5f on average, want %v", c.loss, c.k, m, fewer, mean, BodyTarget)
		}
	}
	for _, loss := range []float64{0, -1, math.NaN(), 1} {
		m, _ := Plan(loss, 187)
		if fewer := BodyMix(loss, 187, m); fewer != 0 {
			t.Errorf("BodyMix(%v, 187) fewer = %v, want 0", loss, fewer)
		}
	}
}

func TestBinomTail(t *testing.T) {
	for _, n := range []int{1, 5, 12, 40} {
		for _, p := range []float64{1e-4, 0.01, 0.3, 0.9} {
			for m := 0; m <= n; m++ {
				direct := 0.0
				for j := m + 1; j <= n; j++ {
					c := 1.0
					for i := range j {
						c = c * float64(n-i) / float64(i+1)
					}
					direct += c * math.Pow(p, float64(j)) * math.Pow(1-p, float64(n-j))
				}
				got := binomTail(n, p, m)
				if math.Abs(got-direct) > 1e-12+1e-9*direct {
					t.Fatalf("binomTail(%d, %v, %d) = %g, direct %g", n, p, m, got, direct)
				}
			}
		}
	}
}

func TestRepairCount(t *testing.T) {
	for _, c := range []struct {
		need int
		loss float64
		want int
	}{
		{0, 0.03, 0}, {-2, 0.03, 0}, {1, 0, 1}, {3, 0, 3}, {1, 0.03, 2}, {3, 0.03, 4},
		{97, 0.03, 100}, {9, 0.10, 10}, {10, 0.10, 12}, {5, 0.9, 10}, {4, math.NaN(), 4},
	} {
		if got := RepairCount(c.need, c.loss); got != c.want {
			t.Errorf("RepairCount(%d, %v) = %d, want %d", c.need, c.loss, got, c.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{
		"off":    {Kind: ModeOff},
		"auto":   {Kind: ModeAuto},
		" Auto ": {Kind: ModeAuto},
		"10+2":   {Kind: ModeFixed, K: 10, M: 2},
		"32+16":  {Kind: ModeFixed, K: 32, M: 16},
		"192+29": {Kind: ModeFixed, K: 192, M: 29},
		"1+0":    {Kind: ModeFixed, K: 1, M: 0},
	} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := ParseMode(got.String()); err != nil || back != got {
			t.Errorf("ParseMode(%q.String() = %q) = %+v, %v", in, got.String(), back, err)
		}
	}
	for in, wantMsg := range map[string]string{
		"":      "want off, auto or K+M",
		"on":    "want off, auto or K+M",
		"10":    "want off, auto or K+M",
		"10+":   "want off, auto or K+M",
		"+2":    "want off, auto or K+M",
		"a+b":   "want off, auto or K+M",
		"10+2+": "want off, auto or K+M",
		"0+2":   "K must be 1..192",
		"193+2": "K must be 1..192",
		"10+49": "M must be 0..48",
		"10+-1": "M must be 0..48",
	} {
		_, err := ParseMode(in)
		if err == nil || !strings.Contains(err.Error(), wantMsg) || !strings.Contains(err.Error(), "fec mode") {
			t.Errorf("ParseMode(%q) error %v, want it to say %q", in, err, wantMsg)
		}
	}
	var m Mode
	if m.String() != "auto" {
		t.Errorf("zero Mode is %q, want auto", m)
	}
	if err := m.Set("8+3"); err != nil || m != (Mode{Kind: ModeFixed, K: 8, M: 3}) || m.Type() != "mode" {
		t.Errorf("Set: %v %+v", err, m)
	}
	if err := m.Set("bad"); err == nil || m.K != 8 {
		t.Errorf("failed Set changed the mode: %v %+v", err, m)
	}
}

func TestLane(t *testing.T) {
	const lanes = 4
	for _, n := range []int{1, 3, 4, 11, 12, 14, 20} {
		starts := map[int]bool{}
		for g := uint64(0); g < 64; g++ {
			per := make([]int, lanes)
			for i := range n {
				l := Lane(g, i, lanes)
				if l < 0 || l >= lanes {
					t.Fatalf("Lane(%d, %d) = %d", g, i, l)
				}
				per[l]++
			}
			for l, c := range per {
				if c > (n+lanes-1)/lanes {
					t.Fatalf("n=%d group %d: lane %d carries %d shards, more than ceil(n/4)", n, g, l, c)
				}
			}
			if g > 0 && Lane(g, 0, lanes) == Lane(g-1, 0, lanes) {
				t.Fatalf("groups %d and %d start on the same lane", g-1, g)
			}
			starts[Lane(g, 0, lanes)] = true
		}
		if len(starts) != lanes {
			t.Fatalf("n=%d: groups start on only %d lanes", n, len(starts))
		}
	}
	if Lane(5, 3, 0) != 0 || Lane(5, 3, 1) != 0 || Lane(1<<63+3, 1<<40, 4) != (3+0)%4 {
		t.Fatal("Lane edge cases")
	}
}

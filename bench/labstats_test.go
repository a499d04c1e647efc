package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// grid builds a series sampled every 20 ms for secs seconds: at each step the UDP counters grow
// by what arrival and delivery give for the step's start time, in Mbit/s.
func grid(secs float64, arrival, delivery func(t float64) float64) *Series {
	s := &Series{EveryMs: 20}
	var a, d float64
	for i := 0; float64(i)/50 <= secs+1e-9; i++ {
		t := float64(i) / 50
		if i > 0 {
			prev := float64(i-1) / 50
			a += arrival(prev) * 1e6 / 8 / 50
			d += delivery(prev) * 1e6 / 8 / 50
		}
		s.T = append(s.T, t)
		s.UDPArrived = append(s.UDPArrived, uint64(math.Round(a)))
		s.UDPDelivered = append(s.UDPDelivered, uint64(math.Round(d)))
		s.TCPDelivered = append(s.TCPDelivered, 0)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func TestSeries(t *testing.T) {
	s := &Series{T: []float64{0, 1, 3}, UDPDelivered: []uint64{0, 100, 500}}
	for _, c := range []struct{ t, want float64 }{{-1, 0}, {0, 0}, {0.5, 50}, {2, 300}, {3, 500}, {9, 500}} {
		if got := s.at(s.UDPDelivered, c.t); !near(got, c.want) {
			t.Errorf("at(%v) = %v, want %v", c.t, got, c.want)
		}
	}
	if got := s.rate(s.UDPDelivered, 1, 3); !near(got, 1600) { // 400 bytes in 2 s
		t.Errorf("rate 1–3 s: %v, want 1600 bit/s", got)
	}
	if got := s.rate(s.UDPDelivered, 2, 2); got != 0 {
		t.Errorf("rate over no time: %v", got)
	}
	s = &Series{T: []float64{0, 1, 2, 3}, UDPArrived: []uint64{0, 5, 9, 9}}
	if got := s.lastGrowth(s.UDPArrived); got != 2 {
		t.Errorf("last growth at %v, want 2", got)
	}
	s = &Series{T: []float64{0, 1}, UDPArrived: []uint64{0, 0}}
	if got := s.lastGrowth(s.UDPArrived); got != 0 {
		t.Errorf("no growth: %v, want the first sample's time", got)
	}
}

// TestFairnessFigures: Farwing's goodput is the UDP bytes delivered over the overlap times the
// copy's file share; CUBIC's is its receiver's count; the goal is 30 % of the lab's rate.
func TestFairnessFigures(t *testing.T) {
	// 0–50 s: 1.05 GB of UDP delivered for a 1 GB file (share 1/1.05); 787.5 MB of it in the
	// 30 s overlap from 10 to 40 s: 750 MB of file, 200 Mbit/s.
	s := &Series{T: []float64{0, 10, 40, 50}, UDPDelivered: []uint64{0, 200e6, 987.5e6, 1050e6},
		UDPArrived: make([]uint64, 4), TCPDelivered: make([]uint64, 4)}
	f := fairnessFigures(s, 0, 50, 10, 40, 1e9, 150, 400e6)
	if !near(f.FarwingMbps, 200) || f.CUBICMbps != 150 || f.OverlapSeconds != 30 || !near(f.GoalMbps, 120) || !f.Pass() {
		t.Errorf("figures %+v, want Farwing 200, CUBIC 150 over 30 s, goal 120, pass", f)
	}
	if f := fairnessFigures(s, 0, 50, 10, 40, 1e9, 119, 400e6); f.Pass() {
		t.Errorf("CUBIC at 119 of a 120 goal passes: %+v", f)
	}
	if f := fairnessFigures(s, 0, 50, 10, 40, 0.5e9, 150, 400e6); !near(f.FarwingMbps, 100) || f.Pass() {
		t.Errorf("half the file share: %+v, want Farwing 100 and a miss", f)
	}
}

// TestHalvingFigures: a copy sends at 390 Mbit/s; the rate is halved at 8 s; it keeps sending
// at 390 until 9.5 s, at 150 until 10 s, then at 200 with one 200 ms probe at 250 until its data
// ends at 30 s. The first round trip (140 ms) at or below 200, with the three after it no
// faster, ends at 9.62 s.
func TestHalvingFigures(t *testing.T) {
	arrival := func(t float64) float64 {
		switch {
		case t < 9.5:
			return 390
		case t < 10:
			return 150
		case t >= 20 && t < 20.2:
			return 250
		case t < 30:
			return 200
		}
		return 0
	}
	delivery := func(t float64) float64 {
		switch {
		case t < 8:
			return 380
		case t < 30:
			return 200
		}
		return 0
	}
	s := grid(31, arrival, delivery)
	// 930 MB delivered in all; a file of 95 % of it.
	h := halvingFigures(s, 0, 30.5, 8, 200e6, 140*time.Millisecond, 883.5e6, true)
	if !h.Reached || !near(h.Seconds, 1.62) || !near(h.RTTs, 1.62/0.14) {
		t.Errorf("reached %v after %v s (%v RTTs), want 1.62 s", h.Reached, h.Seconds, h.RTTs)
	}
	if !near(h.GoodputAfterMbps, 190) || !near(h.SendMedianMbps, 200) || !near(h.SendMaxMbps, 250) {
		t.Errorf("after +3 s: goodput %v, sending median %v max %v; want 190, 200, 250", h.GoodputAfterMbps, h.SendMedianMbps, h.SendMaxMbps)
	}
	if h.ChangeSeconds != 8 || h.CapacityBps != 200e6 || h.RTTms != 140 || h.GoalRTTs != 15 || !h.Pass() {
		t.Errorf("figures %+v", h)
	}
	if h := halvingFigures(s, 0, 30.5, 8, 200e6, 140*time.Millisecond, 883.5e6, false); h.Pass() {
		t.Error("a copy that did not end verified passes")
	}
	// Held back by its inflight cap while the queue is full, a sender sends at the capacity for
	// 200 ms (9.0–9.2 s), then at 300 until it cuts at 9.5 s: it came down at 9.60 s (the
	// round trip from 9.46 s averages 193), not at 9.16 (the first round trip at 200).
	s = grid(31, func(t float64) float64 {
		switch {
		case t >= 9 && t < 9.2:
			return 200
		case t >= 9.2 && t < 9.5:
			return 300
		}
		return arrival(t)
	}, delivery)
	if h := halvingFigures(s, 0, 30.5, 8, 200e6, 140*time.Millisecond, 883.5e6, true); !h.Reached || !near(h.Seconds, 1.60) {
		t.Errorf("a round trip at the capacity before the cut: reached %v after %v s, want 1.60", h.Reached, h.Seconds)
	}
	// Within 2 % of the capacity is at it, for the round trips after the first.
	s = grid(31, func(t float64) float64 {
		if t >= 10 && t < 30 {
			return 203
		}
		return arrival(t)
	}, delivery)
	if h := halvingFigures(s, 0, 30.5, 8, 200e6, 140*time.Millisecond, 883.5e6, true); !h.Reached || !near(h.Seconds, 1.62) {
		t.Errorf("203 Mbit/s after a cut to 150: reached %v after %v s, want 1.62", h.Reached, h.Seconds)
	}
	// A sender that never slows down: the copy's last round trip, when sending stops, does not
	// count as coming down to the capacity.
	s = grid(31, func(t float64) float64 {
		if t < 30 {
			return 390
		}
		return 0
	}, delivery)
	if h := halvingFigures(s, 0, 30.5, 8, 200e6, 140*time.Millisecond, 883.5e6, true); h.Reached || h.Pass() {
		t.Errorf("never slowed: reached %v after %v s", h.Reached, h.Seconds)
	}
}

func labSamples(table string, runs ...Sample) []Sample {
	for i := range runs {
		runs[i].Table, runs[i].Row, runs[i].Level, runs[i].Run = table, table, "None", i+1
		if runs[i].Outcome == "" {
			runs[i].Outcome = OK
		}
	}
	return runs
}

func fair(fw, cubic float64) Sample {
	return Sample{Fairness: &FairnessRun{FarwingMbps: fw, CUBICMbps: cubic, OverlapSeconds: 40.2, GoalMbps: 120}}
}

func TestFairnessMarkdown(t *testing.T) {
	head := "| Farwing | TCP CUBIC | sum | overlap | goal (each) | verdict |\n|---|---|---|---|---|---|\n"
	for _, c := range []struct {
		name string
		runs []Sample
		want string
	}{
		{"all pass", []Sample{fair(207, 153), fair(201, 161), fair(229, 185)},
			"| 207 201–229 | 161 153–185 | 362 360–414 | 40 s 40–40 s | ≥ 120 | pass (3/3) |\n"},
		{"CUBIC misses once", []Sample{fair(264, 118), fair(234, 151), fair(289, 88)},
			"| 264 234–289 | 118 88–151 | 382 377–385 | 40 s 40–40 s | ≥ 120 | **FAIL** (1/3) |\n"},
		{"a run failed", []Sample{fair(207, 153), {Outcome: Failed, Error: "the copy failed"}, fair(229, 185)},
			"| 207 229–failed | 153 185–failed | 360 414–failed | 40 s 40 s–failed | ≥ 120 | **FAIL** (2/3) |\n"},
	} {
		if got := FairnessMarkdown(labSamples("fairness", c.runs...)); got != head+c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, head+c.want)
		}
	}
	if FairnessMarkdown(labSamples("halving", fair(1, 1))) != "" {
		t.Error("a fairness table without fairness samples")
	}
}

func halved(secs, goodput float64, reached, intact bool) Sample {
	return Sample{Halving: &HalvingRun{ChangeSeconds: 8, CapacityBps: 200e6, RTTms: 140, Reached: reached, Seconds: secs,
		RTTs: secs / 0.14, GoalRTTs: 15, GoodputAfterMbps: goodput, Intact: intact}}
}

func TestHalvingMarkdown(t *testing.T) {
	head := "| time until Farwing sends ≤ 200 Mbit/s | in 140 ms RTTs | goal | verdict | goodput from +3 s, Mbit/s | completed intact |\n" +
		"|---|---|---|---|---|---|\n"
	for _, c := range []struct {
		name string
		runs []Sample
		want string
	}{
		{"all pass", []Sample{halved(1.56, 188, true, true), halved(1.76, 187, true, true), halved(1.62, 189, true, true)},
			"| 1.6 s 1.6–1.8 s | 12 11–13 | ≤ 2.1 s (15 RTTs) | pass (3/3) | 188 187–189 | 3/3 |\n"},
		{"one too slow", []Sample{halved(1.56, 188, true, true), halved(2.8, 187, true, true), halved(1.62, 189, true, true)},
			"| 1.6 s 1.6–2.8 s | 12 11–20 | ≤ 2.1 s (15 RTTs) | **FAIL** (2/3) | 188 187–189 | 3/3 |\n"},
		{"one never", []Sample{halved(1.56, 188, true, true), halved(0, 150, false, true), halved(1.62, 189, true, true)},
			"| 1.6 s 1.6 s–never | 12 11–never | ≤ 2.1 s (15 RTTs) | **FAIL** (2/3) | 188 150–189 | 3/3 |\n"},
		{"twice never", []Sample{halved(1.56, 188, true, true), halved(0, 150, false, true), halved(0, 160, false, true)},
			"| never | never | ≤ 2.1 s (15 RTTs) | **FAIL** (1/3) | 160 150–188 | 3/3 |\n"},
		// A copy that failed is never a time, and a failure outranks never.
		{"never, and one not intact", []Sample{halved(1.56, 188, true, true), halved(0, 150, false, true),
			{Outcome: Failed, Error: "digest mismatch", Halving: &HalvingRun{CapacityBps: 200e6, RTTms: 140, GoalRTTs: 15, Reached: true, Seconds: 1.6, RTTs: 11.4}}},
			"| failed | failed | ≤ 2.1 s (15 RTTs) | **FAIL** (1/3) | 150 188–failed | 2/3 |\n"},
	} {
		if got := HalvingMarkdown(labSamples("halving", c.runs...)); got != head+c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, head+c.want)
		}
	}
}

func TestSelectLabRows(t *testing.T) {
	rows, err := SelectRows("halving,farwing,fairness,farwing-tcp")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		where := map[bool]string{true: "lab", false: "any"}[r.IsLab()]
		if r.EveryLevel() {
			where += "-every-level"
		}
		got = append(got, TableName(r.Kind)+":"+r.ID+":"+where)
	}
	if want := "throughput:farwing:any copy:farwing:any fairness:fairness:lab halving:halving:lab copy:farwing-tcp:lab-every-level"; strings.Join(got, " ") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
	all, _ := SelectRows("")
	for _, r := range all {
		if r.IsLab() {
			t.Errorf("the default rows hold the lab row %s", r.ID)
		}
	}
}

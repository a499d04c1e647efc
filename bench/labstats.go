package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The lab rows' goals (issue 4's acceptance): in the fairness row each flow holds at least
// fairGoal of the path's rate; in the halving row Farwing's sending rate is at or below the new
// capacity within halvingGoalRTTs base round trips of the change.
const (
	fairGoal        = 0.30
	halvingGoalRTTs = 15
	// goodputAfter is when, after the change, the halving row starts counting the goodput that
	// Farwing holds at the new capacity.
	goodputAfter = 3.0
	// Farwing has come down to the new capacity once it sends no faster for holdRTTs round
	// trips (each round trip's rate within holdSlack of it): a sender held back by its inflight
	// cap while the queue is full sends at the capacity for a round trip or two and then more.
	holdRTTs  = 3
	holdSlack = 1.02
)

// Series is what the lab counted in the direction toward the receiver during a run, sampled
// every EveryMs: cumulative IP bytes, one column per counter, indexed like T.
type Series struct {
	EveryMs      int       `json:"every_ms"`
	T            []float64 `json:"t"`             // seconds since the run started
	UDPArrived   []uint64  `json:"udp_arrived"`   // Farwing's datagrams as they reached the link: its sending rate
	UDPDelivered []uint64  `json:"udp_delivered"` // Farwing's datagrams the link delivered: its share of it
	TCPDelivered []uint64  `json:"tcp_delivered"` // TCP (the CUBIC flow, and ssh) the link delivered
}

// at is counter c at time t, interpolated between the samples on either side (the first or last
// sample outside them).
func (s *Series) at(c []uint64, t float64) float64 {
	if len(s.T) == 0 {
		return 0
	}
	i, _ := slices.BinarySearch(s.T, t)
	switch {
	case i == 0:
		return float64(c[0])
	case i == len(s.T):
		return float64(c[len(c)-1])
	}
	t0, t1 := s.T[i-1], s.T[i]
	v0, v1 := float64(c[i-1]), float64(c[i])
	if t1 <= t0 {
		return v1
	}
	return v0 + (v1-v0)*(t-t0)/(t1-t0)
}

// bytes is what counter c counted from t0 to t1.
func (s *Series) bytes(c []uint64, t0, t1 float64) float64 { return s.at(c, t1) - s.at(c, t0) }

// rate is counter c's bits per second from t0 to t1.
func (s *Series) rate(c []uint64, t0, t1 float64) float64 {
	if t1 <= t0 {
		return 0
	}
	return s.bytes(c, t0, t1) * 8 / (t1 - t0)
}

// lastGrowth is the time of the last sample at which c had grown (the end of a copy's data),
// or the first sample's time if it never did.
func (s *Series) lastGrowth(c []uint64) float64 {
	for i := len(c) - 1; i > 0; i-- {
		if c[i] > c[i-1] {
			return s.T[i]
		}
	}
	if len(s.T) == 0 {
		return 0
	}
	return s.T[0]
}

// fileShare is the part of the UDP bytes delivered toward the receiver from start to end that
// was file data: the copy's file bytes over all of them (the rest is IP, UDP and Farwing's
// headers, AEAD tags, block digests, parity, repairs and duplicates).
func (s *Series) fileShare(fileBytes int64, start, end float64) float64 {
	if d := s.bytes(s.UDPDelivered, start, end); d > 0 {
		return float64(fileBytes) / d
	}
	return 0
}

// FairnessRun is a fairness run's figures: each flow's goodput while both ran.
type FairnessRun struct {
	FarwingMbps    float64 `json:"farwing_mbit_s"`  // file data delivered over the overlap (fairnessFigures)
	CUBICMbps      float64 `json:"cubic_mbit_s"`    // counted by the CUBIC flow's receiver
	OverlapSeconds float64 `json:"overlap_seconds"` // the CUBIC flow's sender start to its receiver's last byte
	GoalMbps       float64 `json:"goal_mbit_s"`     // each flow's goal: 30 % of the lab's rate
}

// Pass reports whether both flows held the goal.
func (f FairnessRun) Pass() bool { return f.FarwingMbps >= f.GoalMbps && f.CUBICMbps >= f.GoalMbps }

// fairnessFigures works out a fairness run from the lab's counters: the copy ran from start to
// end, the CUBIC flow from t0 to t1 (seconds on the series' clock), its receiver counted
// cubicMbps. Farwing's goodput over [t0, t1] is the UDP bytes the link delivered toward the
// receiver then, times the copy's file share of all it delivered (fileShare): the copy's own
// summary gives the file bytes, the lab the time they crossed.
func fairnessFigures(s *Series, start, end, t0, t1 float64, fileBytes int64, cubicMbps, rateBps float64) FairnessRun {
	return FairnessRun{
		FarwingMbps:    s.fileShare(fileBytes, start, end) * s.rate(s.UDPDelivered, t0, t1) / 1e6,
		CUBICMbps:      cubicMbps,
		OverlapSeconds: t1 - t0,
		GoalMbps:       fairGoal * rateBps / 1e6,
	}
}

// HalvingRun is a halving run's figures.
type HalvingRun struct {
	ChangeSeconds float64 `json:"change_seconds"` // when the rate was halved, since the copy started
	CapacityBps   float64 `json:"capacity_bps"`   // the rate after the change (IP bytes)
	RTTms         float64 `json:"rtt_ms"`         // the lab's base round trip
	// Reached: Farwing's sending rate came down to the capacity, and stayed there for three
	// round trips, while its data still flowed; Seconds from the change to the end of the first
	// of those round trips, RTTs the same in base round trips.
	Reached          bool    `json:"reached"`
	Seconds          float64 `json:"seconds,omitempty"`
	RTTs             float64 `json:"rtts,omitempty"`
	GoalRTTs         float64 `json:"goal_rtts"`
	GoodputAfterMbps float64 `json:"goodput_after_mbit_s"` // file data from 3 s after the change to the end of the data
	SendMedianMbps   float64 `json:"send_median_mbit_s"`   // the sending rate per round trip over the same time: median
	SendMaxMbps      float64 `json:"send_max_mbit_s"`      // and highest (probes above the capacity show here)
	Intact           bool    `json:"intact"`               // the copy ended verified: every block and the file's digest matched at the sink
}

// Pass reports whether the run met the goal.
func (h HalvingRun) Pass() bool { return h.Intact && h.Reached && h.RTTs <= h.GoalRTTs }

// halvingFigures works out a halving run from the lab's counters: the copy (fileBytes) ran from
// start to end, the rate went to capacity at change (seconds on the series' clock). Farwing's
// sending rate is what reached the link per base round trip (UDPArrived over windows of rtt,
// one ending at every sample). The time is that of the first window after the change at or
// below the capacity from which every window of the next holdRTTs round trips stays within
// holdSlack of it. Windows in the copy's last round trip of data are left out: a copy's tail
// sends less whatever the path. The goodput after is fileShare times what the link delivered
// from 3 s after the change until the data ended.
func halvingFigures(s *Series, start, end, change, capacity float64, rtt time.Duration, fileBytes int64, intact bool) HalvingRun {
	w := rtt.Seconds()
	h := HalvingRun{ChangeSeconds: change - start, CapacityBps: capacity, RTTms: float64(rtt) / 1e6, GoalRTTs: halvingGoalRTTs, Intact: intact}
	sendEnd := s.lastGrowth(s.UDPArrived)
	send := func(t float64) float64 { return s.rate(s.UDPArrived, t-w, t) }
	held := func(i int) bool {
		for _, t := range s.T[i+1:] {
			if t > s.T[i]+holdRTTs*w {
				return true
			}
			if send(t) > capacity*holdSlack {
				return false
			}
		}
		return false
	}
	for i, t := range s.T {
		if t <= change || t-w < s.T[0] {
			continue
		}
		if t+holdRTTs*w > sendEnd-w {
			break
		}
		if send(t) <= capacity && held(i) {
			h.Reached, h.Seconds, h.RTTs = true, t-change, (t-change)/w
			break
		}
	}
	from, to := change+goodputAfter, s.lastGrowth(s.UDPDelivered)
	if to > from {
		h.GoodputAfterMbps = s.fileShare(fileBytes, start, end) * s.rate(s.UDPDelivered, from, to) / 1e6
	}
	var sends []float64
	for _, t := range s.T {
		if t-w >= from && t <= sendEnd-w {
			sends = append(sends, send(t)/1e6)
		}
	}
	if len(sends) > 0 {
		slices.Sort(sends)
		h.SendMedianMbps, h.SendMaxMbps = sends[len(sends)/2], sends[len(sends)-1]
	}
	return h
}

// labCell summarizes one figure of a lab row's runs by the published rules: runs that did not
// end OK rank below every other; value gives a run's figure, or ok false when it has none.
func labCell(kind Kind, runs []Sample, value func(Sample) (float64, Outcome)) Cell {
	var vs []Sample
	for _, s := range runs {
		v, o := value(s)
		if s.Outcome != OK {
			o = s.Outcome
		}
		vs = append(vs, Sample{Outcome: o, Mbps: v, Seconds: v})
	}
	return Summarize(kind, vs)
}

// verdict is "pass (n/n)" when every run met the goal, "**FAIL** (k/n)" otherwise.
func verdict(runs []Sample, pass func(Sample) bool) string {
	k := 0
	for _, s := range runs {
		if s.Outcome == OK && pass(s) {
			k++
		}
	}
	if k == len(runs) {
		return fmt.Sprintf("pass (%d/%d)", k, len(runs))
	}
	return fmt.Sprintf("**FAIL** (%d/%d)", k, len(runs))
}

func rowRuns(samples []Sample, table string) []Sample {
	var runs []Sample
	for _, s := range samples {
		if s.Table == table {
			runs = append(runs, s)
		}
	}
	return runs
}

// FairnessMarkdown renders the fairness row: Farwing's and the CUBIC flow's goodput over the
// overlap and their sum, each the median with the fastest and slowest run beside it, the goal
// and whether every run met it. "" without fairness samples.
func FairnessMarkdown(samples []Sample) string {
	runs := rowRuns(samples, TableName(Fairness))
	if len(runs) == 0 {
		return ""
	}
	fig := func(f func(FairnessRun) float64) func(Sample) (float64, Outcome) {
		return func(s Sample) (float64, Outcome) {
			if s.Fairness == nil {
				return 0, Failed
			}
			return f(*s.Fairness), OK
		}
	}
	goal := ""
	for _, s := range runs {
		if s.Fairness != nil {
			goal = "≥ " + Number(s.Fairness.GoalMbps)
		}
	}
	cells := []string{
		labCell(Throughput, runs, fig(func(f FairnessRun) float64 { return f.FarwingMbps })).Text(Throughput),
		labCell(Throughput, runs, fig(func(f FairnessRun) float64 { return f.CUBICMbps })).Text(Throughput),
		labCell(Throughput, runs, fig(func(f FairnessRun) float64 { return f.FarwingMbps + f.CUBICMbps })).Text(Throughput),
		labCell(Copy, runs, fig(func(f FairnessRun) float64 { return f.OverlapSeconds })).Text(Copy),
		goal,
		verdict(runs, func(s Sample) bool { return s.Fairness != nil && s.Fairness.Pass() }),
	}
	return "| Farwing | TCP CUBIC | sum | overlap | goal (each) | verdict |\n|---|---|---|---|---|---|\n| " +
		strings.Join(cells, " | ") + " |\n"
}

// HalvingMarkdown renders the halving row: the time from the change until Farwing sent no
// faster than the new capacity, in seconds and base round trips, the goal and whether every
// run met it, the goodput from 3 s after the change, and how many copies ended intact. ""
// without halving samples.
func HalvingMarkdown(samples []Sample) string {
	runs := rowRuns(samples, TableName(Halving))
	if len(runs) == 0 {
		return ""
	}
	var h *HalvingRun
	for _, s := range runs {
		if s.Halving != nil {
			h = s.Halving
		}
	}
	if h == nil {
		h = &HalvingRun{GoalRTTs: halvingGoalRTTs}
	}
	fig := func(f func(HalvingRun) float64) func(Sample) (float64, Outcome) {
		return func(s Sample) (float64, Outcome) {
			switch {
			case s.Halving == nil:
				return 0, Failed
			case !s.Halving.Reached:
				return 0, Never
			}
			return f(*s.Halving), OK
		}
	}
	intact := 0
	for _, s := range runs {
		if s.Halving != nil && s.Halving.Intact {
			intact++
		}
	}
	goodput := labCell(Throughput, runs, func(s Sample) (float64, Outcome) {
		if s.Halving == nil || s.Halving.GoodputAfterMbps <= 0 {
			return 0, Failed
		}
		return s.Halving.GoodputAfterMbps, OK
	})
	rtts := labCell(Copy, runs, fig(func(h HalvingRun) float64 { return h.RTTs }))
	cells := []string{
		labCell(Copy, runs, fig(func(h HalvingRun) float64 { return h.Seconds })).Text(Copy),
		rtts.textIn(""),
		fmt.Sprintf("≤ %s s (%s RTTs)", Number(h.GoalRTTs*h.RTTms/1e3), Number(h.GoalRTTs)),
		verdict(runs, func(s Sample) bool { return s.Halving != nil && s.Halving.Pass() }),
		goodput.Text(Throughput),
		fmt.Sprintf("%d/%d", intact, len(runs)),
	}
	return fmt.Sprintf("| time until Farwing sends ≤ %s Mbit/s | in %s ms RTTs | goal | verdict | goodput from +%g s, Mbit/s | completed intact |\n",
		Number(h.CapacityBps/1e6), Number(h.RTTms), goodputAfter) +
		"|---|---|---|---|---|---|\n| " + strings.Join(cells, " | ") + " |\n"
}

package xfer

import (
	"strings"
	"testing"

	fcopy "github.com/farwing/farwing/copy"
)

// TestLimiter: each cause from the counters that show it, in order of certainty.
func TestLimiter(t *testing.T) {
	base := Limiter{GoodputBps: 350e6, CapacityBps: 400e6, Datagrams: 1e6}
	for _, c := range []struct {
		name string
		set  func(*Limiter)
		want string
	}{
		{"capacity", func(l *Limiter) {}, "capacity"},
		{"ceiling", func(l *Limiter) { l.CeilingBps = 360e6; l.CapacityBps = 1e9 }, "ceiling"},
		{"backoff", func(l *Limiter) { l.GoodputBps = 200e6; l.CongestionEvents = 12 }, "loss_backoff"},
		{"overflows", func(l *Limiter) { l.RxDropped = 5000 }, "socket_buffers"},
		{"sender cpu", func(l *Limiter) { l.SenderCPU = 0.95; l.WindowFull = 0.5 }, "sender_cpu"},
		{"receiver cpu", func(l *Limiter) { l.ReceiverCPU = 0.9 }, "receiver_cpu"},
		{"window", func(l *Limiter) { l.GoodputBps = 100e6; l.WindowFull = 0.6; l.SourceWait = 0.1 }, "window"},
		{"source", func(l *Limiter) { l.GoodputBps = 100e6; l.SourceWait = 0.5; l.WindowFull = 0.3 }, "source"},
		{"nothing", func(l *Limiter) { l.GoodputBps = 100e6 }, "undetermined"},
	} {
		l := base
		c.set(&l)
		if got := limiter(l); got.Cause != c.want || got.Detail == "" {
			t.Errorf("%s: %s (%s), want %s", c.name, got.Cause, got.Detail, c.want)
		}
	}
}

// TestCheckVerdicts: a peer's congestion verdicts (its word, on a pull) are bounded: at most
// four, the newest kept, unknown reasons named "unknown", states clipped and escaped.
func TestCheckVerdicts(t *testing.T) {
	var vs []Verdict
	for i := range 6 {
		vs = append(vs, Verdict{AtSeconds: float64(i), Reason: "queue", State: "PROBE_BW/CRUISE"})
	}
	vs[4].Reason = "\x1b[2Jowned"
	vs[5].State = "\x1b]0;title\x07" + strings.Repeat("x", 100)
	got := checkVerdicts(vs)
	if len(got) != 4 || got[0].AtSeconds != 2 || got[3].AtSeconds != 5 {
		t.Fatalf("kept %d verdicts from %v; want the newest four", len(got), got)
	}
	if got[2].Reason != "unknown" || got[1].Reason != "queue" {
		t.Errorf("reasons %q, %q; want queue, unknown", got[1].Reason, got[2].Reason)
	}
	if s := got[3].State; len(s) > 24 || strings.ContainsAny(s, "\x1b\x07") {
		t.Errorf("state %q not clipped and escaped", s)
	}
}

// TestFileEnds: the progress report's files are those whose data travels, in plan order, with
// the bytes done at each one's end: no directory, link or file the receiver already had.
func TestFileEnds(t *testing.T) {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "d", Dir: true, Mode: 0o755}, {Name: "d/a", Size: 5, Mode: 0o644},
		{Name: "d/b", Size: 7, Mode: 0o644}, {Name: "d/l", Link: "a"}, {Name: "d/c", Size: 3, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Skip([]int{2}); err != nil {
		t.Fatal(err)
	}
	got := fileEnds(plan)
	want := []fileEnd{{5, 1}, {8, 4}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("fileEnds %v, want %v", got, want)
	}
}

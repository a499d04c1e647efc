//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labcli"
	"github.com/farwing/farwing/internal/benchpeer"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/xfer"
)

// LabConfig is the lab rows' setting: the emulated WAN they work, the sshd in it, and the size
// of their runs. The copies run in namespace A against the sshd in B, as a user's would.
type LabConfig struct {
	Lab       *lab.Lab
	Host      string   // the lab sshd's [user@]host
	SSHArgs   []string // the ssh flags that reach it (-F CONFIG)
	Farwing   string   // the farwing executable
	CopyFlags []string // added to every farwing copy (as Config.CopyFlags)
	Rows      []Row    // of LabRows
	Runs      int
	Level     string        // the samples' level
	Loss      float64       // its random loss each way (the fairness and halving rows: 0)
	Size      int64         // the copy rows' file size (--size)
	Rate      float64       // the lab's rate each way, IP bits/s
	RTT       time.Duration // its base round trip
	Queue     int           // its queue in bytes (0: one BDP)
	// FairDuration is how long the CUBIC flow runs beside Farwing's copy; HalveSize is the
	// halving copy's size, HalveAt when after its start the rate is halved.
	FairDuration time.Duration
	HalveSize    int64
	HalveAt      time.Duration
	Limit        time.Duration // each copy's time limit
	Progress     func(line string, final bool)
}

// add appends the lab's counters st, read t seconds into the run.
func (s *Series) add(t float64, st lab.PathStats) {
	s.T = append(s.T, t)
	s.UDPArrived = append(s.UDPArrived, st.UDPArrived)
	s.UDPDelivered = append(s.UDPDelivered, st.UDPDelivered)
	s.TCPDelivered = append(s.TCPDelivered, st.TCPDelivered)
}

// sampleEvery is how often the lab rows read the lab's counters.
const sampleEvery = 20 * time.Millisecond

// RunLab measures the lab rows, Runs times each, with the path at cfg's rate, round trip and
// loss, and returns their samples (with what finished when ctx ends early). The path is left as
// it was found.
func RunLab(ctx context.Context, cfg LabConfig) ([]Sample, error) {
	dir, err := os.MkdirTemp("", "farwing-bench-lab-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	l := cfg.Lab
	saved := [2]lab.Path{l.Path(lab.AtoB), l.Path(lab.BtoA)}
	defer func() {
		l.SetPath(lab.AtoB, saved[0])
		l.SetPath(lab.BtoA, saved[1])
	}()
	r := &labRunner{cfg: cfg, dir: dir}
	var samples []Sample
	for _, row := range cfg.Rows {
		for i := 1; i <= cfg.Runs; i++ {
			if ctx.Err() != nil {
				return samples, ctx.Err()
			}
			r.setPath(cfg.Rate, false)
			s := Sample{Row: row.ID, Table: TableName(row.Kind), Level: cfg.Level, Run: i,
				Detail: map[string]any{"load_client": hostinfo.Load()}}
			what := fmt.Sprintf("[%s] %s run %d/%d", cfg.Level, row.ID, i, cfg.Runs)
			r.progress(what, false)
			s.Start = time.Now().UTC()
			switch row.Kind {
			case Fairness:
				r.fairness(ctx, what, &s)
			case Halving:
				r.halving(ctx, what, &s)
			case Copy:
				r.tcpFallback(ctx, &s)
			}
			s.End = time.Now().UTC()
			r.progress(what+": "+s.labText(), true)
			samples = append(samples, s)
			if s.Outcome == Unavailable {
				break
			}
		}
	}
	return samples, ctx.Err()
}

type labRunner struct {
	cfg LabConfig
	dir string
	sum string // the copy rows' random file's BLAKE3, once written
}

func (r *labRunner) progress(line string, final bool) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(line, final)
	}
}

// setPath sets both directions to rate, the lab's round trip, its queue (kept in bytes when it
// was one BDP) and the level's random loss; with dropUDP the path carries no UDP (a firewall).
func (r *labRunner) setPath(rate float64, dropUDP bool) {
	q := r.cfg.Queue
	if q <= 0 {
		q = lab.DefaultQueueBytes(r.cfg.Rate, r.cfg.RTT/2)
	}
	for _, d := range []lab.Direction{lab.AtoB, lab.BtoA} {
		r.cfg.Lab.SetPath(d, lab.Path{RateBps: rate, Delay: r.cfg.RTT / 2, QueueBytes: q, Loss: r.cfg.Loss, DropUDP: dropUDP})
	}
}

// tcpFallback is the "Farwing, TCP fallback" copy row: with UDP blocked on the path, a copy of a
// random file of Size to the lab host's disk, as a user would run it, timed from the command's
// start to its verified end: the wait for a UDP answer, the warning, the TCP streams and the
// data. --ignore-times --whole-file send every byte each run (the destination is the same file). The peer is installed
// and the shared ssh connection opened first, with UDP open (warmup), and the summary's transport
// must be tcp and its BLAKE3 the file's.
func (r *labRunner) tcpFallback(ctx context.Context, s *Sample) {
	src := filepath.Join(r.dir, "random")
	sum, err := r.randomFile(ctx, src)
	if err == nil {
		err = r.warmup(ctx, s)
	}
	if err != nil {
		s.Outcome, s.Error = Failed, escape.Text(err.Error())
		return
	}
	r.setPath(r.cfg.Rate, true)
	defer r.setPath(r.cfg.Rate, false)
	argv := []string{"ip", "netns", "exec", r.cfg.Lab.NSA, r.cfg.Farwing, "copy", "--json", "-q", "--ignore-times", "--whole-file"}
	argv = append(argv, r.cfg.SSHArgs...)
	argv = append(argv, r.cfg.CopyFlags...)
	argv = append(argv, src, r.cfg.Host+":farwing-bench-tcp-fallback")
	out, el, err := command(ctx, r.cfg.Limit, argv, nil, s)
	res, err := copySummary(out, err, s)
	switch {
	case err != nil:
		s.Outcome, s.Error = outcome(ctx, err), escape.Text(err.Error())
	case res["transport"] != "tcp":
		s.Outcome, s.Error = Failed, fmt.Sprintf("the copy went over %v, not TCP streams", res["transport"])
	case res["blake3"] != sum:
		s.Outcome, s.Error = Failed, fmt.Sprintf("the copy's BLAKE3 %v is not the file's %s", res["blake3"], sum)
	default:
		s.Outcome, s.Seconds = OK, el.Seconds()
		s.Detail["size"] = r.cfg.Size
	}
}

// randomFile writes Size random bytes to path once per run of the bench, and returns their
// BLAKE3 (hex).
func (r *labRunner) randomFile(ctx context.Context, path string) (string, error) {
	if r.sum != "" {
		return r.sum, nil
	}
	sum, err := benchpeer.RandomFile(ctx, path, r.cfg.Size)
	if err == nil {
		r.sum = sum
	}
	return sum, err
}

func (s Sample) labText() string {
	switch {
	case s.Outcome != OK && s.Error != "":
		return string(s.Outcome) + ": " + s.Error
	case s.Fairness != nil:
		f := s.Fairness
		return fmt.Sprintf("Farwing %.1f, CUBIC %.1f Mbit/s over %.1f s", f.FarwingMbps, f.CUBICMbps, f.OverlapSeconds)
	case s.Halving != nil && s.Halving.Reached:
		h := s.Halving
		return fmt.Sprintf("≤ capacity after %.2f s (%.1f RTTs), then %.1f Mbit/s, intact %v", h.Seconds, h.RTTs, h.GoodputAfterMbps, h.Intact)
	case s.Halving != nil:
		return fmt.Sprintf("never ≤ capacity, intact %v", s.Halving.Intact)
	case s.Outcome == OK && s.Seconds > 0:
		return fmt.Sprintf("%.2f s", s.Seconds)
	}
	return string(s.Outcome)
}

// copyArgv is `farwing copy --json -q` in namespace A with the bench's ssh and copy flags,
// sending src to the sink.
func (r *labRunner) copyArgv(src string) []string {
	argv := []string{"ip", "netns", "exec", r.cfg.Lab.NSA, r.cfg.Farwing, "copy", "--json", "-q"}
	argv = append(argv, r.cfg.SSHArgs...)
	argv = append(argv, r.cfg.CopyFlags...)
	return append(argv, "--sink", src, r.cfg.Host+":")
}

// warmup makes a 1 MiB copy first, so that the peer is installed and the shared ssh connection
// open before the measured copy: its start is then the same every run.
func (r *labRunner) warmup(ctx context.Context, s *Sample) error {
	src := filepath.Join(r.dir, "warmup")
	if err := benchpeer.SparseFile(src, 1<<20); err != nil {
		return err
	}
	out, _, err := command(ctx, r.cfg.Limit, r.copyArgv(src), nil, s)
	_, err = copySummary(out, err, nil)
	if err != nil {
		return fmt.Errorf("warm-up copy: %w", err)
	}
	return nil
}

// labCopy is a measured copy under way, with the lab's counters sampled from before it started.
type labCopy struct {
	series Series
	start  time.Time
	done   chan struct{}
	res    map[string]any
	err    error
	end    float64 // when it ended, on the series' clock
	stop   chan struct{}
	wg     sync.WaitGroup
}

// startCopy starts a --sink copy of a sparse file of size and the sampler of the lab's
// counters toward the receiver; tick is called with the series so far once a second.
func (r *labRunner) startCopy(ctx context.Context, s *Sample, size int64, what string) (*labCopy, error) {
	src := filepath.Join(r.dir, "stream")
	if err := benchpeer.SparseFile(src, size); err != nil {
		return nil, err
	}
	s.Detail["size"] = size
	c := &labCopy{series: Series{EveryMs: int(sampleEvery / time.Millisecond)}, done: make(chan struct{}), stop: make(chan struct{})}
	c.start = time.Now()
	base, _ := r.cfg.Lab.Stats()
	c.series.add(0, lab.PathStats{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		lastLine, lastT, lastB := time.Now(), 0.0, uint64(0)
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				// Timed as read: under load the tick's own time can be milliseconds earlier.
				st, _ := r.cfg.Lab.Stats()
				now := time.Now()
				el := now.Sub(c.start).Seconds()
				c.series.add(el, st.Sub(base))
				if now.Sub(lastLine) >= time.Second {
					d := st.Sub(base).UDPDelivered
					r.progress(fmt.Sprintf("%s  %s  Farwing %s at the link", what, now.Sub(c.start).Round(time.Second),
						units.Rate(float64(d-lastB)*8/(el-lastT))), false)
					lastLine, lastT, lastB = now, el, d
				}
			}
		}
	}()
	argv := r.copyArgv(src)
	go func() {
		defer close(c.done)
		out, _, err := command(ctx, r.cfg.Limit, argv, nil, nil)
		c.end = time.Since(c.start).Seconds()
		c.res, c.err = copySummary(out, err, s)
	}()
	s.Commands = append(s.Commands, argv)
	return c, nil
}

// now is the series' clock.
func (c *labCopy) now() float64 { return time.Since(c.start).Seconds() }

// ended reports whether the copy has ended.
func (c *labCopy) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits for the copy to end, stops the sampler and keeps the series in the sample.
func (c *labCopy) wait(s *Sample) {
	<-c.done
	time.Sleep(2 * sampleEvery) // the counters of the copy's last datagrams
	close(c.stop)
	c.wg.Wait()
	s.Detail["lab_series"] = c.series
	s.Detail["copy_seconds"] = c.end
}

// deliveredSince is the UDP bytes the lab has delivered toward the receiver since the copy started.
func (r *labRunner) deliveredSince(base lab.PathStats) uint64 {
	st, _ := r.cfg.Lab.Stats()
	return st.Sub(base).UDPDelivered
}

// fairness: a --sink copy sized to outlast the CUBIC flow at the whole path's rate starts; once
// its data crosses the link, one TCP CUBIC flow (the bench's tcp-cubic row, in a child process:
// cubic) runs beside it for FairDuration; the copy then runs to its verified end.
func (r *labRunner) fairness(ctx context.Context, what string, s *Sample) {
	if err := tcpbench.CheckCC("cubic"); err != nil {
		s.Outcome, s.Error = Unavailable, escape.Text(err.Error())
		return
	}
	if err := r.warmup(ctx, s); err != nil {
		s.Outcome, s.Error = Failed, escape.Text(err.Error())
		return
	}
	size := int64(r.cfg.Rate / 8 * (r.cfg.FairDuration + 5*time.Second).Seconds())
	base, _ := r.cfg.Lab.Stats()
	c, err := r.startCopy(ctx, s, size, what)
	if err != nil {
		s.Outcome, s.Error = Failed, err.Error()
		return
	}
	// The CUBIC flow joins once Farwing's data crosses the link (1 MiB of it).
	flowing := false
	for !flowing && !c.ended() {
		time.Sleep(sampleEvery)
		flowing = r.deliveredSince(base) >= 1<<20
	}
	var flow Sample
	var t0, t1 float64
	var cerr error
	if flowing {
		flow, t0, t1, cerr = r.cubic(ctx, c, s)
	}
	c.wait(s)
	s.Detail["cubic_start"], s.Detail["cubic_end"] = t0, t1
	s.Detail["cubic_bytes"], s.Detail["cubic_receiver_seconds"] = flow.Detail["bytes"], flow.Detail["receiver_seconds"]
	s.Detail["cubic_cc_used"], s.Detail["cubic_retransmits"] = flow.Detail["cc_used"], flow.Detail["retransmits"]
	switch {
	case c.err != nil:
		s.Outcome, s.Error = outcome(ctx, c.err), escape.Text(c.err.Error())
	case !flowing:
		s.Outcome, s.Error = Failed, "the copy ended before its data crossed the link"
	case cerr != nil:
		s.Outcome, s.Error = Failed, "the CUBIC flow: "+escape.Text(cerr.Error())
	case c.end < t1:
		s.Outcome, s.Error = Failed, fmt.Sprintf("the copy ended %.1f s before the CUBIC flow: nothing shared the path then", t1-c.end)
	default:
		bytes, _ := c.res["bytes"].(float64)
		f := fairnessFigures(&c.series, 0, c.end, t0, t1, int64(bytes), flow.Mbps, r.cfg.Rate)
		s.Outcome, s.Fairness = OK, &f
		s.Detail["tcp_delivered_mbit_s"] = c.series.rate(c.series.TCPDelivered, t0, t1) / 1e6
		s.Detail["udp_delivered_mbit_s"] = c.series.rate(c.series.UDPDelivered, t0, t1) / 1e6
	}
}

// cubic runs one TCP CUBIC stream for FairDuration from namespace A to the lab host's peer, as
// the bench's own tcp-cubic row, in a child `farwing bench` (its ledger in the run's directory),
// and returns the row's sample and when the stream started and ended on c's clock. The flow must
// not come from this process: here the emulator's link loops, locked to their threads, share the
// Go scheduler with it, and an in-process CUBIC flow got 74–124 Mbit/s of the lab's 400 against
// Farwing where iperf3, a process of its own, got 175–182 in the same hour.
func (r *labRunner) cubic(ctx context.Context, c *labCopy, s *Sample) (flow Sample, t0, t1 float64, err error) {
	ledger := filepath.Join(r.dir, "cubic.json")
	argv := []string{"ip", "netns", "exec", r.cfg.Lab.NSA, r.cfg.Farwing, "bench"}
	argv = append(argv, r.cfg.SSHArgs...)
	argv = append(argv, "--rows", "tcp-cubic", "--runs", "1", "--duration", r.cfg.FairDuration.String(), "-q",
		"--json", ledger, r.cfg.Host)
	if _, _, err := command(ctx, r.cfg.Limit, argv, nil, s); err != nil {
		return flow, 0, 0, err
	}
	raw, err := os.ReadFile(ledger)
	if err != nil {
		return flow, 0, 0, err
	}
	var lg Ledger
	if err := json.Unmarshal(raw, &lg); err != nil {
		return flow, 0, 0, fmt.Errorf("the CUBIC flow's ledger: %v", err)
	}
	for _, fs := range lg.Samples {
		if fs.Row == "tcp-cubic" {
			flow = fs
		}
	}
	if flow.Outcome != OK {
		return flow, 0, 0, fmt.Errorf("the tcp-cubic row: %s %s", flow.Outcome, flow.Error)
	}
	// The stream ran between the sample's start and end, less the child's setup before it.
	t0, t1 = flow.Start.Sub(c.start).Seconds(), flow.End.Sub(c.start).Seconds()
	if secs, ok := flow.Detail["receiver_seconds"].(float64); ok && secs > 0 && t1-secs > t0 {
		t0 = t1 - secs
	}
	return flow, t0, t1, nil
}

// halving: a --sink copy of HalveSize at the lab's rate; HalveAt after it starts, the rate of
// both directions is halved (the queue keeps its size in bytes, as a router's buffer would).
func (r *labRunner) halving(ctx context.Context, what string, s *Sample) {
	if err := r.warmup(ctx, s); err != nil {
		s.Outcome, s.Error = Failed, escape.Text(err.Error())
		return
	}
	c, err := r.startCopy(ctx, s, r.cfg.HalveSize, what)
	if err != nil {
		s.Outcome, s.Error = Failed, err.Error()
		return
	}
	capacity := r.cfg.Rate / 2
	change := -1.0
	select {
	case <-c.done:
	case <-time.After(r.cfg.HalveAt):
		half := capacity
		for _, d := range []lab.Direction{lab.AtoB, lab.BtoA} {
			r.cfg.Lab.SetPath(d, labcli.Change{Rate: &half}.Apply(r.cfg.Lab.Path(d)))
		}
		change = c.now()
	}
	c.wait(s)
	r.setPath(r.cfg.Rate, false)
	s.Detail["change"] = change
	switch {
	case change < 0 && c.err == nil:
		s.Outcome, s.Error = Failed, fmt.Sprintf("the copy ended before the change at +%s: give it a larger size", r.cfg.HalveAt)
	case change < 0:
		s.Outcome, s.Error = outcome(ctx, c.err), escape.Text(c.err.Error())
	default:
		bytes, _ := c.res["bytes"].(float64)
		h := halvingFigures(&c.series, 0, c.end, change, capacity, r.cfg.RTT, int64(bytes), c.err == nil)
		s.Halving = &h
		s.Outcome = OK
		if c.err != nil {
			s.Outcome, s.Error = outcome(ctx, c.err), escape.Text(c.err.Error())
		}
	}
}

// LabFacts are the facts of the lab's two ends, gathered inside namespaces A and B (their TCP
// settings are the namespaces'): for a ledger whose rows ran no bench peer to report them.
func LabFacts(l *lab.Lab) (client, server hostinfo.Facts) {
	sshd := []string{"ssh", "-V"}
	if p, err := exec.LookPath("sshd"); err == nil {
		sshd = []string{p, "-V"}
	} else if _, err := os.Stat("/usr/sbin/sshd"); err == nil {
		sshd = []string{"/usr/sbin/sshd", "-V"}
	}
	l.Do(l.NSA, func() error { client = hostinfo.Gather(l.AddrB, []string{"ssh", "-V"}, xfer.Version); return nil })
	l.Do(l.NSB, func() error { server = hostinfo.Gather(l.AddrA, sshd, xfer.Version); return nil })
	return client, server
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/internal/benchpeer"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/xfer"
)

// Schema is the ledger's version; it changes when a field changes meaning.
const Schema = 1

// Config is one bench: what to measure, on which path, how often.
type Config struct {
	Host     string       // [user@]host, as for farwing copy
	Options  xfer.Options // ssh settings for the bench peer (and Start, Lanes in tests)
	SSHArgs  []string     // the ssh flags as given (-F, -i, -P, -o, -J), for the copy commands
	Farwing  string       // the farwing executable the copy rows run
	SCP      string       // the scp program ("scp")
	Size     int64        // copy rows' file size
	Runs     int
	Duration time.Duration // each throughput run
	Limit    time.Duration // each copy run
	Rows     []Row
	Pull     bool     // measure host → this end
	Levels   []string // the names the path goes by in the tables: one per run of the bench
	Argv     []string // the bench's own command line, for the ledger
	// Progress receives a line as each run starts and ends (nil: none).
	Progress func(line string, final bool)
	// Env is added to the environment of the copy commands (tests, the lab).
	Env []string
	// CopyFlags are added to every `farwing copy` of the Farwing rows (--copy-flag: checked by
	// the command line to be copy flags that change how a copy behaves, never ssh flags or paths).
	CopyFlags []string
}

// Ledger is the bench's evidence: every sample and the facts needed to audit the table.
type Ledger struct {
	Schema    int            `json:"schema"`
	Complete  bool           `json:"complete"` // false: interrupted, or ended by an error (Error)
	Error     string         `json:"error,omitempty"`
	Argv      []string       `json:"argv"`
	Started   time.Time      `json:"started"`
	Ended     time.Time      `json:"ended"`
	Host      string         `json:"host"`
	Direction string         `json:"direction"` // push (this end sends) or pull
	Size      int64          `json:"size"`
	Runs      int            `json:"runs"`
	Duration  float64        `json:"duration_seconds"`
	Limit     float64        `json:"limit_seconds"`
	Rows      []string       `json:"rows"`
	PeerArgv  []string       `json:"peer_argv,omitempty"`  // the ssh command that started the bench's remote peer
	CopyFlags []string       `json:"copy_flags,omitempty"` // added to every farwing copy of the Farwing rows
	Client    hostinfo.Facts `json:"client"`
	Server    hostinfo.Facts `json:"server"`
	Levels    []LevelFacts   `json:"levels"`
	Samples   []Sample       `json:"samples"`
}

// LevelFacts are what Farwing measured of the path at a level, and the caveats under its tables.
type LevelFacts struct {
	Name        string   `json:"name"`
	MinRTTms    float64  `json:"min_rtt_ms,omitempty"`
	CapacityBps float64  `json:"capacity_bps,omitempty"` // Farwing's packet-train estimate
	RandomLoss  float64  `json:"random_loss,omitempty"`  // the loss Farwing's rate controller measured
	Notes       []string `json:"notes,omitempty"`
	Argv        []string `json:"argv,omitempty"` // the bench command that measured the level (--lab)
}

// Run measures every row at every level, Runs times, and returns the ledger (also when it ends
// early: Complete says whether it did not).
func Run(ctx context.Context, cfg Config) *Ledger {
	l := &Ledger{Schema: Schema, Argv: cfg.Argv, Started: time.Now().UTC(), Host: cfg.Host, Direction: "push",
		Size: cfg.Size, Runs: cfg.Runs, Duration: cfg.Duration.Seconds(), Limit: cfg.Limit.Seconds(), CopyFlags: cfg.CopyFlags}
	if cfg.Pull {
		l.Direction = "pull"
	}
	for _, r := range cfg.Rows {
		l.Rows = append(l.Rows, r.Name())
	}
	err := run(ctx, cfg, l)
	l.Ended = time.Now().UTC()
	switch {
	case ctx.Err() != nil:
		l.Error = "interrupted"
	case err != nil:
		l.Error = escape.Text(err.Error())
	default:
		l.Complete = true
	}
	return l
}

type runner struct {
	cfg  Config
	l    *Ledger
	peer *benchpeer.Peer
	dir  string       // this end's temporary directory
	src  string       // the copy rows' random file
	sum  string       // its BLAKE3
	live atomic.Int64 // bytes of the TCP run under way, for the progress line
}

func run(ctx context.Context, cfg Config, l *Ledger) error {
	peer, err := benchpeer.Open(ctx, cfg.Options, cfg.Host)
	if err != nil {
		return err
	}
	defer peer.Close()
	r := &runner{cfg: cfg, l: l, peer: peer}
	l.Server, l.PeerArgv = peer.Facts, peer.Argv
	l.Client = hostinfo.Gather(peer.Addr, []string{"ssh", "-V"}, xfer.Version)
	if r.dir, err = os.MkdirTemp("", "farwing-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.dir)
	for _, lv := range cfg.Levels {
		l.Levels = append(l.Levels, LevelFacts{Name: lv})
		for _, row := range runOrder(cfg.Rows) {
			if err := r.row(ctx, lv, row); err != nil {
				return err
			}
		}
		r.notes(len(l.Levels) - 1)
	}
	return nil
}

// runOrder is the order rows are measured in at a level: the TCP rows before Farwing's
// throughput row, which sizes its first run from what they reached; the rest as listed.
func runOrder(rows []Row) []Row {
	var tcp, rest []Row
	for _, r := range rows {
		if _, ok := tcpRows[r.ID]; ok && r.Kind == Throughput {
			tcp = append(tcp, r)
		} else {
			rest = append(rest, r)
		}
	}
	return append(tcp, rest...)
}

// row runs one row's runs at a level; after a stall the remaining runs are skipped.
func (r *runner) row(ctx context.Context, level string, row Row) error {
	var runs []Sample
	for i := 1; i <= r.cfg.Runs; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s := Sample{Row: row.ID, Table: TableName(row.Kind), Level: level, Run: i}
		if SkipRest(runs) {
			s.Outcome = Skipped
		} else {
			s.Detail = map[string]any{"load_client": hostinfo.Load()}
			if f, err := r.peer.HostFacts(ctx); err == nil {
				s.Detail["load_server"] = f.Load
			}
			what := fmt.Sprintf("[%s] %s %s run %d/%d", level, TableName(row.Kind), row.ID, i, r.cfg.Runs)
			r.progress(what, false)
			s.Start = time.Now().UTC()
			stop := r.ticker(what)
			r.measure(ctx, row, &s)
			stop()
			s.End = time.Now().UTC()
			r.progress(fmt.Sprintf("[%s] %s %s run %d/%d: %s", level, TableName(row.Kind), row.ID, i, r.cfg.Runs, s.text(row.Kind)), true)
		}
		runs = append(runs, s)
		r.l.Samples = append(r.l.Samples, s)
		if s.Outcome == Unavailable {
			break // the same reason holds for every run
		}
	}
	return ctx.Err()
}

func (s Sample) text(k Kind) string {
	switch {
	case s.Outcome != OK && s.Error != "":
		return string(s.Outcome) + ": " + s.Error
	case s.Outcome != OK:
		return string(s.Outcome)
	case k == Copy:
		return fmt.Sprintf("%.2f s", s.Seconds)
	}
	return fmt.Sprintf("%.1f Mbit/s", s.Mbps)
}

// ticker redraws the progress line every second with the run's elapsed time and, for the TCP
// rows, the rate this end is sending or receiving at (r.live).
func (r *runner) ticker(what string) (stop func()) {
	r.live.Store(0)
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start, last, lastAt := time.Now(), int64(0), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				line := fmt.Sprintf("%s  %s", what, now.Sub(start).Round(time.Second))
				if n := r.live.Load(); n > 0 {
					line += "  " + units.Rate(float64(n-last)*8/now.Sub(lastAt).Seconds())
					last = n
				}
				lastAt = now
				r.progress(line, false)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (r *runner) progress(line string, final bool) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(line, final)
	}
}

// tcpRows are the TCP throughput rows: streams and congestion control ("" is the default).
var tcpRows = map[string]struct {
	streams int
	cc      string
}{"tcp": {1, ""}, "tcp-cubic": {1, "cubic"}, "tcp-bbr": {1, "bbr"}, "tcp-8bbr": {8, "bbr"}}

func (r *runner) measure(ctx context.Context, row Row, s *Sample) {
	switch {
	case row.Kind == Throughput && row.ID == "farwing":
		r.farwingStream(ctx, s)
	case row.Kind == Throughput:
		t := tcpRows[row.ID]
		r.tcp(ctx, t.streams, t.cc, s)
	case row.ID == "farwing":
		r.farwingCopy(ctx, s, false)
	case row.ID == "farwing-first":
		r.farwingCopy(ctx, s, true)
	case row.ID == "scp":
		r.scp(ctx, s)
	case row.ID == "http":
		r.http(ctx, s)
	default:
		s.Outcome, s.Error = Unavailable, "this build does not measure the "+row.ID+" row yet"
	}
}

func (r *runner) tcp(ctx context.Context, streams int, cc string, s *Sample) {
	secs := max(1, int(r.cfg.Duration.Round(time.Second)/time.Second))
	t := xfer.TCPTest{Streams: streams, CC: cc, Seconds: secs, PeerSends: r.cfg.Pull}
	s.Detail["streams"], s.Detail["cc_asked"] = streams, cc
	res, err := r.peer.TCP(ctx, t, &r.live)
	if err != nil {
		s.Outcome, s.Error = Failed, escape.Text(err.Error())
		if strings.Contains(err.Error(), tcpbench.Unavailable) {
			s.Outcome = Unavailable
		}
		return
	}
	s.Outcome, s.Mbps = OK, res.Mbps()
	s.Detail["bytes"], s.Detail["receiver_seconds"] = res.Bytes, res.Seconds
	s.Detail["cc_used"], s.Detail["retransmits"] = res.CC, res.Retransmits
	// The row names what the kernel used: a socket that got another algorithm fails the run.
	for _, used := range res.CC {
		if cc != "" && used != cc {
			s.Outcome, s.Error = Failed, fmt.Sprintf("asked for %s, the kernel used %s", cc, escape.Text(used))
		}
	}
}

// farwingStream is the Farwing throughput row: a --sink copy (verified, discarded) of a sparse
// file sized to last about Duration at the rate seen before (the previous run, or the TCP rows),
// so no disk is involved at either end; the figure is the data phase's goodput.
func (r *runner) farwingStream(ctx context.Context, s *Sample) {
	est := 0.0
	for _, p := range r.l.Samples {
		if p.Level == s.Level && p.Outcome == OK && p.Table == "throughput" {
			if p.Row == "farwing" {
				est = p.Mbps * 1e6 // the latest Farwing run wins
			} else if p.Mbps*1.25e6 > est {
				est = p.Mbps * 1.25e6
			}
		}
	}
	if est == 0 {
		est = r.sizingRate(ctx, s)
	}
	size := min(max(int64(est/8*r.cfg.Duration.Seconds()), 16<<20), 1<<40)
	s.Detail["size"] = size
	res, err := r.sink(ctx, s, size)
	if err != nil {
		s.Outcome, s.Error = outcome(ctx, err), escape.Text(err.Error())
		return
	}
	s.Outcome = OK
	s.Mbps, _ = res["goodput_bps"].(float64)
	s.Mbps /= 1e6
	r.pathFacts(s.Level, res)
	if lim, ok := res["limiter"].(map[string]any); ok {
		if d, ok := lim["detail"].(string); ok {
			s.Detail["held_by"] = escape.Text(d)
		}
	}
}

// sink runs a --sink copy of size bytes in the bench's direction for s: from a sparse file here
// (push) or from a source file the peer makes (pull), and returns the copy's JSON summary.
func (r *runner) sink(ctx context.Context, s *Sample, size int64) (map[string]any, error) {
	if r.cfg.Pull {
		name, _, err := r.peer.Source(ctx, size, true)
		if err != nil {
			return nil, err
		}
		res, _, err := r.farwing(ctx, s, "--sink", r.cfg.Host+":"+r.peer.Dir+"/"+name, r.dir)
		return res, err
	}
	src := filepath.Join(r.dir, "stream")
	if err := benchpeer.MakeStream(ctx, src, size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	res, _, err := r.farwing(ctx, s, "--sink", src, r.cfg.Host+":")
	return res, err
}

// sizingRate estimates, for a level's first Farwing throughput run when no row before it
// measured the path, the rate that run will see: a 32 MiB --sink copy's packet-train capacity
// estimate, less 5 %. (A fixed guess made the first run last 11–15 s of the 20 at 400 Mbit/s.)
// The sizing copy is recorded in s's detail, not counted; 200 Mbit/s when it fails.
func (r *runner) sizingRate(ctx context.Context, s *Sample) float64 {
	const fallback = 200e6
	sz := &Sample{Detail: map[string]any{}}
	res, err := r.sink(ctx, sz, 32<<20)
	sizing := map[string]any{"argv": sz.Commands}
	s.Detail["sizing"] = sizing
	if err != nil {
		sizing["error"] = escape.Text(err.Error())
		return fallback
	}
	sizing["probe_bps"] = res["probe_bps"]
	if cc, ok := res["cc"].(map[string]any); ok {
		sizing["btlbw_bps"] = cc["btlbw_bps"]
	}
	bps := sizingEstimate(res)
	if bps <= 0 {
		return fallback
	}
	return 0.95 * bps
}

// sizingEstimate is what a sizing copy's summary says of the path's rate in bits/s: its
// packet-train estimate or, where higher, the delivery rate its rate controller measured (BtlBw).
// A train that a stall stretched reads low (8.6 Mbit/s once on the 400 Mbit/s lab, which made
// that level's first run 20 MB long and its figure 117 Mbit/s); the 32 MiB copy's own delivery
// rate does not. 0 when the summary says neither.
func sizingEstimate(res map[string]any) float64 {
	bps, _ := res["probe_bps"].(float64)
	if cc, ok := res["cc"].(map[string]any); ok {
		if b, _ := cc["btlbw_bps"].(float64); b > bps && !math.IsInf(b, 0) {
			bps = b
		}
	}
	return max(bps, 0)
}

// farwing runs `farwing copy --json -q ARGS` with the bench's ssh flags for sample s (which
// records the command and the summary's evidence) and returns the JSON summary.
func (r *runner) farwing(ctx context.Context, s *Sample, args ...string) (map[string]any, time.Duration, error) {
	argv := []string{r.cfg.Farwing, "copy", "--json", "-q"}
	argv = append(argv, r.cfg.SSHArgs...)
	argv = append(argv, r.cfg.CopyFlags...)
	argv = append(argv, args...)
	out, el, err := r.command(ctx, r.cfg.Limit, argv, s)
	res, err := copySummary(out, err, s)
	return res, el, err
}

// summaryKeys are the fields of a copy's --json summary that a Farwing sample keeps as evidence.
var summaryKeys = []string{"bytes", "seconds", "data_seconds", "goodput_bps", "wire_bytes", "wire_ratio", "retransmitted", "fec",
	"parity_sent", "repair_parity", "fec_groups", "repair_groups", "fec_rebuilt", "tail_seconds", "control_copied", "datagrams_sent", "rx_dropped",
	"cc", "probe_bps", "start_bps", "rtt_ms", "peer_uploaded", "bootstrap_seconds", "bootstrap_bytes", "bootstrap_sessions", "max_rss_bytes", "peer_max_rss_bytes", "cpu_seconds", "peer_cpu_seconds",
	"drops", "peer_drops", "blake3", "limiter"}

// copySummary reads the summary event of the JSON lines a `farwing copy --json` printed (out;
// err is how the command ended), keeps its evidence in sample s (nil: nowhere) and returns it,
// with the copy's error.
func copySummary(out []byte, err error, s *Sample) (map[string]any, error) {
	res, jerr := summaryEvent(out)
	if jerr != nil && err == nil {
		err = fmt.Errorf("farwing copy printed no summary: %v", jerr)
	}
	if err == nil && res["error"] != nil {
		err = fmt.Errorf("%v", res["error"])
	}
	if s != nil && res != nil {
		for _, k := range summaryKeys {
			if v, ok := res[k]; ok {
				s.Detail[k] = v
			}
		}
	}
	return res, err
}

// summaryEvent finds the summary event, the last line of `farwing copy --json`'s output.
func summaryEvent(out []byte) (map[string]any, error) {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	last := lines[len(lines)-1]
	var res map[string]any
	if err := json.Unmarshal(last, &res); err != nil {
		return nil, err
	}
	if res["event"] != "summary" || res["schema"] != float64(1) {
		return nil, fmt.Errorf("the last line is not a schema 1 summary event: %.200s", last)
	}
	return res, nil
}

// command runs argv within limit, records it in the sample, and returns its stdout.
func (r *runner) command(ctx context.Context, limit time.Duration, argv []string, s *Sample) ([]byte, time.Duration, error) {
	return command(ctx, limit, argv, r.cfg.Env, s)
}

// command runs argv within limit with env added to this process's environment, records it in
// sample s (nil: nowhere), and returns its stdout.
func command(ctx context.Context, limit time.Duration, argv, env []string, s *Sample) ([]byte, time.Duration, error) {
	if s != nil {
		s.Commands = append(s.Commands, argv)
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// Stopped as Ctrl-C would stop it, so that it cleans up at both ends (farwing removes its
	// partial files, and its peer ends with the ssh session); killed 5 s later if still there.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &limitWriter{w: &stderr, n: 4096}
	start := time.Now()
	out, err := cmd.Output()
	el := time.Since(start)
	if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return out, el, benchpeer.ErrOverLimit
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return out, el, fmt.Errorf("%s: %v: %s", filepath.Base(argv[0]), err, msg)
	}
	return out, el, nil
}

func outcome(ctx context.Context, err error) Outcome {
	if errors.Is(err, benchpeer.ErrOverLimit) && ctx.Err() == nil {
		return Stalled
	}
	return Failed
}

// limitWriter keeps the first n bytes written to it.
type limitWriter struct {
	w io.Writer
	n int
}

func (w *limitWriter) Write(b []byte) (int, error) {
	if w.n > 0 {
		k := min(len(b), w.n)
		w.w.Write(b[:k])
		w.n -= k
	}
	return len(b), nil
}

// farwingCopy is a copy row: the random file to the bench's directory on the host, timed from
// the start of the command to its end (farwing verifies end to end before it exits), then
// checked again by the peer, independently. first: this build is removed from the remote cache
// before, so the time includes installing it.
func (r *runner) farwingCopy(ctx context.Context, s *Sample, first bool) {
	src, dst, name, err := r.copyEnds(ctx, "copy-"+s.Row)
	if err != nil {
		s.Outcome, s.Error = Failed, escape.Text(err.Error())
		return
	}
	if first {
		if err := r.peer.Uncache(ctx); err != nil {
			s.Outcome, s.Error = Unavailable, escape.Text(err.Error())
			return
		}
	}
	_, el, err := r.farwing(ctx, s, src, dst)
	r.finishCopy(ctx, s, name, el, err)
}

// copyEnds are a copy row's source and destination arguments, and the name of the copy in the
// bench directory of the receiving end: this end's random file to the host's directory (push),
// or the host's random file to this end's directory (pull).
func (r *runner) copyEnds(ctx context.Context, name string) (src, dst, copyName string, err error) {
	if !r.cfg.Pull {
		if err := r.source(ctx); err != nil {
			return "", "", "", err
		}
		return r.src, r.cfg.Host + ":" + r.peer.Dir + "/" + name, name, nil
	}
	if r.sum == "" {
		remote, sum, err := r.peer.Source(ctx, r.cfg.Size, false)
		if err != nil {
			return "", "", "", err
		}
		r.src, r.sum = r.cfg.Host+":"+r.peer.Dir+"/"+remote, sum
	}
	return r.src, filepath.Join(r.dir, name), name, nil
}

// scp is the system scp, with the same ssh flags.
func (r *runner) scp(ctx context.Context, s *Sample) {
	src, dst, name, err := r.copyEnds(ctx, "copy-scp")
	if err != nil {
		s.Outcome, s.Error = Failed, escape.Text(err.Error())
		return
	}
	argv := append([]string{r.cfg.SCP, "-q"}, r.cfg.SSHArgs...)
	argv = append(argv, src, dst)
	_, el, err := r.command(ctx, r.cfg.Limit, argv, s)
	r.finishCopy(ctx, s, name, el, err)
}

// http is the HTTP row: one GET of a random file of the copy size from an HTTP server the peer
// runs for the bench (a single TCP stream, default congestion control), into this end's
// directory, hashed as it arrives. It runs host → this end whatever the direction: the server is
// the peer.
func (r *runner) http(ctx context.Context, s *Sample) {
	el, cmd, err := r.peer.HTTP(ctx, r.cfg.Size, filepath.Join(r.dir, "http"), r.cfg.Limit)
	s.Commands = append(s.Commands, cmd)
	s.Detail["direction"] = "host to this end"
	if err != nil {
		s.Outcome, s.Error = outcome(ctx, err), escape.Text(err.Error())
		return
	}
	s.Outcome, s.Seconds = OK, el.Seconds()
}

// finishCopy checks a copy row's file at the peer against the source digest: a wrong or missing
// file is a failed run, never a time.
func (r *runner) finishCopy(ctx context.Context, s *Sample, name string, el time.Duration, err error) {
	var sum string
	var cerr error
	if r.cfg.Pull {
		sum, cerr = benchpeer.SumFile(filepath.Join(r.dir, name)) // and removes it
	} else {
		sum, cerr = r.peer.Check(ctx, name, r.cfg.Size) // also removes it, stalled or not
	}
	switch {
	case err != nil:
		s.Outcome, s.Error = outcome(ctx, err), escape.Text(err.Error())
	case cerr != nil:
		s.Outcome, s.Error = Failed, "the copy's file could not be checked: "+escape.Text(cerr.Error())
	case sum != r.sum:
		s.Outcome, s.Error = Failed, fmt.Sprintf("the copy's BLAKE3 is %.16s…, the source's %.16s…", sum, r.sum)
	default:
		s.Outcome, s.Seconds = OK, el.Seconds()
	}
	s.Detail["blake3_source"], s.Detail["blake3_copy"] = r.sum, sum
}

// source makes the copy rows' random file once.
func (r *runner) source(ctx context.Context) error {
	if r.src != "" {
		return nil
	}
	p := filepath.Join(r.dir, "random")
	sum, err := benchpeer.RandomFile(ctx, p, r.cfg.Size)
	if err != nil {
		return err
	}
	r.src, r.sum = p, sum
	return nil
}

// pathFacts keeps what a Farwing run measured of the path (the first run of a level).
func (r *runner) pathFacts(level string, res map[string]any) {
	lf := &r.l.Levels[len(r.l.Levels)-1]
	if lf.Name != level || lf.MinRTTms != 0 {
		return
	}
	lf.CapacityBps, _ = res["probe_bps"].(float64)
	if cc, ok := res["cc"].(map[string]any); ok {
		lf.MinRTTms, _ = cc["min_rtt_ms"].(float64)
		lf.RandomLoss, _ = cc["random_loss"].(float64)
	}
}

// notes adds the caveats of a level: where TCP's buffers are below the bandwidth-delay product,
// a TCP row cannot show the path, and the table must say so.
func (r *runner) notes(i int) {
	lf := &r.l.Levels[i]
	// What held Farwing's rate, in its median throughput run.
	var runs []Sample
	for _, s := range r.l.Samples {
		if s.Level == lf.Name && s.Table == "throughput" && s.Row == "farwing" && s.Outcome == OK {
			runs = append(runs, s)
		}
	}
	if len(runs) > 0 {
		slices.SortFunc(runs, func(a, b Sample) int { return compare(Throughput, a.Mbps, b.Mbps) })
		if held, ok := runs[(len(runs)-1)/2].Detail["held_by"].(string); ok {
			lf.Notes = append(lf.Notes, "Farwing's rate was held by "+held+".")
		}
	}
	if lf.MinRTTms <= 0 || lf.CapacityBps <= 0 {
		return
	}
	snd, rcv := r.l.Client, r.l.Server
	if r.cfg.Pull {
		snd, rcv = rcv, snd
	}
	buf := min(snd.TCP.Wmem[2], rcv.TCP.Rmem[2])
	if buf <= 0 {
		return
	}
	rtt := lf.MinRTTms / 1e3
	bdp := lf.CapacityBps / 8 * rtt
	if float64(buf) >= bdp {
		return
	}
	which := []string{}
	if snd.TCP.Wmem[2] < int64(bdp) {
		which = append(which, fmt.Sprintf("net.ipv4.tcp_wmem on the sender (max %s)", units.Size(snd.TCP.Wmem[2])))
	}
	if rcv.TCP.Rmem[2] < int64(bdp) {
		which = append(which, fmt.Sprintf("net.ipv4.tcp_rmem on the receiver (max %s)", units.Size(rcv.TCP.Rmem[2])))
	}
	lf.Notes = append(lf.Notes, fmt.Sprintf("TCP limited by buffers to %s (the path's bandwidth-delay product is %s): raise %s",
		units.Rate(float64(buf)*8/rtt), units.Size(int64(bdp)), strings.Join(which, " and ")))
}

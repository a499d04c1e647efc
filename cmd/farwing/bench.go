package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bench"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/xfer"
)

// benchOptions are farwing bench's flags.
type benchOptions struct {
	size, rows, jsonFile string
	runs                 int
	duration, limit      time.Duration
	pull, quiet          bool
	lab, veth            bool
	report               bool // --report: print the tables of ledgers, measure nothing
	labRate, labLoss     string
	labRTT               time.Duration
	copyFlags            []string // --copy-flag: added to the Farwing rows' copies
	fairDuration         time.Duration
	halveSize            string
	halveAt              time.Duration
	level                string // the level's name in the tables (set by --lab for each level)
	ssh                  sshFlags
	sizeBytes            int64
	halveBytes           int64
	selected             []bench.Row
	labRows              []bench.Row // of selected, those only --lab measures
	labRateBps           float64
	labLosses            []float64
	labLossNames         []string
	fs                   *pflag.FlagSet // the flags as parsed: which of --lab's were given (--veth)
}

func (b *benchOptions) register(fs *pflag.FlagSet) {
	b.fs = fs
	fs.StringVar(&b.size, "size", "5G", "size of the copy rows' random file")
	fs.IntVar(&b.runs, "runs", 3, "runs of each row at each level (the median is shown, with the fastest and slowest)")
	fs.DurationVar(&b.duration, "duration", 20*time.Second, "length of each throughput run")
	fs.DurationVar(&b.limit, "limit", 5*time.Minute, "time limit of each copy run: a copy not checked by then stalled")
	fs.StringVar(&b.rows, "rows", "", "rows to measure, comma separated (default all but the lab rows): farwing, tcp-8bbr, tcp-bbr, tcp-cubic, tcp, farwing-first, http, scp; with --lab also fairness, halving, farwing-tcp (UDP blocked)")
	fs.StringArrayVar(&b.copyFlags, "copy-flag", nil, "a farwing copy flag for the Farwing rows, as --NAME=VALUE (repeatable): --rate, --min-rate, --policy, --fec, --window, --port")
	fs.BoolVar(&b.pull, "pull", false, "measure from the host to this one (default: this one to the host)")
	fs.StringVar(&b.jsonFile, "json", "", "write the evidence ledger (every sample, command, host and path fact) to this file")
	fs.BoolVarP(&b.quiet, "quiet", "q", false, "no progress lines")
	fs.BoolVar(&b.report, "report", false, "print the tables and facts of ledgers that --json wrote (the arguments), measuring nothing")
	fs.BoolVar(&b.lab, "lab", false, "run against the built-in emulated WAN on this machine (root, Linux), one level per --lab-loss")
	fs.StringVar(&b.labRate, "lab-rate", "400M", "the lab's rate each way (IP bytes)")
	fs.DurationVar(&b.labRTT, "lab-rtt", 140*time.Millisecond, "the lab's round trip")
	fs.StringVar(&b.labLoss, "lab-loss", "0,0.1%,1%,3%", "the lab's random loss levels, each way")
	fs.BoolVar(&b.veth, "veth", false, "with --lab: a veth pair instead of the emulator (the kernel's path, no delay or loss), unlimited or at --lab-rate through HTB")
	fs.DurationVar(&b.fairDuration, "fair-duration", 40*time.Second, "fairness row: how long the TCP CUBIC flow shares the path with Farwing")
	fs.StringVar(&b.halveSize, "halve-size", "1G", "halving row: the size of the copy under which the rate is halved")
	fs.DurationVar(&b.halveAt, "halve-at", 8*time.Second, "halving row: when the lab halves its rate, after the copy starts")
	fs.StringVar(&b.level, "level", "", "name of the path in the tables (default: the host)")
	fs.MarkHidden("level")
	b.ssh.register(fs)
}

// check checks the flags (parse) and that this platform can measure what they ask.
func (b *benchOptions) check() error {
	if err := b.parse(); err != nil {
		return err
	}
	if b.lab {
		return labHere()
	}
	return nil
}

// parse parses and checks the flags' values, on any platform (--report reads a ledger's command
// line back with it).
func (b *benchOptions) parse() error {
	var err error
	if b.sizeBytes, err = units.ParseSize(b.size); err != nil || b.sizeBytes <= 0 {
		return fmt.Errorf("--size %q: want a size such as 256M or 5G", b.size)
	}
	if b.runs < 1 || b.runs > 100 {
		return fmt.Errorf("--runs must be 1..100")
	}
	if b.duration < time.Second || b.duration > 300*time.Second {
		return fmt.Errorf("--duration must be 1s..300s")
	}
	if b.limit < time.Second {
		return fmt.Errorf("--limit must be at least 1s")
	}
	if b.selected, err = bench.SelectRows(b.rows); err != nil {
		return err
	}
	for _, r := range b.selected {
		if r.IsLab() {
			b.labRows = append(b.labRows, r)
		}
	}
	if len(b.labRows) > 0 && !b.lab {
		return fmt.Errorf("--rows %s: a lab row (it works the emulated path itself); run it with --lab", b.labRows[0].ID)
	}
	if err := checkCopyFlags(b.copyFlags); err != nil {
		return err
	}
	if b.lab {
		return b.parseLab()
	}
	if b.veth {
		return fmt.Errorf("--veth goes with --lab: it is the lab's kernel path")
	}
	return nil
}

// parseLab checks --lab's own flags, on any platform: a ledger's command line is read back
// with them (--report) where the lab itself cannot run.
func (b *benchOptions) parseLab() error {
	var err error
	if b.fairDuration < time.Second || b.fairDuration > tcpbench.MaxSeconds*time.Second {
		return fmt.Errorf("--fair-duration must be 1s..%ds", tcpbench.MaxSeconds)
	}
	if b.halveBytes, err = units.ParseSize(b.halveSize); err != nil || b.halveBytes <= 0 {
		return fmt.Errorf("--halve-size %q: want a size such as 1G", b.halveSize)
	}
	if b.halveAt < time.Second {
		return fmt.Errorf("--halve-at must be at least 1s")
	}
	if b.veth {
		if err := b.parseVeth(); err != nil {
			return err
		}
	}
	if b.labRateBps, err = units.ParseLinkRate(b.labRate); err != nil {
		return fmt.Errorf("--lab-rate: %v", err)
	}
	for _, f := range strings.Split(b.labLoss, ",") {
		loss, err := units.ParseLoss(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--lab-loss: %v", err)
		}
		if b.veth && loss != 0 { // parseVeth's rule, checked as the levels are parsed
			return fmt.Errorf("--veth has no --lab-loss %s: this kernel has no netem and the veth lab no emulator (--lab-rate only)", strings.TrimSpace(f))
		}
		b.labLosses = append(b.labLosses, loss)
		b.labLossNames = append(b.labLossNames, lossName(loss))
	}
	return nil
}

// parseVeth applies --veth to --lab's flags: the kernel's path has a rate (HTB) and nothing
// else, so a --lab-rtt or (in parseLab's loop) a --lab-loss other than 0 is refused, not left out, as are the lab rows
// (they read the emulator's per-protocol counters); without --lab-rate the path is unlimited,
// and without --lab-loss there is one level, no loss.
func (b *benchOptions) parseVeth() error {
	changed := func(name string) bool { return b.fs != nil && b.fs.Changed(name) }
	if len(b.labRows) > 0 {
		return fmt.Errorf("--veth: the %s row reads the emulator's counters; run it without --veth", b.labRows[0].ID)
	}
	if changed("lab-rtt") && b.labRTT != 0 {
		return fmt.Errorf("--veth has no --lab-rtt: this kernel has no netem and the veth lab no emulator (--lab-rate only)")
	}
	if !changed("lab-rate") {
		b.labRate = "0"
	}
	if !changed("lab-loss") {
		b.labLoss = "0"
	}
	b.labRTT = 0
	return nil
}

// benchCopyFlags are the farwing copy flags --copy-flag may pass on: those that change how a
// copy behaves on the path. The bench sets the rest itself (--json, -q, --sink, the ssh flags,
// sources and destination), so none of those can change what a row measures or where it goes.
var benchCopyFlags = []string{"rate", "min-rate", "policy", "fec", "window", "port"}

// checkCopyFlags checks --copy-flag's values: each one --NAME=VALUE of benchCopyFlags, and
// together a valid farwing copy command line (the values parse, --policy fixed has a --rate).
func checkCopyFlags(flags []string) error {
	for _, f := range flags {
		name, _, hasValue := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if !strings.HasPrefix(f, "--") || !slices.Contains(benchCopyFlags, name) {
			return fmt.Errorf("--copy-flag %q: the bench passes on only --%s to its copies", f, strings.Join(benchCopyFlags, ", --"))
		}
		if !hasValue {
			return fmt.Errorf("--copy-flag %q: give the value with the flag, as --copy-flag=--%s=VALUE", f, name)
		}
	}
	fs := pflag.NewFlagSet("copy", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c copyOptions
	c.register(fs)
	if err := fs.Parse(flags); err != nil {
		return fmt.Errorf("--copy-flag: %v", err)
	}
	if _, err := c.options(); err != nil {
		return fmt.Errorf("--copy-flag: %v", err)
	}
	return nil
}

// lossName is a loss level as the published table names it.
func lossName(loss float64) string {
	if loss == 0 {
		return "None"
	}
	return strconv.FormatFloat(loss*100, 'g', 3, 64) + "%"
}

func cmdBench(ctx context.Context, tun tuning.Settings, args []string) int {
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var b benchOptions
	b.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  farwing bench [flags] [user@]host\n  farwing bench --lab [flags]\n  farwing bench --report LEDGER...\n\n"+
			"Measures Farwing, TCP (default, CUBIC, BBR, 8 × BBR) and scp on one path and prints the\n"+
			"published tables: medians with the fastest and slowest run. With --lab, --rows fairness,halving\n"+
			"also measure Farwing sharing the emulated path with TCP CUBIC and under a halved rate, and\n"+
			"--rows farwing-tcp a copy with UDP blocked on it (Farwing's fallback to TCP streams).\n"+
			"--report prints, for each ledger that --json wrote, the tables its run printed, after a header\n"+
			"of its command line, dates, both hosts and the path; it measures nothing, so it takes no other flag.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "farwing bench: %s\n", oneLine(err))
		return code
	}
	if b.report {
		return benchReport(fs, fail)
	}
	if err := b.check(); err != nil {
		return fail(exitUsage, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(exitFail, err)
	}
	argv := append([]string{"farwing", "bench"}, args...)
	var l *bench.Ledger
	if b.lab {
		if fs.NArg() != 0 {
			return fail(exitUsage, fmt.Errorf("--lab takes no host: it measures the emulated WAN"))
		}
		l, err = b.runLab(ctx, exe, args)
		if err != nil {
			return fail(exitFail, err)
		}
		l.Argv = argv
	} else {
		if fs.NArg() != 1 {
			return fail(exitUsage, fmt.Errorf("bench needs one host, [user@]host; see 'farwing bench --help'"))
		}
		host := fs.Arg(0)
		level := b.level
		if level == "" {
			level = host
		}
		cfg := bench.Config{Host: host, Options: xfer.Options{SSH: b.ssh.ssh(false, tun), Tuning: tun, DebugLog: debugLog}, SSHArgs: b.ssh.ssh(false, tun).Flags(), Farwing: exe,
			SCP: "scp", Size: b.sizeBytes, Runs: b.runs, Duration: b.duration, Limit: b.limit, Rows: b.selected, Pull: b.pull,
			Levels: []string{level}, Argv: argv, CopyFlags: b.copyFlags}
		if tun.SCP != "" {
			cfg.SCP = tun.SCP
		}
		if !b.quiet {
			cfg.Progress = benchProgress()
		}
		l = bench.Run(ctx, cfg)
	}
	if b.jsonFile != "" {
		if err := writeLedger(b.jsonFile, l); err != nil {
			return fail(exitFail, err)
		}
	}
	if b.level == "" { // a --lab child prints nothing: its parent prints the whole table
		bench.WriteTables(stdout, l, b.tables())
	}
	switch {
	case l.Complete:
		return 0
	case ctx.Err() != nil:
		return fail(exitInterrupted, fmt.Errorf("interrupted; the ledger holds what finished"))
	}
	return fail(exitFail, errors.New(l.Error))
}

// benchProgress prints a line as each run starts (redrawn in place on a terminal) and ends.
func benchProgress() func(string, bool) {
	term := isTerminal(os.Stderr)
	start := time.Now()
	return func(line string, final bool) {
		line = fmt.Sprintf("bench [%s] %s", time.Since(start).Round(time.Second), line)
		switch {
		case !term && final:
			fmt.Fprintln(stderr, line)
		case term && final:
			fmt.Fprintf(stderr, "\r\033[K%s\n", line)
		case term:
			fmt.Fprintf(stderr, "\r\033[K%s", line)
		}
	}
}

func writeLedger(name string, l *bench.Ledger) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	// A temporary file of a name no one can guess, made new (O_EXCL: never a file or a link
	// someone put there), renamed over the ledger: its directory may be one others can write.
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s.%x.tmp", name, rnd)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	// Its strings hold the remote's words (errors, host facts): no raw control or bidirectional
	// character for whoever views the file.
	_, err = f.Write(append(escape.JSON(b), '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

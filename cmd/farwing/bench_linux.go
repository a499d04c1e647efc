package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/farwing/farwing/bench"
	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/sshlab"
)

// labHere is nil: Linux has the lab (check refuses --lab elsewhere).
func labHere() error { return nil }

// runLab builds the emulated WAN; for each loss level it runs this bench against the lab's sshd
// as an ordinary host from namespace A, merges the levels' ledgers, and measures the lab rows
// that run at every level itself (farwing-tcp blocks UDP on the path: bench.RunLab); then,
// without random loss, the other lab rows (fairness, halving).
func (b *benchOptions) runLab(ctx context.Context, exe string, args []string) (*bench.Ledger, error) {
	check := lab.Check
	if b.veth {
		check = lab.CheckVeth
	}
	if err := check(); err != nil {
		return nil, err
	}
	if err := sshlab.Check(); err != nil {
		return nil, err
	}
	cfg := lab.Symmetric(b.labRateBps, b.labRTT, 0, 0, 1)
	cfg.Veth = b.veth
	l, err := lab.Start(cfg)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	srv, err := sshlab.Start(l)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "farwing-bench-lab-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The children get this command's flags, less the lab's, plus the lab's host; --rows names
	// only the rows they measure.
	var child, rows []string
	for _, r := range b.selected {
		if !r.IsLab() && !slices.Contains(rows, r.ID) {
			rows = append(rows, r.ID)
		}
	}
	skip := map[string]bool{"--lab": true, "--veth": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case skip[name]:
			continue
		case name == "--lab-rate" || name == "--lab-rtt" || name == "--lab-loss" || name == "--json" || name == "--rows" ||
			name == "--fair-duration" || name == "--halve-size" || name == "--halve-at":
			if !hasValue {
				i++
			}
			continue
		}
		child = append(child, a)
	}
	child = append(child, "--rows", strings.Join(rows, ","))
	host := fmt.Sprintf("lab %s, %s", b.labRate, b.labRTT)
	if b.veth {
		host = "lab veth (no emulator), unlimited"
		if b.labRateBps > 0 {
			host = fmt.Sprintf("lab veth (no emulator), %s through HTB", b.labRate)
		}
	}
	merged := &bench.Ledger{Schema: bench.Schema, Started: time.Now().UTC(), Host: host, Complete: true,
		Size: b.sizeBytes, Runs: b.runs, Duration: b.duration.Seconds(), Limit: b.limit.Seconds(), CopyFlags: b.copyFlags, Direction: "push"}
	if b.pull {
		merged.Direction = "pull"
	}
	for _, r := range b.selected {
		merged.Rows = append(merged.Rows, bench.TableName(r.Kind)+":"+r.ID)
	}
	var everyLevel, once []bench.Row // lab rows run at each loss level, and only without loss
	for _, r := range b.labRows {
		if r.EveryLevel() {
			everyLevel = append(everyLevel, r)
		} else {
			once = append(once, r)
		}
	}
	labCfg := func(rows []bench.Row, level string, loss float64) bench.LabConfig {
		cfg := bench.LabConfig{Lab: l, Host: srv.Host, SSHArgs: []string{"-F", srv.ConfigFile}, Farwing: exe, CopyFlags: b.copyFlags,
			Rows: rows, Runs: b.runs, Level: level, Loss: loss, Size: b.sizeBytes, Rate: b.labRateBps, RTT: b.labRTT,
			FairDuration: b.fairDuration, HalveSize: b.halveBytes, HalveAt: b.halveAt, Limit: b.limit}
		if !b.quiet {
			cfg.Progress = benchProgress()
		}
		return cfg
	}
	for i, loss := range b.labLosses {
		if ctx.Err() != nil {
			break
		}
		name := b.labLossNames[i]
		if len(rows) > 0 && !b.childLevel(l, srv, exe, child, dir, i, loss, merged) {
			break
		}
		if len(everyLevel) > 0 {
			if len(rows) == 0 {
				if i == 0 {
					merged.Client, merged.Server = bench.LabFacts(l)
				}
				merged.Levels = append(merged.Levels, bench.LevelFacts{Name: name})
			}
			samples, err := bench.RunLab(ctx, labCfg(everyLevel, name, loss))
			merged.Samples = append(merged.Samples, samples...)
			if err != nil && ctx.Err() == nil {
				merged.Complete, merged.Error = false, "level "+name+": "+oneLine(err)
				break
			}
		}
	}
	if len(once) > 0 && merged.Complete && ctx.Err() == nil {
		if len(rows) == 0 && len(everyLevel) == 0 {
			merged.Client, merged.Server = bench.LabFacts(l)
		}
		samples, err := bench.RunLab(ctx, labCfg(once, lossName(0), 0))
		merged.Samples = append(merged.Samples, samples...)
		if err != nil && ctx.Err() == nil {
			merged.Complete, merged.Error = false, "lab rows: "+oneLine(err)
		}
	}
	if ctx.Err() != nil {
		merged.Complete, merged.Error = false, "interrupted"
	}
	merged.Ended = time.Now().UTC()
	return merged, nil
}

// childLevel runs this bench's rows (child: the flags, --rows included) at loss level i, in
// namespace A against the lab's sshd, and merges its ledger into merged; false where the level
// failed or ended early (merged says why).
func (b *benchOptions) childLevel(l *lab.Lab, srv *sshlab.Server, exe string, child []string, dir string, i int, loss float64, merged *bench.Ledger) bool {
	for _, d := range []lab.Direction{lab.AtoB, lab.BtoA} {
		p := l.Path(d)
		p.Loss = loss
		l.SetPath(d, p)
	}
	name := b.labLossNames[i]
	ledger := filepath.Join(dir, fmt.Sprintf("level-%d.json", i))
	argv := append([]string{"bench", "-F", srv.ConfigFile, "--level", name, "--json", ledger}, child...)
	argv = append(argv, srv.Host)
	cmd := l.Command(l.NSA, exe, argv...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.Env = os.Environ()
	runErr := cmd.Run()
	var lv bench.Ledger
	raw, err := os.ReadFile(ledger)
	if err == nil {
		err = json.Unmarshal(raw, &lv)
	}
	if err != nil {
		merged.Complete, merged.Error = false, fmt.Sprintf("level %s: %v (bench %v)", name, err, runErr)
		return false
	}
	if i == 0 {
		merged.Client, merged.Server = lv.Client, lv.Server
		merged.PeerArgv = lv.PeerArgv
	}
	for _, f := range lv.Levels {
		f.Argv = append([]string{"ip", "netns", "exec", l.NSA, exe}, argv...)
		merged.Levels = append(merged.Levels, f)
	}
	merged.Samples = append(merged.Samples, lv.Samples...)
	if !lv.Complete {
		merged.Complete, merged.Error = false, "level "+name+": "+lv.Error
		return false
	}
	return true
}

//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bench"
	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
	"github.com/farwing/farwing/bench/lab/sshlab"
)

// TestLabBench runs `farwing bench` through the lab at a small size and short durations, against
// the lab's sshd as an ordinary host: every row has a number or an explicit outcome, every
// checked copy matched its source, the TCP rows' sockets used the congestion control they name,
// and the ledger holds both ends' host facts and every command run.
func TestLabBench(t *testing.T) {
	e := startLab(t, 200e6, 40*time.Millisecond, 0.01)
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	cmd := e.l.Command(e.l.NSA, e.bin, "bench", "-q", "-F", e.srv.ConfigFile, "--size", "16M", "--runs", "1",
		"--duration", "2s", "--limit", "60s", "--copy-flag=--fec=auto", "--json", ledger, e.srv.Host)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	l := readLedger(t, ledger)
	if !l.Complete || l.Schema != bench.Schema || len(l.Levels) != 1 || strings.Join(l.CopyFlags, " ") != "--fec=auto" {
		t.Fatalf("ledger: complete %v, schema %d, %d levels, copy flags %q; %s", l.Complete, l.Schema, len(l.Levels), l.CopyFlags, l.Error)
	}
	for who, f := range map[string]struct {
		cores  int
		kernel string
		rmem   int64
		ssh    string
	}{"client": {l.Client.Cores, l.Client.Kernel, l.Client.TCP.Rmem[2], l.Client.OpenSSH}, "server": {l.Server.Cores, l.Server.Kernel, l.Server.TCP.Rmem[2], l.Server.OpenSSH}} {
		if f.cores <= 0 || f.kernel == "" || f.rmem <= 0 || !strings.HasPrefix(f.ssh, "OpenSSH") {
			t.Errorf("%s facts: %+v", who, f)
		}
	}
	if argv := strings.Join(l.PeerArgv, " "); len(l.PeerArgv) == 0 || l.PeerArgv[0] != "ssh" || !strings.Contains(argv, " serve ") || !strings.Contains(argv, "--pub") {
		t.Errorf("the peer's command line is not in the ledger: %q", l.PeerArgv)
	}
	if l.Levels[0].MinRTTms < 20 || l.Levels[0].CapacityBps <= 0 {
		t.Errorf("path facts %+v", l.Levels[0])
	}
	for _, row := range bench.Rows {
		var got []bench.Sample
		for _, s := range l.Samples {
			if s.Row == row.ID && s.Table == bench.TableName(row.Kind) {
				got = append(got, s)
			}
		}
		if len(got) != 1 {
			t.Errorf("%s %s: %d samples", bench.TableName(row.Kind), row.ID, len(got))
			continue
		}
		s := got[0]
		if s.Outcome != bench.OK || s.Value(row.Kind) <= 0 {
			t.Errorf("%s %s: %s %v (%s)", bench.TableName(row.Kind), row.ID, s.Outcome, s.Value(row.Kind), s.Error)
		}
		if _, tcp := s.Detail["cc_asked"]; tcp {
			asked, _ := s.Detail["cc_asked"].(string)
			used, _ := s.Detail["cc_used"].([]any)
			if len(used) == 0 {
				t.Errorf("%s: no congestion control read back", row.ID)
			}
			for _, u := range used {
				if asked != "" && u != asked || asked == "" && u != l.Client.TCP.Default {
					t.Errorf("%s: asked for %q, the socket used %v", row.ID, asked, u)
				}
			}
		}
		// The Farwing rows' copies got --copy-flag, and their FEC evidence is kept (1 % loss: parity
		// on every block, so every block is a group).
		if row.ID == "farwing" || row.ID == "farwing-first" {
			groups, _ := s.Detail["fec_groups"].(float64)
			_, repairs := s.Detail["repair_groups"].(float64)
			if len(s.Commands) != 1 || !slices.Contains(s.Commands[0], "--fec=auto") || groups <= 0 || !repairs || s.Detail["fec"] != "auto" {
				t.Errorf("%s %s: commands %q, fec %v, groups %v, repair groups %v", bench.TableName(row.Kind), row.ID, s.Commands,
					s.Detail["fec"], s.Detail["fec_groups"], s.Detail["repair_groups"])
			}
		}
		if row.Kind == bench.Copy && row.ID != "http" && (len(s.Commands) == 0 || s.Detail["blake3_copy"] != s.Detail["blake3_source"]) {
			t.Errorf("%s copy: commands %v, digests %v / %v", row.ID, s.Commands, s.Detail["blake3_copy"], s.Detail["blake3_source"])
		}
	}
	for _, title := range []string{"| Path | Farwing | 8 × TCP BBR | TCP BBR | TCP CUBIC | TCP, default | vs 8× BBR | vs BBR |",
		"| Path | Farwing | Farwing, first copy | HTTP | scp |"} {
		if !strings.Contains(out.String(), title) {
			t.Errorf("no table headed %s in:\n%s", title, out.String())
		}
	}
}

// TestLabBenchLabRows runs `farwing bench --lab` with only its lab rows, short and small: the
// fairness row shares the path with a CUBIC flow and the halving row halves the rate under a
// copy; both tables are printed with numbers, and the ledger holds each sample with its
// commands (--copy-flag passed on to every copy), its times and the lab's counters.
func TestLabBenchLabRows(t *testing.T) {
	labtest.Skip(t)
	if err := sshlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin := farwingBin(t)
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	cmd := exec.Command(bin, "bench", "--lab", "-q", "--rows", "fairness,halving", "--runs", "1", "--lab-rate", "100M", "--lab-rtt", "40ms",
		"--fair-duration", "3s", "--halve-size", "64M", "--halve-at", "2s", "--limit", "90s", "--copy-flag=--fec=off", "--json", ledger)
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, out.String(), errs.String())
	}
	l := readLedger(t, ledger)
	if !l.Complete || len(l.Samples) != 2 || strings.Join(l.CopyFlags, " ") != "--fec=off" || l.Client.Cores <= 0 || l.Server.Kernel == "" {
		t.Fatalf("ledger: complete %v (%s), %d samples, copy flags %q, client %+v", l.Complete, l.Error, len(l.Samples), l.CopyFlags, l.Client)
	}
	for _, s := range l.Samples {
		want := 2 // the warm-up and the measured copy; fairness adds the CUBIC flow's child bench
		if s.Table == "fairness" {
			want = 3
		}
		if s.Outcome != bench.OK || !s.End.After(s.Start) || len(s.Commands) != want {
			t.Errorf("%s: %s %s, %v–%v, commands %q", s.Table, s.Outcome, s.Error, s.Start, s.End, s.Commands)
			continue
		}
		for i, argv := range s.Commands {
			a := strings.Join(argv, " ")
			if i == 2 {
				if !strings.Contains(a, " bench -F ") || !strings.Contains(a, " --rows tcp-cubic --runs 1 --duration 3s ") {
					t.Errorf("%s: the CUBIC flow's command %q", s.Table, a)
				}
			} else if !strings.Contains(a, " copy --json -q -F ") || !strings.Contains(a, " --fec=off --sink ") {
				t.Errorf("%s: command %q", s.Table, a)
			}
		}
		series, _ := s.Detail["lab_series"].(map[string]any)
		if ts, _ := series["t"].([]any); len(ts) < 100 {
			t.Errorf("%s: %d samples of the lab's counters", s.Table, len(ts))
		}
		if fec, _ := s.Detail["fec"].(string); fec != "off" {
			t.Errorf("%s: the copy's summary says fec %q", s.Table, fec)
		}
	}
	for _, s := range l.Samples {
		switch {
		case s.Table == "fairness" && s.Fairness != nil:
			f := s.Fairness
			if f.FarwingMbps <= 0 || f.CUBICMbps <= 0 || f.FarwingMbps+f.CUBICMbps > 100 || f.OverlapSeconds < 3 || f.OverlapSeconds > 10 || f.GoalMbps != 30 {
				t.Errorf("fairness figures %+v", f)
			}
			if used, _ := s.Detail["cubic_cc_used"].([]any); len(used) != 1 || used[0] != "cubic" {
				t.Errorf("the CUBIC flow used %v", s.Detail["cubic_cc_used"])
			}
		case s.Table == "halving" && s.Halving != nil:
			// The controller follows the capacity down: a correctness check, not a time goal.
			h := s.Halving
			if !h.Intact || !h.Reached || h.Seconds <= 0 || h.RTTs <= 0 || h.GoodputAfterMbps <= 0 || h.GoodputAfterMbps > 50 || h.ChangeSeconds < 2 || h.CapacityBps != 50e6 {
				t.Errorf("halving figures %+v", h)
			}
		default:
			t.Errorf("sample %s without its figures: %+v", s.Table, s)
		}
	}
	for _, head := range []string{"| Farwing | TCP CUBIC | sum | overlap | goal (each) | verdict |",
		"| time until Farwing sends ≤ 50 Mbit/s | in 40 ms RTTs | goal | verdict | goodput from +3 s, Mbit/s | completed intact |"} {
		if !strings.Contains(out.String(), head) {
			t.Errorf("no table headed %s in:\n%s", head, out.String())
		}
	}
	if strings.Contains(out.String(), "| Added loss |") {
		t.Errorf("the lab rows alone printed a throughput or copy table:\n%s", out.String())
	}
}

// TestLabBenchInterrupt: Ctrl-C in the middle of a bench stops it cleanly: exit 130, the ledger
// written with what finished and marked incomplete, no remote peer left running and no bench
// directory left on the host.
func TestLabBenchInterrupt(t *testing.T) {
	e := startLab(t, 200e6, 40*time.Millisecond, 0)
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	cmd := e.l.Command(e.l.NSA, e.bin, "bench", "-F", e.srv.ConfigFile, "--rows", "tcp-bbr,farwing", "--runs", "3",
		"--duration", "5s", "--size", "16M", "--json", ledger, e.srv.Host)
	var out syncBuilder
	cmd.Stdout = &out
	// Off a terminal the bench prints a line as each run ends; the first TCP run's line is the cue.
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	firstDone := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		cued := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !cued && strings.Contains(sc.Text(), "tcp-bbr run 1/3: ") {
				cued = true
				close(firstDone)
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	// Interrupt during the second TCP run (5 s long): the first is in the ledger, the second is not.
	select {
	case <-firstDone:
		time.Sleep(time.Second)
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the first TCP run did not end within 2 minutes:\n%s", out.String())
	}
	benchDirs := filepath.Join(e.srv.Home, ".cache/farwing/bench-*")
	if during, _ := filepath.Glob(benchDirs); len(during) != 1 {
		t.Errorf("bench directories on the host during the bench: %v, want one", during)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	pw.Close()
	var code int
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 130 {
		t.Fatalf("exit %d (%v), want 130:\n%s", code, err, out.String())
	}
	raw, rerr := os.ReadFile(ledger)
	if rerr != nil {
		t.Fatalf("no ledger after Ctrl-C: %v\n%s", rerr, out.String())
	}
	var l bench.Ledger
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	if l.Complete || l.Error != "interrupted" || len(l.Samples) == 0 || l.Samples[0].Outcome != bench.OK {
		t.Errorf("ledger: complete %v, error %q, %d samples (first %+v)", l.Complete, l.Error, len(l.Samples), l.Samples)
	}
	if !strings.Contains(out.String(), "Incomplete: interrupted") {
		t.Errorf("the table does not say it is incomplete:\n%s", out.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(e.srv.Peers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if p := e.srv.Peers(); len(p) > 0 {
		t.Errorf("remote peers %v still running 30 s after Ctrl-C", p)
	}
	if left, _ := filepath.Glob(benchDirs); len(left) > 0 {
		t.Errorf("bench directories left on the host: %v", left)
	}
}

// TestCheckCopyFlags: --copy-flag passes on only the copy flags that change how a copy behaves,
// each with its value, and only values farwing copy itself accepts; never ssh flags, the
// bench's own copy flags, or paths.
func TestCheckCopyFlags(t *testing.T) {
	for _, ok := range [][]string{
		nil,
		{"--fec=off"},
		{"--fec=10+2", "--rate=300M", "--min-rate=50M", "--window=64"},
		{"--policy=fixed", "--rate=100M"},
		{"--port=40000-40003"},
	} {
		if err := checkCopyFlags(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, c := range []struct {
		flags []string
		want  string // in the error
	}{
		{[]string{"-F=/tmp/cfg"}, "passes on only --rate, --min-rate, --policy, --fec, --window"},
		{[]string{"--ssh-config=/tmp/cfg"}, "passes on only"},
		{[]string{"-o=ProxyCommand=sh"}, "passes on only"},
		{[]string{"--option=ProxyCommand=sh"}, "passes on only"},
		{[]string{"--json"}, "passes on only"},
		{[]string{"--sink=false"}, "passes on only"},
		{[]string{"--recursive=true"}, "passes on only"},
		{[]string{"evil@host:/etc"}, "passes on only"},
		{[]string{"--fec"}, "as --copy-flag=--fec=VALUE"},
		{[]string{"--fec=sometimes"}, "--copy-flag"},
		{[]string{"--rate=fast"}, "--copy-flag"},
		{[]string{"--window=-1"}, "--copy-flag"},
		{[]string{"--port=40000"}, "LO-HI"},
		{[]string{"--ssh-port=2222"}, "passes on only"},
		{[]string{"--policy=fixed"}, "needs --rate"},
		{[]string{"--min-rate=500M", "--rate=100M"}, "above --rate"},
	} {
		err := checkCopyFlags(c.flags)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.flags, err, c.want)
		}
	}
}

// TestBenchVethFlags: --veth is the lab's kernel path, so it needs --lab, and what that path
// cannot do (a round trip, random loss, the rows that read the emulator's counters) is a usage
// error naming it, not left out; without --lab-rate it is unlimited, with one level, no loss.
func TestBenchVethFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--veth", "h"}, "--veth goes with --lab"},
		{[]string{"bench", "--lab", "--veth", "--lab-rtt", "10ms"}, "--veth has no --lab-rtt"},
		{[]string{"bench", "--lab", "--veth", "--lab-loss", "0,1%"}, "--veth has no --lab-loss 1%"},
		{[]string{"bench", "--lab", "--veth", "--rows", "farwing,halving"}, "--veth: the halving row"},
	} {
		var errs bytes.Buffer
		stderr = &errs
		code := run(c.args)
		stderr = os.Stderr
		if code != 2 || !strings.Contains(errs.String(), c.want) || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want 2 and one line saying %q", c.args, code, errs.String(), c.want)
		}
	}
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	var b benchOptions
	b.register(fs)
	if err := fs.Parse([]string{"--lab", "--veth", "--lab-rtt", "0"}); err != nil {
		t.Fatal(err)
	}
	if err := b.parse(); err != nil || b.labRateBps != 0 || b.labRTT != 0 || len(b.labLosses) != 1 || b.labLosses[0] != 0 {
		t.Errorf("--lab --veth: %v, rate %g, rtt %v, losses %v; want unlimited, 0, one level of no loss", err, b.labRateBps, b.labRTT, b.labLosses)
	}
	fs = pflag.NewFlagSet("bench", pflag.ContinueOnError)
	b = benchOptions{}
	b.register(fs)
	if err := fs.Parse([]string{"--lab", "--veth", "--lab-rate", "5G"}); err != nil {
		t.Fatal(err)
	}
	if err := b.parse(); err != nil || b.labRateBps != 5e9 {
		t.Errorf("--lab --veth --lab-rate 5G: %v, rate %g", err, b.labRateBps)
	}
}

// TestLabBenchVeth runs `farwing bench --lab --veth` small and short: the rows run through the
// veth pair (shaped to 1 Gbit/s, so that the throughput row's file, sized from TCP's rate, stays
// small), the copy matched its source, and the ledger names the kernel path.
func TestLabBenchVeth(t *testing.T) {
	if err := lab.CheckVeth(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if err := sshlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin := farwingBin(t)
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	cmd := exec.Command(bin, "bench", "--lab", "--veth", "--lab-rate", "1G", "-q", "--rows", "farwing,tcp-bbr", "--size", "64M", "--runs", "1",
		"--duration", "2s", "--limit", "60s", "--json", ledger)
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, out.String(), errs.String())
	}
	l := readLedger(t, ledger)
	if !l.Complete || l.Host != "lab veth (no emulator), 1G through HTB" || len(l.Levels) != 1 || l.Levels[0].Name != "None" {
		t.Fatalf("ledger: complete %v (%s), host %q, levels %+v", l.Complete, l.Error, l.Host, l.Levels)
	}
	var copies int
	for _, s := range l.Samples {
		if s.Outcome != bench.OK || s.Value(bench.Throughput) <= 0 && s.Value(bench.Copy) <= 0 {
			t.Errorf("%s %s: %s (%s)", s.Table, s.Row, s.Outcome, s.Error)
		}
		if s.Table == bench.TableName(bench.Copy) {
			copies++
			if s.Detail["blake3_copy"] != s.Detail["blake3_source"] {
				t.Errorf("copy: digests %v / %v", s.Detail["blake3_copy"], s.Detail["blake3_source"])
			}
		}
	}
	if len(l.Samples) != 3 || copies != 1 {
		t.Errorf("%d samples, %d copies; want farwing's throughput and copy and tcp-bbr's", len(l.Samples), copies)
	}
}

// readLedger reads the bench's --json ledger at path.
func readLedger(t *testing.T, path string) bench.Ledger {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l bench.Ledger
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// syncBuilder is a strings.Builder safe for a writer goroutine and a reader.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) WriteString(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(v)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

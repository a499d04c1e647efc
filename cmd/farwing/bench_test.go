package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench"
)

// TestLabBench runs `farwing bench` through the lab at a small size and short durations, against
// the lab's sshd as an ordinary host: every row has a number or an explicit outcome, every
// checked copy matched its source, the TCP rows' sockets used the congestion control they name,
// and the ledger holds both ends' host facts and every command run.
func TestLabBench(t *testing.T) {
	e := startLab(t, 200e6, 40*time.Millisecond, 0.01)
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	cmd := e.l.Command(e.l.NSA, e.bin, "bench", "-q", "-F", e.srv.ConfigFile, "--size", "16M", "--runs", "1",
		"--duration", "2s", "--limit", "60s", "--json", ledger, e.srv.Host)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	raw, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	var l bench.Ledger
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	if !l.Complete || l.Schema != bench.Schema || len(l.Levels) != 1 {
		t.Fatalf("ledger: complete %v, schema %d, %d levels; %s", l.Complete, l.Schema, len(l.Levels), l.Error)
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

// TestLabBenchInterrupt: Ctrl-C in the middle of a bench stops it cleanly: exit 130, the ledger
// written with what finished and marked incomplete, no remote peer left running and no bench
// directory left on the host.
func TestLabBenchInterrupt(t *testing.T) {
	e := startLab(t, 200e6, 40*time.Millisecond, 0)
	ledger := filepath.Join(t.TempDir(), "ledger.json")
	cmd := e.l.Command(e.l.NSA, e.bin, "bench", "-q", "-F", e.srv.ConfigFile, "--rows", "tcp-bbr,farwing", "--runs", "3",
		"--duration", "5s", "--size", "16M", "--json", ledger, e.srv.Host)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt during the second TCP run: the first is in the ledger, the second is not.
	time.Sleep(9 * time.Second)
	benchDirs := filepath.Join(e.srv.Home, ".cache/farwing/bench-*")
	if during, _ := filepath.Glob(benchDirs); len(during) != 1 {
		t.Errorf("bench directories on the host during the bench: %v, want one", during)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
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

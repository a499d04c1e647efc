package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchFixture is the bench package's hand-written lab ledger.
var benchFixture = filepath.Join("..", "..", "bench", "testdata", "report-lab.json")

// runCaptured runs farwing with args and returns its exit code, stdout and stderr.
func runCaptured(args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	stdout, stderr = &out, &errs
	defer func() { stdout, stderr = os.Stdout, os.Stderr }()
	code := run(args)
	return code, out.String(), errs.String()
}

// TestBenchReport: farwing bench --report prints a ledger's header and the tables its run
// printed, the lab's settings (here the fairness row's path) read back from its command line;
// with two ledgers, both, in order.
func TestBenchReport(t *testing.T) {
	code, out, errs := runCaptured("bench", "--report", benchFixture)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"`farwing bench --lab --size 64M --runs 3 --rows farwing,tcp-8bbr,tcp-bbr,scp,fairness --json ledger.json`\n\n- When: 2026-12-02 10:30:00 – 10:42:22 UTC (12m22s)\n",
		"- Client (this end): Example CPU @ 2.00GHz; 2 cores;",
		"- Level 1%: min RTT 140.6 ms, capacity estimate 395.0 Mbit/s",
		"\n| Added loss | Farwing | 8 × TCP BBR | TCP BBR | vs 8× BBR | vs BBR |\n|---|---|---|---|---|---|\n" +
			"| None | 375 364–376 | 358 351–363 | 356 353–358 | 1.0× | 1.0× |\n| 1% | 370 370–370 | 348 345–351 | 326 313–340 | 1.0× | 1.1× |\n",
		"\n| Added loss | Farwing | scp |\n|---|---|---|\n| None | 7.2 s 6.9–7.5 s | 12 s 12–13 s |\n| 1% | 7.9 s 7.4 s–failed | stalled |\n",
		"sharing the lab's path (400 Mbit/s, 140ms, no random loss)\n\nGoodput in Mbit/s over the 40s the CUBIC flow ran",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	code, two, _ := runCaptured("bench", "--report", benchFixture, benchFixture)
	if code != 0 || two != out+"\n"+out {
		t.Errorf("two ledgers: exit %d, output is not both reports in turn:\n%s", code, two)
	}
}

// TestBenchReportUsage: --report with a measuring flag or no ledger, a file that is not a
// ledger of this schema, or a ledger whose command line is not a bench's is a usage error:
// exit 2, one line, nothing printed on stdout (every ledger is checked before any is printed).
func TestBenchReportUsage(t *testing.T) {
	dir := t.TempDir()
	ledger := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	schema2 := ledger("schema2.json", `{"schema": 2, "complete": true}`)
	notJSON := ledger("table.md", "| Added loss | Farwing |\n")
	notBench := ledger("argv.json", `{"schema": 1, "complete": true, "argv": ["rm", "-rf", "/"]}`)
	badArgv := ledger("flags.json", `{"schema": 1, "complete": true, "argv": ["farwing", "bench", "--frobnicate", "h"]}`)
	for _, args := range [][]string{
		{"bench", "--report"},
		{"bench", "--report", "--lab", benchFixture},
		{"bench", "--report", "--json", filepath.Join(dir, "out.json"), benchFixture},
		{"bench", "--report", "--runs", "5", benchFixture},
		{"bench", "--report", "user@host"},
		{"bench", "--report", filepath.Join(dir, "missing.json")},
		{"bench", "--report", dir},
		{"bench", "--report", schema2},
		{"bench", "--report", notJSON},
		{"bench", "--report", notBench},
		{"bench", "--report", badArgv},
		{"bench", "--report", benchFixture, schema2},
	} {
		code, out, errs := runCaptured(args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if msg := strings.TrimSpace(errs); msg == "" || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "farwing bench: ") {
			t.Errorf("%q: stderr %q, want one line", args, errs)
		}
		if out != "" {
			t.Errorf("%q: printed %q", args, out)
		}
	}
}

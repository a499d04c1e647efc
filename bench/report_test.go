package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
)

// labSettings are the settings report-lab.json's command line gives the tables (the defaults of
// farwing bench --lab).
var labSettings = TableSettings{Lab: true, LabRateBps: 400e6, LabRTT: 140 * time.Millisecond, FairDuration: 40 * time.Second,
	HalveSize: 1 << 30, HalveAt: 8 * time.Second}

// wantLabHeader and wantLabTables are the report of testdata/report-lab.json, a hand-written
// ledger of two loss levels: medians with the fastest and slowest run, the speed-ups rounded
// down, a copy whose slowest run failed, scp stalled and skipped, the levels' notes under the
// throughput table, and the fairness row.
var wantLabHeader = "`" + `farwing bench --lab --size 64M --runs 3 --rows farwing,tcp-8bbr,tcp-bbr,scp,fairness --json ledger.json` + "`" + `

- When: 2026-12-02 10:30:00 – 10:42:22 UTC (12m22s)
- Path: lab 400M, 140ms; push: this end sends to the host
- Runs: 3 of each row at each level; throughput runs of 20s; copies of 64.0 MiB, limit 5m0s each
- Client (this end): Example CPU @ 2.00GHz; 2 cores; 8.00 GiB memory; linux/amd64; kernel 6.1.0-test; host name lab-a; OpenSSH_9.2p1 Debian-2+deb12u3, OpenSSL 3.0.15 3 Sep 2024; farwing abc1234; go1.26.8; TCP default bbr, tcp_rmem max 64.0 MiB, tcp_wmem max 64.0 MiB; MTU 1500 (lab0); CPU flags aes pclmulqdq avx2
- Server (the host): Example CPU @ 2.00GHz; 2 cores; 8.00 GiB memory; linux/amd64; kernel 6.1.0-test; host name lab-b; OpenSSH_9.2, OpenSSL 3.0.15 3 Sep 2024; farwing abc1234; go1.26.8; TCP default bbr, tcp_rmem max 64.0 MiB, tcp_wmem max 64.0 MiB; MTU 1500 (lab0); CPU flags aes pclmulqdq avx2
- 1-minute load average before each run: client 0.41–3.95, server 0.41–3.95
- Level None: min RTT 140.4 ms, capacity estimate 398.2 Mbit/s (Farwing's packet train), random loss measured 0 %
- Level 1%: min RTT 140.6 ms, capacity estimate 395.0 Mbit/s (Farwing's packet train), random loss measured 0.98 %

`

var wantLabTables = `Throughput to lab 400M, 140ms

Mbit/s of useful data. 20s runs, median of 3, with the slowest and fastest run beside it.

| Added loss | Farwing | 8 × TCP BBR | TCP BBR | vs 8× BBR | vs BBR |
|---|---|---|---|---|---|
| None | 375 364–376 | 358 351–363 | 356 353–358 | 1.0× | 1.0× |
| 1% | 370 370–370 | 348 345–351 | 326 313–340 | 1.0× | 1.1× |

None: Farwing's rate was held by the path's capacity (about 398.2 Mbit/s).

1%: Farwing's rate was held by the path's capacity (about 395.0 Mbit/s).

64.0 MiB copy to lab 400M, 140ms, start of command to checked file

Disk to disk, 5m0s limit per run, median of 3.

| Added loss | Farwing | scp |
|---|---|---|
| None | 7.2 s 6.9–7.5 s | 12 s 12–13 s |
| 1% | 7.9 s 7.4 s–failed | stalled |

Fairness: Farwing (--sink) and one TCP CUBIC flow sharing the lab's path (400 Mbit/s, 140ms, no random loss)

Goodput in Mbit/s over the 40s the CUBIC flow ran, median of 3, with the slowest and fastest run beside it.

| Farwing | TCP CUBIC | sum | overlap | goal (each) | verdict |
|---|---|---|---|---|---|
| 180 175–190 | 171 161–181 | 351 351–356 | 40 s 40–41 s | ≥ 120 | pass (3/3) |

`

// TestReportLab: the report of a known ledger is its header and exactly these tables.
func TestReportLab(t *testing.T) {
	l, err := ReadLedger(filepath.Join("testdata", "report-lab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tables strings.Builder
	WriteTables(&tables, l, labSettings)
	if tables.String() != wantLabTables {
		t.Errorf("tables:\n%s\nwant:\n%s", tables.String(), wantLabTables)
	}
	var report strings.Builder
	Report(&report, l, labSettings)
	if report.String() != wantLabHeader+wantLabTables {
		t.Errorf("report:\n%s\nwant:\n%s", report.String(), wantLabHeader+wantLabTables)
	}
}

// TestReportTablesPath: a bench of a host (not the lab) names its levels "Path" and, pulling, says
// "from"; an unavailable row says so; an incomplete ledger's tables end by saying why.
func TestReportTablesPath(t *testing.T) {
	l := &Ledger{Schema: Schema, Error: "interrupted", Host: "user@far", Direction: "pull", Size: 5 << 30, Runs: 1,
		Duration: 2.5, Limit: 90, Rows: []string{"throughput:farwing", "throughput:tcp-cubic", "copy:scp"},
		Levels: []LevelFacts{{Name: "user@far"}},
		Samples: []Sample{
			{Row: "farwing", Table: "throughput", Level: "user@far", Run: 1, Outcome: OK, Mbps: 11498.4},
			{Row: "tcp-cubic", Table: "throughput", Level: "user@far", Run: 1, Outcome: Unavailable, Error: "no tcp_cubic"},
			{Row: "scp", Table: "copy", Level: "user@far", Run: 1, Outcome: OK, Seconds: 81.6},
		}}
	var b strings.Builder
	WriteTables(&b, l, TableSettings{})
	want := `Throughput from user@far

Mbit/s of useful data. 2.5s runs, median of 1, with the slowest and fastest run beside it.

| Path | Farwing | TCP CUBIC |
|---|---|---|
| user@far | 11,498 | unavailable |

5.00 GiB copy from user@far, start of command to checked file

Disk to disk, 1m30s limit per run, median of 1.

| Path | scp |
|---|---|
| user@far | 82 s |

Incomplete: interrupted.
`
	if b.String() != want {
		t.Errorf("tables:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestReportIncomplete: a ledger that is not complete is reported, and its header says so first.
func TestReportIncomplete(t *testing.T) {
	l := readFixture(t)
	l.Complete, l.Error = false, "level 1%: interrupted"
	var b strings.Builder
	Report(&b, l, labSettings)
	if first, _, _ := strings.Cut(b.String(), "\n"); first != "**Incomplete ledger** (level 1%: interrupted): the tables hold only the runs that finished." {
		t.Errorf("first line %q", first)
	}
	if !strings.HasSuffix(b.String(), "Incomplete: level 1%: interrupted.\n") {
		t.Errorf("the tables do not end by saying the ledger is incomplete:\n%s", b.String())
	}
}

// TestReportHeaderRows: the header gives the throughput runs' duration and the copies' size and
// limit only when the ledger has such rows (a bench of the lab rows alone has neither).
func TestReportHeaderRows(t *testing.T) {
	l := readFixture(t)
	for _, c := range []struct {
		rows []string
		want string
	}{
		{[]string{"throughput:farwing", "copy:scp"}, "- Runs: 3 of each row at each level; throughput runs of 20s; copies of 64.0 MiB, limit 5m0s each\n"},
		{[]string{"throughput:tcp-bbr"}, "- Runs: 3 of each row at each level; throughput runs of 20s\n"},
		{[]string{"copy:http"}, "- Runs: 3 of each row at each level; copies of 64.0 MiB, limit 5m0s each\n"},
		{[]string{"fairness:fairness", "halving:halving"}, "- Runs: 3 of each row at each level\n"},
	} {
		l.Rows = c.rows
		var b strings.Builder
		WriteHeader(&b, l)
		if !strings.Contains(b.String(), "\n"+c.want) {
			t.Errorf("rows %v: the header lacks %q:\n%s", c.rows, c.want, b.String())
		}
	}
}

func readFixture(t *testing.T) *Ledger {
	t.Helper()
	l, err := ReadLedger(filepath.Join("testdata", "report-lab.json"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReportRefuses: a file that cannot be read, is not a ledger, is of another schema, names a
// row this build does not know or names one twice, or is larger than a bench's ledger (bytes,
// objects, levels, samples) is refused, in one line naming the file.
func TestReportRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not-json":    "farwing bench output\n",
		"no-schema":   `{"complete": true, "rows": []}`,
		"schema-2":    `{"schema": 2, "complete": true}`,
		"schema-text": `{"schema": "1"}`,
		"bad-field":   `{"schema": 1, "samples": "many"}`,
		"unknown-row": `{"schema": 1, "complete": true, "rows": ["throughput:ftp"]}`,
		"array":       `[1, 2]`,
		"twice":       `{"schema": 1, "complete": true, "rows": ["throughput:farwing", "throughput:farwing"]}`,
		// Bounds on what a file someone hands over may make the report do: 3 bytes of JSON
		// decode to a 200-byte Sample, and every table cell reads every sample.
		"braces":  `{"schema": 1, "samples": [` + strings.Repeat("{},", maxLedgerValues) + `{}]}`,
		"levels":  `{"schema": 1, "levels": [` + strings.Repeat(`{"name":"x"},`, maxLedgerLevels) + `{}]}`,
		"samples": `{"schema": 1, "samples": [` + strings.Repeat("{},", maxLedgerSamples) + `{}]}`,
		"huge":    `{"schema": 1, "error": "` + strings.Repeat("x", MaxLedger) + `"}`,
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "a-directory"), 0o755)
	for _, c := range []struct{ name, want string }{
		{"missing", "cannot read it: no such file or directory"},
		{"a-directory", "cannot read it"},
		{"not-json", "not a bench ledger"},
		{"no-schema", "not a bench ledger"},
		{"schema-text", "not a bench ledger"},
		{"array", "not a bench ledger"},
		{"schema-2", "schema 2; this farwing reads bench ledgers of schema 1"},
		{"bad-field", "not a bench ledger of schema 1"},
		{"unknown-row", `a row this farwing does not know, "throughput:ftp"`},
		{"twice", `it names the row "throughput:farwing" twice`},
		{"braces", "more than 262144 JSON objects and arrays, not a bench ledger"},
		{"levels", "257 levels; a bench ledger has at most 256"},
		{"samples", "131073 samples; a bench ledger has at most 131072"},
		{"huge", "larger than 16.0 MiB, not a bench ledger"},
	} {
		path := filepath.Join(dir, c.name)
		l, err := ReadLedger(path)
		if err == nil {
			t.Errorf("%s: read, want an error (%+v)", c.name, l)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "ledger "+path+": ") || !strings.Contains(msg, c.want) || strings.ContainsAny(msg, "\n\r") {
			t.Errorf("%s: %q, want one line naming the file and %q", c.name, msg, c.want)
		}
	}
}

// TestReportEscapes: a ledger is untrusted input. Whatever its strings hold (escape sequences,
// bidirectional overrides, newlines that would start a line of their own), the report is
// printable text whose lines are its own: every string is one escaped line.
func TestReportEscapes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "report-lab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l map[string]any
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	evil := "\x1b]0;owned\x07\x1b[2J\u202egnp.exe\r\n| forged | row |\n"
	l["complete"], l["error"], l["host"] = false, "gone"+evil, "lab"+evil
	l["argv"] = append(l["argv"].([]any), evil)
	client := l["client"].(map[string]any)
	client["cpu"], client["openssh"], client["cpu_flags"] = "CPU"+evil, "ssh"+evil, []any{evil}
	levels := l["levels"].([]any)
	lv := levels[0].(map[string]any)
	lv["notes"] = []any{"note" + evil}
	lv["name"] = "None" + evil
	for _, s := range l["samples"].([]any) {
		s := s.(map[string]any)
		if s["level"] == "None" {
			s["level"] = "None" + evil
		}
	}
	raw, _ = json.Marshal(l)
	name := filepath.Join(t.TempDir(), "evil.json")
	os.WriteFile(name, raw, 0o644)
	got, err := ReadLedger(name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	Report(&b, got, labSettings)
	out := b.String()
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			t.Fatalf("the report holds %U:\n%s", r, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| forged") {
			t.Fatalf("a string of the ledger started a line of its own:\n%s", out)
		}
	}
	// The level's samples still meet their level: the tables are those of the escaped names.
	if !strings.Contains(out, `| None\x1b]0;owned\x07\x1b[2J\u202egnp.exe\r\n| forged | row |\n | 375 364–376 |`) {
		t.Errorf("the escaped level's row is missing:\n%s", out)
	}
}

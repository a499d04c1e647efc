package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	fw := filepath.Join(dir, "fw.json")
	os.WriteFile(fw, []byte("{\n  \"bytes\": 1073741824,\n  \"data_seconds\": 23.5\n}\n"), 0o644)
	raw, err := record([]string{"test=throughput", "loss_pct=0.1", "run=2", "ok=true", "tool=iperf3 8xbbr",
		"farwing=@" + fw, "missing=@" + filepath.Join(dir, "nope"), "ver=007", "x=1."})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if m["loss_pct"] != 0.1 || m["run"] != 2.0 || m["ok"] != true || m["tool"] != "iperf3 8xbbr" ||
		m["ver"] != "007" || m["x"] != "1." {
		t.Errorf("scalars: %s", raw)
	}
	if b, _ := num(m, "farwing", "bytes"); b != 1<<30 {
		t.Errorf("embedded file: %s", raw)
	}
	if str(m, "missing", "unreadable") == "" {
		t.Errorf("a missing file should be recorded as unreadable: %s", raw)
	}
	if bytes.Contains(raw, []byte("\n")) {
		t.Errorf("record is not one line")
	}
	if _, err := record([]string{"novalue"}); err == nil {
		t.Errorf("KEY without = accepted")
	}
}

func TestIperfSummary(t *testing.T) {
	in := `{"start":{"test_start":{"num_streams":8}},
	"intervals":[{"sum":{"bits_per_second":3.5e8}},{"sum":{"bits_per_second":3.8e8}}],
	"end":{"sum_sent":{"bits_per_second":3.84e8,"retransmits":40740,"seconds":20.0},
	       "sum_received":{"bits_per_second":3.55e8,"bytes":887500000},
	       "sender_tcp_congestion":"bbr"}}`
	s := iperfSummary([]byte(in))
	if s.ReceiverBps != 3.55e8 || s.SenderBps != 3.84e8 || s.Retransmits != 40740 || s.Streams != 8 ||
		s.CC != "bbr" || len(s.Intervals) != 2 || s.Intervals[1] != 380 || s.Error != "" {
		t.Errorf("%+v", s)
	}
	if s := iperfSummary([]byte(`{"start":{},"end":{},"error":"unable to connect to server"}`)); s.Error != "unable to connect to server" {
		t.Errorf("error not kept: %+v", s)
	}
	if s := iperfSummary([]byte("iperf3: error")); s.Error == "" {
		t.Errorf("garbage accepted: %+v", s)
	}
}

const trace = `100.0 farwing: UDP lanes open to 198.19.0.2 ports [1 2 3 4], rtt 141ms
100.5    0% 0 B/1.00 GiB  0 bit/s  rate 15.1 Mbit/s  srtt 142 ms (min 141)  loss 0.00%  cong 0  re-sent 1
101.0    2% 20.0 MiB/1.00 GiB  300.0 Mbit/s  rate 380.0 Mbit/s  srtt 142 ms (min 141)  loss 0.00%  cong 0  re-sent 1
101.5    4% 40.0 MiB/1.00 GiB  400.0 Mbit/s  rate 400.0 Mbit/s  srtt 150 ms (min 141)  loss 0.00%  cong 0  re-sent 1
102.0    6% 60.0 MiB/1.00 GiB  380.0 Mbit/s  rate 390.0 Mbit/s  srtt 250 ms (min 141)  loss 0.00%  cong 1  re-sent 1
102.5    8% 70.0 MiB/1.00 GiB  200.0 Mbit/s  rate 250.0 Mbit/s  srtt 300 ms (min 141)  loss 0.00%  cong 2  re-sent 9
103.0   10% 80.0 MiB/1.00 GiB  190.0 Mbit/s  rate 195.0 Mbit/s  srtt 200 ms (min 141)  loss 0.00%  cong 2  re-sent 9
103.5   12% 90.0 MiB/1.00 GiB  1.20 Gbit/s  rate 190.0 Mbit/s  srtt 150 ms (min 141)  loss 0.00%  cong 2  re-sent 9
107.0  100% 1.00 GiB/1.00 GiB  185.0 Mbit/s  rate 190.0 Mbit/s  srtt 150 ms (min 141)  loss 0.00%  cong 2  re-sent 9
farwing: sent to sink 1 file(s), 1.00 GiB in 9.00 s (data 7.00 s, 300.0 Mbit/s), verified
`

func TestProgress(t *testing.T) {
	ss := parseProgress(strings.NewReader(trace))
	if len(ss) != 8 || ss[0].T != 100.5 || ss[0].RateBps != 15.1e6 || ss[6].CurBps != 1.2e9 || ss[3].SRTTms != 250 {
		t.Fatalf("parsed %+v", ss)
	}
	// [101, 102]: lines at 101.5 (400) and 102 (380) cover it.
	p := summarize(ss, 101, 102, 0, 0)
	if math.Abs(p.WindowBps-390e6) > 1 || p.WindowS != 1 {
		t.Errorf("window %v over %v s, want 390e6 over 1 s", p.WindowBps, p.WindowS)
	}
	// Half of the 101.5 line's interval.
	if p := summarize(ss, 101.25, 101.5, 0, 0); math.Abs(p.WindowBps-400e6) > 1 || p.WindowS != 0.25 {
		t.Errorf("partial window %v over %v", p.WindowBps, p.WindowS)
	}
	// The trace ends at 107: only the covered part counts.
	if p := summarize(ss, 106, 120, 0, 0); p.WindowS != 1 || p.WindowBps != 185e6 {
		t.Errorf("window past the end: %+v", p)
	}
	p = summarize(ss, 0, 0, 101.8, 200e6)
	if p.RateBelowS == nil || math.Abs(*p.RateBelowS-1.2) > 1e-9 {
		t.Errorf("rate below after %v, want 1.2 s", p.RateBelowS)
	}
	// 102.0 is the first line after the change, but its interval started before it; 102.5 is
	// the first whole interval after the change with goodput ≤ 200.
	if p.GoodputBelowS == nil || math.Abs(*p.GoodputBelowS-0.7) > 1e-9 {
		t.Errorf("goodput below after %v, want 0.7 s", p.GoodputBelowS)
	}
	if p.BeforeBps != 400e6 || p.MaxRateAfter3s != 190e6 || p.MedianRateAfter != 190e6 {
		t.Errorf("before %v, max after %v", p.BeforeBps, p.MaxRateAfter3s)
	}
	if len(p.RateSeries) != 8 || p.RateSeries[0] != 15 || p.RateSeries[5] != 195 {
		t.Errorf("series %v", p.RateSeries)
	}
	if p := summarize(ss, 0, 0, 104, 100e6); p.RateBelowS != nil {
		t.Errorf("never below 100M, got %v", *p.RateBelowS)
	}
}

func TestLabChange(t *testing.T) {
	log := "lab: A 198.19.0.1 ...\nlab: at +8.001s (unix 1795988608.554195): A->B rate 200.0M, rtt 140ms, loss 0%, queue 7000000 bytes\n" +
		"lab: at +8.001s (unix 1795988608.554200): B->A rate 200.0M\n"
	if v, ok := labChange(log); !ok || v != 1795988608.554195 {
		t.Errorf("labChange = %v, %v", v, ok)
	}
	if _, ok := labChange("lab: 3s elapsed"); ok {
		t.Errorf("found a change in a log without one")
	}
}

func TestTable(t *testing.T) {
	fw := func(loss string, gbps float64, rc string) string {
		return `{"test":"throughput","tool":"farwing","loss_pct":` + loss + `,"run":1,"load1":0.5,"rc":` + rc +
			`,"farwing":{"bytes":1073741824,"data_seconds":` + jsonNum(8*(1<<30)/gbps) + `,"wire_bytes":1127428915,"retransmitted":10}}`
	}
	ip := func(tool, loss string, bps float64) string {
		return `{"test":"throughput","tool":"` + tool + `","loss_pct":` + loss + `,"run":1,"load1":1.2,"rc":0,"iperf":{"receiver_bps":` + jsonNum(bps) + `}}`
	}
	lines := []string{
		fw("0", 370e6, "0"), fw("0", 365e6, "0"), fw("0", 350e6, "0"),
		fw("1", 300e6, "0"), fw("1", 310e6, "0"), fw("1", 0.5, "7"),
		ip("iperf3 cubic", "0", 362e6), ip("iperf3 8xbbr", "0", 355e6), ip("iperf3 8xbbr", "1", 350e6),
		`{"test":"copy","tool":"farwing","loss_pct":0,"run":1,"rc":0,"seconds":5.5,"farwing":{"bytes":268435456,"wire_bytes":270000000}}`,
		`{"test":"copy","tool":"scp","loss_pct":0,"run":1,"rc":0,"seconds":9.2,"intact":true,"tcp_cc":"A:bbr,B:cubic"}`,
		`{"test":"copy","tool":"scp","loss_pct":1,"run":1,"rc":124,"stalled":true,"bytes_done":5242880,"limit_s":60}`,
		`{"test":"copy","tool":"scp","loss_pct":1,"run":2,"skipped":"stalled in run 1"}`,
		`{"test":"copy","tool":"http","server":"nginx","loss_pct":0,"run":1,"rc":0,"seconds":7.0,"intact":true}`,
		`{"test":"fairness","run":1,"rc":0,"load1":0.9,"progress":{"window_bps":2.1e8,"window_s":40.2},"iperf":{"receiver_bps":1.5e8}}`,
		`{"test":"halving","run":1,"rc":0,"load1":0.7,"progress":{"rate_below_s":1.2,"median_rate_after_3s_bps":1.85e8,"max_rate_after_3s_bps":1.9e8,"goodput_after_bps":1.8e8},"farwing":{"bytes":1073741824,"data_seconds":40}}`,
		`{"test":"halving","run":2,"rc":0,"progress":{"median_rate_after_3s_bps":3.8e8,"max_rate_after_3s_bps":3.9e8}}`,
	}
	f := filepath.Join(t.TempDir(), "r.jsonl")
	os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	recs, err := readRecords(f)
	if err != nil {
		t.Fatal(err)
	}
	out := table(recs)
	t.Logf("\n%s", out)
	for _, want := range []string{
		"| 0 % | 350–365–370 | ≥ 362 | median only (2/3) | 362.0 | — | 355 | yes (365 vs 355) | 0.50–1.20 |",
		"| 1 % | 300–305–310 (+1 failed) | ≥ 355 | **FAIL** (0/3) |",
		"**no** (305 vs 350)",
		"| 0 % | 5.50 | ≤ 6.7 | pass (1/1) | 9.2 | 7.0 |",
		"stalled ×1 (5.0 MiB in 60 s; 1 later runs skipped)",
		"| scp (TCP bbr) | HTTP GET (curl ← nginx, TCP cubic) |",
		"| 210 | 150 | 360 | ≥ 120 | pass (1/1) | pass (1/1) | 40.2 | 0.90 |",
		"| 1.20 (1 runs never below) | 8.6 | ≤ 2.1 s (15 RTTs) | **FAIL** (1/2) | 185–282–380 / 190–290–390 |",
		"| 1.050 | pass (4/4) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

func TestRunUsage(t *testing.T) {
	var o, e bytes.Buffer
	if run(nil, &o, &e) != 2 || run([]string{"bogus"}, &o, &e) != 2 {
		t.Errorf("usage errors should exit 2")
	}
}

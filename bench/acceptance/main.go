// Command fwacc is the helper of bench/acceptance.sh: it builds the JSON
// result lines, reads iperf3 and farwing progress output, and renders the
// acceptance table. See docs/ACCEPTANCE.md.
//
//	fwacc rec KEY=VALUE...            one compact JSON object (VALUE: number, true/false,
//	                                  @FILE to embed a JSON file, anything else a string)
//	fwacc iperf FILE                  summary of `iperf3 -J` output
//	fwacc progress FILE [--from T --to T] [--change T --capacity BPS]
//	                                  summary of timestamped `farwing copy -v` progress lines
//	fwacc labchange FILE              unix time of the first `lab: at +…s (unix T)` line
//	fwacc table RESULTS.jsonl         the markdown acceptance table
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: fwacc rec|iperf|progress|labchange|table ...")
		return 2
	}
	var out any
	var err error
	switch args[0] {
	case "rec":
		out, err = record(args[1:])
	case "iperf":
		if len(args) != 2 {
			return usage(stderr, "fwacc iperf FILE")
		}
		var b []byte
		if b, err = os.ReadFile(args[1]); err == nil {
			out = iperfSummary(b)
		}
	case "progress":
		out, err = progressCmd(args[1:])
	case "labchange":
		if len(args) != 2 {
			return usage(stderr, "fwacc labchange FILE")
		}
		var b []byte
		if b, err = os.ReadFile(args[1]); err == nil {
			t, ok := labChange(string(b))
			if !ok {
				err = fmt.Errorf("no scheduled change logged in %s", args[1])
			} else {
				fmt.Fprintf(stdout, "%.6f\n", t)
				return 0
			}
		}
	case "table":
		if len(args) != 2 {
			return usage(stderr, "fwacc table RESULTS.jsonl")
		}
		var recs []map[string]any
		if recs, err = readRecords(args[1]); err == nil {
			fmt.Fprint(stdout, table(recs))
			return 0
		}
	default:
		return usage(stderr, "fwacc rec|iperf|progress|labchange|table ...")
	}
	if err != nil {
		fmt.Fprintf(stderr, "fwacc: %v\n", err)
		return 1
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

func usage(w io.Writer, s string) int {
	fmt.Fprintln(w, "usage:", s)
	return 2
}

// record builds one object from KEY=VALUE arguments, keeping their order.
func record(args []string) (json.RawMessage, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("rec: %q is not KEY=VALUE", a)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(value(v))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func value(v string) []byte {
	if f, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(f)
		var c bytes.Buffer
		if err == nil {
			// Some tools print more than one value or a prefix; keep the first JSON value.
			dec := json.NewDecoder(bytes.NewReader(b))
			var raw json.RawMessage
			if err = dec.Decode(&raw); err == nil {
				err = json.Compact(&c, raw)
			}
		}
		if err != nil {
			e, _ := json.Marshal(map[string]string{"unreadable": f, "error": err.Error()})
			return e
		}
		return c.Bytes()
	}
	switch v {
	case "true", "false", "null":
		return []byte(v)
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) &&
		!strings.HasPrefix(v, "+") && !strings.HasPrefix(v, ".") && !strings.HasSuffix(v, ".") &&
		!(len(v) > 1 && v[0] == '0' && v[1] != '.') {
		return []byte(v)
	}
	b, _ := json.Marshal(v)
	return b
}

// IperfSummary is what the table needs from `iperf3 -J`.
type IperfSummary struct {
	SenderBps   float64 `json:"sender_bps"`
	ReceiverBps float64 `json:"receiver_bps"` // goodput: bytes the server received / test seconds
	Bytes       float64 `json:"receiver_bytes"`
	Seconds     float64 `json:"seconds"`
	Retransmits float64 `json:"retransmits"`
	Streams     int     `json:"streams"`
	CC          string  `json:"cc,omitempty"`
	Intervals   []int   `json:"interval_mbps,omitempty"` // sender side, per interval
	Error       string  `json:"error,omitempty"`
}

func iperfSummary(b []byte) IperfSummary {
	var d struct {
		Start struct {
			TestStart struct {
				NumStreams int `json:"num_streams"`
			} `json:"test_start"`
		} `json:"start"`
		Intervals []struct {
			Sum struct {
				BPS float64 `json:"bits_per_second"`
			} `json:"sum"`
		} `json:"intervals"`
		End struct {
			Sent struct {
				BPS         float64 `json:"bits_per_second"`
				Retransmits float64 `json:"retransmits"`
				Seconds     float64 `json:"seconds"`
			} `json:"sum_sent"`
			Received struct {
				BPS   float64 `json:"bits_per_second"`
				Bytes float64 `json:"bytes"`
			} `json:"sum_received"`
			CC string `json:"sender_tcp_congestion"`
		} `json:"end"`
		Error string `json:"error"`
	}
	var s IperfSummary
	if err := json.Unmarshal(b, &d); err != nil {
		s.Error = "unreadable iperf3 output: " + err.Error()
		return s
	}
	s.SenderBps, s.ReceiverBps, s.Bytes = d.End.Sent.BPS, d.End.Received.BPS, d.End.Received.Bytes
	s.Seconds, s.Retransmits, s.Streams, s.CC = d.End.Sent.Seconds, d.End.Sent.Retransmits, d.Start.TestStart.NumStreams, d.End.CC
	for _, iv := range d.Intervals {
		s.Intervals = append(s.Intervals, int(math.Round(iv.Sum.BPS/1e6)))
	}
	s.Error = d.Error
	if s.Error == "" && s.ReceiverBps == 0 {
		s.Error = "no receiver total"
	}
	return s
}

// Sample is one timestamped progress line of `farwing copy -v`.
type Sample struct {
	T       float64 // unix seconds, stamped by the harness when the line arrived
	CurBps  float64 // goodput over the last interval (file bytes acknowledged)
	RateBps float64 // the rate controller's rate (IP bytes); 0 when absent
	SRTTms  float64
}

var progressRE = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s+\d+% \S+ \S+/\S+ \S+\s+([\d.]+) (bit|kbit|Mbit|Gbit)/s(?:\s+rate ([\d.]+) (bit|kbit|Mbit|Gbit)/s\s+srtt (\d+) ms)?`)

func unit(u string) float64 {
	switch u {
	case "kbit":
		return 1e3
	case "Mbit":
		return 1e6
	case "Gbit":
		return 1e9
	}
	return 1
}

func parseProgress(r io.Reader) []Sample {
	var out []Sample
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := progressRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var s Sample
		s.T, _ = strconv.ParseFloat(m[1], 64)
		cur, _ := strconv.ParseFloat(m[2], 64)
		s.CurBps = cur * unit(m[3])
		if m[4] != "" {
			rate, _ := strconv.ParseFloat(m[4], 64)
			s.RateBps = rate * unit(m[5])
			s.SRTTms, _ = strconv.ParseFloat(m[6], 64)
		}
		out = append(out, s)
	}
	return out
}

// ProgressSummary describes a progress trace, optionally over a window and around a change of
// the path's capacity.
type ProgressSummary struct {
	Lines     int     `json:"lines"`
	FirstT    float64 `json:"first_t,omitempty"`
	LastT     float64 `json:"last_t,omitempty"`
	WindowBps float64 `json:"window_bps,omitempty"` // file goodput over [from, to]
	WindowS   float64 `json:"window_s,omitempty"`   // the part of [from, to] the trace covers
	// Around --change T with --capacity C:
	BeforeBps       float64  `json:"rate_before_bps,omitempty"`          // controller rate, last line before T
	RateBelowS      *float64 `json:"rate_below_s,omitempty"`             // first line at or after T with rate ≤ C, minus T
	GoodputBelowS   *float64 `json:"goodput_below_s,omitempty"`          // same for the interval goodput
	MedianRateAfter float64  `json:"median_rate_after_3s_bps,omitempty"` // median controller rate from T+3 s on
	MaxRateAfter3s  float64  `json:"max_rate_after_3s_bps,omitempty"`    // highest controller rate from T+3 s on
	GoodputAfter    float64  `json:"goodput_after_bps,omitempty"`        // file goodput from T+3 s to the end
	RateSeries      []int    `json:"rate_mbps_from_change,omitempty"`    // controller rate per line from T−2 s
	GoodputSeries   []int    `json:"goodput_mbps_from_change,omitempty"`
}

func progressCmd(args []string) (ProgressSummary, error) {
	var file string
	var from, to, change, capacity float64
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			file = a
			continue
		}
		if i+1 >= len(args) {
			return ProgressSummary{}, fmt.Errorf("progress: %s needs a value", a)
		}
		v, err := strconv.ParseFloat(args[i+1], 64)
		if err != nil {
			return ProgressSummary{}, fmt.Errorf("progress: %s %q: %v", a, args[i+1], err)
		}
		i++
		switch a {
		case "--from":
			from = v
		case "--to":
			to = v
		case "--change":
			change = v
		case "--capacity":
			capacity = v
		default:
			return ProgressSummary{}, fmt.Errorf("progress: unknown flag %s", a)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return ProgressSummary{}, err
	}
	defer f.Close()
	return summarize(parseProgress(f), from, to, change, capacity), nil
}

// goodput integrates the interval goodputs over [from, to]: line i covers (t[i-1], t[i]].
func goodput(ss []Sample, from, to float64) (bps, covered float64) {
	var bits float64
	for i := 1; i < len(ss); i++ {
		a, b := max(ss[i-1].T, from), min(ss[i].T, to)
		if b > a {
			bits += ss[i].CurBps * (b - a)
			covered += b - a
		}
	}
	if covered == 0 {
		return 0, 0
	}
	return bits / covered, covered
}

func summarize(ss []Sample, from, to, change, capacity float64) ProgressSummary {
	p := ProgressSummary{Lines: len(ss)}
	if len(ss) == 0 {
		return p
	}
	p.FirstT, p.LastT = ss[0].T, ss[len(ss)-1].T
	if to > from {
		p.WindowBps, p.WindowS = goodput(ss, from, to)
	}
	if change > 0 && capacity > 0 {
		var after []float64
		for i, s := range ss {
			if s.T < change {
				if s.RateBps > 0 {
					p.BeforeBps = s.RateBps
				}
				if s.T >= change-2 {
					p.RateSeries = append(p.RateSeries, int(math.Round(s.RateBps/1e6)))
					p.GoodputSeries = append(p.GoodputSeries, int(math.Round(s.CurBps/1e6)))
				}
				continue
			}
			d := s.T - change
			if p.RateBelowS == nil && s.RateBps > 0 && s.RateBps <= capacity {
				p.RateBelowS = &d
			}
			// The first interval after the change still holds traffic from before it.
			if p.GoodputBelowS == nil && i > 0 && ss[i-1].T >= change && s.CurBps <= capacity {
				p.GoodputBelowS = &d
			}
			if d >= 3 && s.RateBps > 0 {
				p.MaxRateAfter3s = max(p.MaxRateAfter3s, s.RateBps)
				after = append(after, s.RateBps)
			}
			if d <= 15 {
				p.RateSeries = append(p.RateSeries, int(math.Round(s.RateBps/1e6)))
				p.GoodputSeries = append(p.GoodputSeries, int(math.Round(s.CurBps/1e6)))
			}
		}
		if len(after) > 0 {
			p.MedianRateAfter = median(after)
		}
		p.GoodputAfter, _ = goodput(ss, change+3, p.LastT)
	}
	return p
}

var labChangeRE = regexp.MustCompile(`lab: at \+[\d.]+s \(unix (\d+\.\d+)\)`)

func labChange(s string) (float64, bool) {
	m := labChangeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	t, err := strconv.ParseFloat(m[1], 64)
	return t, err == nil
}

func readRecords(path string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		recs = append(recs, m)
	}
	return recs, sc.Err()
}

// get walks a path of keys through nested objects.
func get(m map[string]any, keys ...string) (any, bool) {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = o[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func num(m map[string]any, keys ...string) (float64, bool) {
	v, ok := get(m, keys...)
	f, isNum := v.(float64)
	return f, ok && isNum
}

func str(m map[string]any, keys ...string) string {
	v, _ := get(m, keys...)
	s, _ := v.(string)
	return s
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mmm renders min–median–max with the given format, or the one value.
func mmm(v []float64, format string) string {
	switch len(v) {
	case 0:
		return "—"
	case 1:
		return fmt.Sprintf(format, v[0])
	}
	return fmt.Sprintf(format+"–"+format+"–"+format, slices.Min(v), median(v), slices.Max(v))
}

// verdict: "pass" when every run meets the goal, "median only" when the median does, else
// "FAIL"; with how many runs met it. Failed runs (no value) count against it.
func verdict(v []float64, ok func(float64) bool, failed int) string {
	if len(v) == 0 {
		return "**FAIL** (no successful run)"
	}
	n, all := count(v, ok), len(v)+failed
	switch {
	case n == all:
		return fmt.Sprintf("pass (%d/%d)", n, all)
	case 2*n > all: // the median run meets it
		return fmt.Sprintf("median only (%d/%d)", n, all)
	}
	return fmt.Sprintf("**FAIL** (%d/%d)", n, all)
}

func count(v []float64, ok func(float64) bool) int {
	n := 0
	for _, x := range v {
		if ok(x) {
			n++
		}
	}
	return n
}

func lossKey(r map[string]any) float64 { f, _ := num(r, "loss_pct"); return f }

func fmtLoss(l float64) string { return strconv.FormatFloat(l, 'f', -1, 64) + " %" }

// loads renders the range of 1-minute load averages seen before the measurements.
func loads(recs []map[string]any) string {
	var v []float64
	for _, r := range recs {
		if f, ok := num(r, "load1"); ok {
			v = append(v, f)
		}
	}
	if len(v) == 0 {
		return "—"
	}
	if slices.Min(v) == slices.Max(v) {
		return fmt.Sprintf("%.2f", v[0])
	}
	return fmt.Sprintf("%.2f–%.2f", slices.Min(v), slices.Max(v))
}

func sel(recs []map[string]any, test, tool string, loss float64) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if str(r, "test") == test && (tool == "" || str(r, "tool") == tool) && (loss < 0 || lossKey(r) == loss) {
			out = append(out, r)
		}
	}
	return out
}

func lossLevels(recs []map[string]any, test string) []float64 {
	var ls []float64
	for _, r := range recs {
		if str(r, "test") == test && !slices.Contains(ls, lossKey(r)) {
			ls = append(ls, lossKey(r))
		}
	}
	slices.Sort(ls)
	return ls
}

// farwingGoodput is file bytes / data seconds of a successful farwing record.
func farwingGoodput(r map[string]any) (float64, bool) {
	if rc, _ := num(r, "rc"); rc != 0 {
		return 0, false
	}
	b, ok1 := num(r, "farwing", "bytes")
	d, ok2 := num(r, "farwing", "data_seconds")
	if !ok1 || !ok2 || d <= 0 {
		return 0, false
	}
	return b * 8 / d, true
}

func iperfGoodput(r map[string]any) (float64, bool) {
	if rc, _ := num(r, "rc"); rc != 0 || str(r, "iperf", "error") != "" {
		return 0, false
	}
	return num(r, "iperf", "receiver_bps")
}

func collect(recs []map[string]any, f func(map[string]any) (float64, bool)) (v []float64, failed int) {
	for _, r := range recs {
		if x, ok := f(r); ok {
			v = append(v, x)
		} else {
			failed++
		}
	}
	return v, failed
}

func withFailed(s string, failed int) string {
	if failed > 0 {
		s += fmt.Sprintf(" (+%d failed)", failed)
	}
	return s
}

func scaled(v []float64, k float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * k
	}
	return out
}

// Goals of issue 4.
var throughputGoal = map[float64]float64{0: 362, 0.1: 360, 1: 355, 3: 350}

const (
	copyGoalS     = 6.7
	fairShareMbps = 0.30 * 400
	newCapacity   = 200e6
	baseRTT       = 0.140
	halvingRTTs   = 15
)

func table(recs []map[string]any) string {
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	w("Path: 400 Mbit/s (IP bytes), 140 ms RTT, drop-tail queue 1 BDP, random loss each way. " +
		"Cells are min–median–max over the runs; \"pass\" = every run meets the goal.\n\n")

	if ls := lossLevels(recs, "throughput"); len(ls) > 0 {
		w("### Throughput, memory to memory (goodput Mbit/s: 1 GiB `--sink`, file bytes / data_seconds; iperf3: receiver)\n\n")
		w("| loss | farwing | goal | verdict | iperf3 CUBIC | iperf3 BBR | iperf3 8×BBR | farwing > 8×BBR (median) | load1 |\n")
		w("|---|---|---|---|---|---|---|---|---|\n")
		for _, l := range ls {
			all := sel(recs, "throughput", "", l)
			fw, fwFail := collect(sel(recs, "throughput", "farwing", l), farwingGoodput)
			fw = scaled(fw, 1e-6)
			goal, hasGoal := throughputGoal[l]
			v, g := "—", "—"
			if hasGoal {
				g = fmt.Sprintf("≥ %.0f", goal)
				v = verdict(fw, func(x float64) bool { return x >= goal }, fwFail)
			}
			var ip [3][]float64
			var ipFail [3]int
			for i, tool := range []string{"iperf3 cubic", "iperf3 bbr", "iperf3 8xbbr"} {
				ip[i], ipFail[i] = collect(sel(recs, "throughput", tool, l), iperfGoodput)
				ip[i] = scaled(ip[i], 1e-6)
			}
			beat := "—"
			if len(fw) > 0 && len(ip[2]) > 0 {
				beat = fmt.Sprintf("%s (%.0f vs %.0f)", map[bool]string{true: "yes", false: "**no**"}[median(fw) > median(ip[2])], median(fw), median(ip[2]))
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", fmtLoss(l), withFailed(mmm(fw, "%.0f"), fwFail), g, v,
				withFailed(mmm(ip[0], "%.1f"), ipFail[0]), withFailed(mmm(ip[1], "%.0f"), ipFail[1]),
				withFailed(mmm(ip[2], "%.0f"), ipFail[2]), beat, loads(all))
		}
		w("\n")

		w("### Wire bytes (farwing `wire_bytes / bytes`, 1 GiB `--sink` and 256 MiB copy)\n\n")
		w("| loss | wire / bytes | limit 1 + loss + 5 %% | verdict | re-sent datagrams (sink) |\n|---|---|---|---|---|\n")
		for _, l := range ls {
			var rs []map[string]any
			rs = append(rs, sel(recs, "throughput", "farwing", l)...)
			rs = append(rs, sel(recs, "copy", "farwing", l)...)
			ratio, fail := collect(rs, func(r map[string]any) (float64, bool) {
				wb, ok1 := num(r, "farwing", "wire_bytes")
				by, ok2 := num(r, "farwing", "bytes")
				if rc, _ := num(r, "rc"); rc != 0 || !ok1 || !ok2 || by == 0 {
					return 0, false
				}
				return wb / by, true
			})
			retx, _ := collect(sel(recs, "throughput", "farwing", l), func(r map[string]any) (float64, bool) {
				return num(r, "farwing", "retransmitted")
			})
			limit := 1 + l/100 + 0.05
			w("| %s | %s | %.3f | %s | %s |\n", fmtLoss(l), withFailed(mmm(ratio, "%.3f"), fail), limit,
				verdict(ratio, func(x float64) bool { return x <= limit }, fail), mmm(retx, "%.0f"))
		}
		w("\n")
	}

	if ls := lossLevels(recs, "copy"); len(ls) > 0 {
		server, ccA, ccB := "", "", ""
		for _, r := range recs {
			if str(r, "test") != "copy" {
				continue
			}
			if x := str(r, "server"); x != "" {
				server = x
			}
			if a, b, ok := strings.Cut(str(r, "tcp_cc"), ","); ok {
				ccA, ccB = strings.TrimPrefix(a, "A:"), strings.TrimPrefix(b, "B:")
			}
		}
		scp, http := "scp", "HTTP GET (curl"
		if server != "" {
			http += " ← " + server
		}
		if ccA != "" {
			scp += " (TCP " + ccA + ")"
			http += ", TCP " + ccB
		}
		http += ")"
		w("### Copy time, 256 MiB random file disk to disk (whole command wall clock, s; peer installed)\n\n")
		w("| loss | farwing | goal | verdict | %s | %s | load1 |\n|---|---|---|---|---|---|---|\n", scp, http)
		for _, l := range ls {
			fwRecs := sel(recs, "copy", "farwing", l)
			fw, fail := collect(fwRecs, func(r map[string]any) (float64, bool) {
				if rc, _ := num(r, "rc"); rc != 0 {
					return 0, false
				}
				return num(r, "seconds")
			})
			w("| %s | %s | ≤ %.1f | %s | %s | %s | %s |\n", fmtLoss(l), withFailed(mmm(fw, "%.2f"), fail), copyGoalS,
				verdict(fw, func(x float64) bool { return x <= copyGoalS }, fail),
				copyCell(sel(recs, "copy", "scp", l)), copyCell(sel(recs, "copy", "http", l)), loads(sel(recs, "copy", "", l)))
		}
		w("\n")
	}

	if fr := sel(recs, "fairness", "", -1); len(fr) > 0 {
		fw, fwFail := collect(fr, func(r map[string]any) (float64, bool) {
			x, ok := num(r, "progress", "window_bps")
			return x / 1e6, ok && x > 0
		})
		cu, cuFail := collect(fr, func(r map[string]any) (float64, bool) {
			x, ok := iperfGoodput(r)
			return x / 1e6, ok && x > 0
		})
		ov, _ := collect(fr, func(r map[string]any) (float64, bool) { return num(r, "progress", "window_s") })
		w("### Fairness: farwing (`--sink`) with one competing iperf3 CUBIC flow, no random loss (goodput Mbit/s over the overlap)\n\n")
		w("| farwing | iperf3 CUBIC | sum | goal (each) | verdict farwing | verdict CUBIC | overlap s | load1 |\n|---|---|---|---|---|---|---|---|\n")
		var sum []float64
		for i := range min(len(fw), len(cu)) {
			sum = append(sum, fw[i]+cu[i])
		}
		ok := func(x float64) bool { return x >= fairShareMbps }
		w("| %s | %s | %s | ≥ %.0f | %s | %s | %s | %s |\n\n", withFailed(mmm(fw, "%.0f"), fwFail), withFailed(mmm(cu, "%.0f"), cuFail),
			mmm(sum, "%.0f"), fairShareMbps, verdict(fw, ok, fwFail), verdict(cu, ok, cuFail), mmm(ov, "%.1f"), loads(fr))
	}

	if hr := sel(recs, "halving", "", -1); len(hr) > 0 {
		var below []float64
		missing := 0
		for _, r := range hr {
			if x, ok := num(r, "progress", "rate_below_s"); ok {
				below = append(below, x)
			} else {
				missing++
			}
		}
		intact := 0
		for _, r := range hr {
			if rc, ok := num(r, "rc"); ok && rc == 0 {
				intact++
			}
		}
		after, _ := collect(hr, func(r map[string]any) (float64, bool) {
			x, ok := num(r, "progress", "goodput_after_bps")
			return x / 1e6, ok
		})
		medAfter, _ := collect(hr, func(r map[string]any) (float64, bool) {
			x, ok := num(r, "progress", "median_rate_after_3s_bps")
			return x / 1e6, ok
		})
		maxAfter, _ := collect(hr, func(r map[string]any) (float64, bool) {
			x, ok := num(r, "progress", "max_rate_after_3s_bps")
			return x / 1e6, ok
		})
		gp, _ := collect(hr, farwingGoodput)
		belowCell := mmm(below, "%.2f")
		if missing > 0 {
			belowCell += fmt.Sprintf(" (%d runs never below)", missing)
		}
		limit := halvingRTTs * baseRTT
		v := verdict(below, func(x float64) bool { return x <= limit }, missing)
		at := str(hr[0], "at")
		if at == "" {
			at = "8s:rate=200M"
		}
		w("### Capacity halved mid-transfer (1 GiB `--sink` at 400 Mbit/s; lab `--at %s`, counted from the command's start)\n\n", at)
		w("| time until farwing's rate ≤ 200 Mbit/s (s) | in 140 ms RTTs | goal | verdict | rate from +3 s, median / max (Mbit/s) | goodput from +3 s (Mbit/s) | whole-transfer goodput | completed intact | load1 |\n")
		w("|---|---|---|---|---|---|---|---|---|\n")
		w("| %s | %s | ≤ %.1f s (15 RTTs) | %s | %s / %s | %s | %s | %d/%d | %s |\n\n", belowCell, mmm(scaled(below, 1/baseRTT), "%.1f"), limit, v,
			mmm(medAfter, "%.0f"), mmm(maxAfter, "%.0f"), mmm(after, "%.0f"), mmm(scaled(gp, 1e-6), "%.0f"), intact, len(hr), loads(hr))
	}
	return b.String()
}

// copyCell renders the baselines, which may stall or be skipped after a stall.
func copyCell(rs []map[string]any) string {
	if len(rs) == 0 {
		return "—"
	}
	var done []float64
	stalled, skipped, failed := 0, 0, 0
	var stallMiB []float64
	var limit float64
	for _, r := range rs {
		switch {
		case str(r, "skipped") != "":
			skipped++
		case r["stalled"] == true:
			stalled++
			x, _ := num(r, "bytes_done")
			stallMiB = append(stallMiB, x/(1<<20))
			limit, _ = num(r, "limit_s")
		default:
			if rc, _ := num(r, "rc"); rc != 0 || r["intact"] == false {
				failed++
				continue
			}
			x, _ := num(r, "seconds")
			done = append(done, x)
		}
	}
	var parts []string
	if len(done) > 0 {
		parts = append(parts, mmm(done, "%.1f"))
	}
	if stalled > 0 {
		s := fmt.Sprintf("stalled ×%d (%s MiB in %.0f s", stalled, mmm(stallMiB, "%.1f"), limit)
		if skipped > 0 {
			s += fmt.Sprintf("; %d later runs skipped", skipped)
		}
		parts = append(parts, s+")")
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", failed))
	}
	return strings.Join(parts, "; ")
}

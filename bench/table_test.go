package bench

import (
	"strings"
	"testing"
)

func ok(v float64) Sample  { return Sample{Outcome: OK, Mbps: v, Seconds: v} }
func not(o Outcome) Sample { return Sample{Outcome: o} }

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		name string
		kind Kind
		runs []Sample
		want string
	}{
		// Median with the fastest and slowest beside it; copies rank by fewest seconds.
		{"three copies", Copy, []Sample{ok(2.3), ok(2.1), ok(2.35)}, "2.3 s 2.1–2.4 s"},
		{"three streams", Throughput, []Sample{ok(11536), ok(10837), ok(11498)}, "11,498 10,837–11,536"},
		// The slowest run stalled: the median is still a result, the range ends in stalled.
		{"slowest stalled", Copy, []Sample{ok(4.1), ok(2.4), not(Stalled)}, "4.1 s 2.4 s–stalled"},
		// The median run stalled (the others were skipped after it, or it stalled second).
		{"first stalled, rest skipped", Copy, []Sample{not(Stalled), not(Skipped), not(Skipped)}, "stalled"},
		{"two stalled", Copy, []Sample{ok(62), not(Stalled), not(Skipped)}, "stalled"},
		// A wrong file is a failed run, never a time, and outranks a stall.
		{"one failed", Copy, []Sample{ok(3), ok(2), not(Failed)}, "3.0 s 2.0 s–failed"},
		{"median failed", Copy, []Sample{ok(3), not(Stalled), not(Failed)}, "failed"},
		// An even number of runs: the mean of the middle two, or not a result.
		{"four", Throughput, []Sample{ok(10), ok(20), ok(30), ok(40)}, "25 10–40"},
		{"four, one stalled", Copy, []Sample{ok(1), ok(2), ok(3), not(Stalled)}, "2.5 s 1.0 s–stalled"},
		{"four, two stalled", Copy, []Sample{ok(1), ok(2), not(Stalled), not(Skipped)}, "stalled"},
		{"one run", Throughput, []Sample{ok(491)}, "491"},
		{"small rates", Throughput, []Sample{ok(0.6), ok(0.5), ok(0.7)}, "0.6 0.5–0.7"},
		{"unavailable", Throughput, []Sample{{Outcome: Unavailable, Error: "no tcp_bbr"}}, "unavailable"},
		{"none", Throughput, nil, "skipped"},
	} {
		if got := Summarize(c.kind, c.runs).Text(c.kind); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if c := Summarize(Throughput, []Sample{{Outcome: Unavailable, Error: "no tcp_bbr"}}); c.Reason != "no tcp_bbr" {
		t.Errorf("unavailable reason %q", c.Reason)
	}
}

func TestSkipRest(t *testing.T) {
	if SkipRest([]Sample{ok(1), not(Failed)}) {
		t.Error("a failure is no reason to skip: the next run may work")
	}
	if !SkipRest([]Sample{ok(1), not(Stalled)}) {
		t.Error("after a stall the remaining runs are skipped")
	}
}

func TestSpeedup(t *testing.T) {
	cell := func(kind Kind, v ...float64) Cell {
		var runs []Sample
		for _, x := range v {
			runs = append(runs, ok(x))
		}
		return Summarize(kind, runs)
	}
	for _, c := range []struct {
		kind     Kind
		fw, that Cell
		want     string
	}{
		{Throughput, cell(Throughput, 11498), cell(Throughput, 10828), "1.0×"},
		{Throughput, cell(Throughput, 11431), cell(Throughput, 9945), "1.1×"},
		{Throughput, cell(Throughput, 11274), cell(Throughput, 1403), "8.0×"},
		{Throughput, cell(Throughput, 11015), cell(Throughput, 491), "22×"},
		{Throughput, cell(Throughput, 12), cell(Throughput, 10), "1.2×"}, // exactly 1.2 stays 1.2
		{Copy, cell(Copy, 2.3), cell(Copy, 82), "35×"},                   // copies: the other's time over Farwing's
		{Copy, cell(Copy, 2.3), cell(Copy, 4.0), "1.7×"},
		{Copy, cell(Copy, 2.3), Summarize(Copy, []Sample{not(Stalled)}), "–"},
	} {
		if got := Speedup(c.kind, c.fw, c.that); got != c.want {
			t.Errorf("%v over %v: %s, want %s", c.fw.Median, c.that.Median, got, c.want)
		}
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[float64]string{11498.4: "11,498", 1263: "1,263", 491: "491", 25: "25", 9.96: "10", 9.7: "9.7",
		1.5: "1.5", 0.6: "0.6", 0.05: "0.05", 0: "0", 1234567: "1,234,567"} {
		if got := Number(v); got != want {
			t.Errorf("Number(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestSelectRows(t *testing.T) {
	rows, err := SelectRows("farwing, tcp-bbr,scp")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, TableName(r.Kind)+":"+r.ID)
	}
	if want := "throughput:farwing throughput:tcp-bbr copy:farwing copy:scp"; strings.Join(got, " ") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
	if _, err := SelectRows("farwing,ftp"); err == nil || !strings.Contains(err.Error(), `"ftp"`) {
		t.Errorf("unknown row: %v", err)
	}
	if all, _ := SelectRows(""); len(all) != len(Rows) {
		t.Errorf("empty list: %d rows, want all %d", len(all), len(Rows))
	}
}

// TestMarkdown renders both tables from hand-made samples in the published layout.
func TestMarkdown(t *testing.T) {
	var samples []Sample
	add := func(table, row, level string, runs ...Sample) {
		for i, s := range runs {
			s.Table, s.Row, s.Level, s.Run = table, row, level, i+1
			samples = append(samples, s)
		}
	}
	add("throughput", "farwing", "None", ok(11498), ok(10837), ok(11536))
	add("throughput", "tcp-8bbr", "None", ok(10828), ok(10816), ok(10992))
	add("throughput", "tcp-bbr", "None", ok(4152), ok(4036), ok(4179))
	add("throughput", "farwing", "3%", ok(11015), ok(10493), ok(11352))
	add("throughput", "tcp-8bbr", "3%", ok(8028), ok(7556), ok(8275))
	add("throughput", "tcp-bbr", "3%", Sample{Outcome: Unavailable, Error: "tcp_bbr not loaded"})
	add("copy", "farwing", "None", ok(2.3), ok(2.1), ok(2.3))
	add("copy", "scp", "None", ok(82), ok(80), ok(96))
	add("copy", "farwing", "3%", ok(4.7), ok(3.4), ok(6.1))
	add("copy", "scp", "3%", not(Stalled), not(Skipped), not(Skipped))
	rows, _ := SelectRows("farwing,tcp-8bbr,tcp-bbr,scp")
	levels := []string{"None", "3%"}
	want := `| Added loss | Farwing | 8 × TCP BBR | TCP BBR | vs 8× BBR | vs BBR |
|---|---|---|---|---|---|
| None | 11,498 10,837–11,536 | 10,828 10,816–10,992 | 4,152 4,036–4,179 | 1.0× | 2.7× |
| 3% | 11,015 10,493–11,352 | 8,028 7,556–8,275 | unavailable | 1.3× | – |
`
	if got := Markdown(Throughput, "Added loss", rows, levels, samples); got != want {
		t.Errorf("throughput table:\n%s\nwant:\n%s", got, want)
	}
	want = `| Added loss | Farwing | scp |
|---|---|---|
| None | 2.3 s 2.1–2.3 s | 82 s 80–96 s |
| 3% | 4.7 s 3.4–6.1 s | stalled |
`
	if got := Markdown(Copy, "Added loss", rows, levels, samples); got != want {
		t.Errorf("copy table:\n%s\nwant:\n%s", got, want)
	}
}

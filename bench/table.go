// Package bench is `farwing bench`: the rows it measures, the samples and ledger they leave, and
// the published table's rules for turning samples into cells (../shared/reference/
// published-results.md): the median with the fastest and slowest run beside it, "stalled" when
// the median run did not finish, a range ending in "stalled" when the slowest did not, and
// speed-ups of Farwing's median over the other tool's, rounded down.
package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind says which table a row belongs to.
type Kind uint8

const (
	Throughput Kind = iota // memory to memory for a duration: Mbit/s of useful data, higher is better
	Copy                   // disk to disk, start of command to checked file: seconds, lower is better
	Fairness               // lab only: Farwing and one TCP CUBIC flow sharing the path (FairnessRun)
	Halving                // lab only: the path's rate halved under a copy (HalvingRun)
)

// Row is one tool measured by the bench.
type Row struct {
	ID    string // what --rows names
	Title string // the table's column heading
	Kind  Kind
}

// Rows are every row the bench can measure, in the published tables' column order.
var Rows = []Row{
	{"farwing", "Farwing", Throughput},
	{"tcp-8bbr", "8 × TCP BBR", Throughput},
	{"tcp-bbr", "TCP BBR", Throughput},
	{"tcp-cubic", "TCP CUBIC", Throughput},
	{"tcp", "TCP, default", Throughput},
	{"farwing", "Farwing", Copy},
	{"farwing-first", "Farwing, first copy", Copy},
	{"http", "HTTP", Copy},
	{"scp", "scp", Copy},
}

// LabRows are the rows only `farwing bench --lab` measures, because they work the emulated path
// itself: one shares it with a TCP CUBIC flow of the bench's, one halves its rate under a copy,
// and one blocks UDP on it (Farwing's fallback to TCP streams, in the copy table beside scp and
// HTTP, at every loss level). They are never in the default set.
var LabRows = []Row{
	{"fairness", "Fairness", Fairness},
	{"halving", "Capacity halved", Halving},
	{"farwing-tcp", "Farwing, TCP fallback", Copy},
}

// SelectRows returns the rows a --rows list names (comma separated IDs; "farwing" is both
// Farwing rows), or all rows but the lab rows for an empty list.
func SelectRows(list string) ([]Row, error) {
	if strings.TrimSpace(list) == "" {
		return slices.Clone(Rows), nil
	}
	all := append(slices.Clone(Rows), LabRows...)
	want := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		id = strings.TrimSpace(strings.ToLower(id))
		if !slices.ContainsFunc(all, func(r Row) bool { return r.ID == id }) {
			var ids []string
			for _, r := range all {
				if !slices.Contains(ids, r.ID) {
					ids = append(ids, r.ID)
				}
			}
			return nil, fmt.Errorf("--rows: no row %q; the rows are %s", id, strings.Join(ids, ", "))
		}
		want[id] = true
	}
	var rows []Row
	for _, r := range all {
		if want[r.ID] {
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// Name is the row's name in a ledger ("throughput:farwing").
func (r Row) Name() string { return TableName(r.Kind) + ":" + r.ID }

// IsLab reports whether r is one of the LabRows.
func (r Row) IsLab() bool { return slices.Contains(LabRows, r) }

// EveryLevel reports whether a lab row runs at each of the lab's loss levels (the copy table's
// rows), not only on the path without loss.
func (r Row) EveryLevel() bool { return r.IsLab() && r.Kind == Copy }

// Outcome is how one run ended.
type Outcome string

const (
	OK          Outcome = "ok"
	Stalled     Outcome = "stalled"     // no checked result within the time limit
	Failed      Outcome = "failed"      // an error, or a wrong file: never a time
	Skipped     Outcome = "skipped"     // not run: an earlier run of the row stalled at this level
	Unavailable Outcome = "unavailable" // the row cannot run on this path (Error says why)
	Never       Outcome = "never"       // halving: the rate did not come down to the capacity while data flowed
)

// Cell is what the table shows for one row at one level.
type Cell struct {
	Outcome             Outcome // OK: Median is a result; otherwise the median run's outcome
	Median, Best, Worst float64 // Mbit/s or seconds; Best and Worst of the runs that finished
	WorstOutcome        Outcome // OK, or how the slowest run ended when it did not finish
	Runs, Finished      int
	Reason              string // for Unavailable: why
}

// Summarize applies the published rules to the runs of one row at one level. Runs that did not
// finish (stalled, failed or skipped) rank below every finished run; with an even number of
// runs the median is the mean of the middle two, or the worse of them when one did not finish.
func Summarize(kind Kind, runs []Sample) Cell {
	c := Cell{Runs: len(runs), Outcome: Stalled, WorstOutcome: OK}
	if len(runs) == 0 {
		c.Outcome = Skipped
		return c
	}
	if i := slices.IndexFunc(runs, func(s Sample) bool { return s.Outcome == Unavailable }); i >= 0 {
		c.Outcome, c.Reason = Unavailable, runs[i].Error
		return c
	}
	var done []float64
	worst := OK
	for _, s := range runs {
		if s.Outcome == OK {
			done = append(done, s.Value(kind))
			continue
		}
		// A failure outranks a stall: a wrong file is worse news than a slow one.
		if worst == OK || s.Outcome == Failed {
			worst = s.Outcome
		}
	}
	if worst == Skipped {
		worst = Stalled // only a stall causes skips
	}
	c.Finished = len(done)
	slices.SortFunc(done, func(a, b float64) int { return compare(kind, a, b) })
	if len(done) > 0 {
		c.Best, c.Worst = done[0], done[len(done)-1]
	}
	c.WorstOutcome = worst
	n := len(runs)
	mid := (n - 1) / 2 // ranks mid (and mid+1 for even n) in best-first order
	switch {
	case n%2 == 1 && mid < len(done):
		c.Outcome, c.Median = OK, done[mid]
	case n%2 == 0 && mid+1 < len(done):
		c.Outcome, c.Median = OK, (done[mid]+done[mid+1])/2
	default:
		c.Outcome = worst
	}
	return c
}

// compare orders results best first: higher Mbit/s, fewer seconds.
func compare(kind Kind, a, b float64) int {
	if kind == Throughput {
		a, b = b, a
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SkipRest reports whether the remaining runs of a row at a level are skipped: once one of them
// stalled, the others would stall too and only cost the limit again.
func SkipRest(runs []Sample) bool {
	return slices.ContainsFunc(runs, func(s Sample) bool { return s.Outcome == Stalled })
}

// Speedup is Farwing's median over another tool's (for copies, the other's time over Farwing's),
// rounded down: one decimal below 10, whole numbers above, as "2.7×" or "22×". It is "–" unless
// both medians are results.
func Speedup(kind Kind, farwing, other Cell) string {
	if farwing.Outcome != OK || other.Outcome != OK || farwing.Median <= 0 || other.Median <= 0 {
		return "–"
	}
	r := farwing.Median / other.Median
	if kind == Copy {
		r = other.Median / farwing.Median
	}
	if r >= 10 {
		return strconv.FormatFloat(math.Floor(r), 'f', 0, 64) + "×"
	}
	// The epsilon keeps 1.2 / 1.0 (1.1999…) from flooring to 1.1.
	return strconv.FormatFloat(math.Floor(r*10+1e-9)/10, 'f', 1, 64) + "×"
}

// Number formats a value as the published tables do: whole numbers with thousands separators
// from 10 up, one decimal from 0.1, two significant digits below.
func Number(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "?"
	case v >= 9.95:
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	case v >= 0.095:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v <= 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// Text renders a cell: "11,498 10,837–11,536" (Mbit/s) or "2.3 s 2.1–2.3 s", "4.1 s 2.4 s–stalled",
// "stalled", "unavailable".
func (c Cell) Text(kind Kind) string {
	if kind == Copy {
		return c.textIn(" s")
	}
	return c.textIn("")
}

// textIn renders a cell with unit after each figure ("" for none).
func (c Cell) textIn(unit string) string {
	switch c.Outcome {
	case OK:
	case Unavailable, Skipped, Stalled, Failed, Never:
		return string(c.Outcome)
	default:
		return "?"
	}
	s := Number(c.Median) + unit
	switch {
	case c.Runs == 1:
		return s
	case c.WorstOutcome != OK:
		return s + " " + Number(c.Best) + unit + "–" + string(c.WorstOutcome)
	}
	lo, hi := min(c.Best, c.Worst), max(c.Best, c.Worst)
	return s + " " + Number(lo) + "–" + Number(hi) + unit
}

// Sample is one run of one row at one level, as the ledger keeps it.
type Sample struct {
	Row      string         `json:"row"`
	Table    string         `json:"table"` // "throughput" or "copy"
	Level    string         `json:"level"`
	Run      int            `json:"run"`
	Outcome  Outcome        `json:"outcome"`
	Mbps     float64        `json:"mbit_s,omitempty"`  // throughput rows: useful bits per second / 1e6
	Seconds  float64        `json:"seconds,omitempty"` // copy rows: start of command to checked file
	Error    string         `json:"error,omitempty"`
	Start    time.Time      `json:"start"`
	End      time.Time      `json:"end"`
	Commands [][]string     `json:"commands,omitempty"` // every command run for it, either side
	Detail   map[string]any `json:"detail,omitempty"`   // the row's evidence (cc used, retransmits, wire bytes…)
	// The lab rows' figures (see labstats.go for how each is measured).
	Fairness *FairnessRun `json:"fairness,omitempty"`
	Halving  *HalvingRun  `json:"halving,omitempty"`
}

// Value is the sample's result in its table's unit.
func (s Sample) Value(kind Kind) float64 {
	if kind == Copy {
		return s.Seconds
	}
	return s.Mbps
}

// TableName is the ledger's name for a kind of row.
func TableName(kind Kind) string {
	switch kind {
	case Copy:
		return "copy"
	case Fairness:
		return "fairness"
	case Halving:
		return "halving"
	}
	return "throughput"
}

// speedupTitle heads the speed-up columns, as published: Farwing over these rows.
var speedupTitle = map[string]string{"tcp-8bbr": "8× BBR", "tcp-bbr": "BBR"}

// Markdown renders one table in the published layout: a line per level (first column levelTitle,
// e.g. "Added loss"), a column per row of the kind, then, for throughput, Farwing's speed-up over
// 8 × TCP BBR and over TCP BBR where those rows were measured.
func Markdown(kind Kind, levelTitle string, rows []Row, levels []string, samples []Sample) string {
	var cols []Row
	for _, r := range rows {
		if r.Kind == kind {
			cols = append(cols, r)
		}
	}
	if len(cols) == 0 {
		return ""
	}
	var speedups []Row
	if kind == Throughput && cols[0].ID == "farwing" {
		for _, r := range cols[1:] {
			if speedupTitle[r.ID] != "" {
				speedups = append(speedups, r)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| " + levelTitle)
	for _, r := range cols {
		b.WriteString(" | " + r.Title)
	}
	for _, r := range speedups {
		b.WriteString(" | vs " + speedupTitle[r.ID])
	}
	b.WriteString(" |\n|---")
	b.WriteString(strings.Repeat("|---", len(cols)+len(speedups)))
	b.WriteString("|\n")
	name := TableName(kind)
	for _, lv := range levels {
		cells := map[string]Cell{}
		b.WriteString("| " + lv)
		for _, r := range cols {
			var runs []Sample
			for _, s := range samples {
				if s.Table == name && s.Row == r.ID && s.Level == lv {
					runs = append(runs, s)
				}
			}
			c := Summarize(kind, runs)
			cells[r.ID] = c
			b.WriteString(" | " + c.Text(kind))
		}
		for _, r := range speedups {
			b.WriteString(" | " + Speedup(kind, cells["farwing"], cells[r.ID]))
		}
		b.WriteString(" |\n")
	}
	return b.String()
}

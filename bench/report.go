package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/units"
)

// TableSettings are what the tables' headings state beyond the ledger's own fields: the lab's
// settings, which only the bench's command line records (the report reads them back from the
// ledger's Argv with the bench's own flags).
type TableSettings struct {
	Lab          bool          // the levels are the lab's loss levels: the first column is "Added loss"
	LabRateBps   float64       // --lab-rate
	LabRTT       time.Duration // --lab-rtt
	FairDuration time.Duration // --fair-duration
	HalveSize    int64         // --halve-size
	HalveAt      time.Duration // --halve-at
}

// WriteTables writes the tables `farwing bench` prints at the end of a run, in the published
// layout, from its ledger: throughput with the levels' notes under it, copies, and the lab rows;
// then a line saying so when the ledger is incomplete. The live bench and --report both print
// through it, so a report shows exactly what the run printed.
func WriteTables(w io.Writer, l *Ledger, s TableSettings) {
	rows := ledgerRows(l.Rows)
	var levels []string
	var notes []string
	for _, lv := range l.Levels {
		levels = append(levels, lv.Name)
		for _, n := range lv.Notes {
			notes = append(notes, lv.Name+": "+n)
		}
	}
	title := "Path"
	if s.Lab {
		title = "Added loss"
	}
	dir := "to " + l.Host
	if l.Direction == "pull" {
		dir = "from " + l.Host
	}
	duration, limit := seconds(l.Duration), seconds(l.Limit)
	if t := Markdown(Throughput, title, rows, levels, l.Samples); t != "" {
		fmt.Fprintf(w, "Throughput %s\n\nMbit/s of useful data. %s runs, median of %d, with the slowest and fastest run beside it.\n\n%s",
			dir, duration, l.Runs, t)
		for _, n := range notes {
			fmt.Fprintf(w, "\n%s\n", n)
		}
		fmt.Fprintln(w)
	}
	if t := Markdown(Copy, title, rows, levels, l.Samples); t != "" {
		fmt.Fprintf(w, "%s copy %s, start of command to checked file\n\nDisk to disk, %s limit per run, median of %d.\n\n%s\n",
			units.Size(l.Size), dir, limit, l.Runs, t)
	}
	path := fmt.Sprintf("%s Mbit/s, %s, no random loss", Number(s.LabRateBps/1e6), s.LabRTT)
	if t := FairnessMarkdown(l.Samples); t != "" {
		fmt.Fprintf(w, "Fairness: Farwing (--sink) and one TCP CUBIC flow sharing the lab's path (%s)\n\n"+
			"Goodput in Mbit/s over the %s the CUBIC flow ran, median of %d, with the slowest and fastest run beside it.\n\n%s\n",
			path, s.FairDuration, l.Runs, t)
	}
	if t := HalvingMarkdown(l.Samples); t != "" {
		fmt.Fprintf(w, "Capacity halved: a %s --sink copy (%s); %s after it starts the lab's rate is halved\n\n"+
			"Farwing's sending rate as it reaches the link, per base round trip; median of %d, with the slowest and fastest run beside it.\n\n%s\n",
			units.Size(s.HalveSize), path, s.HalveAt, l.Runs, t)
	}
	if !l.Complete {
		fmt.Fprintf(w, "Incomplete: %s.\n", l.Error)
	}
}

// ledgerRows are the rows a ledger's Rows names ("throughput:farwing"), in its order; names this
// build does not know are left out (ReadLedger refuses them).
func ledgerRows(names []string) []Row {
	var rows []Row
	for _, n := range names {
		if r, ok := rowNamed(n); ok {
			rows = append(rows, r)
		}
	}
	return rows
}

func rowNamed(name string) (Row, bool) {
	for _, rows := range [][]Row{Rows, LabRows} {
		for _, r := range rows {
			if r.Name() == name {
				return r, true
			}
		}
	}
	return Row{}, false
}

// seconds is a ledger's duration in seconds as the flag that set it prints.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// A ledger ReadLedger reads is bounded before and after it is decoded, so that a file someone
// hands over cannot take the memory or the CPU: a 40-minute lab bench writes about 0.2 MB with
// under 1,000 objects and arrays (its lab rows' ledger 1.5 MB, about 150), 4 levels and under
// 100 samples, and the largest bench the flags allow (100 runs of every row at many levels) stays
// far inside these. Decoded, 3 bytes of JSON ("{},") become a 200-byte Sample: the count of
// objects and arrays is what bounds the memory, the count of samples and levels what bounds the
// tables' work (Markdown reads every sample for each cell).
const (
	MaxLedger        = 16 << 20 // bytes
	maxLedgerValues  = 1 << 18  // JSON objects and arrays ('{' and '[', strings' included)
	maxLedgerLevels  = 256
	maxLedgerSamples = 1 << 17
)

// ReadLedger reads a ledger that `farwing bench --json` wrote, for a report. It refuses a file
// that cannot be read, is not a ledger or is of another Schema, and a ledger whose tables cannot
// be shown as they were (a row this build does not know). Every string of the ledger is escaped
// (escape.Text: one printable line) before it is returned: the file may come from anyone. A
// ledger that is not Complete is returned; the report says so in its header.
func ReadLedger(name string) (*Ledger, error) {
	what := "ledger " + escape.Text(name)
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read it: %v", what, pathError(err))
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxLedger+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: cannot read it: %v", what, pathError(err))
	case len(raw) > MaxLedger:
		return nil, fmt.Errorf("%s: larger than %s, not a bench ledger", what, units.Size(MaxLedger))
	}
	if n := bytes.Count(raw, []byte("{")) + bytes.Count(raw, []byte("[")); n > maxLedgerValues {
		return nil, fmt.Errorf("%s: more than %d JSON objects and arrays, not a bench ledger", what, maxLedgerValues)
	}
	// One decode; the header alone is read again only to say why a file is not a ledger of this
	// schema.
	var l Ledger
	err = json.Unmarshal(raw, &l)
	if err != nil || l.Schema != Schema {
		var head struct {
			Schema *int `json:"schema"`
		}
		if json.Unmarshal(raw, &head) != nil || head.Schema == nil {
			return nil, fmt.Errorf("%s: not a bench ledger (a JSON object with a schema, as --json writes)", what)
		}
		if *head.Schema != Schema {
			return nil, fmt.Errorf("%s: schema %d; this farwing reads bench ledgers of schema %d", what, *head.Schema, Schema)
		}
		return nil, fmt.Errorf("%s: not a bench ledger of schema %d: %s", what, Schema, escape.Text(err.Error()))
	}
	switch {
	case len(l.Levels) > maxLedgerLevels:
		return nil, fmt.Errorf("%s: %d levels; a bench ledger has at most %d", what, len(l.Levels), maxLedgerLevels)
	case len(l.Samples) > maxLedgerSamples:
		return nil, fmt.Errorf("%s: %d samples; a bench ledger has at most %d", what, len(l.Samples), maxLedgerSamples)
	}
	clean(reflect.ValueOf(&l).Elem())
	seen := map[string]bool{}
	for _, r := range l.Rows {
		if _, ok := rowNamed(r); !ok {
			return nil, fmt.Errorf("%s: it names a row this farwing does not know, %s", what, escape.Quote(r))
		}
		if seen[r] {
			return nil, fmt.Errorf("%s: it names the row %s twice", what, escape.Quote(r))
		}
		seen[r] = true
	}
	return &l, nil
}

// pathError is err without the path an *os.PathError repeats.
func pathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return escape.Text(err.Error())
}

// clean escapes every string reachable from v (structs, slices, arrays, pointers and maps of
// them) with escape.Text, so that nothing of an untrusted ledger moves a terminal's cursor or
// starts a line of its own. Text leaves printable text as it is, so a ledger the bench wrote
// (whose remote strings it escaped already) prints exactly as the bench printed it.
func clean(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(escape.Text(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			if v.Kind() == reflect.Interface {
				// An interface's value cannot be set in place: clean a copy and put it back.
				c := reflect.New(e.Type()).Elem()
				c.Set(e)
				clean(c)
				v.Set(c)
				return
			}
			clean(e)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				clean(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			clean(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			clean(e)
			v.SetMapIndex(k, e)
		}
	}
}

// Report writes what `farwing bench --report` prints for a ledger read by ReadLedger: a header
// of the facts the ledger holds (WriteHeader), then the tables exactly as the bench printed them
// at the end of its run (WriteTables).
func Report(w io.Writer, l *Ledger, s TableSettings) {
	WriteHeader(w, l)
	fmt.Fprintln(w)
	WriteTables(w, l, s)
}

// WriteHeader writes a report's header, in Markdown: whether the ledger is complete (only when it
// is not), the bench's command line, when it ran (UTC), the path, direction, runs and the
// duration and size of the kinds of row it measured, both ends' facts (hostinfo.Facts), the load
// averages its samples recorded, and what Farwing measured of the path at each level.
func WriteHeader(w io.Writer, l *Ledger) {
	if !l.Complete {
		fmt.Fprintf(w, "**Incomplete ledger** (%s): the tables hold only the runs that finished.\n\n", orNone(l.Error))
	}
	fmt.Fprintf(w, "%s\n\n", code(shellLine(l.Argv)))
	fmt.Fprintf(w, "- When: %s\n", span(l.Started, l.Ended))
	dir := "push: this end sends to the host"
	if l.Direction == "pull" {
		dir = "pull: the host sends to this end"
	} else if l.Direction != "push" {
		dir = l.Direction
	}
	fmt.Fprintf(w, "- Path: %s; %s\n", l.Host, dir)
	runs := fmt.Sprintf("- Runs: %d of each row at each level", l.Runs)
	rows := ledgerRows(l.Rows)
	if slices.ContainsFunc(rows, func(r Row) bool { return r.Kind == Throughput }) {
		runs += fmt.Sprintf("; throughput runs of %s", seconds(l.Duration))
	}
	if slices.ContainsFunc(rows, func(r Row) bool { return r.Kind == Copy }) {
		runs += fmt.Sprintf("; copies of %s, limit %s each", units.Size(l.Size), seconds(l.Limit))
	}
	fmt.Fprintln(w, runs)
	if len(l.CopyFlags) > 0 {
		fmt.Fprintf(w, "- Farwing's copies also had: %s\n", code(shellLine(l.CopyFlags)))
	}
	fmt.Fprintf(w, "- Client (this end): %s\n", facts(l.Client))
	fmt.Fprintf(w, "- Server (the host): %s\n", facts(l.Server))
	if load := loads(l.Samples); load != "" {
		fmt.Fprintf(w, "- 1-minute load average before each run: %s\n", load)
	}
	for _, lv := range l.Levels {
		fmt.Fprintf(w, "- Level %s: %s\n", lv.Name, levelFacts(lv))
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// plainArg is an argument a shell takes as it is.
var plainArg = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellLine is argv as one shell command line, each argument quoted where it needs it.
func shellLine(argv []string) string {
	if len(argv) == 0 {
		return "(no command line recorded)"
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		if plainArg.MatchString(a) {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// code is s as a Markdown code span: fenced by one backtick more than the longest run of them in s.
func code(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// span is "2026-12-04 22:18:09 – 22:56:40 UTC (38m31s)", with the second date when it differs.
func span(from, to time.Time) string {
	from, to = from.UTC(), to.UTC()
	if from.IsZero() {
		return "not recorded"
	}
	s := from.Format("2006-01-02 15:04:05")
	if to.IsZero() || to.Before(from) {
		return s + " UTC"
	}
	end := to.Format("15:04:05")
	if to.Format("2006-01-02") != from.Format("2006-01-02") {
		end = to.Format("2006-01-02 15:04:05")
	}
	return fmt.Sprintf("%s – %s UTC (%s)", s, end, to.Sub(from).Round(time.Second))
}

// facts is one end's hostinfo.Facts on a line.
func facts(f hostinfo.Facts) string {
	var parts []string
	add := func(format string, a ...any) { parts = append(parts, fmt.Sprintf(format, a...)) }
	if f.CPU != "" {
		add("%s", f.CPU)
	}
	if f.Cores > 0 {
		add("%d cores", f.Cores)
	}
	if f.MemBytes > 0 {
		add("%s memory", units.Size(f.MemBytes))
	}
	if f.OS != "" || f.Arch != "" {
		add("%s/%s", f.OS, f.Arch)
	}
	if f.Kernel != "" {
		add("kernel %s", f.Kernel)
	}
	if f.Hostname != "" {
		add("host name %s", f.Hostname)
	}
	if f.OpenSSH != "" {
		add("%s", f.OpenSSH)
	}
	if f.Farwing != "" {
		add("farwing %s", f.Farwing)
	}
	if f.Go != "" {
		add("%s", f.Go)
	}
	if t := f.TCP; t.Default != "" || t.Rmem[2] > 0 || t.Wmem[2] > 0 {
		add("TCP default %s, tcp_rmem max %s, tcp_wmem max %s", cmp.Or(t.Default, "unknown"), units.Size(t.Rmem[2]), units.Size(t.Wmem[2]))
	}
	if f.MTU > 0 {
		add("MTU %d (%s)", f.MTU, f.Interface)
	}
	if len(f.CPUFlags) > 0 {
		add("CPU flags %s", strings.Join(f.CPUFlags, " "))
	}
	if len(parts) == 0 {
		return "not recorded"
	}
	return strings.Join(parts, "; ")
}

// loads is the range of the 1-minute load averages the samples recorded before each run, at
// either end ("client 0.4–3.1, server 0.4–3.1"), or "" when none did.
func loads(samples []Sample) string {
	var parts []string
	for _, end := range []struct{ key, name string }{{"load_client", "client"}, {"load_server", "server"}} {
		lo, hi, n := math.Inf(1), math.Inf(-1), 0
		for _, s := range samples {
			l, ok := s.Detail[end.key].([]any)
			if !ok || len(l) == 0 {
				continue
			}
			if v, ok := l[0].(float64); ok {
				lo, hi, n = min(lo, v), max(hi, v), n+1
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f–%.2f", end.name, lo, hi))
		}
	}
	return strings.Join(parts, ", ")
}

// levelFacts is what Farwing measured of the path at a level: its first throughput run's
// minimum round trip, packet-train capacity estimate and random loss.
func levelFacts(lv LevelFacts) string {
	if lv.MinRTTms <= 0 && lv.CapacityBps <= 0 {
		return "no Farwing run measured the path"
	}
	return fmt.Sprintf("min RTT %.1f ms, capacity estimate %s (Farwing's packet train), random loss measured %.2g %%",
		lv.MinRTTms, units.Rate(lv.CapacityBps), lv.RandomLoss*100)
}

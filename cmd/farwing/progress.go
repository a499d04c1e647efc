package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/units"
	"github.com/farwing/farwing/internal/xfer"
)

// rateWindow is how far back the progress line's rate looks: per-update rates jump with every
// feedback burst (above the link's capacity, then far below).
const rateWindow = 3 * time.Second

// termWidth is the width of the terminal on stderr (80 when it cannot be read).
func termWidth() int {
	if ws, err := unix.IoctlGetWinsize(int(os.Stderr.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		return int(ws.Col)
	}
	return 80
}

// rateMeter turns progress reports into rates: the one since the last report and the one over
// the last rateWindow (both the average over the whole data phase in the final report).
type rateMeter struct {
	marks []mark // the last rateWindow of reports
	last  mark
}

type mark struct {
	at    time.Duration
	bytes int64
}

func (m *rateMeter) add(p xfer.Progress) (cur, avg float64) {
	if d := (p.Elapsed - m.last.at).Seconds(); d > 0 {
		cur = float64(p.Bytes-m.last.bytes) * 8 / d
	}
	m.last = mark{p.Elapsed, p.Bytes}
	m.marks = append(m.marks, m.last)
	for len(m.marks) > 1 && p.Elapsed-m.marks[0].at > rateWindow {
		m.marks = m.marks[1:]
	}
	if d := (p.Elapsed - m.marks[0].at).Seconds(); d > 0 {
		avg = float64(p.Bytes-m.marks[0].bytes) * 8 / d
	} else if p.Elapsed > 0 {
		avg = float64(p.Bytes) * 8 / p.Elapsed.Seconds()
	}
	if p.Final && p.Elapsed > 0 { // the last interval can be a few milliseconds
		cur = float64(p.Bytes) * 8 / p.Elapsed.Seconds()
		avg = cur
	}
	return cur, avg
}

// eta is the time the bytes left take at rate bits/s (false while the rate is 0).
func eta(p xfer.Progress, rate float64) (time.Duration, bool) {
	if p.Total <= p.Bytes {
		return 0, true
	}
	if rate <= 0 {
		return 0, false
	}
	return time.Duration(float64(p.Total-p.Bytes) * 8 / rate * float64(time.Second)), true
}

// progressLine draws the copy's progress on w. On a terminal (lines false) one line is redrawn in
// place, cut to the terminal's width (width, read at each update): the file in progress with its own percentage, the whole
// copy's percentage, the rate over the last few seconds, ETA, bytes and elapsed time, and with
// verbose the controller's view (RTT, loss, re-sent and parity datagrams). With lines (-v to a
// pipe or file) it prints one line per update in the layout "  41% 105.0 MiB/256.0 MiB  352.1
// Mbit/s  ETA 0:04  rate 380.2 Mbit/s  srtt 141 ms (min 140)  loss 1.02%  cong 0  re-sent 1234
// parity 56  [3/5] name 12%". The line is for people: programs read --json's events.
func progressLine(w io.Writer, width func() int, lines, verbose bool) xfer.ProgressFunc {
	var m rateMeter
	return func(p xfer.Progress) {
		cur, avg := m.add(p)
		pct := 100.0
		if p.Total > 0 {
			pct = 100 * float64(p.Bytes) / float64(p.Total)
		}
		if lines {
			fmt.Fprintln(w, fixedLine(p, pct, cur, avg))
			return
		}
		if p.Final {
			fmt.Fprintf(w, "\r\033[K")
			return
		}
		fmt.Fprintf(w, "\r\033[K%s", fitLine(p, pct, avg, verbose, width()-1))
	}
}

// uploadLine draws, on a terminal, how much of the peer first contact has sent, redrawn in place
// under the "installing farwing on HOST" line, and clears it when all is sent.
func uploadLine(sent, total int64) {
	if sent >= total || total <= 0 {
		fmt.Fprint(stderr, "\r\033[K")
		return
	}
	fmt.Fprintf(stderr, "\r\033[K%4.0f%% %s/%s", 100*float64(sent)/float64(total), units.Size(sent), units.Size(total))
}

// filePct is the file in progress's own percentage ("" with a single file: the copy's is its).
func filePct(p xfer.Progress) string {
	if p.Files <= 1 {
		return ""
	}
	pct := 100.0
	if p.FileSize > 0 {
		pct = 100 * float64(p.FileBytes) / float64(p.FileSize)
	}
	return fmt.Sprintf(" %.0f%%", pct)
}

// fixedLine is the one-line-per-update layout: rate is the one since the last line, avg the one
// the ETA is reckoned at.
func fixedLine(p xfer.Progress, pct, rate, avg float64) string {
	s := fmt.Sprintf("%4.0f%% %s/%s  %s", pct, units.Size(p.Bytes), units.Size(p.Total), units.Rate(rate))
	if d, ok := eta(p, avg); ok {
		s += "  ETA " + clock(d)
	} else {
		s += "  ETA --:--"
	}
	if p.RateBps > 0 {
		s += fmt.Sprintf("  rate %s  srtt %.0f ms (min %.0f)  loss %.2f%%  cong %d  re-sent %d  parity %d",
			units.Rate(p.RateBps), float64(p.SRTT)/1e6, float64(p.MinRTT)/1e6, 100*p.RandomLoss, p.CongestionEvents, p.Retransmitted, p.Parity)
		if p.Competing {
			s += "  competing"
		}
	}
	if p.Rebuilt > 0 {
		s += fmt.Sprintf("  fec-rebuilt %d", p.Rebuilt)
	}
	if p.Files > 1 {
		s += fmt.Sprintf("  [%d/%d] %s%s", p.FileIndex+1, p.Files, escape.Text(p.File), filePct(p))
	}
	return s
}

// fitLine is the terminal's progress line within width columns: the name shortened first (to no
// less than 12 columns), then the least important fields dropped.
func fitLine(p xfer.Progress, pct, rate float64, verbose bool, width int) string {
	name := escape.Text(p.File)
	head, tail := "", filePct(p) // around the name, never shortened
	if p.Files > 1 {
		head = fmt.Sprintf("[%d/%d] ", p.FileIndex+1, p.Files)
	}
	left := "ETA --:--"
	if d, ok := eta(p, rate); ok {
		left = "ETA " + clock(d)
	}
	// Fields in order of importance; the line keeps a prefix of them.
	fields := []string{
		fmt.Sprintf("%3.0f%%", pct),
		units.Rate(rate),
		left,
		fmt.Sprintf("%s/%s", units.Size(p.Bytes), units.Size(p.Total)),
		clock(p.Elapsed),
	}
	if verbose && p.RateBps > 0 {
		fields = append(fields, fmt.Sprintf("rtt %.0f ms", float64(p.SRTT)/1e6), fmt.Sprintf("loss %.2f%%", 100*p.RandomLoss),
			fmt.Sprintf("re-sent %d", p.Retransmitted), fmt.Sprintf("parity %d", p.Parity))
		if p.Rebuilt > 0 {
			fields = append(fields, fmt.Sprintf("fec-rebuilt %d", p.Rebuilt))
		}
		if p.Competing {
			fields = append(fields, "competing")
		}
	}
	const minName = 12
	for n := len(fields); n > 0; n-- {
		rest := strings.Join(fields[:n], "  ")
		room := width - utf8.RuneCountInString(rest) - 2
		if name == "" && room >= -2 {
			return rest
		}
		room -= utf8.RuneCountInString(head) + utf8.RuneCountInString(tail)
		if room >= min(minName, utf8.RuneCountInString(name)) {
			return head + shorten(name, room) + tail + "  " + rest
		}
	}
	return shorten(fields[0], width)
}

// shorten cuts s to at most n runes, keeping its start and end around "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:max(n, 0)])
	}
	head := (n - 1) / 2
	return string(r[:head]) + "…" + string(r[len(r)-(n-1-head):])
}

// clock formats d as m:ss, or h:mm:ss from an hour.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

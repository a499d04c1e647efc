package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/xfer"
)

// eventSchema is the version of --json's event lines (docs/EVENTS.md): it changes only when a
// field changes meaning or goes; new fields and events may come without it.
const eventSchema = 1

// events writes `farwing copy --json`'s JSON lines: start first, then progress, file, skip and
// warning as they happen, error when the copy fails, and summary last. Every line carries the
// schema and its event's name, and no raw control or bidirectional character (escape.JSON): file
// names and messages may be the peer's. Safe for concurrent use.
type events struct {
	mu      sync.Mutex
	w       io.Writer
	started bool
	start   startEvent
	rate    rateMeter
}

func newEvents(w io.Writer) *events {
	return &events{w: w, start: startEvent{Version: version, Time: time.Now().UTC().Format(time.RFC3339Nano)}}
}

// startEvent is the first line: what the command line asks for (what of it was understood when
// the copy failed before it began).
type startEvent struct {
	Version     string   `json:"version"`
	Time        string   `json:"time"`                // RFC 3339, UTC
	Direction   string   `json:"direction,omitempty"` // push or pull
	Host        string   `json:"host,omitempty"`
	Sources     []string `json:"sources,omitempty"`
	Destination *string  `json:"destination,omitempty"` // "" on a push: the remote home directory
}

// progressEvent is one progress report, about twice a second during the data phase and once
// more (final) at its end. The rate controller's fields are known where this end sends (a push);
// on a pull they are absent, and rtt_ms is the handshake's round trip.
type progressEvent struct {
	Bytes      int64    `json:"bytes"` // file bytes acknowledged (push) or written (pull)
	Total      int64    `json:"total"` // file bytes to send (skipped files not counted)
	Elapsed    float64  `json:"elapsed_seconds"`
	RateBps    float64  `json:"rate_bps"`              // goodput over the last 3 s (final: over the data phase)
	ETA        *float64 `json:"eta_seconds,omitempty"` // at that rate; absent while the rate is 0
	File       string   `json:"file,omitempty"`        // the file in progress
	FileIndex  int      `json:"file_index"`            // from 0, among the files whose data travels
	Files      int      `json:"files"`
	FileBytes  int64    `json:"file_bytes"`
	FileSize   int64    `json:"file_size"`
	RTTms      float64  `json:"rtt_ms,omitempty"`
	MinRTTms   *float64 `json:"min_rtt_ms,omitempty"`
	PacingBps  *float64 `json:"pacing_rate_bps,omitempty"`
	Loss       *float64 `json:"loss,omitempty"` // the random loss the rate controller measures (fraction)
	CongEvents *uint64  `json:"congestion_events,omitempty"`
	Retransmit *uint64  `json:"retransmitted,omitempty"`
	Parity     *uint64  `json:"parity_sent,omitempty"`
	Repair     *uint64  `json:"repair_parity,omitempty"` // FEC repairs: parity sent for groups the receiver could not rebuild
	FECRebuilt *uint64  `json:"fec_rebuilt,omitempty"`   // groups this receiver rebuilt from parity (pull)
	Competing  bool     `json:"competing,omitempty"`
	Final      bool     `json:"final,omitempty"`
}

type skipEvent struct {
	Name   string `json:"name,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Reason string `json:"reason"` // size-mtime or checksum (the destination has it), special, loop
	// Count and Example: how many special files or link loops the sending side left out, one
	// of them by name.
	Count   int    `json:"count,omitempty"`
	Example string `json:"example,omitempty"`
}

type warningEvent struct {
	Message string `json:"message"`
}

type errorEvent struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

type summaryEvent struct {
	ExitCode int `json:"exit_code"`
	*xfer.Result
}

// emit writes one line: {"schema":1,"event":kind, v's fields}, starting with the start event if
// it has not been written.
func (e *events) emit(kind string, v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started && kind != "start" {
		e.line("start", e.start)
	}
	e.started = true
	e.line(kind, v)
}

func (e *events) line(kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		b, _ = json.Marshal(errorEvent{Error: "internal: cannot encode a " + kind + " event"})
	}
	head, _ := json.Marshal(kind)
	out := append([]byte(`{"schema":1,"event":`), head...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	out = append(out, b[1:]...)
	e.w.Write(append(escape.JSON(out), '\n'))
}

// hook makes o's copy tell these events what happens: progress, finished and skipped files,
// what the sending side left out and warnings, alongside what o already reports.
func (e *events) hook(o *xfer.Options) {
	if line := o.Progress; line != nil {
		o.Progress = func(p xfer.Progress) { e.progress(p); line(p) }
	} else {
		o.Progress = e.progress
	}
	if warn := o.Warn; warn != nil {
		o.Warn = func(msg string) { e.warning(msg); warn(msg) }
	} else {
		o.Warn = e.warning
	}
	reason := "size-mtime"
	if o.Compare == fcopy.Checksum {
		reason = "checksum"
	}
	o.File = e.file
	o.Skip = func(name string, size int64) { e.skip(name, size, reason) }
	o.LeftOut = e.leftOut
	if o.DryRun {
		o.WouldSend = func(name string, size int64) { e.emit("send", sendEvent{Name: name, Size: size, DryRun: true}) }
	}
	dry := o.DryRun
	o.Deleted = func(d fcopy.Deletion) { e.deleted(d, dry) }
}

// begin writes the start event with what the command line asks for.
func (e *events) begin(direction, host string, srcs []string, dst string) {
	e.start.Direction, e.start.Host, e.start.Sources, e.start.Destination = direction, host, srcs, &dst
	e.emit("start", e.start)
}

func (e *events) progress(p xfer.Progress) {
	_, avg := e.rate.add(p)
	ev := progressEvent{Bytes: p.Bytes, Total: p.Total, Elapsed: p.Elapsed.Seconds(), RateBps: avg, File: p.File,
		FileIndex: p.FileIndex, Files: p.Files, FileBytes: p.FileBytes, FileSize: p.FileSize, RTTms: float64(p.SRTT) / 1e6,
		Competing: p.Competing, Final: p.Final}
	if d, ok := eta(p, avg); ok {
		s := d.Seconds()
		ev.ETA = &s
	}
	if p.RateBps > 0 { // the sender's view
		ev.MinRTTms, ev.PacingBps, ev.Loss = ptr(float64(p.MinRTT)/1e6), ptr(p.RateBps), ptr(p.RandomLoss)
		ev.CongEvents, ev.Retransmit, ev.Parity, ev.Repair = ptr(p.CongestionEvents), ptr(p.Retransmitted), ptr(p.Parity), ptr(p.RepairParity)
	} else {
		ev.FECRebuilt = ptr(p.Rebuilt)
	}
	e.emit("progress", ev)
}

func (e *events) file(f fcopy.FileResult) { e.emit("file", f) }

func (e *events) skip(name string, size int64, reason string) {
	e.emit("skip", skipEvent{Name: name, Size: size, Reason: reason})
}

// skippedSpecial reports what the sending side left out (devices, sockets, FIFOs; link loops).
func (e *events) leftOut(s fcopy.Skipped) {
	if s.Special > 0 {
		e.emit("skip", skipEvent{Reason: "special", Count: s.Special, Example: s.SpecialExample})
	}
	if s.Loops > 0 {
		e.emit("skip", skipEvent{Reason: "loop", Count: s.Loops, Example: s.LoopExample})
	}
}

// deleted reports an entry a pull's --delete removed here.
func (e *events) deleted(d fcopy.Deletion, dry bool) {
	e.emit("delete", deleteEvent{Name: d.Name, Path: d.Path, Dir: d.Dir, DryRun: dry})
}

type deleteEvent struct {
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	Dir    bool   `json:"dir,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// sendEvent is a file a --dry-run copy would send.
type sendEvent struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	DryRun bool   `json:"dry_run"`
}

func (e *events) warning(msg string) { e.emit("warning", warningEvent{msg}) }

// fail writes the error event and the summary a failed copy has: the error and the exit code.
func (e *events) fail(msg string, code int) {
	e.emit("error", errorEvent{msg, code})
	e.emit("summary", errorEvent{msg, code})
}

func (e *events) summary(r *xfer.Result) { e.emit("summary", summaryEvent{0, r}) }

func ptr[T any](v T) *T { return &v }

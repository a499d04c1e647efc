//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLabEvents: `farwing copy --json` through the lab prints JSON lines (jsonEvents: each parses,
// schema 1, start first, summary last, no raw control or bidirectional character though a file
// name holds U+202E and U+2066): a push of a tree has a file event per file with the BLAKE3 of
// the source, a final progress event with every byte, a skip event and a warning for the FIFO
// left out; pushing it again has a skip event per file the remote has and no file event; pulling
// it back has the file events with the names as they are; a copy that fails has an error event
// with its exit code, and a summary that holds them.
func TestLabEvents(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	root, back := t.TempDir(), t.TempDir()
	top := filepath.Join(root, "t")
	os.MkdirAll(filepath.Join(top, "sub"), 0o755)
	evil := "\u202eevil\u2066gpj.exe"
	want := map[string]int64{"t/big.bin": 8<<20 + 5, "t/sub/small.bin": 4000, "t/" + evil: 1, "t/empty": 0}
	sums := map[string]string{}
	for name, size := range want {
		_, sums[name] = randomFile(t, root, name, int(size))
	}
	if err := unix.Mkfifo(filepath.Join(top, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := func(what string, r copyRun) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", what, r.code, r.stderr)
		}
		got := eventsOf(r.events, "file")
		if len(got) != len(want) {
			t.Errorf("%s: %d file events, want %d: %v", what, len(got), len(want), got)
		}
		for _, f := range got {
			name, _ := f["name"].(string)
			if size, ok := want[name]; !ok || f["size"] != float64(size) || f["blake3"] != sums[name] {
				t.Errorf("%s: file event %v; want size %d, BLAKE3 %s", what, f, want[name], sums[name])
			}
		}
		prog := eventsOf(r.events, "progress")
		if len(prog) == 0 {
			t.Fatalf("%s: no progress event", what)
		}
		last := prog[len(prog)-1]
		if last["final"] != true || last["bytes"] != float64(8<<20+4006) || last["total"] != last["bytes"] {
			t.Errorf("%s: last progress event %v", what, last)
		}
		// About two a second: bounded by the command's time.
		if limit := 2*r.res["seconds"].(float64) + 3; float64(len(prog)) > limit {
			t.Errorf("%s: %d progress events in %.1f s", what, len(prog), r.res["seconds"])
		}
	}

	r := e.copy("-r", "-p", top, e.srv.Host+":")
	files("push", r)
	if sk := eventsOf(r.events, "skip"); len(sk) != 1 || sk[0]["reason"] != "special" || sk[0]["count"] != float64(1) || sk[0]["example"] != filepath.Join(top, "fifo") {
		t.Errorf("push: skip events %v, want the FIFO", sk)
	}
	if w := eventsOf(r.events, "warning"); len(w) != 1 {
		t.Errorf("push: warning events %v, want the FIFO's", w)
	}
	if st := r.events[0]; st["direction"] != "push" || st["host"] != e.srv.Host || st["destination"] != "" {
		t.Errorf("push: start event %v", st)
	}

	// Again: the remote has every file (size and time, -p).
	os.Remove(filepath.Join(top, "fifo"))
	r = e.copy("-r", "-p", top, e.srv.Host+":")
	if r.code != 0 || len(eventsOf(r.events, "file")) != 0 {
		t.Fatalf("second push: exit %d, file events %v: %s", r.code, eventsOf(r.events, "file"), r.stderr)
	}
	sk := eventsOf(r.events, "skip")
	for _, s := range sk {
		if name, _ := s["name"].(string); s["reason"] != "size-mtime" || s["size"] != float64(want[name]) && !(want[name] == 0 && s["size"] == nil) {
			t.Errorf("second push: skip event %v", s)
		}
	}
	if len(sk) != len(want) {
		t.Errorf("second push: %d skip events, want %d: %v", len(sk), len(want), sk)
	}

	r = e.copy("-r", e.srv.Host+":t", back)
	files("pull", r)
	if b, err := os.ReadFile(filepath.Join(back, "t", evil)); err != nil || len(b) != 1 {
		t.Errorf("pull: %s: %v", evil, err)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"missing source", []string{filepath.Join(root, "nope"), e.srv.Host + ":"}, 3},
		{"missing remote source", []string{e.srv.Host + ":nope", back}, 3},
		{"bad flag value", []string{"--rate", "fast", filepath.Join(top, "big.bin"), e.srv.Host + ":"}, 2},
	} {
		r := e.copy(c.args...)
		errs := eventsOf(r.events, "error")
		if r.code != c.code || len(errs) != 1 || errs[0]["exit_code"] != float64(c.code) || errs[0]["error"] == "" {
			t.Errorf("%s: exit %d, error events %v; want exit %d", c.name, r.code, errs, c.code)
			continue
		}
		if r.res["error"] != errs[0]["error"] || r.res["exit_code"] != float64(c.code) || len(eventsOf(r.events, "file")) != 0 {
			t.Errorf("%s: summary %v", c.name, r.res)
		}
	}
}

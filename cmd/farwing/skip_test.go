//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabSkip copies a tree through the lab with -r -p, push and pull, and copies it again: the
// second run exits 0, sends no file data (no data datagram's bytes in --json's wire_bytes, a
// handshake's worth of datagrams), reports every file and byte as skipped in --json and in its
// summary line, and leaves the destination's files as they were; --checksum then sends the one
// file changed behind the same size and time.
func TestLabSkip(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	root, back := t.TempDir(), t.TempDir()
	top := filepath.Join(root, "t")
	os.MkdirAll(filepath.Join(top, "sub"), 0o755)
	randomFile(t, top, "big.bin", 8<<20)
	randomFile(t, top, "sub/small.bin", 4000)
	const files, size = 2, 8<<20 + 4000
	skipped := func(what string, r copyRun, summary string) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", what, r.code, r.stderr)
		}
		if r.res["skipped_files"] != float64(files) || r.res["skipped_bytes"] != float64(size) || r.res["bytes"] != float64(0) {
			t.Errorf("%s: --json says skipped %v files, %v bytes, copied %v bytes", what, r.res["skipped_files"], r.res["skipped_bytes"], r.res["bytes"])
		}
		if w, _ := r.res["wire_bytes"].(float64); w != 0 {
			t.Errorf("%s: %v bytes of data datagrams onto an identical destination", what, w)
		}
		if n, _ := r.res["datagrams_sent"].(float64); n > 500 { // hellos and the packet train's 432
			t.Errorf("%s: %v datagrams sent", what, n)
		}
		if !strings.Contains(r.stderr, summary) {
			t.Errorf("%s: the summary does not say %q: %s", what, summary, r.stderr)
		}
	}

	if r := e.copy("-r", "-p", top, e.srv.Host+":"); r.code != 0 {
		t.Fatalf("push: exit %d: %s", r.code, r.stderr)
	}
	remote := filepath.Join(e.srv.Home, "t", "big.bin")
	before, _ := os.Stat(remote)
	skipped("second push", e.copy("-r", "-p", top, e.srv.Host+":"), "2 file(s), 8.0 MiB not sent: already there, as the remote reports")
	if st, _ := os.Stat(remote); !os.SameFile(st, before) {
		t.Error("the second push replaced big.bin")
	}

	if r := e.copy("-r", "-p", e.srv.Host+":t", back); r.code != 0 {
		t.Fatalf("pull: exit %d: %s", r.code, r.stderr)
	}
	skipped("second pull", e.copy("-r", "-p", e.srv.Host+":t", back), "2 file(s), 8.0 MiB not sent: already here")

	// The same size and time, other bytes: --checksum finds and sends it.
	p := filepath.Join(back, "t", "sub", "small.bin")
	st, _ := os.Stat(p)
	os.WriteFile(p, make([]byte, st.Size()), 0o644)
	os.Chtimes(p, st.ModTime(), st.ModTime())
	r := e.copy("-r", "-p", "--checksum", e.srv.Host+":t", back)
	if r.code != 0 || r.res["skipped_files"] != float64(1) || r.res["bytes"] != float64(4000) {
		t.Fatalf("pull --checksum: exit %d, skipped %v, copied %v bytes: %s", r.code, r.res["skipped_files"], r.res["bytes"], r.stderr)
	}
	if fileSum(t, p) != fileSum(t, filepath.Join(top, "sub", "small.bin")) {
		t.Error("pull --checksum: small.bin differs")
	}
}

//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabChangedBlocks pushes a 16 MiB file through the lab, changes one of its blocks and pushes
// it again: the second copy compares it block by block and sends that block only (--json's
// delta_files, kept_blocks, kept_bytes, sent_blocks, bytes, and wire_bytes of about one block;
// the summary line says so), and the remote file is the source's; after another change,
// --whole-file sends every byte.
func TestLabChangedBlocks(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	dir := t.TempDir()
	const size = 16 << 20
	src, _ := randomFile(t, dir, "img.bin", size)
	remote := filepath.Join(e.srv.Home, "img.bin")
	if r := e.copy("-p", src, e.srv.Host+":"); r.code != 0 {
		t.Fatalf("first push: exit %d: %s", r.code, r.stderr)
	}
	change := func(off int64) {
		t.Helper()
		f, err := os.OpenFile(src, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("changed"), off)
		f.Close()
		later := time.Now().Add(time.Hour)
		os.Chtimes(src, later, later)
	}
	change(5<<20 + 123)
	r := e.copy("-p", src, e.srv.Host+":")
	if r.code != 0 {
		t.Fatalf("push of the changed file: exit %d: %s", r.code, r.stderr)
	}
	if r.res["delta_files"] != float64(1) || r.res["kept_blocks"] != float64(15) || r.res["sent_blocks"] != float64(1) ||
		r.res["kept_bytes"] != float64(15<<20) || r.res["bytes"] != float64(1<<20) {
		t.Errorf("push of the changed file: --json says %v files compared, %v blocks (%v bytes) kept, %v blocks, %v bytes sent",
			r.res["delta_files"], r.res["kept_blocks"], r.res["kept_bytes"], r.res["sent_blocks"], r.res["bytes"])
	}
	if w, _ := r.res["wire_bytes"].(float64); w < 1<<20 || w > 2<<20 {
		t.Errorf("push of the changed file: %v bytes of data datagrams for one block", w)
	}
	if !strings.Contains(r.stderr, "1 changed file(s) compared block by block: 15 block(s), 15.0 MiB, kept at the destination, 1 block(s) sent") {
		t.Errorf("the summary does not say what was kept: %s", r.stderr)
	}
	if fileSum(t, remote) != fileSum(t, src) {
		t.Fatal("the remote file differs from the source")
	}

	change(9 << 20)
	r = e.copy("-p", "-W", src, e.srv.Host+":")
	if r.code != 0 || r.res["delta_files"] != float64(0) || r.res["bytes"] != float64(size) {
		t.Fatalf("push -W: exit %d, %v files compared, %v bytes sent: %s", r.code, r.res["delta_files"], r.res["bytes"], r.stderr)
	}
	if fileSum(t, remote) != fileSum(t, src) {
		t.Fatal("after -W the remote file differs from the source")
	}
}

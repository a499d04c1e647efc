//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/treetest"
)

// TestLabTree pushes a tree of 2,000 small files with nested directories, an empty one, a
// 0-byte file, modes 0600 to 0755, symbolic links inside and outside the tree, a hard link pair
// and a FIFO through the lab with -r -p -H, and pulls it back: both copies are the source as
// rsync -a -H leaves it (digests, modes, link targets, hard links, times of files, directories
// and links), each end skips its FIFO with one warning line, and no temporary file is left.
func TestLabTree(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	root, outside, back := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	top := treetest.Build(t, root, outside, 2000)
	if err := unix.Mkfifo(filepath.Join(top, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := treetest.Snapshot(t, top)
	cmp := treetest.Options{MTimes: true, HardLinks: true, Skip: map[string]bool{"fifo": true}}
	warning := func(what string, r copyRun, path string) {
		t.Helper()
		var n int
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "farwing: warning: ") {
				n++
				if !strings.Contains(l, "skipped 1 special file") || !strings.Contains(l, path) {
					t.Errorf("%s: warning %q, want one special file, %s", what, l, path)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d warning lines, want 1: %s", what, n, r.stderr)
		}
		if r.res["symlinks"] != float64(8) || r.res["hard_links"] != float64(1) {
			t.Errorf("%s: --json says %v symbolic links, %v hard links; want 8 and 1", what, r.res["symlinks"], r.res["hard_links"])
		}
	}

	push := e.copy("-r", "-p", "-H", top, e.srv.Host+":")
	if push.code != 0 {
		t.Fatalf("push: exit %d: %s", push.code, push.stderr)
	}
	remote := filepath.Join(e.srv.Home, "t")
	treetest.Compare(t, "push", want, treetest.Snapshot(t, remote), cmp)
	warning("push", push, filepath.Join(top, "fifo"))

	rfifo := filepath.Join(remote, "sub", "rfifo")
	if err := unix.Mkfifo(rfifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := time.Unix(0, want["sub"].MTime)
	os.Chtimes(filepath.Dir(rfifo), sub, sub) // as the push left it
	pull := e.copy("-r", "-p", "-H", e.srv.Host+":t", back)
	if pull.code != 0 {
		t.Fatalf("pull: exit %d: %s", pull.code, pull.stderr)
	}
	treetest.Compare(t, "pull", want, treetest.Snapshot(t, filepath.Join(back, "t")), cmp)
	warning("pull", pull, rfifo)
	noPartials(t, e.srv.Home)
	noPartials(t, back)
	t.Logf("2,000-file tree: push %.2f s, pull %.2f s", push.elapsed.Seconds(), pull.elapsed.Seconds())
}

//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/treetest"
)

// TestLabFiltersDelete runs farwing copy through the lab with filters, --delete, --dry-run and
// --files-from, as a user types them: a filtered push leaves what rsync -rl leaves with the same
// rules; a dry run with --delete lists the stale entry (a delete event) and changes nothing; the
// real run deletes it (summary: deleted 1) and keeps what the rules exclude; a pull with
// --files-from brings the listed paths with their directories, as rsync does.
func TestLabFiltersDelete(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	rules := []string{"--exclude", "*.tmp", "--exclude", ".git/"}
	want := t.TempDir()
	treetest.Rsync(t, append(append([]string{"-rl"}, rules...), top, want+"/")...)
	push := e.copy(append(append([]string{"-r"}, rules...), top, e.srv.Host+":")...)
	if push.code != 0 {
		t.Fatalf("push: exit %d: %s", push.code, push.stderr)
	}
	remote := filepath.Join(e.srv.Home, "t")
	treetest.Compare(t, "push "+strings.Join(rules, " "), treetest.Snapshot(t, filepath.Join(want, "t")), treetest.Snapshot(t, remote), treetest.Options{})

	os.WriteFile(filepath.Join(remote, "old.txt"), []byte("stale"), 0o644)
	os.WriteFile(filepath.Join(remote, "kept.tmp"), []byte("excluded, so protected"), 0o644)
	dry := e.copy(append(append([]string{"-r", "-n", "--delete"}, rules...), top, e.srv.Host+":")...)
	dels := eventsOf(dry.events, "delete")
	if dry.code != 0 || len(dels) != 1 || dels[0]["name"] != "t/old.txt" || dels[0]["dry_run"] != true || dry.res["dry_run"] != true {
		t.Fatalf("dry run: exit %d, delete events %v, summary %v: %s", dry.code, dels, dry.res, dry.stderr)
	}
	if _, err := os.Stat(filepath.Join(remote, "old.txt")); err != nil {
		t.Fatalf("the dry run deleted: %v", err)
	}
	mirror := e.copy(append(append([]string{"-r", "--delete"}, rules...), top, e.srv.Host+":")...)
	if mirror.code != 0 || mirror.res["deleted"] != float64(1) {
		t.Fatalf("--delete: exit %d, summary deleted %v: %s", mirror.code, mirror.res["deleted"], mirror.stderr)
	}
	if _, err := os.Lstat(filepath.Join(remote, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(remote, "kept.tmp")); err != nil {
		t.Errorf("the excluded kept.tmp was deleted: %v", err)
	}

	list := filepath.Join(root, "list")
	os.WriteFile(list, []byte("a.txt\n# a comment\nsrc/sub dir/file one.txt\ndeep/a\n"), 0o644)
	back, wantBack := t.TempDir(), t.TempDir()
	treetest.Rsync(t, "-rl", "--files-from", list, top, wantBack+"/")
	pull := e.copy("-r", "--files-from", list, e.srv.Host+":t", back)
	if pull.code != 0 {
		t.Fatalf("pull --files-from: exit %d: %s", pull.code, pull.stderr)
	}
	treetest.Compare(t, "pull --files-from", treetest.Snapshot(t, wantBack), treetest.Snapshot(t, back), treetest.Options{})
}

// TestLabDeleteDestinationThatIsNot: farwing copy -r --delete to host:missing/../mirror (no
// missing there) exits 4, one line, and leaves the remote home as it was, where the destination
// read as ~/mirror itself: the copy's directory became it, and --delete emptied it.
func TestLabDeleteDestinationThatIsNot(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	top := treetest.FilterTree(t, t.TempDir())
	mirror := filepath.Join(e.srv.Home, "mirror")
	os.MkdirAll(mirror, 0o755)
	os.WriteFile(filepath.Join(mirror, "precious"), []byte("keep"), 0o644)
	var home syscall.Stat_t
	if err := syscall.Stat(e.srv.Home, &home); err != nil {
		t.Fatal(err)
	}
	os.Chown(mirror, int(home.Uid), int(home.Gid)) // the remote user's, as a mirror of theirs is
	before := treetest.Snapshot(t, e.srv.Home)
	r := e.copy("-r", "--delete", top, e.srv.Host+":missing/../mirror")
	if r.code != 4 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
	after := treetest.Snapshot(t, e.srv.Home)
	for n := range after {
		if strings.HasPrefix(n, ".cache") {
			delete(after, n) // the peer, installed on first contact
		}
	}
	treetest.Compare(t, "the remote home", before, after, treetest.Options{})
}

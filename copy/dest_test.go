package copy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// planFor is a plan of files with the given names (a trailing "/" makes a directory) and sizes.
func planFor(t *testing.T, names ...string) []File {
	t.Helper()
	var fs []File
	for _, n := range names {
		if d, ok := strings.CutSuffix(n, "/"); ok {
			fs = append(fs, File{Name: d, Dir: true, Mode: 0o755})
		} else {
			fs = append(fs, File{Name: n, Size: 10, Mode: 0o644})
		}
	}
	return fs
}

// writeAll writes every file of files into target with 10 bytes each, like a receiver would,
// through a writer with options o (its Digest set here).
func writeAll(t *testing.T, files []File, target *Target, o WriterOptions) error {
	t.Helper()
	plan, err := NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("0123456789")
	sums := map[int][32]byte{}
	for i := range files {
		if !files[i].Dir {
			var tr fileTree
			s := plan.Sum(plan.first[i], data)
			tr.add(&s)
			sums[i] = tr.sum()
		}
	}
	o.Digest = func(_ context.Context, i int) ([32]byte, error) { return sums[i], nil }
	w := NewWriter(plan, target, o)
	for b := uint32(0); b < plan.NumBlocks(); b++ {
		s := plan.Sum(b, data)
		if err := w.WriteBlock(context.Background(), b, data, s.Digest()); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Finish(context.Background()); err != nil {
		w.Abort()
		return err
	}
	w.Close()
	return nil
}

// TestNoWriteThroughSymlinks: a symbolic link standing in the destination where a directory of a
// name goes is refused, before anything is written (ResolveTarget) and again by the writer when
// it appears afterwards; nothing lands outside the destination.
func TestNoWriteThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	out, outside := filepath.Join(dir, "out"), filepath.Join(dir, "outside")
	os.Mkdir(out, 0o755)
	os.Mkdir(outside, 0o755)
	files := planFor(t, "t/", "t/sub/", "t/sub/x")
	if err := os.Symlink(outside, filepath.Join(out, "t")); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveTarget(out, files); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlink in the destination: %v", err)
	}
	// The link appears after the check (or the copy makes one): the writer refuses it too.
	os.Remove(filepath.Join(out, "t"))
	target, err := ResolveTarget(out, files)
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(out, "t"), 0o755)
	os.Symlink(outside, filepath.Join(out, "t", "sub"))
	if err := writeAll(t, files, target, WriterOptions{}); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("writer through a symlink: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the destination: %s", ents[0].Name())
	}
	// A file of the same name as a directory to create, and the other way round.
	os.Remove(filepath.Join(out, "t", "sub"))
	os.WriteFile(filepath.Join(out, "t", "sub"), nil, 0o644)
	if _, err := ResolveTarget(out, files); !errors.Is(err, ErrDest) {
		t.Fatalf("a file where a directory goes: %v", err)
	}
	os.Remove(filepath.Join(out, "t", "sub"))
	os.MkdirAll(filepath.Join(out, "t", "sub", "x"), 0o755)
	if _, err := ResolveTarget(out, files); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("a directory where a file goes: %v", err)
	}
	// A symlink where the file itself goes is replaced, not followed.
	os.RemoveAll(filepath.Join(out, "t"))
	os.MkdirAll(filepath.Join(out, "t", "sub"), 0o755)
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, filepath.Join(out, "t", "sub", "x"))
	target, err = ResolveTarget(out, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAll(t, files, target, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the file behind a symlink was written: %q", b)
	}
	if st, err := os.Lstat(filepath.Join(out, "t", "sub", "x")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the symlink was not replaced by the file: %v %v", st, err)
	}
}

// TestReadOnlyDestination: a destination file its user may not write is refused, as scp does.
func TestReadOnlyDestination(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write a read-only file (as scp does as root); the lab test covers an ordinary user")
	}
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "x"), []byte("old"), 0o444)
	if _, err := ResolveTarget(out, planFor(t, "x")); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only destination: %v", err)
	}
}

// TestPartialFiles: a temporary file is mode 0600 and locked while it is written; one left by a
// writer that died (unlocked, old enough) is removed by the next copy into its directory, and by
// the housekeeping sweep through the registry; one still locked is left alone.
func TestPartialFiles(t *testing.T) {
	out := t.TempDir()
	fd, err := unix.Open(out, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	live, liveName, err := createPart(fd, out, "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if st, _ := live.Stat(); st.Mode().Perm() != 0o600 {
		t.Fatalf("temporary file mode %v, want 0600", st.Mode().Perm())
	}
	// A dead writer's file: created, then its descriptor (and lock) gone.
	dead, deadName, _ := createPart(fd, out, "dead")
	dead.Close()
	if err := writeAll(t, planFor(t, "new"), &Target{root: out, into: true}, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, deadName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dead writer's partial file survived the next copy into its directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, liveName)); err != nil {
		t.Fatalf("a live writer's partial file was removed: %v", err)
	}

	// The registry: an entry whose writer died lists a partial in a directory nobody copies to.
	other := t.TempDir()
	ofd, _ := unix.Open(other, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer unix.Close(ofd)
	orphan, orphanName, _ := createPart(ofd, other, "orphan")
	orphan.Close()
	reg := newRegistry()
	if reg == nil {
		t.Fatal("no registry")
	}
	reg.add(filepath.Join(other, orphanName))
	reg.add("/etc/passwd") // not a temporary file's name: never touched
	held := newRegistry()
	held.add(filepath.Join(out, liveName))
	reg.f.Close() // the writer dies: its lock goes, the entry stays
	if n := SweepPartials(); n != 1 {
		t.Fatalf("sweep removed %d files, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(other, orphanName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan partial survived the sweep: %v", err)
	}
	if _, err := os.Stat(reg.f.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dead writer's registry entry survived the sweep")
	}
	if _, err := os.Stat(held.f.Name()); err != nil {
		t.Fatalf("live writer's registry entry removed: %v", err)
	}
	held.close()
}

// TestReplacedHeldOpen: a large file that a copy replaces keeps its inode, open in the writer,
// until the writer closes (its blocks are freed then, not inside the rename); small ones and
// anything not a regular file are not held.
func TestReplacedHeldOpen(t *testing.T) {
	dst := t.TempDir()
	big := filepath.Join(dst, "big")
	if err := os.WriteFile(big, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, replacedHoldMin); err != nil { // sparse: no disk needed
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "small"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := probeWriter(t, planFor(t, "big", "small"), dst, WriterOptions{})
	data := []byte("0123456789") // what probeWriter writes into each file
	if err := w.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.replaced) != 1 {
		t.Fatalf("writer holds %d replaced files, want 1 (the large one)", len(w.replaced))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(w.replaced[0].Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 || st.Size != replacedHoldMin {
		t.Errorf("held file: %d links, %d bytes; want the replaced inode (0 links, %d bytes)", st.Nlink, st.Size, replacedHoldMin)
	}
	for _, n := range []string{"big", "small"} {
		if b, err := os.ReadFile(filepath.Join(dst, n)); err != nil || string(b) != string(data) {
			t.Errorf("%s after the copy: %q, %v; want the new bytes", n, b, err)
		}
	}
	w.Close()
	if len(w.replaced) != 0 {
		t.Errorf("writer still holds %d replaced files after Close", len(w.replaced))
	}
	// Not regular, or small: nothing held.
	if err := unix.Mkfifo(filepath.Join(dst, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("big", filepath.Join(dst, "link")); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	for _, n := range []string{"fifo", "link", "small", "missing"} {
		was, _ := replaceable(dfd, n, n, "a file")
		if f := holdReplaced(dfd, n, was); f != nil {
			f.Close()
			t.Errorf("holdReplaced(%s) held it", n)
		}
	}
}

// TestDestinationAsTheSystemFindsIt: a destination that does not exist is named as the system
// resolves it, never by its cleaned text: "missing/.." and "missing/../d" (no "missing": no such
// directory) are refused, where the cleaned text named the existing directory (the copy's
// top-level directory became it, and --delete emptied it); "d/../new" is "new" in "d/..", and
// "l/../new" is "new" in "l/.." (beside what the link l points to, as the system has it).
func TestDestinationAsTheSystemFindsIt(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "d"), 0o755)
	os.MkdirAll(filepath.Join(root, "far", "in"), 0o755)
	os.Symlink(filepath.Join(root, "far", "in"), filepath.Join(root, "l"))
	files := []File{{Name: "t", Dir: true}, {Name: "t/f", Size: 1}}
	for _, dst := range []string{"missing/..", "missing/../d", "missing/../d/", "d/missing/../..", "missing/.", "d/missing/../../d"} {
		if tg, err := ResolveTarget(root+"/"+dst, files); !errors.Is(err, ErrDest) {
			t.Errorf("%s: %v (lands at %+v)", dst, err, tg)
		}
	}
	for dst, want := range map[string]Target{
		"d/../new": {root: root + "/d/..", base: "new"},
		"l/../new": {root: root + "/l/..", base: "new"},
		"new":      {root: root, base: "new"},
		"d/..":     {root: root + "/d/..", into: true},
	} {
		tg, err := ResolveTarget(root+"/"+dst, files)
		if err != nil || tg.root != want.root || tg.base != want.base || tg.into != want.into {
			t.Errorf("%s: %+v, %v; want %+v", dst, tg, err, want)
		}
	}
}

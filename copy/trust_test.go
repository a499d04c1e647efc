package copy

// The receiving and sending sides against sizes, names and modes the other side chooses (issue
// 37): sizes the block numbering cannot hold, names only the remote knows landing on what the
// destination already has, the modes of what was already there, and the files the sender lists
// swapped before they are read.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSizeBeyondNumbering: a size the 32-bit block numbering cannot hold is refused by the plan
// and by the list check as it arrives, whatever its value (2^52+1 bytes counted as one block
// before, and 2^63-1, whose block count overflowed int64), and so are files that add up to more;
// the largest size the numbering holds is taken.
func TestSizeBeyondNumbering(t *testing.T) {
	if got := blocksOf(1<<63 - 1); got != 1<<43 {
		t.Errorf("blocksOf(2^63-1) = %d, want 2^43", got)
	}
	if got := blocksOf(1<<52 + 1); got != 1<<32+1 {
		t.Errorf("blocksOf(2^52+1) = %d", got)
	}
	for _, files := range [][]File{
		{{Name: "huge", Size: 1<<52 + 1}},
		{{Name: "huge", Size: MaxSize + 1}},
		{{Name: "huge", Size: 1<<63 - 1}},
		{{Name: "a", Size: MaxSize / 2}, {Name: "b", Size: MaxSize/2 + BlockSize}},
	} {
		if _, err := NewPlan(files); !errors.Is(err, ErrTooLarge) {
			t.Errorf("NewPlan(%+v) = %v, want ErrTooLarge", files, err)
		}
		if len(files) == 1 {
			if err := NewTreeCheck(1).Add(files); !errors.Is(err, ErrTooLarge) {
				t.Errorf("TreeCheck(%+v) = %v, want ErrTooLarge", files, err)
			}
		}
	}
	p, err := NewPlan([]File{{Name: "most", Size: MaxSize}})
	if err != nil || p.NumBlocks() != MaxBlocks || p.TotalBytes() != MaxSize {
		t.Fatalf("the largest size: %v, %d blocks", err, p.NumBlocks())
	}
	if _, off, n := p.Locate(MaxBlocks - 1); off != MaxSize-BlockSize || n != BlockSize {
		t.Errorf("last block at %d, %d bytes", off, n)
	}
}

// sparseFile makes a file of size bytes without data, on a file system that can hold one (the
// test's directory, else /dev/shm: tmpfs holds files up to 8 EiB); "" if none can.
func sparseFile(t *testing.T, size int64) string {
	t.Helper()
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		f, err := os.CreateTemp(dir, "farwing-sparse-*")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.Remove(f.Name()) })
		err = f.Truncate(size)
		f.Close()
		if err == nil {
			return f.Name()
		}
	}
	return ""
}

// TestCollectRefusesHugeSource: a source beyond MaxSize (an honest sparse file) is refused when it
// is listed, naming it, before anything is sent: it was sent as one block and reported verified.
func TestCollectRefusesHugeSource(t *testing.T) {
	p := sparseFile(t, 1<<52+1)
	if p == "" {
		t.Skip("no file system here holds a sparse file of 4 PiB (tmpfs does)")
	}
	_, err := Collect([]string{p}, CollectOptions{})
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "4 PiB") {
		t.Fatalf("Collect of a 4 PiB file: %v", err)
	}
}

// TestTruncateErrorFails: a file system that cannot give a new file its length (EFBIG) fails the
// copy with the destination's error, and nothing is left at the destination; before, the error
// was ignored and the file was placed shorter than its list said.
func TestTruncateErrorFails(t *testing.T) {
	dst := t.TempDir()
	files := []File{{Name: "f", Size: 10, Mode: 0o644}}
	o := WriterOptions{Calls: WriterCalls{Truncate: func(*os.File, int64) error { return unix.EFBIG }}}
	err := writeAll(t, files, &Target{root: dst, into: true}, o)
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "cannot make a file of 10 bytes") {
		t.Fatalf("truncate failing: %v", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Fatalf("%s left at the destination", ents[0].Name())
	}
	if _, err := os.Lstat(filepath.Join(dst, "f")); err == nil {
		t.Fatal("the file was placed")
	}
}

// TestFreshNameNotMerged: a top-level name only the remote chose (a pull of "host:") is refused
// where the destination has it already, before anything is written (Target.Fresh) and again when
// the writer comes to make it (a directory made in between); a new one is made.
func TestFreshNameNotMerged(t *testing.T) {
	d := func(n string) File { return File{Name: n, Dir: true, Mode: 0o755} }
	f := func(n string) File { return File{Name: n, Size: 10, Mode: 0o755} }
	files := []File{d("bin"), f("bin/ls")}

	dst := t.TempDir()
	os.Mkdir(filepath.Join(dst, "bin"), 0o700)
	target, err := ResolveTarget(dst, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Fresh([]string{"bin"}); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("Fresh with bin there: %v", err)
	}

	dst = t.TempDir()
	if target, err = ResolveTarget(dst, files); err != nil {
		t.Fatal(err)
	}
	if err := target.Fresh([]string{"bin"}); err != nil {
		t.Fatalf("Fresh with no bin: %v", err)
	}
	os.Mkdir(filepath.Join(dst, "bin"), 0o700) // made after the check
	if err := writeAll(t, files, target, WriterOptions{}); !errors.Is(err, ErrDest) {
		t.Fatalf("writing into a bin made after the check: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "bin", "ls")); err == nil {
		t.Fatal("bin/ls was written into the directory that was there")
	}

	dst = t.TempDir()
	target, _ = ResolveTarget(dst, files)
	if err := target.Fresh([]string{"bin"}); err != nil {
		t.Fatal(err)
	}
	if err := writeAll(t, files, target, WriterOptions{}); err != nil {
		t.Fatalf("a new bin: %v", err)
	}
}

// modeOf is the permission bits of p.
func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestExistingModesKept: without -p a directory that was there keeps its mode (0700 stays 0700,
// not the remote's 0755; 0500, which the copy opens to write in, gets it back) and so does a
// file the copy replaces; what the copy makes gets the source's mode less the umask; with -p
// everything gets the source's.
func TestExistingModesKept(t *testing.T) {
	old := umask
	umask = 0o022
	defer func() { umask = old }()
	files := []File{
		{Name: "priv", Dir: true, Mode: 0o755},
		{Name: "priv/x", Size: 10, Mode: 0o644},
		{Name: "ro", Dir: true, Mode: 0o777},
		{Name: "ro/y", Size: 10, Mode: 0o644},
		{Name: "new", Dir: true, Mode: 0o750},
		{Name: "new/z", Size: 10, Mode: 0o640},
	}
	for _, preserve := range []bool{false, true} {
		dst := t.TempDir()
		os.Mkdir(filepath.Join(dst, "priv"), 0o700)
		os.WriteFile(filepath.Join(dst, "priv", "x"), []byte("secret"), 0o600)
		os.Mkdir(filepath.Join(dst, "ro"), 0o700)
		os.Chmod(filepath.Join(dst, "ro"), 0o500)
		if err := writeAll(t, files, &Target{root: dst, into: true}, WriterOptions{Preserve: preserve}); err != nil {
			t.Fatalf("-p %v: %v", preserve, err)
		}
		want := map[string]os.FileMode{"priv": 0o700, "priv/x": 0o600, "ro": 0o500, "ro/y": 0o644, "new": 0o750, "new/z": 0o640}
		if preserve {
			want = map[string]os.FileMode{"priv": 0o755, "priv/x": 0o644, "ro": 0o755, "ro/y": 0o644, "new": 0o750, "new/z": 0o640}
		}
		for name, m := range want {
			if got := modeOf(t, filepath.Join(dst, name)); got != m {
				t.Errorf("-p %v: %s has mode %04o, want %04o", preserve, name, got, m)
			}
		}
		os.Chmod(filepath.Join(dst, "ro"), 0o700) // for the test's cleanup
	}
}

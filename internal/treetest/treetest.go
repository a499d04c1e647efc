// Package treetest builds file trees for tests and compares trees as rsync -a leaves them:
// kinds, bytes (BLAKE3), permission bits, symbolic link targets, modification times and hard
// link groups. It is for tests only.
package treetest

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"
)

// Entry is what stands at one name of a tree.
type Entry struct {
	Kind  string      // "dir", "file" or "link"
	Mode  fs.FileMode // permission bits (not for links)
	Size  int64
	Sum   [32]byte // a file's BLAKE3
	Link  string   // a link's target text
	MTime int64    // unix nanoseconds
	ino   uint64
	nlink uint64
}

func (e Entry) String() string {
	switch e.Kind {
	case "link":
		return fmt.Sprintf("link -> %q, mtime %s", e.Link, time.Unix(0, e.MTime).UTC().Format(time.RFC3339Nano))
	case "file":
		return fmt.Sprintf("file %04o, %d bytes, blake3 %x…, mtime %s", e.Mode, e.Size, e.Sum[:6], time.Unix(0, e.MTime).UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("dir %04o, mtime %s", e.Mode, time.Unix(0, e.MTime).UTC().Format(time.RFC3339Nano))
}

// Snapshot records root (as ".") and every entry below it, never following a link. Names are
// slash-separated and relative to root.
func Snapshot(t testing.TB, root string) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		e := Entry{Mode: st.Mode().Perm(), MTime: st.ModTime().UnixNano(), ino: sys.Ino, nlink: uint64(sys.Nlink)}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			e.Kind, e.Mode = "link", 0
			if e.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case st.IsDir():
			e.Kind = "dir"
		case st.Mode().IsRegular():
			e.Kind, e.Size = "file", st.Size()
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Sum = blake3.Sum256(b)
		default:
			e.Kind = "special"
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

// Options say what Compare checks beyond kinds, bytes, modes and link targets.
type Options struct {
	MTimes    bool // modification times of files, directories and links (-p)
	HardLinks bool // names sharing an inode in want share one in got, and no others (-H)
	// Skip names entries of want that must not be in got (special files the sender skips).
	Skip map[string]bool
}

// Compare checks that got holds exactly the entries of want (less o.Skip), alike.
func Compare(t testing.TB, what string, want, got map[string]Entry, o Options) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	bad := 0
	for _, n := range names {
		w := want[n]
		g, ok := got[n]
		switch {
		case o.Skip[n]:
			if ok {
				t.Errorf("%s: %s (%s) should have been skipped, is there as %s", what, n, w, g)
				bad++
			}
			continue
		case !ok:
			t.Errorf("%s: %s (%s) missing", what, n, w)
			bad++
			continue
		}
		same := w.Kind == g.Kind && w.Mode == g.Mode && w.Size == g.Size && w.Sum == g.Sum && w.Link == g.Link
		if o.MTimes && w.MTime != g.MTime {
			same = false
		}
		if !same {
			t.Errorf("%s: %s is %s, want %s", what, n, g, w)
			bad++
		}
		if bad > 20 {
			t.Fatalf("%s: too many differences", what)
		}
	}
	for n, g := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: unexpected %s (%s)", what, n, g)
		}
	}
	if o.HardLinks {
		// name → the first name (in order) of its inode's group, on each side.
		group := func(m map[string]Entry) map[string]string {
			first := map[uint64]string{}
			g := map[string]string{}
			for _, n := range names {
				e, ok := m[n]
				if !ok || e.Kind != "file" {
					continue
				}
				if _, ok := first[e.ino]; !ok {
					first[e.ino] = n
				}
				g[n] = first[e.ino]
			}
			return g
		}
		wg, gg := group(want), group(got)
		for n, f := range wg {
			if gg[n] != f {
				t.Errorf("%s: %s shares its inode with %s in the source, with %s at the destination", what, n, f, gg[n])
			}
		}
	}
}

// Random writes a file of size random bytes at p with mode perm.
func Random(t testing.TB, p string, size int, perm fs.FileMode) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	if err := os.WriteFile(p, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // less no umask
		t.Fatal(err)
	}
}

// Build makes the tree the tree tests copy, under root/t, and returns root/t: nested
// directories, an empty one and a private one (0700), a 0-byte file, modes 0600, 0640, 0644 and
// 0755, a file of more than one block, n small files in t/many, symbolic links inside the tree
// (to a file, to a directory, going up), one pointing outside the tree (absolute, to outside),
// one relative out of it and one dangling, a hard link pair, and every entry's modification time
// set to a distinct time in the past (directories' after their contents). Special files are the
// caller's (they need mkfifo or a socket).
func Build(t testing.TB, root, outside string, n int) string {
	t.Helper()
	top := filepath.Join(root, "t")
	for _, d := range []string{"t", "t/empty", "t/private", "t/deep/a/b/c", "t/many", "t/sub"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	Random(t, filepath.Join(top, "big.bin"), 1<<20+4321, 0o644)
	Random(t, filepath.Join(top, "zero"), 0, 0o600)
	Random(t, filepath.Join(top, "run.sh"), 300, 0o755)
	Random(t, filepath.Join(top, "private", "secret"), 64, 0o600)
	Random(t, filepath.Join(top, "deep/a/b/c", "leaf"), 5000, 0o640)
	Random(t, filepath.Join(top, "sub", "x"), 10, 0o644)
	for i := range n {
		Random(t, filepath.Join(top, "many", fmt.Sprintf("f%05d", i)), 1+i*37%3000, 0o644)
	}
	if err := os.Link(filepath.Join(top, "sub", "x"), filepath.Join(top, "hard-x")); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"t/link-file":     "deep/a/b/c/leaf",
		"t/link-dir":      "sub",
		"t/deep/link-up":  "../big.bin",
		"t/link-out":      filepath.Join(outside, "victim"),
		"t/link-out-dir":  outside,
		"t/link-rel-out":  "../../../../etc/passwd",
		"t/sub/dangling":  "no/such/file",
		"t/private/selfe": "selfe", // a link to itself: dangling with -L
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(top, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Times: distinct, in the past, deepest first so that a directory's time is set last.
	var all []string
	filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			all = append(all, p)
		}
		return nil
	})
	base := time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC).UnixNano()
	for i := len(all) - 1; i >= 0; i-- {
		ts := unix.NsecToTimespec(base + int64(i)*int64(time.Hour+time.Millisecond))
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, all[i], []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	return top
}

// Sparse makes a file of size bytes without data on a file system that can hold one (the test's
// temporary directory, else /dev/shm: tmpfs holds files up to 8 EiB), removed after the test; ""
// where none can.
func Sparse(t testing.TB, size int64) string {
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

// NoControl fails the test where s, an error's text, holds a control character (an escape a
// terminal would act on): the hostile tests' check that remote text arrives escaped.
func NoControl(t testing.TB, s string) {
	t.Helper()
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			t.Fatalf("error text %q holds control character %U", s, r)
		}
	}
}

// Empty fails the test where dir holds anything: what a refused copy must leave.
func Empty(t testing.TB, dir string) {
	t.Helper()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%s holds %s after a refused copy", dir, ents[0].Name())
	}
}

// FilterTree makes the tree the filter tests copy, under root/t, and returns root/t: nested
// directories, dot files and a .git directory, *.tmp files (and a directory named b.tmp), names
// with spaces, a symbolic link, an empty directory.
func FilterTree(t testing.TB, root string) string {
	t.Helper()
	top := filepath.Join(root, "t")
	for _, d := range []string{".git/objects", "src/sub dir", "build", "docs/b.tmp", "deep/a/b/c", "empty"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range []string{"a.txt", "b.tmp", "keep.tmp", ".hidden", ".git/config", ".git/objects/x.tmp",
		"src/main.go", "src/main.tmp", "src/sub dir/file one.txt", "src/sub dir/x.tmp", "build/out.o",
		"docs/b.tmp/inner.txt", "docs/readme.txt", "deep/a/b/c/d.txt", "deep/a/b.txt", "c d.txt"} {
		Random(t, filepath.Join(top, f), 10+i*7, 0o644)
	}
	if err := os.Symlink("a.txt", filepath.Join(top, "link.txt")); err != nil {
		t.Fatal(err)
	}
	return top
}

// Rsync runs rsync with args (the oracle of the filter and --delete tests), failing the test on
// its error; it skips the test, saying so, where rsync is not installed.
func Rsync(t testing.TB, args ...string) {
	t.Helper()
	NeedRsync(t)
	if out, err := exec.Command("rsync", args...).CombinedOutput(); err != nil {
		t.Fatalf("rsync %q: %v: %s", args, err, out)
	}
}

// NeedRsync skips the test, saying so, where rsync is not installed.
func NeedRsync(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("rsync is not installed (scripts/setup.sh installs it): it is these tests' oracle")
	}
}

// DeepChain makes a chain of n directories called d below dir, one below the other, each made
// relative to its parent (a path to the deepest would be longer than PATH_MAX).
func DeepChain(t testing.TB, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	for range n {
		if err == nil {
			err = unix.Mkdirat(fd, "d", 0o755)
		}
		if err == nil {
			next, oerr := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			fd, err = next, oerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

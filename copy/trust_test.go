package copy

// The receiving and sending sides against sizes, names and modes the other side chooses (issue
// 37): sizes the block numbering cannot hold, names only the remote knows landing on what the
// destination already has, the modes of what was already there, and the files the sender lists
// swapped before they are read.

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/treetest"
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

// TestCollectRefusesHugeSource: a source beyond MaxSize (an honest sparse file) is refused when it
// is listed, naming it, before anything is sent: it was sent as one block and reported verified.
func TestCollectRefusesHugeSource(t *testing.T) {
	p := treetest.Sparse(t, 1<<52+1)
	if p == "" {
		t.Skip("no file system here holds a sparse file of 4 PiB (tmpfs does)")
	}
	_, err := Collect([]string{p}, CollectOptions{})
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "4 PiB") {
		t.Fatalf("Collect of a 4 PiB file: %v", err)
	}
	// Two that each fit and together do not: refused at the second, by the sender (exit 3), not
	// left to the receiver's plan (exit 10).
	a, b := treetest.Sparse(t, MaxSize/2), treetest.Sparse(t, MaxSize/2+BlockSize)
	if _, err := Collect([]string{a, b}, CollectOptions{}); !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), b) {
		t.Fatalf("Collect of two files beyond 4 PiB together: %v", err)
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

// readAll reads every block of the sources' plan with opener open, as the sender does, and
// returns the bytes read per file name.
func readAll(t *testing.T, s *Sources, open Opener) (map[string][]byte, error) {
	t.Helper()
	plan, err := NewPlan(s.Files)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *Block, 64)
	errc := make(chan error, 1)
	go func() {
		errc <- Read(context.Background(), plan, open, NewPool(8), out, func(int, [32]byte) {})
		close(out)
	}()
	got := map[string][]byte{}
	for b := range out {
		i, _, _ := plan.Locate(b.ID)
		got[plan.Files[i].Name] = append(got[plan.Files[i].Name], b.Data...)
	}
	return got, <-errc
}

// TestSenderReadsWhatItListed: between the listing and the read, another user who can write the
// source swaps a directory for a link to the victim's (~/.ssh), a file for another of the same
// size and time, or puts a FIFO there; the sender stops with an error naming the file and sends
// none of the victim's bytes, and a FIFO does not hold it. Before, Open was os.Open(path): the
// victim's key left under the listed name.
func TestSenderReadsWhatItListed(t *testing.T) {
	secret := []byte("-----BEGIN OPENSSH PRIVATE KEY-----")
	for _, c := range []struct {
		what   string
		follow bool
		want   string // in the error: how the swap was seen
		swap   func(src, victim string)
	}{
		{"a directory swapped for a link", false, "a directory on its path is no longer the one listed", func(src, victim string) {
			os.Rename(filepath.Join(src, "t", "sub"), filepath.Join(src, "old"))
			os.Symlink(victim, filepath.Join(src, "t", "sub"))
		}},
		{"a file swapped for a link", false, "is a symbolic link now", func(src, victim string) {
			os.Remove(filepath.Join(src, "t", "sub", "id"))
			os.Symlink(filepath.Join(victim, "id"), filepath.Join(src, "t", "sub", "id"))
		}},
		{"a file swapped for another of its size and time", false, "changed after it was listed", func(src, victim string) {
			p := filepath.Join(src, "t", "sub", "id")
			st, _ := os.Stat(p)
			os.Remove(p)
			os.Link(filepath.Join(victim, "id"), p)
			os.Chtimes(p, st.ModTime(), st.ModTime())
		}},
		{"a file swapped for a FIFO", false, "changed after it was listed", func(src, victim string) {
			p := filepath.Join(src, "t", "sub", "id")
			os.Remove(p)
			unix.Mkfifo(p, 0o644)
		}},
		{"a followed link pointed elsewhere (-L)", true, "changed after it was listed", func(src, victim string) {
			os.Remove(filepath.Join(src, "t", "sub"))
			os.Symlink(victim, filepath.Join(src, "t", "sub"))
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			src, victim := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(victim, "id"), secret, 0o600)
			os.MkdirAll(filepath.Join(src, "t"), 0o755)
			if c.follow {
				os.Mkdir(filepath.Join(src, "real"), 0o755)
				os.Symlink(filepath.Join(src, "real"), filepath.Join(src, "t", "sub"))
			} else {
				os.Mkdir(filepath.Join(src, "t", "sub"), 0o755)
			}
			os.WriteFile(filepath.Join(src, "t", "sub", "id"), make([]byte, len(secret)), 0o644)
			vst, _ := os.Stat(filepath.Join(victim, "id"))
			os.Chtimes(filepath.Join(src, "t", "sub", "id"), vst.ModTime(), vst.ModTime())
			os.WriteFile(filepath.Join(src, "t", "z"), []byte("after"), 0o644)
			s, err := Collect([]string{filepath.Join(src, "t")}, CollectOptions{Recursive: true, Follow: c.follow})
			if err != nil {
				t.Fatal(err)
			}
			c.swap(src, victim)
			done := make(chan struct{})
			var got map[string][]byte
			go func() {
				defer close(done)
				got, err = readAll(t, s, s.Open())
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the read is held (a FIFO opened for reading blocks)")
			}
			if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), filepath.Join("t", "sub", "id")) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("read after the swap: %v, want %q", err, c.want)
			}
			for name, b := range got {
				if strings.Contains(string(b), string(secret)) {
					t.Fatalf("the victim's bytes were read as %s", name)
				}
			}
		})
	}
}

// TestSenderFileChangedWhileRead: a file whose modification time moves while it is read (written
// in place, the same size) stops the copy, naming it, instead of sending a mix of two versions.
func TestSenderFileChangedWhileRead(t *testing.T) {
	src := t.TempDir()
	p := filepath.Join(src, "f")
	os.WriteFile(p, make([]byte, 3*BlockSize), 0o644)
	s, err := Collect([]string{p}, CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	open := s.Open()
	touching := func(i int) (io.ReaderAt, io.Closer, error) {
		r, c, err := open(i)
		later := time.Now().Add(time.Hour)
		os.Chtimes(p, later, later)
		return r, c, err
	}
	if _, err := readAll(t, s, touching); !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "changed while being read") {
		t.Fatalf("a file changed while read: %v", err)
	}
	if got, err := readAll(t, s, s.Open()); err == nil || len(got) != 0 {
		t.Fatalf("read again after the change: %v, %d files", err, len(got))
	}
}

// TestRecordTempPlanted: the resume record's temporary name can be guessed from the partial
// file's, in a directory others may write. A FIFO planted there does not hold the checkpoint (it
// held it for ever, under its lock), and a hard link or a symbolic link planted there to another
// file leaves that file as it was (O_TRUNC truncated it where protected_hardlinks=0): the name is
// unlinked and made anew, and the record is written.
func TestRecordTempPlanted(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep me"), 0o644)
	part := partName("f")
	stem := strings.TrimSuffix(part, partSuffix)
	tmp := filepath.Join(dir, stem+rtmpSuffix)
	for _, c := range []struct {
		what  string
		plant func() error
	}{
		{"a FIFO", func() error { return unix.Mkfifo(tmp, 0o666) }},
		{"a hard link", func() error { return os.Link(victim, tmp) }},
		{"a symbolic link", func() error { return os.Symlink(victim, tmp) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			os.Remove(tmp)
			if err := c.plant(); err != nil {
				t.Fatal(err)
			}
			rec := newRecord("f", File{Name: "f", Size: 5 * BlockSize, MTime: 1})
			rec.Blocks = 2
			done := make(chan error, 1)
			go func() { done <- writeRecordAt(dfd, part, rec) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s planted: %v", c.what, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s planted holds the checkpoint", c.what)
			}
			got, err := readRecordAt(dfd, stem+recSuffix)
			if err != nil || got.Blocks != 2 {
				t.Fatalf("%s planted: record %+v, %v", c.what, got, err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me" {
				t.Fatalf("%s planted: the other file now holds %q", c.what, b)
			}
			if _, err := os.Lstat(tmp); err == nil {
				t.Fatalf("%s planted: the temporary record is left", c.what)
			}
		})
	}
}

// TestRegistryDirNotPrivate: a partial-file registry directory that another user can write is
// refused with an error naming it and the fix, before anything is written, and its entries are
// not swept: an entry planted there named another user's partial file, which the sweep removed.
func TestRegistryDirNotPrivate(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	reg := filepath.Join(cache, "farwing", "partial")
	files := []File{{Name: "f", Size: 10, Mode: 0o644}}
	if _, err := ResolveTarget(t.TempDir(), files); err != nil {
		t.Fatalf("a new registry: %v", err)
	}
	if m := modeOf(t, reg); m != 0o700 {
		t.Fatalf("registry made with mode %04o", m)
	}
	os.Chmod(reg, 0o777)
	victimDir := t.TempDir()
	victim := filepath.Join(victimDir, partName("work"))
	os.WriteFile(victim, []byte("someone's partial file"), 0o600)
	old := time.Now().Add(-30 * 24 * time.Hour)
	os.Chtimes(victim, old, old)
	os.WriteFile(filepath.Join(reg, "0123456789abcdef.list"), []byte(victim+"\n"), 0o666)
	plan, _ := NewPlan(files)
	w := NewWriter(plan, &Target{root: t.TempDir(), into: true}, WriterOptions{Records: true})
	if w.reg != nil {
		t.Error("a writer keeps its entry in a registry others can write")
	}
	w.Close()
	_, err := ResolveTarget(t.TempDir(), files)
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), reg) || !strings.Contains(err.Error(), "chmod go-w") {
		t.Fatalf("a registry others can write: %v", err)
	}
	if n := SweepPartials(); n != 0 {
		t.Fatalf("the sweep removed %d file(s) listed in a registry others can write", n)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the planted entry's file is gone: %v", err)
	}
	os.Chmod(reg, 0o700)
	if n := SweepPartials(); n != 1 {
		t.Fatalf("the sweep of a private registry removed %d file(s), want 1 (the test's own entry)", n)
	}
}

// TestChecksumHashesWhatItListed: --checksum's digests of the sources (AddSums) are taken from the
// files that were listed: a file swapped for a link to the victim's key, of the same size, stops
// the copy instead of sending the key's digest, and one swapped for a FIFO does not hold it.
func TestChecksumHashesWhatItListed(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		src, victim := t.TempDir(), t.TempDir()
		secret := []byte("-----BEGIN OPENSSH PRIVATE KEY-----")
		os.WriteFile(filepath.Join(victim, "id"), secret, 0o600)
		os.Mkdir(filepath.Join(src, "t"), 0o755)
		p := filepath.Join(src, "t", "f")
		os.WriteFile(p, make([]byte, len(secret)), 0o644)
		s, err := Collect([]string{filepath.Join(src, "t")}, CollectOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if fifo {
			unix.Mkfifo(p, 0o644)
		} else {
			os.Symlink(filepath.Join(victim, "id"), p)
		}
		done := make(chan error, 1)
		go func() { done <- s.AddSums() }()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("hashing the sources is held by a FIFO")
		}
		if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), p) {
			t.Fatalf("AddSums after a swap (FIFO %v): %v", fifo, err)
		}
		keySum, _ := HashFile(strings.NewReader(string(secret)), int64(len(secret)))
		for _, f := range s.Files {
			if f.Sum == hex.EncodeToString(keySum[:]) {
				t.Fatal("the victim's key's digest is in the list")
			}
		}
	}
}

// TestFinishDirsSameDirectory: in a destination others may write, another user who moves the new
// directory d away and one of this user's private directories into its place during the copy does
// not get that directory's mode changed (it became 0755): finishDirs sets the modes of the
// directories the copy made or found only, and otherwise fails naming it.
func TestFinishDirsSameDirectory(t *testing.T) {
	dst := t.TempDir()
	private := filepath.Join(dst, "private")
	os.Mkdir(private, 0o700)
	os.Chmod(private, 0o700)
	files := []File{{Name: "d", Dir: true, Mode: 0o755}, {Name: "d/f", Size: 10, Mode: 0o644}}
	plan, err := NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("0123456789")
	var tr fileTree
	s := plan.Sum(0, data)
	tr.add(&s)
	swapped := false
	w := NewWriter(plan, &Target{root: dst, into: true}, WriterOptions{Digest: func(context.Context, int) ([32]byte, error) {
		if !swapped {
			swapped = true
			os.Rename(filepath.Join(dst, "d"), filepath.Join(dst, "moved"))
			os.Rename(private, filepath.Join(dst, "d"))
		}
		return tr.sum(), nil
	}})
	defer w.Close()
	err = w.WriteBlock(context.Background(), 0, data, s.Digest())
	if err == nil {
		err = w.Finish(context.Background())
	}
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "replaced by another directory") {
		t.Fatalf("a directory swapped during the copy: %v", err)
	}
	if m := modeOf(t, filepath.Join(dst, "d")); m != 0o700 {
		t.Fatalf("the private directory moved into the copy's place got mode %04o", m)
	}
}

// TestReplacedModeOnlyOwn: a file the copy replaces passes its permission bits on only if it is
// this user's: one another user put there (0666, in a shared directory) does not make the new
// file readable to everyone.
func TestReplacedModeOnlyOwn(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to leave a file of another user's at the destination")
	}
	old := umask
	umask = 0o022
	defer func() { umask = old }()
	dst := t.TempDir()
	p := filepath.Join(dst, "f")
	os.WriteFile(p, []byte("planted"), 0o666)
	os.Chmod(p, 0o666)
	os.Chown(p, 65534, 65534)
	if err := writeAll(t, []File{{Name: "f", Size: 10, Mode: 0o600}}, &Target{root: dst, into: true}, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := modeOf(t, p); m != 0o600 {
		t.Fatalf("the new file has mode %04o, want the source's 0600", m)
	}
}

// TestSweepOnlyTemporaryNames: the sweep removes only names of the exact form partName makes: a
// user's ".notes.farwing-draft.part" (no 12 hex digits) stays.
func TestSweepOnlyTemporaryNames(t *testing.T) {
	dst := t.TempDir()
	keep := filepath.Join(dst, ".notes.farwing-draft.part")
	os.WriteFile(keep, []byte("mine"), 0o600)
	stale := filepath.Join(dst, partName("x"))
	os.WriteFile(stale, []byte("left by a dead writer"), 0o600)
	if err := writeAll(t, []File{{Name: "f", Size: 10, Mode: 0o644}}, &Target{root: dst, into: true}, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the user's file was swept: %v", err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("a dead writer's temporary file was not swept")
	}
}

// TestLongHardTargetErrorBounded: a list's hard link to a name of a megabyte gives an error of a
// line, escaped, not of four megabytes (it reaches the terminal, --json and the peer).
func TestLongHardTargetErrorBounded(t *testing.T) {
	err := NewTreeCheck(1).Add([]File{{Name: "h", Hard: strings.Repeat("\x1b", 1<<20)}})
	if !errors.Is(err, ErrName) || len(err.Error()) > 2000 || strings.ContainsRune(err.Error(), 0x1b) {
		t.Fatalf("error of %d bytes: %.200q", len(err.Error()), err)
	}
}

// TestCollectListsWhatItLooksAt: a directory that another user swaps for a link to the victim's
// (~/.ssh) after the walk looked at it, before it reads it, is refused, naming it: nothing of what
// the link leads to (names, sizes) is listed. The walk reads each directory through a descriptor
// checked to be the directory it looked at (it read the swapped path before).
func TestCollectListsWhatItLooksAt(t *testing.T) {
	src, victim := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(victim, "id_ed25519"), []byte("key"), 0o600)
	top := filepath.Join(src, "t")
	os.MkdirAll(filepath.Join(top, "sub"), 0o755)
	tfd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tfd)
	lst, err := statAt(tfd, "sub", false) // what the walk looked at
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(top, "sub"), filepath.Join(src, "old"))
	os.Symlink(victim, filepath.Join(top, "sub"))
	c := &collector{s: &Sources{}, inodes: map[devIno]string{}}
	err = c.entry(filepath.Join(top, "sub"), "t/sub", lst, tfd, nil)
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "changed while it was listed") {
		t.Fatalf("a directory swapped for a link while listed: %v", err)
	}
	for _, f := range c.s.Files {
		if strings.Contains(f.Name, "id_ed25519") {
			t.Fatalf("the victim's %s was listed", f.Name)
		}
	}
}

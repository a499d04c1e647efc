package tuning

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStartProfileNames (issue 37, second read): the profile is a new file of this user's only;
// whatever stands at its name (a link to another file, a file, a FIFO with a reader) is left as it
// was and no profile is written into it. os.Create followed the link and truncated its target, and
// opened the FIFO (or waited for a reader of it).
func TestStartProfileNames(t *testing.T) {
	dir := t.TempDir()
	name := func(prefix string) string { return fmt.Sprintf("%s.test.%d.pprof", prefix, os.Getpid()) }

	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, name(filepath.Join(dir, "link")))
	StartProfile(filepath.Join(dir, "link"), "test")()
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target now holds %d bytes", len(b))
	}
	if fi, err := os.Lstat(name(filepath.Join(dir, "link"))); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link: %v %v", fi, err)
	}

	there := name(filepath.Join(dir, "file"))
	os.WriteFile(there, []byte("keep"), 0o644)
	StartProfile(filepath.Join(dir, "file"), "test")()
	if b, _ := os.ReadFile(there); string(b) != "keep" {
		t.Errorf("the file there now holds %d bytes", len(b))
	}

	fifo := name(filepath.Join(dir, "fifo"))
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a reader: opening it to write would not wait
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	StartProfile(filepath.Join(dir, "fifo"), "test")()
	var buf [1 << 16]byte
	if n, _ := r.Read(buf[:]); n > 0 {
		t.Errorf("%d bytes of profile written into the FIFO", n)
	}

	StartProfile(filepath.Join(dir, "new"), "test")()
	fi, err := os.Lstat(name(filepath.Join(dir, "new")))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || fi.Size() == 0 {
		t.Fatalf("the new profile: %v (%v)", fi, err)
	}
	if b, _ := os.ReadFile(name(filepath.Join(dir, "new"))); !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("the new profile is not gzip")
	}
}

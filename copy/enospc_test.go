//go:build linux

package copy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriterNoSpace: a destination that fills up stops the copy with a destination error that
// names the file being written (not its temporary name) and says what to do; no temporary file is
// left, and files placed before it stay. Root only (it mounts a 1 MiB tmpfs).
func TestWriterNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: this test mounts a small tmpfs to fill")
	}
	root, dst := t.TempDir(), t.TempDir()
	if err := unix.Mount("tmpfs", dst, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	defer unix.Unmount(dst, 0)
	_, small := writeFile(t, root, "t/a-small", 4000)
	writeFile(t, root, "t/b-big", 3*BlockSize)
	src, err := Collect([]string{filepath.Join(root, "t")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := streamTree(t, src, dst, WriterOptions{}, nil)
	w.Interrupt()
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), filepath.Join(dst, "t", "b-big")+":") ||
		!strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "free space there") {
		t.Fatalf("a full destination: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "t", "a-small")); err != nil || string(got) != string(small) {
		t.Errorf("the file placed before the destination filled up is gone (%v)", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dst, "t", ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
	t.Log(err)
}

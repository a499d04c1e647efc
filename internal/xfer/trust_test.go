package xfer

// Issue 37's second round of trust checks, from both ends of the control channel: sizes the
// block numbering cannot hold, a request whose name only the remote knows landing on what the
// destination has, the modes of what was already there.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/lane/lanetest"
)

// hugeLists are file lists whose sizes the block numbering cannot hold: 2^52+1 bytes (one block
// to a 32-bit count), the largest int64, and two files that add up to more than it holds.
func hugeLists(name string) [][]fcopy.File {
	f := func(n string, size int64) fcopy.File { return fcopy.File{Name: n, Size: size, Mode: 0o644} }
	return [][]fcopy.File{
		{f(name, 1<<52+1)},
		{f(name, 1<<63-1)},
		{f(name, fcopy.MaxSize+1)},
	}
}

// TestPullRefusesHugeSize: a remote that answers a pull with a size beyond what a copy can number
// is refused before a byte is written (it was one block, verified, and truncated to 4 PiB).
func TestPullRefusesHugeSize(t *testing.T) {
	for _, files := range hugeLists("report.txt") {
		pullRefused(t, files, "report.txt", func(*Options) {})
	}
	d := fcopy.File{Name: "t", Dir: true, Mode: 0o755}
	two := []fcopy.File{d, {Name: "t/a", Size: fcopy.MaxSize / 2, Mode: 0o644}, {Name: "t/b", Size: fcopy.MaxSize/2 + fcopy.BlockSize, Mode: 0o644}}
	pullRefused(t, two, "t", func(o *Options) { o.Recursive = true })
}

// TestPushRefusesHugeSize: a client that pushes such a size is refused by the real server before
// it writes anything, with the protocol code.
func TestPushRefusesHugeSize(t *testing.T) {
	for _, files := range hugeLists("f") {
		e := newEnv(t, lanetest.Link{}, 1)
		dst := t.TempDir()
		o := e.options()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, _, err := start(ctx, &o, "host", Msg{Role: "recv", Dest: dst, Files: files, Window: 16}, &Result{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ctl.Next(c.ctx, 10*time.Second)
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != ExitProtocol || !strings.Contains(err.Error(), "4 PiB") {
			t.Errorf("server's answer to a size of %d: %v", files[0].Size, err)
		}
		c.close(0)
		cancel()
		emptyDir(t, dst)
	}
}

// TestPushRefusesHugeSource: an honest sparse source beyond what a copy can number (on tmpfs) is
// refused by the client before anything starts, with the source's exit code, naming it.
func TestPushRefusesHugeSource(t *testing.T) {
	var src string
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		f, err := os.CreateTemp(dir, "farwing-sparse-*")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.Remove(f.Name()) })
		err = f.Truncate(1<<52 + 1)
		f.Close()
		if err == nil {
			src = f.Name()
			break
		}
	}
	if src == "" {
		t.Skip("no file system here holds a sparse file of 4 PiB (tmpfs does)")
	}
	e := newEnv(t, lanetest.Link{}, 1)
	dst := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Push(ctx, e.options(), []string{src}, "host", dst)
	if ExitCode(err) != ExitSource || !strings.Contains(err.Error(), filepath.Base(src)) {
		t.Fatalf("push of a 4 PiB source: %v (exit %d)", err, ExitCode(err))
	}
	emptyDir(t, dst)
}

package xfer

// Issue 37's second round of trust checks, from both ends of the control channel: sizes the
// block numbering cannot hold, a request whose name only the remote knows landing on what the
// destination has, the modes of what was already there.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/treetest"
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
		c, _, err := start(ctx, &o, "host", Msg{Role: RoleRecv, Dest: dst, Files: files, Window: 16}, &Result{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ctl.Next(c.ctx, 10*time.Second)
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != CodeProtocol || !strings.Contains(err.Error(), "4 PiB") {
			t.Errorf("server's answer to a size of %d: %v", files[0].Size, err)
		}
		c.close(0)
		cancel()
		treetest.Empty(t, dst)
	}
}

// TestPushRefusesHugeSource: an honest sparse source beyond what a copy can number (on tmpfs) is
// refused by the client before anything starts, with the source's exit code, naming it.
func TestPushRefusesHugeSource(t *testing.T) {
	src := treetest.Sparse(t, 1<<52+1)
	if src == "" {
		t.Skip("no file system here holds a sparse file of 4 PiB (tmpfs does)")
	}
	e := newEnv(t, lanetest.Link{}, 1)
	dst := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Push(ctx, e.options(), []string{src}, "host", dst)
	if CodeOf(err) != CodeSource || !strings.Contains(err.Error(), filepath.Base(src)) {
		t.Fatalf("push of a 4 PiB source: %v (exit %d)", err, CodeOf(err))
	}
	treetest.Empty(t, dst)
}

// TestPullHomeRequestNotMerged: a remote that answers a pull of its home directory ("host:",
// "host:.", "host:x/..") with bin/ls is refused where the destination has a bin already, with the
// destination's code, and bin is left as it was; the remote is told. Before, ~/bin/ls was written
// (and ~/bin is on Debian's PATH).
func TestPullHomeRequestNotMerged(t *testing.T) {
	for _, req := range []string{"", ".", "x/.."} {
		t.Run(strings.ReplaceAll(req, "/", "|"), func(t *testing.T) { pullHomeRequestNotMerged(t, req) })
	}
}

// pullHomeRequestNotMerged is one request of TestPullHomeRequestNotMerged.
func pullHomeRequestNotMerged(t *testing.T, req string) {
	e := newEnv(t, lanetest.Link{}, 1)
	told := make(chan Msg, 1)
	e.serve = hostileServer(func(ctl *Control, hello Msg) error {
		return sendFiles(ctl, Msg{T: KindFiles}, []fcopy.File{{Name: "bin", Dir: true, Mode: 0o755}, {Name: "bin/ls", Size: 10, Mode: 0o755}})
	}, told)
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	os.Mkdir(bin, 0o700)
	o := e.options()
	o.Recursive = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, err := Pull(ctx, o, "host", []string{req}, home)
	cancel()
	if CodeOf(err) != CodeDest || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("pull of %q with bin there: %v (exit %d)", req, err, CodeOf(err))
	}
	treetest.NoControl(t, err.Error())
	treetest.Empty(t, bin)
	if m := modeOfPath(t, bin); m != 0o700 {
		t.Errorf("bin's mode changed to %04o", m)
	}
	select {
	case m := <-told:
		if m.Code != CodeDest {
			t.Errorf("the remote was told %q with code %d", m.Err, m.Code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not tell the remote why it stopped")
	}
}

func modeOfPath(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestCopyKeepsExistingModes: `farwing copy -r host:t/d local/` where local/d exists as 0700
// leaves it 0700 (it became 0755, readable by others); a file already there that the copy skips
// keeps its mode 0600, and one it replaces too. A push's server does the same.
func TestCopyKeepsExistingModes(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	remote, local := t.TempDir(), t.TempDir()
	tree(t, remote, map[string]int{"t/d/same": 100, "t/d/other": 200})
	os.Chmod(filepath.Join(remote, "t", "d"), 0o755)
	os.Chmod(filepath.Join(remote, "t", "d", "same"), 0o644)
	os.Chmod(filepath.Join(remote, "t", "d", "other"), 0o644)
	d := filepath.Join(local, "d")
	os.Mkdir(d, 0o700)
	os.Chmod(d, 0o700)
	b, _ := os.ReadFile(filepath.Join(remote, "t", "d", "same"))
	os.WriteFile(filepath.Join(d, "same"), b, 0o600)
	st, _ := os.Stat(filepath.Join(remote, "t", "d", "same"))
	os.Chtimes(filepath.Join(d, "same"), st.ModTime(), st.ModTime())
	os.WriteFile(filepath.Join(d, "other"), []byte("old"), 0o600)
	o := e.options()
	o.Recursive = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Pull(ctx, o, "host", []string{filepath.Join(remote, "t", "d")}, local+"/")
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedFiles != 1 || len(res.Files) != 1 {
		t.Fatalf("skipped %d, copied %d", res.SkippedFiles, len(res.Files))
	}
	for name, want := range map[string]os.FileMode{"d": 0o700, "d/same": 0o600, "d/other": 0o600} {
		if got := modeOfPath(t, filepath.Join(local, name)); got != want {
			t.Errorf("pull: %s has mode %04o, want %04o", name, got, want)
		}
	}
	sameBytes(t, filepath.Join(remote, "t", "d", "other"), filepath.Join(d, "other"))

	// A push into a directory the server has as 0700.
	dst := t.TempDir()
	os.Mkdir(filepath.Join(dst, "d"), 0o700)
	os.Chmod(filepath.Join(dst, "d"), 0o700)
	if _, err := Push(ctx, o, []string{filepath.Join(remote, "t", "d")}, "host", dst); err != nil {
		t.Fatal(err)
	}
	if got := modeOfPath(t, filepath.Join(dst, "d")); got != 0o700 {
		t.Errorf("push: d has mode %04o, want 0700", got)
	}
}

// TestServeTellsRefusedHello: a hello the server refuses before decoding it (beyond its type's
// bounds) is answered with an error naming why, with the protocol code: the client's user sees
// the reason, not only the peer going away.
func TestServeTellsRefusedHello(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	priv, err := newKex()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	hello := repeated(`{"t":"hello","paths":["a"],"stats":{"lanes":[`, "{}", 1<<20, `]}}`)
	err = Serve(context.Background(), bytes.NewReader(hello), &out, encodePub(priv.PublicKey()), ServeOptions{Lanes: e.lanes(serverHost)})
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Serve: %v", err)
	}
	var last Msg
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		json.Unmarshal([]byte(line), &last)
	}
	if last.T != KindError || last.Code != CodeProtocol || !strings.Contains(last.Err, "hello") {
		t.Fatalf("the server's last message: %+v", last)
	}
}

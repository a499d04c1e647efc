package xfer

// Hostile peers on the control channel: a remote that answers a pull with what was not asked for,
// a client that pushes names that escape the destination, error messages that carry terminal
// escapes, messages that never end. Each is refused with a clear error and a distinct exit code,
// and nothing is written outside the destination.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane/lanetest"
)

// hostileServer is a remote peer that speaks the protocol as far as script says: it announces
// itself (a real key, ports nothing listens on), reads the client's hello and hands over.
func hostileServer(script func(ctl *Control, hello Msg) error, told chan<- Msg) func(context.Context, io.Reader, io.Writer, string, ServeOptions) error {
	return func(ctx context.Context, r io.Reader, w io.Writer, _ string, _ ServeOptions) error {
		ctl := NewControl(r, w, nil)
		ctl.Start(nil)
		priv, err := newKex()
		if err != nil {
			return err
		}
		ctl.Send(Msg{T: KindReady, Version: Version, Proto: Proto, Pub: encodePub(priv.PublicKey()), Ports: []int{9, 9, 9, 9}, Addr: serverHost.String()})
		hello, err := ctl.Expect(ctx, KindHello, 5*time.Second)
		if err != nil {
			return err
		}
		if err := script(ctl, hello); err != nil {
			return err
		}
		// Report what the client answers (its refusal), then wait for it to leave.
		for {
			m, err := ctl.Next(ctx, 10*time.Second)
			var re *RemoteError
			if errors.As(err, &re) {
				if told != nil {
					told <- m
				}
				continue
			}
			if err != nil {
				return nil
			}
		}
	}
}

// TestPullRefusesWhatWasNotAsked: asked for report.txt, a remote that also sends .bashrc,
// .ssh/authorized_keys, ../x, /etc/x, names with escapes or newlines, a directory or a tree
// without -r, or a name twice: the client refuses the list before a byte is written, tells the
// remote, and exits with the protocol code and an escaped message.
func TestPullRefusesWhatWasNotAsked(t *testing.T) {
	f := func(name string, size int64) fcopy.File { return fcopy.File{Name: name, Size: size, Mode: 0o644} }
	d := func(name string) fcopy.File { return fcopy.File{Name: name, Dir: true, Mode: 0o755} }
	for _, c := range []struct {
		what  string
		files []fcopy.File
		r     bool
	}{
		{"an extra file", []fcopy.File{f("report.txt", 10), f(".bashrc", 10)}, false},
		{"an extra tree", []fcopy.File{f("report.txt", 10), d(".ssh"), f(".ssh/authorized_keys", 10)}, true},
		{"another name", []fcopy.File{f("authorized_keys", 10)}, false},
		{"dot-dot", []fcopy.File{f("../report.txt", 10)}, false},
		{"absolute", []fcopy.File{f("/etc/report.txt", 10)}, false},
		{"escape sequence", []fcopy.File{f("report.txt\x1b]0;owned\x07", 10)}, false},
		{"newline", []fcopy.File{f("report.txt\nx", 10)}, false},
		{"not UTF-8", []fcopy.File{f("report\xff.txt", 10)}, false},
		{"a directory without -r", []fcopy.File{d("report.txt")}, false},
		{"a tree without -r", []fcopy.File{d("report.txt"), f("report.txt/x", 1)}, false},
		{"below a file", []fcopy.File{f("report.txt", 1), f("report.txt/x", 1)}, true},
		{"twice", []fcopy.File{f("report.txt", 1), f("report.txt", 1)}, false},
		{"a child without its directory", []fcopy.File{f("report.txt/a/b", 1)}, true},
	} {
		t.Run(c.what, func(t *testing.T) {
			pullRefused(t, c.files, "report.txt", func(o *Options) { o.Recursive = c.r })
		})
	}
}

// TestPullTakesWhatWasAsked: the same checks let through what a request can produce: a file, a
// tree under -r, and the remote's own name for its home directory.
func TestPullTakesWhatWasAsked(t *testing.T) {
	f := func(name string) fcopy.File { return fcopy.File{Name: name, Size: 1, Mode: 0o644} }
	d := func(name string) fcopy.File { return fcopy.File{Name: name, Dir: true, Mode: 0o755} }
	for _, c := range []struct {
		paths []string
		r     bool
		files []fcopy.File
	}{
		{[]string{"report.txt"}, false, []fcopy.File{f("report.txt")}},
		{[]string{"dir/sub/report.txt", "~/b"}, false, []fcopy.File{f("report.txt"), f("b")}},
		{[]string{"/data/t/"}, true, []fcopy.File{d("t"), d("t/x"), f("t/x/y")}},
		{[]string{"."}, true, []fcopy.File{d("alice"), f("alice/.profile")}},
		{[]string{""}, true, []fcopy.File{d("alice")}},
	} {
		if _, err := fcopy.MatchRequest(c.paths, fcopy.CollectOptions{Recursive: c.r}, c.files); err != nil {
			t.Errorf("%q (-r %v): %v", c.paths, c.r, err)
		}
		if _, err := fcopy.NewPlan(c.files); err != nil {
			t.Errorf("%q: plan: %v", c.paths, err)
		}
	}
	if _, err := fcopy.MatchRequest([]string{"."}, fcopy.CollectOptions{Recursive: true}, []fcopy.File{d("alice"), d("bob")}); err == nil {
		t.Error("one request for the home directory brought two top-level names")
	}
}

// TestRemoteErrorEscaped: an error message from the remote with terminal escapes and a made-up
// exit code reaches the user escaped, with the generic exit code.
func TestRemoteErrorEscaped(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileServer(func(ctl *Control, hello Msg) error {
		return ctl.Send(Msg{T: KindError, Err: "\x1b]0;owned\x07\x1b[2J\x1b[31mdisk on fire\r\nfarwing: copied 1 file", Code: 77})
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Pull(ctx, e.options(), "host", []string{"x"}, t.TempDir())
	var re *RemoteError
	if !errors.As(err, &re) || CodeOf(err) != CodeFail || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("remote error: %v (exit %d)", err, CodeOf(err))
	}
	treetest.NoControl(t, err.Error())
}

// TestOversizedMessage: a remote that sends a line without end is cut off at the bound, with the
// protocol code, instead of growing this end's memory.
func TestOversizedMessage(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileServer(func(ctl *Control, hello Msg) error {
		chunk := []byte(`{"t":"files","files":[` + strings.Repeat(`{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","size":1},`, 1<<14))
		for sent := 0; sent <= maxMessage; sent += len(chunk) {
			if _, err := ctl.w.Write(chunk); err != nil {
				return nil
			}
		}
		return nil
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Pull(ctx, e.options(), "host", []string{"x"}, t.TempDir())
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("endless message: %v", err)
	}
}

// TestPushRefusesEscapingNames: a client whose push names ../x, an absolute path or a name with
// an escape sequence is refused by the real server before it writes anything, with the protocol
// code, and nothing appears outside (or inside) the destination.
func TestPushRefusesEscapingNames(t *testing.T) {
	for _, name := range []string{"../escaped", "/tmp/escaped", "a/../../escaped", "x\x1b[2J", "x\ny"} {
		t.Run(strings.ReplaceAll(name, "/", "|"), func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			root := t.TempDir()
			dst := filepath.Join(root, "dst")
			os.Mkdir(dst, 0o755)
			o := e.options()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res := &Result{}
			c, _, err := start(ctx, &o, "host", Msg{Role: RoleRecv, Dest: dst, Files: []fcopy.File{{Name: name, Size: 5, Mode: 0o644}}, Window: 16}, res)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close(0)
			_, err = c.ctl.Next(c.ctx, 10*time.Second)
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != CodeProtocol {
				t.Fatalf("server's answer to %q: %v", name, err)
			}
			treetest.NoControl(t, err.Error())
			treetest.Empty(t, dst)
			if ents, _ := os.ReadDir(root); len(ents) != 1 {
				t.Fatalf("%d entries beside the destination", len(ents))
			}
		})
	}
}

// TestPullIntoSymlink: an honest pull of a tree into a destination where a directory of the tree
// is a symbolic link to elsewhere is refused before any data moves; nothing lands elsewhere.
func TestPullIntoSymlink(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	remote, dst, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	tree(t, remote, map[string]int{"t/sub/x": 100, "t/y": 5})
	os.Mkdir(filepath.Join(dst, "t"), 0o755)
	os.Symlink(elsewhere, filepath.Join(dst, "t", "sub"))
	o := e.options()
	o.Recursive = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, dst)
	if !errors.Is(err, fcopy.ErrDest) || CodeOf(err) != CodeDest || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("pull through a symlink: %v (exit %d)", err, CodeOf(err))
	}
	treetest.Empty(t, elsewhere)
}

// hostileTrees are file lists that try to place bytes outside a destination "t": names with
// .. or absolute, a symbolic link and then a file or a directory through it, link targets and
// names with NUL or control characters, hard links to what the list does not hold, and the
// kinds a pull's request cannot bring. hard says the list needs -H to get past MatchRequest.
func hostileTrees(outside string) []struct {
	what  string
	files []fcopy.File
	hard  bool
} {
	d := func(n string) fcopy.File { return fcopy.File{Name: n, Dir: true, Mode: 0o755} }
	f := func(n string) fcopy.File { return fcopy.File{Name: n, Size: 5, Mode: 0o644} }
	l := func(n, to string) fcopy.File { return fcopy.File{Name: n, Link: to, Mode: 0o777} }
	h := func(n, to string) fcopy.File { return fcopy.File{Name: n, Hard: to, Mode: 0o644} }
	return []struct {
		what  string
		files []fcopy.File
		hard  bool
	}{
		{"dot-dot", []fcopy.File{d("t"), f("t/../x")}, false},
		{"dot-dot at the top", []fcopy.File{d("t"), f("../x")}, false},
		{"absolute", []fcopy.File{d("t"), f("/etc/x")}, false},
		{"a link then a file through it", []fcopy.File{d("t"), l("t/a", outside), f("t/a/victim")}, false},
		{"a link then a directory through it", []fcopy.File{d("t"), l("t/a", outside), d("t/a/sub"), f("t/a/sub/x")}, false},
		{"a link then a directory of its name", []fcopy.File{d("t"), l("t/a", outside), d("t/a"), f("t/a/x")}, false},
		{"a link target with NUL", []fcopy.File{d("t"), l("t/a", outside+"\x00/x")}, false},
		{"a link named with an escape", []fcopy.File{d("t"), l("t/a\x1b]0;owned\x07", "x")}, false},
		{"a file named with a newline", []fcopy.File{d("t"), f("t/a\nb")}, false},
		{"a link at the top", []fcopy.File{l("t", outside)}, false},
		{"a hard link to outside", []fcopy.File{d("t"), h("t/h", "../x")}, true},
		{"a hard link to a link", []fcopy.File{d("t"), l("t/a", outside+"/victim"), h("t/h", "t/a")}, true},
		{"a hard link without -H", []fcopy.File{d("t"), f("t/a"), h("t/h", "t/a")}, false},
	}
}

// outsideDir is a directory beside the destination with a file in it, and a check that a
// refused copy left it as it was.
func outsideDir(t *testing.T) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "victim"), []byte("keep"), 0o644)
	before := treetest.Snapshot(t, dir)
	return dir, func() {
		t.Helper()
		treetest.Compare(t, "outside the destination", before, treetest.Snapshot(t, dir), treetest.Options{MTimes: true})
	}
}

// TestPullRefusesHostileTree: a remote that answers a pull of t with a hostile tree is refused
// before a byte is written, with the protocol code, and tells the remote why; nothing changes
// outside the destination (and nothing appears in it).
func TestPullRefusesHostileTree(t *testing.T) {
	outside, untouched := outsideDir(t)
	for _, c := range hostileTrees(outside) {
		t.Run(c.what, func(t *testing.T) {
			pullRefused(t, c.files, "t", func(o *Options) { o.Recursive, o.HardLinks = true, c.hard })
			untouched()
		})
	}
}

// TestPushRefusesHostileTree: a client that pushes a hostile tree is refused by the real server
// before it writes anything, with the protocol code; nothing changes outside the destination.
func TestPushRefusesHostileTree(t *testing.T) {
	outside, untouched := outsideDir(t)
	for _, c := range hostileTrees(outside) {
		if c.what == "a hard link without -H" || c.what == "a link at the top" {
			continue // a push's receiver takes them: the client chose to send its own tree so
		}
		t.Run(c.what, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			dst := t.TempDir()
			o := e.options()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c2, _, err := start(ctx, &o, "host", Msg{Role: RoleRecv, Dest: dst, Files: c.files, Window: 16}, &Result{})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.close(0)
			_, err = c2.ctl.Next(c2.ctx, 10*time.Second)
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != CodeProtocol {
				t.Fatalf("server's answer: %v", err)
			}
			treetest.NoControl(t, err.Error())
			treetest.Empty(t, dst)
			untouched()
		})
	}
}

// TestHostileTreeThroughExistingLinks: an honest-looking tree whose names go through symbolic
// links that already stand at the destination (t itself, or t/l, pointing outside) is refused
// on a pull and on a push, with the destination code, and nothing changes outside.
func TestHostileTreeThroughExistingLinks(t *testing.T) {
	outside, untouched := outsideDir(t)
	d := func(n string) fcopy.File { return fcopy.File{Name: n, Dir: true, Mode: 0o755} }
	f := func(n string) fcopy.File { return fcopy.File{Name: n, Size: 5, Mode: 0o644} }
	list := []fcopy.File{d("t"), d("t/l"), f("t/l/victim"), f("t/x")}
	for _, c := range []struct {
		what  string
		setup func(dst string)
	}{
		{"t is a link", func(dst string) { os.Symlink(outside, filepath.Join(dst, "t")) }},
		{"t/l is a link", func(dst string) {
			os.Mkdir(filepath.Join(dst, "t"), 0o755)
			os.Symlink(outside, filepath.Join(dst, "t", "l"))
		}},
	} {
		t.Run("pull: "+c.what, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileServer(func(ctl *Control, hello Msg) error {
				return sendFiles(ctl, Msg{T: KindFiles}, list)
			}, nil)
			dst := t.TempDir()
			c.setup(dst)
			o := e.options()
			o.Recursive = true
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := Pull(ctx, o, "host", []string{"t"}, dst)
			if CodeOf(err) != CodeDest || !strings.Contains(fmt.Sprint(err), "symbolic link") {
				t.Fatalf("pull through an existing link: %v (exit %d)", err, CodeOf(err))
			}
			untouched()
		})
		t.Run("push: "+c.what, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			dst := t.TempDir()
			c.setup(dst)
			o := e.options()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c2, _, err := start(ctx, &o, "host", Msg{Role: RoleRecv, Dest: dst, Files: list, Window: 16}, &Result{})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.close(0)
			_, err = c2.ctl.Next(c2.ctx, 10*time.Second)
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != CodeDest || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("server's answer: %v", err)
			}
			untouched()
		})
	}
}

// TestPullSkippedReport: the remote's report of what it skipped is printed escaped, and one
// out of bounds is refused with the protocol code.
func TestPullSkippedReport(t *testing.T) {
	list := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}}
	for _, c := range []struct {
		what string
		s    fcopy.Skipped
		ok   bool
	}{
		{"escapes in the example", fcopy.Skipped{Special: 2, SpecialExample: "/home/u/t/\x1b]0;owned\x07fifo"}, true},
		{"a negative count", fcopy.Skipped{Special: -1, SpecialExample: "x"}, false},
		{"an example longer than a path", fcopy.Skipped{Loops: 1, LoopExample: strings.Repeat("x", 5000)}, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileServer(func(ctl *Control, hello Msg) error {
				return sendFiles(ctl, Msg{T: KindFiles, Skipped: &c.s}, list)
			}, nil)
			var warned []string
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			o := e.options()
			o.Recursive = true
			o.Warn = func(m string) {
				warned = append(warned, m)
				cancel() // the hostile remote opens no lanes: the copy goes no further
			}
			_, err := Pull(ctx, o, "host", []string{"t"}, t.TempDir())
			if !c.ok {
				if CodeOf(err) != CodeProtocol || len(warned) != 0 {
					t.Fatalf("refused report: %v (exit %d), warnings %q", err, CodeOf(err), warned)
				}
				return
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "skipped 2 special file(s)") {
				t.Fatalf("warnings %q (%v)", warned, err)
			}
			treetest.NoControl(t, warned[0])
		})
	}
}

// toldProtocol waits for the error the client sent its remote and checks it carries the protocol
// code: a client that refuses a peer says why.
func toldProtocol(t *testing.T, told <-chan Msg) {
	t.Helper()
	select {
	case m := <-told:
		if m.Code != CodeProtocol {
			t.Fatalf("the remote was told %q with code %d", m.Err, m.Code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not tell the remote why it stopped")
	}
}

// pullRefused pulls req (with the options set gives) from a remote that answers with files: the
// pull must end with the protocol code and an escaped error, write nothing into the destination,
// and tell the remote why.
func pullRefused(t *testing.T, files []fcopy.File, req string, set func(*Options)) {
	t.Helper()
	e := newEnv(t, lanetest.Link{}, 1)
	told := make(chan Msg, 1)
	e.serve = hostileServer(func(ctl *Control, hello Msg) error {
		return sendFiles(ctl, Msg{T: KindFiles}, files)
	}, told)
	dst := t.TempDir()
	o := e.options()
	set(&o)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Pull(ctx, o, "host", []string{req}, dst)
	if err == nil || CodeOf(err) != CodeProtocol {
		t.Fatalf("pull accepted the list or failed otherwise: %v (exit %d)", err, CodeOf(err))
	}
	treetest.NoControl(t, err.Error())
	treetest.Empty(t, dst)
	toldProtocol(t, told)
}

// TestPortsOutsideRange: a remote peer that offers lanes outside the --port range the client asked
// for is refused (exit 10) before any UDP goes there.
func TestPortsOutsideRange(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileServer(func(*Control, Msg) error { return nil }, nil) // ports 9, 9, 9, 9
	o := e.options()
	o.Ports = session.PortRange{Lo: 40000, Hi: 40003}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src := t.TempDir()
	tree(t, src, map[string]int{"f": 10})
	_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", t.TempDir())
	if CodeOf(err) != CodeProtocol || !strings.Contains(fmt.Sprint(err), "offered UDP port 9, outside --port 40000-40003") {
		t.Fatalf("ports outside the range: %v (exit %d)", err, CodeOf(err))
	}
}

// TestPushRefusesHostileConfirmations: a push's receiver (the real Serve, its messages changed on
// the way) that confirms what it did not place is refused as its confirmation comes, while the
// data travels: a digest that is not the source's, a file not in the list, one confirmed twice (in
// a chunk, or again in a later one), files out of order, one more than were sent, a malformed
// chunk, a verdict short of a file or counting otherwise than its chunks. Each ends the copy with
// the verify exit (7) or, for what breaks the chunks' rules, the protocol exit (10); Options.File
// hears of exactly the files confirmed before it, each checked, none of the refused chunk. A path
// with terminal escapes is taken, escaped.
func TestPushRefusesHostileConfirmations(t *testing.T) {
	smallChunks(t, 50) // several chunks for the 300 files; before newEnv, whose wait runs first
	src := t.TempDir()
	files := map[string]int{}
	for i := range 300 {
		files[fmt.Sprintf("t/f%03d", i)] = 500 + i
	}
	sums := tree(t, src, files)
	top := filepath.Join(src, "t")
	list, err := fcopy.Collect([]string{top}, fcopy.CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var sent []string // the files, in the list's order
	for _, f := range list.Files {
		if f.Regular() {
			sent = append(sent, f.Name)
		}
	}
	type results = []fcopy.FileResult
	// at changes the first chunk from the k0-th on that holds two results at least (the server
	// sends results as files are placed, so where its chunks are cut depends on timing: a chunk
	// of one came in CI).
	at := func(k0 int, f func(part results, prev fcopy.FileResult) results) func(int, results, fcopy.FileResult) (results, bool) {
		return func(k int, part results, prev fcopy.FileResult) (results, bool) {
			if k < k0 || len(part) < 2 {
				return part, false
			}
			return f(part, prev), true
		}
	}
	forged := fcopy.FileResult{Name: "t/extra", Size: 1, Sum: strings.Repeat("00", 32)}
	for _, c := range []struct {
		name string
		// chunk changes the k-th results chunk as it comes, after prev (true: it did; a nil
		// chunk goes as bytes that are not DEFLATE); end changes the last chunk and done, and
		// the second chunk it returns goes as one of its own before done.
		chunk func(k int, part results, prev fcopy.FileResult) (results, bool)
		end   func(last results, done *Msg) (results, results)
		code  ErrorCode
		want  string
		told  int // files told of; -1: those of the chunks before the changed one
	}{
		{name: "another digest", chunk: at(2, func(p results, _ fcopy.FileResult) results { p[1].Sum = strings.Repeat("0", 64); return p }),
			code: CodeVerify, want: "with BLAKE3 \"000", told: -1},
		{name: "a file not in the list", chunk: at(2, func(p results, _ fcopy.FileResult) results { p[1].Name = "t/nothere"; return p }),
			code: CodeVerify, want: `confirmed "t/nothere"`, told: -1},
		{name: "twice in a chunk", chunk: at(2, func(p results, _ fcopy.FileResult) results { p[1] = p[0]; return p }),
			code: CodeVerify, want: "twice", told: -1},
		{name: "again in a later chunk", chunk: at(2, func(p results, prev fcopy.FileResult) results { return append(results{prev}, p...) }),
			code: CodeVerify, want: "twice", told: -1},
		{name: "out of order", chunk: at(2, func(p results, _ fcopy.FileResult) results { p[0], p[1] = p[1], p[0]; return p }),
			code: CodeVerify, want: "was next", told: -1},
		{name: "a malformed chunk", chunk: at(2, func(results, fcopy.FileResult) results { return nil }),
			code: CodeProtocol, want: "not DEFLATE", told: -1},
		{name: "one more than sent", end: func(last results, done *Msg) (results, results) { done.Entries++; return last, results{forged} },
			code: CodeProtocol, want: "more than the files sent", told: 300},
		{name: "short of a file", end: func(last results, done *Msg) (results, results) { done.Entries--; return last[:len(last)-1], nil },
			code: CodeVerify, want: "confirmed 299 files of the 300 sent", told: 299},
		{name: "done counts another number", end: func(last results, done *Msg) (results, results) { done.Entries += 2; return last, nil },
			code: CodeProtocol, want: "done announces 302 results, 300 came", told: 300},
		{name: "a path with escapes", chunk: at(1, func(p results, _ fcopy.FileResult) results { p[0].Path = "/dst/\x1b]0;owned\x07x"; return p }),
			told: 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := t.TempDir() // removed after the remote has ended (newEnv's wait)
			e := newEnv(t, lanetest.Link{}, 1)
			var mu sync.Mutex
			k, passed, changed := 0, 0, false
			var held []byte // the latest chunk's line: the last one is changed at done
			var heldPart results
			var prev fcopy.FileResult
			e.filterServer(func(line []byte) []byte {
				mu.Lock()
				defer mu.Unlock()
				var m Msg
				if err := json.Unmarshal(line, &m); err != nil {
					t.Errorf("the server wrote %q", line)
					return line
				}
				out := held
				switch m.T {
				case KindResults:
					var d inflater
					var part results
					if err := d.decode(m.Z, &part); err != nil {
						t.Errorf("the server's chunk: %v", err)
						return line
					}
					last := part[len(part)-1]
					if c.chunk != nil && !changed {
						var did bool
						if part, did = c.chunk(k, part, prev); did {
							changed = true
						}
					}
					if !changed {
						passed += len(part)
					}
					m.Z = []byte("not DEFLATE")
					if part != nil {
						m.Z = deflated(t, part)
					}
					held, heldPart, prev, k = msgLine(t, m), part, last, k+1
					return out
				case KindDone:
					if c.end != nil && held != nil {
						last, extra := c.end(heldPart, &m)
						out = msgLine(t, Msg{T: KindResults, Z: deflated(t, last)})
						if extra != nil {
							out = append(out, msgLine(t, Msg{T: KindResults, Z: deflated(t, extra)})...)
						}
					}
					held = nil
					return append(out, msgLine(t, m)...)
				}
				held = nil
				return append(out, line...)
			})
			var told results
			o := e.options()
			o.Recursive = true
			o.File = func(f fcopy.FileResult) { mu.Lock(); told = append(told, f); mu.Unlock() }
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := Push(ctx, o, []string{top}, "host", dst)
			if CodeOf(err) != c.code || c.code != 0 && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("push: %v (exit %d), want exit %d saying %q", err, CodeOf(err), c.code, c.want)
			}
			if err != nil {
				treetest.NoControl(t, err.Error())
			}
			mu.Lock()
			defer mu.Unlock()
			want := c.told
			if want < 0 {
				want = passed
				if !changed || k < 3 {
					t.Fatalf("%d chunks came, the third not changed", k)
				}
			}
			if len(told) != want {
				t.Fatalf("File told of %d files, want %d", len(told), want)
			}
			for i, f := range told {
				sum := sums[f.Name]
				if f.Name != sent[i] || f.Size != int64(files[f.Name]) || f.Sum != hex.EncodeToString(sum[:]) {
					t.Fatalf("File told of %+v as the %d-th file, want %s", f, i, sent[i])
				}
				treetest.NoControl(t, f.Path)
			}
		})
	}
}

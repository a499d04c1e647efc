package xfer

// What is already there: a re-run onto an identical destination sends no file data, push and
// pull; a changed file is sent again; --checksum catches what the quick check cannot; a remote
// that lies about what it has is refused, or believed only as far as "skipped".

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane/lanetest"
)

// skipTree is the tree the skip tests copy: 4 regular files (one empty) in 2 directories.
var skipTree = map[string]int{"t/a.bin": 2<<20 + 5, "t/sub/b.bin": 777, "t/sub/c.bin": 100 << 10, "t/empty": 0}

const skipTreeBytes = 2<<20 + 5 + 777 + 100<<10

// noData checks that a copy sent no file data: nothing skipped but skipped, no data datagram
// (wire bytes are the sender's data datagrams' payload; on a pull the in-process server's word),
// and no more datagrams either way than the handshake's (hellos, the packet train's two trains of 48 and 384).
func noData(t *testing.T, what string, res *Result, files int, bytes int64) {
	t.Helper()
	if res.SkippedFiles != files || res.SkippedBytes != bytes || len(res.Files) != 0 || res.Bytes != 0 {
		t.Errorf("%s: skipped %d files, %d bytes (want %d, %d); copied %d files, %d bytes", what, res.SkippedFiles, res.SkippedBytes,
			files, bytes, len(res.Files), res.Bytes)
	}
	if res.WireBytes != 0 || res.Retransmitted != 0 {
		t.Errorf("%s: %d bytes of data datagrams, %d re-sent, onto an identical destination", what, res.WireBytes, res.Retransmitted)
	}
	if res.DatagramsSent > 550 || res.DatagramsRecv > 550 {
		t.Errorf("%s: %d datagrams sent, %d received: more than a handshake", what, res.DatagramsSent, res.DatagramsRecv)
	}
	t.Logf("%s: %d datagrams sent, %d received, wire bytes %d", what, res.DatagramsSent, res.DatagramsRecv, res.WireBytes)
}

// sameBytes checks that a and b hold the same bytes.
func sameBytes(t *testing.T, a, b string) {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ (%v, %v)", a, b, err1, err2)
	}
}

// spoil overwrites p with other bytes of the same length and gives it back its times: what the
// quick check cannot see.
func spoil(t *testing.T, p string) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, int(st.Size())), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, st.ModTime(), st.ModTime())
}

// TestInProcessSkip pushes and pulls a tree with -p twice through 1 % loss: the second run sends
// no file data and reports every file and byte as skipped, leaving the files as they were (the
// same inodes). A changed source file is sent again and arrives byte-identical; a destination
// file changed behind the same size and time is left by the quick check and sent with
// --checksum; --ignore-times replaces everything (with -W sending every byte). Without -p the
// destination's times are the copy's, and a second copy replaces every file again.
func TestInProcessSkip(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 0.01, Delay: 2 * time.Millisecond}, 3)
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	tree(t, src, skipTree)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	o := e.options()
	o.Recursive, o.Preserve = true, true
	top := filepath.Join(src, "t")
	push := func(what string, o Options) *Result {
		t.Helper()
		res, err := Push(ctx, o, []string{top}, "host", remote)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
	if res := push("first push", o); len(res.Files) != 4 || res.SkippedFiles != 0 || res.Bytes != skipTreeBytes {
		t.Fatalf("first push: %d files, %d bytes, %d skipped", len(res.Files), res.Bytes, res.SkippedFiles)
	}
	a := filepath.Join(remote, "t", "a.bin")
	before, _ := os.Stat(a)
	res := push("second push", o)
	noData(t, "second push", res, 4, skipTreeBytes)
	if res.Compare != "size-mtime" {
		t.Errorf("compare %q", res.Compare)
	}
	if st, _ := os.Stat(a); !os.SameFile(st, before) {
		t.Error("the second push replaced a.bin")
	}

	// A changed source file (another time) is sent again, alone.
	b := filepath.Join(top, "sub", "b.bin")
	tree(t, top, map[string]int{"sub/b.bin": 777})
	later := time.Now().Add(time.Hour)
	os.Chtimes(b, later, later)
	res = push("push of a changed file", o)
	if res.SkippedFiles != 3 || len(res.Files) != 1 || res.Files[0].Name != "t/sub/b.bin" || res.Bytes != 777 {
		t.Errorf("push of a changed file: skipped %d, copied %+v", res.SkippedFiles, res.Files)
	}
	sameBytes(t, b, filepath.Join(remote, "t", "sub", "b.bin"))

	// The same size and time, other bytes: the quick check leaves it, --checksum sends it.
	spoil(t, a)
	if res := push("quick check of a spoiled file", o); res.SkippedFiles != 4 {
		t.Errorf("quick check of a spoiled file: skipped %d", res.SkippedFiles)
	}
	oc := o
	oc.Compare = fcopy.Checksum
	res = push("--checksum", oc)
	if res.SkippedFiles != 3 || len(res.Files) != 1 || res.Files[0].Name != "t/a.bin" || res.Compare != "checksum" {
		t.Errorf("--checksum: skipped %d, copied %+v", res.SkippedFiles, res.Files)
	}
	sameBytes(t, filepath.Join(top, "a.bin"), a)
	noData(t, "--checksum again", push("--checksum again", oc), 4, skipTreeBytes)

	// --ignore-times replaces every file; as rsync's -I it compares each block by block (nothing
	// differs: no data travels), and with --whole-file sends every byte.
	oi := o
	oi.Compare = fcopy.IgnoreTimes
	if res := push("--ignore-times", oi); res.SkippedFiles != 0 || len(res.Files) != 4 || res.DeltaFiles != 3 || res.SentBlocks != 0 || res.WireBytes != 0 {
		t.Errorf("--ignore-times: skipped %d, copied %d files (%d compared, %d blocks sent), %d wire bytes", res.SkippedFiles, len(res.Files),
			res.DeltaFiles, res.SentBlocks, res.WireBytes)
	}
	oi.WholeFile = true
	if res := push("--ignore-times --whole-file", oi); res.SkippedFiles != 0 || len(res.Files) != 4 || res.DeltaFiles != 0 || res.WireBytes < skipTreeBytes {
		t.Errorf("--ignore-times --whole-file: skipped %d, copied %d files, %d wire bytes", res.SkippedFiles, len(res.Files), res.WireBytes)
	}

	// Pull: the client is the receiver and decides.
	pull := func(what string, o Options, dst string) *Result {
		t.Helper()
		res, err := Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, dst)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
	if res := pull("first pull", o, back); len(res.Files) != 4 {
		t.Fatalf("first pull: %d files", len(res.Files))
	}
	noData(t, "second pull", pull("second pull", o, back), 4, skipTreeBytes)
	spoil(t, filepath.Join(back, "t", "sub", "c.bin"))
	res = pull("pull --checksum", oc, back)
	if res.SkippedFiles != 3 || len(res.Files) != 1 || res.Files[0].Name != "t/sub/c.bin" {
		t.Errorf("pull --checksum: skipped %d, copied %+v", res.SkippedFiles, res.Files)
	}
	sameBytes(t, filepath.Join(top, "sub", "c.bin"), filepath.Join(back, "t", "sub", "c.bin"))

	// Without -p a copy's files get the time of the copy, so the next one sends them again.
	op := o
	op.Preserve = false
	plain := t.TempDir()
	pull("pull without -p", op, plain)
	if res := pull("second pull without -p", op, plain); res.SkippedFiles != 0 || len(res.Files) != 4 {
		t.Errorf("second pull without -p: skipped %d, copied %d", res.SkippedFiles, len(res.Files))
	}
}

// tamperServe runs the real Serve with the control messages rewritten on their way: hello from
// the client (toServer) and what the server sends (toClient). Either may be nil. The server's
// rewritten messages are its only ones (no copies on the lanes, as a hostile server's own copies
// would say the same); a client whose messages are rewritten needs Options.ChannelOnly.
func tamperServe(toServer, toClient func(m *Msg)) func(context.Context, io.Reader, io.Writer, string, ServeOptions) error {
	return func(ctx context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error {
		so.ChannelOnly = so.ChannelOnly || toClient != nil
		pr, pw := io.Pipe()
		go func() {
			sc := bufio.NewScanner(r)
			sc.Buffer(nil, maxMessage)
			for sc.Scan() {
				line := sc.Bytes()
				var m Msg
				if toServer != nil && json.Unmarshal(line, &m) == nil {
					toServer(&m)
					line, _ = json.Marshal(m)
				}
				if _, err := pw.Write(append(line, '\n')); err != nil {
					break
				}
			}
			pw.Close()
		}()
		return Serve(ctx, pr, tamperWriter{w, toClient}, pub, so)
	}
}

// tamperWriter rewrites each message written to it (Control writes one per call).
type tamperWriter struct {
	w       io.Writer
	rewrite func(m *Msg)
}

func (t tamperWriter) Write(b []byte) (int, error) {
	var m Msg
	if t.rewrite == nil || json.Unmarshal(b, &m) != nil {
		return t.w.Write(b)
	}
	t.rewrite(&m)
	out, _ := json.Marshal(m)
	if _, err := t.w.Write(append(out, '\n')); err != nil {
		return 0, err
	}
	return len(b), nil
}

// TestPushHostileHave: a receiving server whose report of the files it has names an index
// beyond the list, one twice or out of order, a directory, or anything at all under
// --ignore-times, is refused before any data with the protocol's exit code and a message saying
// what was wrong; the destination gets nothing.
func TestPushHostileHave(t *testing.T) {
	src := t.TempDir()
	tree(t, src, skipTree)
	// The list: t, t/a.bin, t/empty, t/sub, t/sub/b.bin, t/sub/c.bin (name order).
	for _, c := range []struct {
		what string
		have []int
		cmp  fcopy.Compare
		want string
	}{
		{"out of range", []int{1, 6}, fcopy.QuickCheck, "not in the list"},
		{"negative", []int{-1}, fcopy.QuickCheck, "not in the list"},
		{"twice", []int{1, 1}, fcopy.QuickCheck, "twice"},
		{"out of order", []int{4, 1}, fcopy.QuickCheck, "twice or out of order"},
		{"a directory", []int{3}, fcopy.QuickCheck, "not a regular file"},
		{"unasked", []int{1}, fcopy.IgnoreTimes, "nothing was to be skipped"},
	} {
		t.Run(c.what, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = tamperServe(nil, func(m *Msg) {
				if m.T == KindHave {
					m.Have = c.have
				}
			})
			dst := t.TempDir()
			o := e.options()
			o.Recursive, o.Compare = true, c.cmp
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", dst)
			if err == nil || CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("push took the report %v: %v (exit %d), result %+v", c.have, err, CodeOf(err), res)
			}
			treetest.NoControl(t, err.Error())
			if ents, _ := os.ReadDir(filepath.Join(dst, "t", "sub")); len(ents) != 0 {
				t.Errorf("the destination got %s", ents[0].Name())
			}
		})
	}
}

// TestPushHostileHaveEverything: a server that claims to have every file (here: it looks in
// another directory that holds them, while the client named an empty one) makes the client
// report them skipped, on the remote's word, and never copied or verified: no result, no
// digest, no bytes; the directory the client named gets no file.
func TestPushHostileHaveEverything(t *testing.T) {
	src, decoy, dst := t.TempDir(), t.TempDir(), t.TempDir()
	tree(t, src, skipTree)
	e := newEnv(t, lanetest.Link{}, 1)
	o := e.options()
	o.Recursive, o.Preserve = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", decoy); err != nil {
		t.Fatal(err)
	}
	e.serve = tamperServe(func(m *Msg) {
		if m.T == KindHello {
			m.Dest = decoy
		}
	}, nil)
	o.ChannelOnly = true // the hello the server reads is not the one sent: no copy of it
	res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", dst)
	if err != nil {
		t.Fatal(err)
	}
	noData(t, "push to a server that has everything", res, 4, skipTreeBytes)
	if res.BLAKE3 != "" {
		t.Errorf("the result claims a digest: %s", res.BLAKE3)
	}
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("%s appeared in the destination the client named", p)
		}
		return nil
	})
}

// TestPullHostileHave: a pulling client (the receiver) whose accept reports files it has that
// are not regular files of the list the server sent, or names one twice, is refused by the real
// server with the protocol's exit code before it sends anything.
func TestPullHostileHave(t *testing.T) {
	src := t.TempDir()
	tree(t, src, skipTree)
	for _, have := range [][]int{{6}, {-3}, {2, 2}, {0}} {
		e := newEnv(t, lanetest.Link{}, 1)
		o := e.options()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, _, err := start(ctx, &o, "host", Msg{Role: RoleSend, Paths: []string{filepath.Join(src, "t")}, Recursive: true, Window: 16}, &Result{})
		if err != nil {
			t.Fatal(err)
		}
		files, err := c.ctl.Expect(c.ctx, KindFiles, 10*time.Second)
		if err == nil {
			files.Files, err = recvList(c.ctx, c.ctl, files.Entries)
		}
		if err != nil || len(files.Files) != 6 {
			t.Fatalf("files: %v, %d entries", err, len(files.Files))
		}
		c.ctl.Send(Msg{T: KindAccept, Window: 16, Have: have})
		_, err = c.ctl.Next(c.ctx, 10*time.Second)
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != CodeProtocol || !strings.Contains(re.Msg, "report of the files it has") {
			t.Errorf("server's answer to have %v: %v", have, err)
		}
		c.close(0)
		cancel()
	}
}

// TestInProcessSkipHardLink: with -H, a re-run skips the file and makes its second name a hard
// link to the one already there again.
func TestInProcessSkipHardLink(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	src, remote := t.TempDir(), t.TempDir()
	tree(t, src, map[string]int{"t/a": 5000})
	if err := os.Link(filepath.Join(src, "t", "a"), filepath.Join(src, "t", "b")); err != nil {
		t.Fatal(err)
	}
	o := e.options()
	o.Recursive, o.Preserve, o.HardLinks = true, true, true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for run := range 2 {
		res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
		if err != nil {
			t.Fatalf("push %d: %v", run, err)
		}
		if res.SkippedFiles != run || res.HardLinks != 1 {
			t.Errorf("push %d: skipped %d, %d hard links", run, res.SkippedFiles, res.HardLinks)
		}
		a, _ := os.Stat(filepath.Join(remote, "t", "a"))
		b, _ := os.Stat(filepath.Join(remote, "t", "b"))
		if !os.SameFile(a, b) {
			t.Errorf("push %d: t/b is not a hard link to t/a", run)
		}
	}
	sameBytes(t, filepath.Join(src, "t", "a"), filepath.Join(remote, "t", "b"))
}

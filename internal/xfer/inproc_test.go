package xfer

// The in-process harness: a whole copy, client and Serve, over pipes (the ssh session) and
// lanetest's in-memory network (the UDP path), as any user, on every go test.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/pipetest"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

var (
	clientHost = netip.MustParseAddr("198.18.0.1")
	serverHost = netip.MustParseAddr("198.18.0.2")
)

// env is one in-memory network with a client host and a server host.
type env struct {
	t   *testing.T
	net *lanetest.Network
	// serve runs the remote end (Serve, or a hostile double).
	serve func(ctx context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error
	// sshConn is the peer's SSH_CONNECTION (default: clientHost to serverHost).
	sshConn string
	// realUDP: the remote end's lanes are real UDP sockets (ServeOptions.Lanes nil), for a
	// client with real ones too, on loopback.
	realUDP bool
	// serveLog is the remote end's debug logger (ServeOptions.DebugLog).
	serveLog func(format string, args ...any)
	// checkpoint is both ends' Options.CheckpointEvery and ServeOptions.CheckpointEvery.
	checkpoint int64
	// hostName is the address ssh would go to, as ssh -G says (PeerInfo.HostName; "": none).
	hostName string
	// took is the peer's start as PeerInfo.Took reports it (ssh's start to the peer's word).
	took time.Duration
	// envPreface: the peer also finds the preface in its environment (bootstrap.EnvPreface),
	// as cmd/farwing's serve hands it to Serve (EnvPrefaced).
	envPreface bool

	mu     sync.Mutex
	serves []*pipeRemote
}

func newEnv(t *testing.T, link lanetest.Link, seed uint64) *env {
	e := &env{t: t, net: lanetest.New(link, seed), serve: Serve}
	t.Cleanup(e.wait)
	return e
}

// wait waits for every remote end to finish: a test ends with no peer left running.
func (e *env) wait() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.serves {
		select {
		case <-r.done:
		case <-time.After(40 * time.Second):
			e.t.Errorf("the remote peer is still running 40 s after the test")
		}
	}
}

// lanes opens four lanes on host a of the network.
func (e *env) lanes(a netip.Addr) LaneOpener {
	return func(string) (conns [session.Lanes]lane.PacketConn, err error) {
		for i := range conns {
			c, err := e.net.Listen(a)
			if err != nil {
				return conns, err
			}
			conns[i] = c
		}
		return conns, nil
	}
}

// options are client options for a copy through the environment.
func (e *env) options() Options {
	return Options{Start: e.start, Lanes: e.lanes(clientHost), CheckpointEvery: e.checkpoint}
}

// start is the Starter: Serve in a goroutine on pipes.
func (e *env) start(ctx context.Context, host string, args []string, preface []byte) (Remote, error) {
	// `farwing serve --pub KEY [--port LO-HI]`, as the client builds it.
	if len(args) != 2 && len(args) != 4 || args[0] != "--pub" || len(args) == 4 && args[2] != "--port" {
		return nil, fmt.Errorf("serve args %q", args)
	}
	var ports session.PortRange
	if len(args) == 4 {
		var err error
		if ports, err = session.ParsePortRange(args[3]); err != nil {
			return nil, err
		}
	}
	r := &pipeRemote{in: pipetest.New(), out: pipetest.New(), done: make(chan struct{}), hostName: e.hostName, took: e.took}
	r.in.Write(preface)
	var in io.Reader = r.in
	if e.envPreface {
		in = EnvPrefaced(in, bytes.Clone(preface))
	}
	sshConn := e.sshConn
	if sshConn == "" {
		sshConn = fmt.Sprintf("%s 50000 %s 22", clientHost, serverHost)
	}
	so := ServeOptions{SSHConnection: sshConn, Lanes: e.lanes(serverHost), Ports: ports, DebugLog: e.serveLog, CheckpointEvery: e.checkpoint}
	if e.realUDP {
		so.Lanes = nil
	}
	e.mu.Lock()
	e.serves = append(e.serves, r)
	e.mu.Unlock()
	go func() {
		r.err = e.serve(context.Background(), in, r.out, args[1], so)
		r.out.Close()
		close(r.done)
	}()
	return r, nil
}

// pipeRemote is a Remote whose peer runs in this process.
type pipeRemote struct {
	in, out  *pipetest.Pipe
	done     chan struct{}
	err      error // Serve's, once done is closed
	hostName string
	took     time.Duration
}

func (r *pipeRemote) Control() (io.Reader, io.WriteCloser) { return r.out, r.in }
func (r *pipeRemote) Info() PeerInfo {
	return PeerInfo{Path: "in-process", RemoteOS: "test", HostName: r.hostName, Took: r.took}
}
func (r *pipeRemote) Close(time.Duration) { r.in.Close() }

// Relay is what an ssh session running `farwing serve --relay socket` gives (bootstrap's
// Peer.Relay): the relay in this process, on a pipe.
func (r *pipeRemote) Relay(ctx context.Context, socket string) (net.Conn, error) {
	a, b := net.Pipe()
	go func() {
		Relay(ctx, socket, b, b)
		b.Close()
	}()
	return a, nil
}
func (r *pipeRemote) Ended(err error) error {
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("%w: the remote peer ended: %v", err, r.err)
		}
	case <-time.After(time.Second):
	}
	return err
}

// tree writes files (name → size; a size below 0 makes a directory) under root with random
// contents, and returns their BLAKE3 digests.
func tree(t *testing.T, root string, files map[string]int) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	for name, size := range files {
		p := filepath.Join(root, name)
		if size < 0 {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		b := make([]byte, size)
		rand.Read(b)
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		sums[name] = blake3.Sum256(b)
	}
	return sums
}

// sameTree checks that every file of want is under root with its digest, and that root holds
// nothing else but the directories leading to them (no partial file, nothing unrequested).
func sameTree(t *testing.T, root string, want map[string][32]byte, dirs ...string) {
	t.Helper()
	seen := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			return nil
		}
		sum, ok := want[filepath.ToSlash(rel)]
		if !ok {
			t.Errorf("unexpected file %s in the destination", rel)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || blake3.Sum256(b) != sum {
			t.Errorf("%s differs (%v)", rel, err)
		}
		seen++
		return nil
	})
	if seen != len(want) {
		t.Errorf("%d of %d files in the destination", seen, len(want))
	}
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(root, d)); err != nil || !st.IsDir() {
			t.Errorf("directory %s missing (%v)", d, err)
		}
	}
}

// TestInProcessPushPull: a tree (nested directories, an empty one, an empty file, files of a few
// blocks and of a few bytes) pushed and pulled back through 2 % loss each way and 10 ms of delay,
// all in process: every byte verified, the results' digests match, nothing left behind.
func TestInProcessPushPull(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 0.02, Delay: 5 * time.Millisecond, Jitter: time.Millisecond}, 1)
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]int{"t/a.bin": 3<<20 + 12345, "t/sub/b.bin": 777, "t/sub/deep/c.bin": 1 << 20, "t/empty.bin": 0, "t/nothing": -1}
	sums := tree(t, src, files)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := e.options()
	o.Recursive = true
	res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if len(res.Files) != len(sums) || res.Bytes != 3<<20+12345+777+1<<20 {
		t.Fatalf("push result: %d files, %d bytes", len(res.Files), res.Bytes)
	}
	if res.Retransmitted == 0 && res.ParitySent == 0 {
		t.Fatalf("2 %% loss, yet nothing re-sent and no parity: %+v", res)
	}
	sameTree(t, filepath.Join(remote, "t"), stripTop(sums), "nothing")

	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if len(res.Files) != len(sums) {
		t.Fatalf("pull result: %d files", len(res.Files))
	}
	sameTree(t, filepath.Join(back, "t"), stripTop(sums), "nothing")
	t.Logf("push and pull: %d bytes each way, last: %d datagrams re-sent, %d parity, %d auth failures", res.Bytes, res.Retransmitted, res.ParitySent, res.AuthFailures)
}

// TestInProcessDebug: Tuning.Debug (FARWING_DEBUG) sends the engines' state lines to the client's
// debug logger and, through the hello, the remote's; without it neither logger hears a line, though
// both are injected.
func TestInProcessDebug(t *testing.T) {
	e := newEnv(t, lanetest.Link{Delay: time.Millisecond}, 2)
	var mu sync.Mutex
	var client, server []string
	logTo := func(to *[]string) func(string, ...any) {
		return func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			*to = append(*to, fmt.Sprintf(f, a...))
		}
	}
	e.serveLog = logTo(&server)
	src := t.TempDir()
	tree(t, src, map[string]int{"f": 2<<20 + 5})
	has := func(lines []string, prefix string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	}
	for _, debug := range []bool{false, true} {
		o := e.options()
		o.Tuning.Debug, o.DebugLog = debug, logTo(&client)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", t.TempDir())
		cancel()
		if err != nil {
			t.Fatalf("debug %v: push: %v", debug, err)
		}
		e.wait()
		mu.Lock()
		switch {
		case !debug && (len(client) > 0 || len(server) > 0):
			t.Fatalf("debug off, yet the client logged %q and the remote %q", client, server)
		case debug && !has(client, "memory sender: "):
			t.Fatalf("debug on: the client's sender did not log its memory: %q", client)
		case debug && !has(server, "receiver: last block written"):
			t.Fatalf("debug on: the remote's receiver did not log through its logger (the hello's Debug): %q", server)
		}
		mu.Unlock()
	}
}

// stripTop drops the first element of every name ("t/a" → "a").
func stripTop(m map[string][32]byte) map[string][32]byte {
	out := map[string][32]byte{}
	for k, v := range m {
		_, rest, _ := strings.Cut(k, "/")
		out[rest] = v
	}
	return out
}

// TestInProcessNoUDP: with --udp-only, a network that drops every datagram fails the copy with
// the no-UDP error (exit code 6) naming the ports, and the remote peer ends too.
func TestInProcessNoUDP(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 1}, 1)
	e.hostName = serverHost.String() // the lanes opened while the peer starts are the ones used
	src := t.TempDir()
	tree(t, src, map[string]int{"f": 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := e.options()
	o.UDPOnly = true
	var warned []string
	o.Warn = func(m string) { warned = append(warned, m) }
	_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", t.TempDir())
	if len(warned) != 0 {
		t.Errorf("--udp-only warned of a fallback: %q", warned)
	}
	if !errors.Is(err, session.ErrNoUDP) || CodeOf(err) != CodeUDP {
		t.Fatalf("push without UDP: %v (exit %d)", err, CodeOf(err))
	}
	// lanetest numbers ports from 40000 on each host: the server's lanes and the client's.
	for _, want := range []string{"no UDP reply from 198.18.0.2 port(s) 40000-40003 within 5s (this end's ports 40000-40003)",
		"open UDP to port(s) 40000-40003 on the remote host's firewall", "--port LO-HI"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("push without UDP: %q does not say %q", err, want)
		}
	}
}

// TestInProcessPortRange: with Options.Ports the remote peer binds its four lanes inside the range
// (real UDP on loopback; a port of the range in use is skipped) and the copy goes through; a range
// without four free ports fails before any data with the peer's error, exit 6, naming --port.
func TestInProcessPortRange(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	e.realUDP = true
	e.sshConn = "127.0.0.1 50000 127.0.0.1 22"
	var lo int
	var busy *net.UDPConn
	for range 50 { // five free ports below the ephemeral range, the second held by this test
		lo = 20000 + mrand.IntN(10000)
		c, err := net.ListenUDP("udp", &net.UDPAddr{Port: lo + 1})
		if err != nil {
			continue
		}
		free := true
		for _, p := range []int{lo, lo + 2, lo + 3, lo + 4} {
			if f, err := net.ListenUDP("udp", &net.UDPAddr{Port: p}); err != nil {
				free = false
			} else {
				f.Close()
			}
		}
		if free {
			busy = c
			break
		}
		c.Close()
	}
	if busy == nil {
		t.Fatal("no free port range")
	}
	defer busy.Close()
	src := t.TempDir()
	sums := tree(t, src, map[string]int{"f": 3<<20 + 17})
	dst := t.TempDir()
	o := Options{Start: e.start, Ports: session.PortRange{Lo: lo, Hi: lo + 4}}
	var logged []string
	o.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", dst); err != nil {
		t.Fatal(err)
	}
	if got := blake3.Sum256(must(os.ReadFile(filepath.Join(dst, "f")))); got != sums["f"] {
		t.Fatal("the copy differs from its source")
	}
	want := fmt.Sprintf("ports [%d %d %d %d]", lo, lo+2, lo+3, lo+4)
	found := false
	for _, l := range logged {
		if strings.HasPrefix(l, "UDP lanes open to 127.0.0.1 "+want) {
			found = true
		}
	}
	if !found {
		t.Fatalf("the lanes did not open on %s: %q", want, logged)
	}
	// lo..lo+3 holds three free ports, once the first peer has closed its lanes.
	e.wait()
	o.Ports = session.PortRange{Lo: lo, Hi: lo + 3}
	_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", t.TempDir())
	if CodeOf(err) != CodeUDP || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("only 3 of its 4 UDP lanes in ports %d-%d", lo, lo+3)) ||
		!strings.Contains(fmt.Sprint(err), "--port") {
		t.Fatalf("a range with three free ports: %v (exit %d)", err, CodeOf(err))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestInProcessTree: a tree (nested directories, an empty and a private one, a 0-byte file,
// modes 0600 to 0755, a file of more than a block and 300 small ones, symbolic links inside and
// outside the tree, dangling and to themselves, a hard link pair, a FIFO) pushed with -r -p -H
// through 1 % loss, then pulled back, arrives as rsync -a -H leaves it: digests, modes, link
// targets, hard links, the times of files, directories and links; the FIFO is skipped with one
// warning at each end, nothing outside the tree changes. A pull with -L brings what the links
// point to instead.
func TestInProcessTree(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 0.01, Delay: 2 * time.Millisecond}, 7)
	root, outside, remote, back := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	top := treetest.Build(t, root, outside, 300)
	if err := unix.Mkfifo(filepath.Join(top, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := treetest.Snapshot(t, top)
	before := treetest.Snapshot(t, outside)
	cmp := treetest.Options{MTimes: true, HardLinks: true, Skip: map[string]bool{"fifo": true}}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var warnings []string
	o := e.options()
	o.Recursive, o.Preserve, o.HardLinks = true, true, true
	o.Warn = func(m string) { warnings = append(warnings, m) }

	res, err := Push(ctx, o, []string{top}, "host", remote)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	treetest.Compare(t, "push", want, treetest.Snapshot(t, filepath.Join(remote, "t")), cmp)
	// 306 files with bytes (one of the hard link pair has none), 8 links, 1 hard link, 9 directories.
	if len(res.Files) != 306 || res.Symlinks != 8 || res.HardLinks != 1 || res.Dirs != 9 {
		t.Errorf("push result: %d files, %d links, %d hard links, %d directories", len(res.Files), res.Symlinks, res.HardLinks, res.Dirs)
	}
	fifo := filepath.Join(top, "fifo")
	if res.Skipped == nil || res.Skipped.Special != 1 || len(warnings) != 1 || !strings.Contains(warnings[0], "1 special file") || !strings.Contains(warnings[0], fifo) {
		t.Errorf("push: skipped %+v, warnings %q", res.Skipped, warnings)
	}

	// Back: the remote's tree, with a FIFO of its own for the remote to skip.
	rfifo := filepath.Join(remote, "t", "sub", "rfifo")
	if err := unix.Mkfifo(rfifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := time.Unix(0, want["sub"].MTime)
	os.Chtimes(filepath.Dir(rfifo), sub, sub) // as the push left it
	warnings = nil
	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	treetest.Compare(t, "pull", want, treetest.Snapshot(t, filepath.Join(back, "t")), cmp)
	if res.Skipped == nil || res.Skipped.Special != 1 || len(warnings) != 1 || !strings.Contains(warnings[0], rfifo) {
		t.Errorf("pull: skipped %+v, warnings %q", res.Skipped, warnings)
	}
	treetest.Compare(t, "outside the tree", before, treetest.Snapshot(t, outside), treetest.Options{MTimes: true})

	// -L: a dangling link stops the remote's walk, naming it (exit 3); the others arrive as what
	// they point to.
	o.Follow, o.HardLinks, o.Preserve = true, false, false
	_, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, t.TempDir())
	if CodeOf(err) != CodeSource || !strings.Contains(fmt.Sprint(err), "without -L") {
		t.Errorf("pull -L of a tree with dangling links: %v (exit %d)", err, CodeOf(err))
	}
	for _, p := range []string{"private/selfe", "sub/dangling", "link-rel-out"} {
		os.Remove(filepath.Join(remote, "t", p))
	}
	followed := t.TempDir()
	if _, err := Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, followed); err != nil {
		t.Fatalf("pull -L: %v", err)
	}
	got := treetest.Snapshot(t, filepath.Join(followed, "t"))
	for link, target := range map[string]string{"link-file": "deep/a/b/c/leaf", "deep/link-up": "big.bin", "link-out": ""} {
		w := want[target]
		if target == "" {
			w = before["victim"]
		}
		if g := got[link]; g.Kind != "file" || g.Sum != w.Sum || g.Mode != w.Mode {
			t.Errorf("pull -L: %s is %s, want %s", link, g, w)
		}
	}
	if g := got["link-dir/x"]; g.Kind != "file" || g.Sum != want["sub/x"].Sum || got["link-dir"].Kind != "dir" {
		t.Errorf("pull -L: link-dir/x is %s", g)
	}
	if g := got["link-out-dir/victim"]; g.Kind != "file" || g.Sum != before["victim"].Sum {
		t.Errorf("pull -L: link-out-dir/victim is %s", g)
	}
}

// lineFilter passes what is written to w through line, one whole control message (a line, with
// its newline) at a time: line may change it, hold it (block) or drop it (nil). It stands between
// an end and its control channel, where a test plays a hostile peer or watches the conversation.
type lineFilter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
	line func([]byte) []byte
}

func (f *lineFilter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, b...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		l := f.line(bytes.Clone(f.buf[:i+1]))
		f.buf = f.buf[i+1:]
		if len(l) > 0 {
			if _, err := f.w.Write(l); err != nil {
				return 0, err
			}
		}
	}
}

func (f *lineFilter) Close() error {
	if c, ok := f.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// msgLine is m as a control message's line.
func msgLine(t *testing.T, m Msg) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		t.Error(err)
	}
	return append(b, '\n')
}

// filteredRemote is a remote peer in this process whose control channel's input (what the
// client writes) goes through a lineFilter.
type filteredRemote struct {
	*pipeRemote
	in *lineFilter
}

func (r *filteredRemote) Control() (io.Reader, io.WriteCloser) { return r.out, r.in }

// filterClient is a Starter for e whose remote peer reads the client's messages through line.
func (e *env) filterClient(line func([]byte) []byte) Starter {
	return e.filterClientTo(func(io.Writer) func([]byte) []byte { return line })
}

// filterClientTo is filterClient with a filter made for the writer behind it (which it may write
// to itself, later: holdFrom).
func (e *env) filterClientTo(filter func(w io.Writer) func([]byte) []byte) Starter {
	return func(ctx context.Context, host string, args []string, preface []byte) (Remote, error) {
		r, err := e.start(ctx, host, args, preface)
		if err != nil {
			return nil, err
		}
		p := r.(*pipeRemote)
		return &filteredRemote{pipeRemote: p, in: &lineFilter{w: p.in, line: filter(p.in)}}, nil
	}
}

// filterServer makes e's remote peer the real Serve, whose messages reach the client through line.
func (e *env) filterServer(line func([]byte) []byte) {
	e.serve = func(ctx context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error {
		so.ChannelOnly = true // the messages changed here are the only ones
		return Serve(ctx, r, &lineFilter{w: w, line: line}, pub, so)
	}
}

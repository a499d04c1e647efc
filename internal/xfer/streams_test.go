package xfer

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane/lanetest"
)

// streamsEnv is an environment whose UDP path drops every datagram, where the client finds the
// server at 127.0.0.1 (ssh's host name): the UDP handshake gets no answer, and the TCP streams
// reach the in-process server's listener on loopback.
func streamsEnv(t *testing.T) *env {
	e := newEnv(t, lanetest.Link{Loss: 1}, 1)
	e.hostName = "127.0.0.1"
	return e
}

// pushPullTree pushes src/t to remote, then pulls it back to back, checking each result with
// check and each tree against sums.
func pushPullTree(ctx context.Context, t *testing.T, o Options, src, remote, back string, sums map[string][32]byte, check func(string, *Result, error)) {
	t.Helper()
	res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
	check("push", res, err)
	sameTree(t, filepath.Join(remote, "t"), stripTop(sums))
	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	check("pull", res, err)
	sameTree(t, filepath.Join(back, "t"), stripTop(sums))
}

// TestInProcessFallback: where UDP is blocked, a push and a pull say so in one warning and carry
// the files over TCP streams instead: every byte verified, no FEC parity, the result says tcp.
func TestInProcessFallback(t *testing.T) {
	e := streamsEnv(t)
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	sums := tree(t, src, map[string]int{"t/a.bin": 3<<20 + 4321, "t/b.bin": 99, "t/e.bin": 0})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := e.options()
	o.Recursive = true
	var warned []string
	o.Warn = func(m string) { warned = append(warned, m) }
	check := func(what string, res *Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s over TCP streams: %v", what, err)
		}
		if res.Transport != TransportTCP || res.ParitySent != 0 || len(res.Files) != len(sums) {
			t.Errorf("%s: transport %q, %d parity, %d files; want tcp, none, %d", what, res.Transport, res.ParitySent, len(res.Files), len(sums))
		}
		if len(warned) != 1 || !strings.Contains(warned[0], "no UDP reply from 127.0.0.1 within 5s: carrying the data over 4 TCP streams instead") ||
			!strings.Contains(warned[0], "--udp-only") {
			t.Errorf("%s: warnings %q, want one about the TCP streams", what, warned)
		}
		warned = nil
	}
	pushPullTree(ctx, t, o, src, remote, back, sums, check)
}

// TestInProcessFallbackRelay: where the server's TCP port refuses too, the copy says so in a
// second warning and carries the lanes over ssh sessions (here the relay in process, on pipes)
// to the server's local socket: push and pull arrive whole, the result says ssh.
func TestInProcessFallbackRelay(t *testing.T) {
	e := streamsEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port // nothing listens there once closed: a refused connection
	ln.Close()
	e.filterServer(func(line []byte) []byte {
		var m Msg
		if json.Unmarshal(line, &m) == nil && m.T == KindStreams {
			if m.Relay == "" {
				t.Errorf("the server offered no relay socket: %s", line)
			}
			m.Port = closed
			return msgLine(t, m)
		}
		return line
	})
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	sums := tree(t, src, map[string]int{"t/a.bin": 2<<20 + 99, "t/b.bin": 7})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := e.options()
	o.Recursive = true
	var warned []string
	o.Warn = func(m string) { warned = append(warned, m) }
	check := func(what string, res *Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s over ssh relays: %v", what, err)
		}
		if res.Transport != TransportSSH || res.ParitySent != 0 {
			t.Errorf("%s: transport %q, %d parity; want ssh, none", what, res.Transport, res.ParitySent)
		}
		if len(warned) != 2 || !strings.Contains(warned[1], fmt.Sprintf("no TCP connection to 127.0.0.1:%d either: carrying the data over 4 ssh sessions instead", closed)) {
			t.Errorf("%s: warnings %q, want the TCP streams' and the ssh sessions'", what, warned)
		}
		warned = nil
	}
	pushPullTree(ctx, t, o, src, remote, back, sums, check)
}

// TestInProcessFallbackPortRange: the server's TCP listener lies inside --port too.
func TestInProcessFallbackPortRange(t *testing.T) {
	e := streamsEnv(t)
	src, dst := t.TempDir(), t.TempDir()
	sums := tree(t, src, map[string]int{"f": 1<<20 + 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := e.options()
	o.Ports = session.PortRange{Lo: 40000, Hi: 40063} // lanetest's UDP ports are 40000 on; the listener takes the first free TCP one
	var logged []string
	o.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	o.Warn = func(string) {}
	if _, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", dst); err != nil {
		t.Fatal(err)
	}
	if got := blake3.Sum256(must(os.ReadFile(filepath.Join(dst, "f")))); got != sums["f"] {
		t.Fatal("the copy differs from its source")
	}
	found := ""
	for _, l := range logged {
		var port int
		if _, err := fmt.Sscanf(l, "lanes on 4 TCP streams to 127.0.0.1:%d", &port); err == nil {
			found = l
			if !o.Ports.Contains(port) {
				t.Errorf("streams on port %d, outside --port %s", port, o.Ports)
			}
		}
	}
	if found == "" {
		t.Fatalf("no streams logged: %q", logged)
	}
}

// TestInProcessFallbackHostile: a server that answers the request for streams with a port
// outside --port, a relay socket that is no absolute path, or no token of 16 bytes in hex, breaks
// the protocol (exit 10); one
// that answers nothing leaves the no-UDP error and says the streams' request went unanswered
// (exit 6).
func TestInProcessFallbackHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m *Msg) bool // false: the answer is dropped
		code ErrorCode
		want string
	}{
		{"outside --port", func(m *Msg) bool { m.Port = 80; return true }, CodeProtocol, "offered TCP port 80 for the streams, outside --port"},
		{"relative relay", func(m *Msg) bool { m.Relay = "tmp/s"; return true }, CodeProtocol, `offered "tmp/s" as its relay socket`},
		{"relay with a newline", func(m *Msg) bool { m.Relay = "/tmp/s\nrm -rf x"; return true }, CodeProtocol, "as its relay socket"},
		{"long relay", func(m *Msg) bool { m.Relay = "/" + strings.Repeat("a", maxRelayPath); return true }, CodeProtocol, "at most 108 bytes"},
		{"no token", func(m *Msg) bool { m.Token = ""; return true }, CodeProtocol, `offered "" as the streams' token`},
		{"short token", func(m *Msg) bool { m.Token = m.Token[2:]; return true }, CodeProtocol, "as the streams' token, not 32 lowercase hex digits"},
		{"silent", func(*Msg) bool { return false }, CodeUDP, "did not answer the request for TCP streams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := streamsEnv(t)
			e.filterServer(func(line []byte) []byte {
				var m Msg
				if json.Unmarshal(line, &m) != nil || m.T != KindStreams {
					return line
				}
				if !tc.edit(&m) {
					return nil
				}
				return msgLine(t, m)
			})
			src := t.TempDir()
			tree(t, src, map[string]int{"f": 1000})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := e.options()
			o.Ports = session.PortRange{Lo: 40000, Hi: 40063}
			o.Warn = func(string) {}
			_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", t.TempDir())
			if CodeOf(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Fatalf("%v (exit %d), want exit %d saying %q", err, CodeOf(err), tc.code, tc.want)
			}
			if tc.code == CodeUDP && !errors.Is(err, session.ErrNoUDP) {
				t.Errorf("%v: not the no-UDP error", err)
			}
		})
	}
}

// streamsOffer is a server's side of the fallback alone: its UDP lanes on an in-memory network,
// and the handler (offerStreams) that answers a client's streams request, whose answers come on
// the channel and whose failures go to fail. Everything ends with the test.
func streamsOffer(t *testing.T, fail func(error)) (func(Msg), <-chan []byte) {
	t.Helper()
	e := &env{t: t, net: lanetest.New(lanetest.Link{}, 1)}
	conns, err := e.lanes(serverHost)("")
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, wire.KeyLen)
	rand.Read(key)
	crypto, _ := wire.NewCrypto(key, 1, wire.ServerToClient)
	path := session.NewPath(conns, crypto, true)
	t.Cleanup(func() { path.Close() })
	answers := make(chan []byte, 4)
	ctl := NewControl(strings.NewReader(""), &lineFilter{w: io.Discard, line: func(l []byte) []byte { answers <- l; return nil }}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return offerStreams(ctx, ctl, path, "127.0.0.1:0", session.PortRange{}, fail), answers
}

// TestServeStreamsAskedOnce: a client may ask for streams once, for one per lane: a request for
// another number, or a second one, ends the server's session as a protocol violation; the first
// is answered with a TCP port and a relay socket in a directory only this user can enter.
func TestServeStreamsAskedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []int
	}{
		{"three streams", []int{3}},
		{"asked twice", []int{session.Lanes, session.Lanes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed := make(chan error, 2)
			f, answers := streamsOffer(t, func(err error) { failed <- err })
			for _, r := range tc.reqs {
				f(Msg{T: KindStreams, Streams: r})
			}
			select {
			case err := <-failed:
				if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "a client asks once, for 4") {
					t.Fatalf("%v, want a protocol violation", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the server took the request")
			}
			if len(tc.reqs) == 2 { // the first was answered
				var line []byte
				select {
				case line = <-answers:
				case <-time.After(5 * time.Second):
					t.Fatal("no answer to the first request")
				}
				var m Msg
				if err := json.Unmarshal(line, &m); err != nil || m.T != KindStreams || m.Port == 0 || m.Relay == "" || len(m.Token) != 32 {
					t.Fatalf("answer %q (%v)", line, err)
				}
				st, err := os.Stat(filepath.Dir(m.Relay))
				if err != nil || st.Mode().Perm() != 0o700 {
					t.Errorf("the relay's directory: %v, mode %v; want 0700", err, st.Mode())
				}
			}
		})
	}
}

// TestInProcessFallbackResume: a push interrupted half way on UDP is resumed over TCP streams
// where UDP is blocked next time: the verified blocks are kept, the rest travels, and the file is
// the source's.
func TestInProcessFallbackResume(t *testing.T) {
	src, remote := t.TempDir(), t.TempDir()
	tree(t, src, map[string]int{"big": resumeSize})
	interruptedRun(t, true, true, src, remote, "")
	e := streamsEnv(t)
	e.checkpoint = resumeCheckpoint
	o := e.options()
	o.Warn = func(string) {}
	res := rerun(t, true, o, src, remote, "")
	if res.Transport != TransportTCP || res.ResumedFiles != 1 || res.ResumedBytes <= 0 || res.Bytes != resumeSize-res.ResumedBytes {
		t.Fatalf("transport %s, resumed %d files, %d bytes, then sent %d", res.Transport, res.ResumedFiles, res.ResumedBytes, res.Bytes)
	}
	sameBytes(t, filepath.Join(src, "big"), filepath.Join(remote, "big"))
}

// TestRelayOnlyToServerSocket: `farwing serve --relay` connects only to what a copy's server makes
// for its relays, a socket s in a farwing-relay-* directory of this user's alone: not another
// socket (another program's, another user's), nor one behind a symbolic link or in a directory
// others may enter, whatever a hostile server names. Each refusal is one line naming the socket.
func TestRelayOnlyToServerSocket(t *testing.T) {
	listen := func(path string) {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.Copy(c, c) //nolint:errcheck // an echo
				c.Close()
			}
		}()
	}
	good, err := os.MkdirTemp("", "farwing-relay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(good) })
	listen(filepath.Join(good, "s"))
	open := filepath.Join(t.TempDir(), "farwing-relay-open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	listen(filepath.Join(open, "s"))
	other := filepath.Join(good, "agent.sock")
	listen(other)
	link := filepath.Join(t.TempDir(), "farwing-relay-link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	sockLink := filepath.Join(good, "t")
	if err := os.Symlink(filepath.Join(good, "s"), sockLink); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, path := range map[string]string{
		"another socket":               other,
		"a directory others may write": filepath.Join(open, "s"),
		"a linked directory":           filepath.Join(link, "s"),
		"a linked socket":              sockLink,
		"a relative path":              "s",
	} {
		var out strings.Builder
		err := Relay(ctx, path, strings.NewReader("hello"), &out)
		if err == nil || !strings.Contains(err.Error(), "not a copy's relay socket") || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
			t.Errorf("%s: relayed (%v, %q)", name, err, out.String())
		}
	}
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- Relay(ctx, filepath.Join(good, "s"), b, b) }()
	a.SetDeadline(time.Now().Add(5 * time.Second))
	echo := make([]byte, 5)
	if _, err := a.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(a, echo); err != nil || string(echo) != "hello" {
		t.Errorf("the server's own socket: %v, %q", err, echo)
	}
	a.Close()
	if err := <-done; err != nil {
		t.Errorf("the relay, its input closed: %v", err)
	}
}

// TestServeStreamsUnsafeTemp: where the server's temporary directory lets other users replace
// what is in it, it offers no relay socket (its relays would refuse it): TCP only.
func TestServeStreamsUnsafeTemp(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(tmp, 0o777) // writable by all, not sticky
	t.Setenv("TMPDIR", tmp)
	f, answers := streamsOffer(t, func(err error) { t.Error(err) })
	f(Msg{T: KindStreams, Streams: session.Lanes})
	var m Msg
	select {
	case line := <-answers:
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	if m.Port == 0 || m.Relay != "" {
		t.Errorf("answer with port %d, relay %q; want a port and no relay", m.Port, m.Relay)
	}
}

// TestInProcessFallbackRemembered: a path whose UDP got no answer is remembered, so the next copy
// on it (a pull here) waits a second for UDP, not five, before it goes over TCP streams; a path
// remembered so whose UDP answers again copies over UDP and forgets it.
func TestInProcessFallbackRemembered(t *testing.T) {
	e := streamsEnv(t)
	e.took = 40 * time.Millisecond
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	sums := tree(t, src, map[string]int{"f": 1<<20 + 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := e.options()
	o.PathMemory = t.TempDir()
	var warned []string
	o.Warn = func(m string) { warned = append(warned, m) }
	key := pathKey("host", netip.MustParseAddr("127.0.0.1"))
	if _, ok := recallNoUDP(o.PathMemory, key, time.Now()); ok {
		t.Fatal("a path remembered without UDP before any copy")
	}
	check := func(what, wait string, res *Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Transport != TransportTCP || len(warned) != 1 || !strings.Contains(warned[0], "no UDP reply from 127.0.0.1 within "+wait+": carrying the data over 4 TCP streams") {
			t.Errorf("%s: transport %q, warnings %q; want tcp after waiting %s", what, res.Transport, warned, wait)
		}
		if _, ok := recallNoUDP(o.PathMemory, key, time.Now()); !ok {
			t.Errorf("%s: the path is not remembered without UDP", what)
		}
		warned = nil
	}
	res, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", filepath.Join(remote, "f"))
	check("the first push", "5s", res, err)
	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "f")}, filepath.Join(back, "f"))
	check("the pull after it", "1s", res, err)
	sameTree(t, back, sums)

	// The same memory, a path that answers: remembered without UDP, copied over UDP, forgotten.
	e2 := newEnv(t, lanetest.Link{}, 2)
	e2.hostName, e2.took = serverHost.String(), 40*time.Millisecond
	o2 := e2.options()
	o2.PathMemory = o.PathMemory
	o2.Warn = o.Warn
	key2 := pathKey("host", serverHost)
	if err := rememberNoUDP(o2.PathMemory, key2, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	res, err = Push(ctx, o2, []string{filepath.Join(src, "f")}, "host", t.TempDir())
	if err != nil || res.Transport != TransportUDP || len(warned) != 0 {
		t.Fatalf("a path that answers again: %v, transport %q, warnings %q; want udp and none", err, res.Transport, warned)
	}
	if _, ok := recallNoUDP(o2.PathMemory, key2, time.Now()); ok {
		t.Errorf("a path whose UDP answered is still remembered without it")
	}
	if _, ok := recallNoUDP(o2.PathMemory, key, time.Now()); !ok {
		t.Errorf("another path's record went with it")
	}
}

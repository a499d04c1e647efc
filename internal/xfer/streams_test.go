package xfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/internal/session"
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
	res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
	check("push", res, err)
	sameTree(t, filepath.Join(remote, "t"), stripTop(sums))
	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	check("pull", res, err)
	sameTree(t, filepath.Join(back, "t"), stripTop(sums))
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
	res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
	check("push", res, err)
	sameTree(t, filepath.Join(remote, "t"), stripTop(sums))
	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	check("pull", res, err)
	sameTree(t, filepath.Join(back, "t"), stripTop(sums))
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
// outside --port breaks the protocol (exit 10); one that answers nothing leaves the no-UDP error
// and says the streams' request went unanswered (exit 6).
func TestInProcessFallbackHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		port int // the server's answer (0: none)
		code ErrorCode
		want string
	}{
		{"outside --port", 80, CodeProtocol, "offered TCP port 80 for the streams, outside --port"},
		{"silent", 0, CodeUDP, "did not answer the request for TCP streams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := streamsEnv(t)
			e.filterServer(func(line []byte) []byte {
				if strings.Contains(string(line), `"t":"streams"`) {
					if tc.port == 0 {
						return nil
					}
					return msgLine(t, Msg{T: KindStreams, Port: tc.port})
				}
				return line
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

//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/internal/session"
)

// TestLabUDP: the remote peer's ports and a path that blocks UDP, with the real binary, ssh and
// sshd through the lab. --port puts the peer's four lanes inside the range (as -v reports them);
// a range farwing cannot use is refused before ssh (exit 2); with UDP dropped both ways, or only
// its replies, a copy with --udp-only fails (exit 6) with one line naming the remote's ports,
// this end's, the configured timeout and what to open, and leaves nothing behind; without it, the
// copy says so in one warning (and a warning event) and goes over TCP streams, inside --port
// (TestLabTCPFallback).
func TestLabUDP(t *testing.T) {
	e := startLab(t, 100e6, 20*time.Millisecond, 0)
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "u.bin", 2<<20)
	lanes := regexp.MustCompile(`UDP lanes open to 198\.1[89]\.\d+\.\d+ ports \[(\d+) (\d+) (\d+) (\d+)\]`)

	t.Run("port range", func(t *testing.T) {
		// Namespace B is the lab's own: only sshd listens there, so 45000-45003 are free and the
		// four lanes must take exactly those.
		r := e.copy("-v", "--port", "45000-45003", src, e.srv.Host+":ranged.bin")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		m := lanes.FindStringSubmatch(r.stderr)
		if m == nil || strings.Join(m[1:], " ") != "45000 45001 45002 45003" {
			t.Fatalf("lanes %q, want ports 45000-45003; stderr: %s", m, r.stderr)
		}
		if got := fileSum(t, filepath.Join(e.srv.Home, "ranged.bin")); got != sum {
			t.Fatalf("the copy's BLAKE3 %s, want %s", got, sum)
		}
		// Without --port the peer takes ports the kernel gives (a check that the test above can fail).
		r = e.copy("-v", src, e.srv.Host+":any.bin")
		if m := lanes.FindStringSubmatch(r.stderr); r.code != 0 || m == nil || m[1] == "45000" {
			t.Fatalf("exit %d, lanes %q without --port", r.code, m)
		}
	})

	t.Run("bad ranges", func(t *testing.T) {
		for arg, msg := range map[string]string{"40000": "LO-HI", "40000-40002": "at least 4", "0-9": "1 to 65535", "9-5": "above its last"} {
			r := e.copy("--port", arg, src, e.srv.Host+":bad.bin")
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], msg) {
				t.Errorf("--port %s: exit %d, %q; want exit 2 and one line saying %q", arg, r.code, r.stderr, msg)
			}
		}
	})

	blocked := func(t *testing.T, ab, ba bool, args ...string) {
		defer dropUDP(e.l, ab, ba)()
		ab0, ba0 := e.l.Stats()
		r := e.copy(append(args, src, e.srv.Host+":blocked.bin")...)
		if r.code != 6 {
			t.Fatalf("exit %d, want 6; stderr: %s", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		want := regexp.MustCompile(`^farwing: no UDP reply from 198\.1[89]\.\d+\.\d+ port\(s\) [\d,-]+ within ` + session.HandshakeTimeout.String() +
			` \(this end's ports [\d,-]+\): open UDP to port\(s\) [\d,-]+ on the remote host's firewall and let the replies back to this end, or choose the remote's ports with --port LO-HI$`)
		if len(lines) != 1 || !want.MatchString(lines[0]) {
			t.Fatalf("want one line matching %s, got %q", want, r.stderr)
		}
		if len(args) > 1 && !strings.Contains(lines[0], "port(s) 45000-45003 within") {
			t.Fatalf("the message does not name the --port range's ports: %s", lines[0])
		}
		if r.res["exit_code"] != float64(6) || r.res["error"] != strings.TrimPrefix(lines[0], "farwing: ") {
			t.Fatalf("--json error object: %v", r.res)
		}
		if ab1, ba1 := e.l.Stats(); ab && ab1.Sub(ab0).Blocked == 0 || !ab && ba1.Sub(ba0).Blocked == 0 {
			// (with A→B blocked nothing reaches B to answer)
			t.Fatalf("the lab blocked no UDP: the test proved nothing (%+v %+v)", ab1.Sub(ab0), ba1.Sub(ba0))
		}
		if _, err := os.Stat(filepath.Join(e.srv.Home, "blocked.bin")); err == nil {
			t.Fatal("a file arrived over a path without UDP")
		}
		noPartials(t, e.srv.Home)
	}
	t.Run("UDP blocked", func(t *testing.T) { blocked(t, true, true, "--udp-only") })
	t.Run("UDP replies blocked", func(t *testing.T) { blocked(t, false, true, "--udp-only", "--port", "45000-45003") })
	if session.HandshakeTimeout != 5*time.Second {
		t.Fatalf("the handshake's timeout is %s; the promise is 5 s", session.HandshakeTimeout)
	}
}

// TestLabTCPFallback: with UDP dropped both ways (or only its replies), a push and a pull of a few
// MiB go over TCP streams: exit 0, the bytes' BLAKE3 the source's, one warning line on standard
// error and one warning event saying so, the summary's transport "tcp" and no FEC parity; with
// --port the streams' port lies inside the range. Where TCP to that range is dropped too, they go
// over four more ssh sessions (a second warning, transport "ssh").
func TestLabTCPFallback(t *testing.T) {
	e := startLab(t, 100e6, 20*time.Millisecond, 0)
	e.limit = 60 * time.Second
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "f.bin", 4<<20+777)
	streams := regexp.MustCompile(`lanes on 4 TCP streams to 198\.1[89]\.\d+\.\d+:(\d+)`)
	check := func(t *testing.T, what, transport string, r copyRun, got string) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", what, r.code, r.stderr)
		}
		if sum2 := fileSum(t, got); sum2 != sum {
			t.Fatalf("%s: BLAKE3 %s, want %s", what, sum2, sum)
		}
		var warned []string
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "farwing: warning: ") {
				warned = append(warned, l)
			}
		}
		want := 1 // the TCP streams'; and the ssh sessions' where TCP is blocked too
		if transport == "ssh" {
			want = 2
		}
		if len(warned) != want || !strings.Contains(warned[0], "no UDP reply from") || !strings.Contains(warned[0], "carrying the data over 4 TCP streams instead") ||
			want == 2 && !strings.Contains(warned[1], "either: carrying the data over 4 ssh sessions instead") {
			t.Errorf("%s: warning lines %q, want %d about the TCP streams and ssh", what, warned, want)
		}
		if w := eventsOf(r.events, "warning"); len(w) != want || !strings.Contains(fmt.Sprint(w[0]["message"]), "TCP streams") {
			t.Errorf("%s: warning events %v, want %d", what, w, want)
		}
		if r.res["transport"] != transport || r.res["parity_sent"] != float64(0) {
			t.Errorf("%s: summary transport %v, parity_sent %v; want %s, 0", what, r.res["transport"], r.res["parity_sent"], transport)
		}
	}
	t.Run("UDP blocked", func(t *testing.T) {
		defer dropUDP(e.l, true, true)()
		ab0, _ := e.l.Stats()
		r := e.copy("-v", "--port", "45000-45009", src, e.srv.Host+":tcp.bin")
		check(t, "push", "tcp", r, filepath.Join(e.srv.Home, "tcp.bin"))
		if m := streams.FindStringSubmatch(r.stderr); m == nil {
			t.Errorf("-v did not tell the streams: %s", r.stderr)
		} else if port, _ := strconv.Atoi(m[1]); port < 45000 || port > 45009 {
			t.Errorf("streams on port %d, want one inside --port 45000-45009", port)
		}
		if ab1, _ := e.l.Stats(); ab1.Sub(ab0).Blocked == 0 {
			t.Fatalf("the lab blocked no UDP: the test proved nothing")
		}
		back := filepath.Join(dir, "back.bin")
		check(t, "pull", "tcp", e.copy(e.srv.Host+":tcp.bin", back), back)
	})
	t.Run("UDP replies blocked", func(t *testing.T) {
		defer dropUDP(e.l, false, true)()
		r := e.copy(src, e.srv.Host+":tcp2.bin")
		check(t, "push", "tcp", r, filepath.Join(e.srv.Home, "tcp2.bin"))
	})
	t.Run("UDP and TCP blocked", func(t *testing.T) {
		defer dropUDP(e.l, true, true)()
		pa := e.l.Path(lab.AtoB)
		qa := pa
		qa.DropTCP = lab.Ports{Lo: 45000, Hi: 45009}
		e.l.SetPath(lab.AtoB, qa)
		defer e.l.SetPath(lab.AtoB, pa)
		ab0, _ := e.l.Stats()
		r := e.copy("-v", "--port", "45000-45009", src, e.srv.Host+":ssh.bin")
		check(t, "push", "ssh", r, filepath.Join(e.srv.Home, "ssh.bin"))
		if !strings.Contains(r.stderr, "lanes on 4 ssh sessions relaying to") {
			t.Errorf("-v did not tell the ssh sessions: %s", r.stderr)
		}
		if ab1, _ := e.l.Stats(); ab1.Sub(ab0).TCPArrived == 0 || ab1.Sub(ab0).Blocked == 0 {
			t.Fatalf("the lab blocked nothing: the test proved nothing")
		}
		back := filepath.Join(dir, "back-ssh.bin")
		check(t, "pull", "ssh", e.copy("--port", "45000-45009", e.srv.Host+":ssh.bin", back), back)
	})
}

//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/session"
)

// TestLabUDP: the remote peer's ports and a path that blocks UDP, with the real binary, ssh and
// sshd through the lab. --port puts the peer's four lanes inside the range (as -v reports them);
// a range farwing cannot use is refused before ssh (exit 2); with UDP dropped both ways, or only
// its replies, the copy fails (exit 6) with one line naming the remote's ports, this end's, the
// configured timeout and what to open, and leaves nothing behind.
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
		if len(args) > 0 && !strings.Contains(lines[0], "port(s) 45000-45003 within") {
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
	t.Run("UDP blocked", func(t *testing.T) { blocked(t, true, true) })
	t.Run("UDP replies blocked", func(t *testing.T) { blocked(t, false, true, "--port", "45000-45003") })
	if session.HandshakeTimeout != 5*time.Second {
		t.Fatalf("the handshake's timeout is %s; the promise is 5 s", session.HandshakeTimeout)
	}
}

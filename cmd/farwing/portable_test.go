//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/lane"
)

// portableSSH writes an ssh that runs the remote command with FARWING_SOCKETS=portable in its
// environment, and returns the FARWING_SSH setting for it. The lab's sshd passes no variable but
// LANG and LC_* (AcceptEnv), and the remote peer takes its switches from its own environment only,
// so the variable rides the remote command: ssh's arguments end with "--", the host and the
// command (bootstrap's sshCmd), and the command becomes "FARWING_SOCKETS=portable COMMAND" for the
// remote shell. ssh -G and -O, which have no command, pass unchanged.
func portableSSH(t *testing.T, dir string) string {
	t.Helper()
	real, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ssh-portable")
	script := `#!/bin/sh
s=
for a; do
  shift
  case $s in
  host) s=cmd;;
  cmd) a="FARWING_SOCKETS=portable $a"; s=done;;
  '') [ "$a" = -- ] && s=host;;
  esac
  set -- "$@" "$a"
done
exec '` + real + `' "$@"
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return "FARWING_SSH=" + p
}

// TestLabPortable: a push and a pull of a random 32 MiB file through 200 Mbit/s, 30 ms RTT and
// 0.5 % loss each way with both ends' lanes on the portable socket path (FARWING_SOCKETS=portable:
// this end's environment, and the remote peer's through the remote command), bytes and digests
// checked. Each process on that path says so once (lane.PortableNotice) on its standard error,
// and -v shows the remote peer's: the notice twice is both ends. With the remote end alone on the
// portable path the notice comes once (the check can fail, and the remote's line is the one -v
// carries).
func TestLabPortable(t *testing.T) {
	e := startLab(t, 200e6, 30*time.Millisecond, 0.005)
	e.limit = 2 * time.Minute
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "portable.bin", 32<<20) // 32 MiB: checkLanes counts on it
	remoteSSH := portableSSH(t, dir)
	both := []string{"FARWING_SOCKETS=portable", remoteSSH}
	notices := func(r copyRun) int { return strings.Count(r.stderr, lane.PortableNotice) }

	push := e.copyIn(e.l.NSA, both, "-v", "--rate", "180M", "--ssh-persist", "0", src, e.srv.Host+":portable.bin")
	if push.code != 0 {
		t.Fatalf("push: exit %d: %s", push.code, push.stderr)
	}
	if got := fileSum(t, filepath.Join(e.srv.Home, "portable.bin")); got != sum || push.res["blake3"] != sum {
		t.Fatalf("push: the remote file's BLAKE3 %s, reported %v, want %s", got, push.res["blake3"], sum)
	}
	if n := notices(push); n != 2 {
		t.Fatalf("push: the portable path's notice %d times, want 2 (each end once): %s", n, push.stderr)
	}
	checkLanes(t, "push", push.res)
	t.Logf("push on the portable path: %.2f s, goodput %.1f Mbit/s, %v re-sent", push.res["seconds"], push.res["goodput_bps"].(float64)/1e6, push.res["retransmitted"])

	back := filepath.Join(dir, "back.bin")
	pull := e.copyIn(e.l.NSA, both, "-v", "--rate", "180M", "--ssh-persist", "0", e.srv.Host+":portable.bin", back)
	if pull.code != 0 {
		t.Fatalf("pull: exit %d: %s", pull.code, pull.stderr)
	}
	if got := fileSum(t, back); got != sum || pull.res["blake3"] != sum {
		t.Fatalf("pull: the file's BLAKE3 %s, reported %v, want %s", got, pull.res["blake3"], sum)
	}
	if n := notices(pull); n != 2 {
		t.Fatalf("pull: the portable path's notice %d times, want 2 (each end once): %s", n, pull.stderr)
	}
	checkLanes(t, "pull", pull.res)
	t.Logf("pull on the portable path: %.2f s, goodput %.1f Mbit/s, %v re-sent", pull.res["seconds"], pull.res["goodput_bps"].(float64)/1e6, pull.res["retransmitted"])

	one := e.copyIn(e.l.NSA, []string{remoteSSH}, "-v", "--rate", "180M", "--ssh-persist", "0", src, e.srv.Host+":one.bin")
	if one.code != 0 || fileSum(t, filepath.Join(e.srv.Home, "one.bin")) != sum {
		t.Fatalf("push with the remote alone portable: exit %d: %s", one.code, one.stderr)
	}
	if n := notices(one); n != 1 {
		t.Fatalf("push with the remote alone portable: the notice %d times, want 1: %s", n, one.stderr)
	}
	noPartials(t, e.srv.Home)
}

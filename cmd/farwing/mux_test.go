//go:build linux

package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLabStaleSharedConnection: a shared ssh connection (ControlMaster) that does not answer is
// dropped and replaced, and the copy goes on over a new one: a socket that accepts and never
// answers, a master that is stopped (SIGSTOP), and a master whose connection carries nothing
// any more (the server's end of it stopped, as a network change leaves it). Each time the copy
// succeeds with the file's digest, -v says what happened, and a live master answers at the
// socket afterwards.
func TestLabStaleSharedConnection(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	e.limit = 40 * time.Second            // without the checks a copy waits on a deaf socket forever
	cache, err := os.MkdirTemp("", "fwc") // short: a socket path holds 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(cache)
	env := []string{"XDG_CACHE_HOME=" + cache}
	src, sum := randomFile(t, t.TempDir(), "m.bin", 1<<20+3)
	dst := filepath.Join(e.srv.Home, "m.bin")
	push := func(what string, says ...string) {
		t.Helper()
		os.Remove(dst)
		r := e.copyIn(e.l.NSA, env, "-v", src, e.srv.Host+":")
		if r.code != 0 || r.res["blake3"] != sum || fileSum(t, dst) != sum {
			t.Fatalf("%s: exit %d, digest %v: %s", what, r.code, r.res["blake3"], r.stderr)
		}
		for _, s := range says {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%s: -v does not say %q: %s", what, s, r.stderr)
			}
		}
	}
	// master asks the master at sock for its pid (0: none answers).
	master := func(sock string) int {
		cmd := e.l.Command(e.l.NSA, "timeout", "5", "ssh", "-F", e.srv.ConfigFile, "-S", sock, "-O", "check", e.srv.Host)
		out, _ := cmd.CombinedOutput()
		m := regexp.MustCompile(`Master running \(pid=(\d+)\)`).FindSubmatch(out)
		if m == nil {
			return 0
		}
		pid, _ := strconv.Atoi(string(m[1]))
		return pid
	}

	push("first copy")
	socks, _ := filepath.Glob(filepath.Join(cache, "farwing", "ssh", "*"))
	if len(socks) != 1 {
		t.Fatalf("control sockets %v, want one", socks)
	}
	sock := socks[0]
	first := master(sock)
	if first == 0 {
		t.Fatalf("no master answers at %s after the first copy", sock)
	}
	defer func() {
		e.l.Command(e.l.NSA, "timeout", "5", "ssh", "-F", e.srv.ConfigFile, "-S", sock, "-O", "exit", e.srv.Host).Run()
	}()
	push("second copy", "riding on the shared ssh connection")

	// A socket that accepts and never answers.
	if err := e.l.Command(e.l.NSA, "ssh", "-F", e.srv.ConfigFile, "-S", sock, "-O", "exit", e.srv.Host).Run(); err != nil {
		t.Fatalf("ssh -O exit: %v", err)
	}
	waitFor(10*time.Second, func() bool { _, err := os.Stat(sock); return err != nil })
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false) // the path is the new master's by then
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	push("deaf socket", "did not answer within 3s", "removed the shared ssh connection's socket")
	l.Close()
	n := 0
	for c := range accepted {
		c.Close()
		n++
	}
	second := master(sock)
	if n == 0 || second == 0 || second == first {
		t.Fatalf("deaf socket: %d connections to it, master at the socket now %d (first %d)", n, second, first)
	}

	// A stopped master.
	syscall.Kill(second, syscall.SIGSTOP)
	push("stopped master", "did not answer within 3s")
	syscall.Kill(second, syscall.SIGKILL) // stopped: it cannot remove the new master's socket
	third := master(sock)
	if third == 0 || third == second {
		t.Fatalf("stopped master: master at the socket now %d (was %d)", third, second)
	}

	// A master whose connection carries nothing: the server's end of it stopped.
	var stopped []int
	for _, pid := range sshdOf(e.srv.UID) {
		if syscall.Kill(pid, syscall.SIGSTOP) == nil {
			stopped = append(stopped, pid)
		}
	}
	defer func() {
		for _, pid := range stopped {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if len(stopped) == 0 {
		t.Fatal("found no sshd process of the lab user to stop")
	}
	push("dead connection", "did not answer within 5s; closing it and connecting again")
	if fourth := master(sock); fourth == 0 || fourth == third {
		t.Fatalf("dead connection: master at the socket now %d (was %d)", fourth, third)
	}
}

// sshdOf lists the sshd processes of user uid: the server's end of the user's connections.
func sshdOf(uid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		comm, _ := os.ReadFile("/proc/" + ent.Name() + "/comm")
		if syscall.Stat("/proc/"+ent.Name(), &st) == nil && int(st.Uid) == uid && strings.TrimSpace(string(comm)) == "sshd" {
			pids = append(pids, pid)
		}
	}
	return pids
}

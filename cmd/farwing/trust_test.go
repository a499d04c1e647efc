//go:build linux

package main

// What a dead or vanished peer leaves behind, through the lab with real ssh: nothing running,
// nothing listening, no partial file that nothing will remove, and a clear message.

import (
	"bytes"
	"fmt"
	"io/fs"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
)

// running is a farwing command started in the background.
type running struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errb   bytes.Buffer
	done   chan struct{}
	code   int
	exited time.Time
}

func (e *labEnv) startCopy(args ...string) *running {
	e.t.Helper()
	full := append([]string{"copy", "--json", "-F", e.srv.ConfigFile}, args...)
	r := &running{cmd: e.l.Command(e.l.NSA, e.bin, full...), done: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errb
	if err := r.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		err := r.cmd.Wait()
		r.exited = time.Now()
		r.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.code = 128 + int(ws.Signal())
			}
		}
		close(r.done)
	}()
	e.t.Cleanup(func() { r.cmd.Process.Kill(); <-r.done })
	return r
}

// wait waits up to d for the command to end and returns its exit code (-1: still running).
func (r *running) wait(d time.Duration) int {
	select {
	case <-r.done:
		return r.code
	case <-time.After(d):
		return -1
	}
}

// partials lists the temporary part files under root.
func partials(root string) []string {
	var ps []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".farwing-") && strings.HasSuffix(d.Name(), ".part") {
			ps = append(ps, p)
		}
		return nil
	})
	return ps
}

// waitFor polls cond every 50 ms for up to d and reports whether it came true.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond()
}

// udpSockets counts the UDP sockets open in namespace ns.
func (e *labEnv) udpSockets(ns string) int {
	out, err := e.l.Command(ns, "ss", "-Hanu").Output()
	if err != nil {
		e.t.Fatalf("ss: %v", err)
	}
	return len(strings.Fields(string(out))) / 5
}

// childPids lists the processes whose parent is pid and whose name starts with comm.
func childPids(pid int, comm string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		name := string(b[bytes.IndexByte(b, '(')+1 : i])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && strings.HasPrefix(name, comm) {
			pids = append(pids, p)
		}
	}
	return pids
}

// TestLabClientVanishes: the client's network disappears in the middle of a push (every datagram
// and segment lost both ways; ssh's TCP connection stays up, as it would for about two hours).
// Both ends end themselves within 30 s with exit code 6 at the client; the remote peer is gone,
// its UDP ports closed and its partial file removed; the same copy works once the path is back.
func TestLabClientVanishes(t *testing.T) {
	e := startLab(t, 100e6, 60*time.Millisecond, 0)
	src, sum := randomFile(t, t.TempDir(), "big.bin", 48<<20)
	r := e.startCopy("--rate", "40M", src, e.srv.Host+":")
	if !waitFor(20*time.Second, func() bool { return len(partials(e.srv.Home)) > 0 && len(e.srv.Peers()) > 0 }) {
		t.Fatalf("the push never started: %s", r.errb.String())
	}
	if st, err := os.Stat(partials(e.srv.Home)[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the remote partial file: %v, mode %v (want 0600)", err, st.Mode().Perm())
	}
	cut := time.Now()
	for _, d := range []lab.Direction{lab.AtoB, lab.BtoA} {
		p := e.l.Path(d)
		p.Loss = 1
		e.l.SetPath(d, p)
	}
	gone := waitFor(40*time.Second, func() bool { return len(e.srv.Peers()) == 0 && len(partials(e.srv.Home)) == 0 })
	peerGone := time.Since(cut)
	code := r.wait(40 * time.Second)
	clientGone := r.exited.Sub(cut)
	t.Logf("network cut: the remote peer was gone after %.1f s, the client after %.1f s (exit %d): %s", peerGone.Seconds(), clientGone.Seconds(), code, strings.TrimSpace(r.errb.String()))
	if !gone || peerGone > 30*time.Second {
		t.Fatalf("the remote peer outlived its client by %s (peers %v, partials %v)", peerGone, e.srv.Peers(), partials(e.srv.Home))
	}
	if n := e.udpSockets(e.l.NSB); n != 0 {
		t.Fatalf("%d UDP sockets still open on the remote host", n)
	}
	if code != 6 || clientGone > 30*time.Second {
		t.Fatalf("client: exit %d after %s, want 6 within 30 s", code, clientGone)
	}
	for _, d := range []lab.Direction{lab.AtoB, lab.BtoA} {
		p := e.l.Path(d)
		p.Loss = 0
		e.l.SetPath(d, p)
	}
	again := e.copy(src, e.srv.Host+":")
	if again.code != 0 || again.res["blake3"] != sum || fileSum(t, filepath.Join(e.srv.Home, "big.bin")) != sum {
		t.Fatalf("the copy after the path came back: exit %d: %s", again.code, again.stderr)
	}
	noPartials(t, e.srv.Home)
}

// crashKill names what a crash loop iteration kills.
var crashKinds = []string{"client", "peer", "ssh"}

// TestLabCrashLoop kills the client, the remote peer or the client's ssh at a random point of a
// push or a pull, then runs the same copy again: every final file is byte-identical (none is ever
// renamed into place unverified), no remote peer or UDP socket of the transfer is alive 30 s after
// its peer died, and no partial file is left once the next copy has run. FARWING_CRASH_ITERS sets
// the number of iterations (default: one of each kind, both directions).
func TestLabCrashLoop(t *testing.T) {
	e := startLab(t, 200e6, 20*time.Millisecond, 0.01)
	iters := 2 * len(crashKinds)
	if v, err := strconv.Atoi(os.Getenv("FARWING_CRASH_ITERS")); err == nil && v > 0 {
		iters = v
	}
	local := t.TempDir()
	src, sum := randomFile(t, local, "src.bin", 24<<20)
	rng := mathrand.New(mathrand.NewPCG(uint64(time.Now().UnixNano()), 1))
	failures := 0
	for it := range iters {
		kind := crashKinds[it%len(crashKinds)]
		pull := it/len(crashKinds)%2 == 1
		args := []string{"--rate", "150M", src, e.srv.Host + ":crash.bin"}
		final := filepath.Join(e.srv.Home, "crash.bin")
		if pull {
			if _, err := os.Stat(filepath.Join(e.srv.Home, "src.bin")); err != nil {
				if c := e.copy(src, e.srv.Host+":src.bin"); c.code != 0 {
					t.Fatalf("seeding the remote: %s", c.stderr)
				}
			}
			final = filepath.Join(local, "pulled.bin")
			args = []string{"--rate", "150M", e.srv.Host + ":src.bin", final}
		}
		r := e.startCopy(args...)
		delay := time.Duration(200+rng.IntN(1800)) * time.Millisecond
		time.Sleep(delay)
		var victim int
		switch kind {
		case "client":
			victim = r.cmd.Process.Pid
		case "peer":
			waitFor(5*time.Second, func() bool { return len(e.srv.Peers()) > 0 })
			if ps := e.srv.Peers(); len(ps) > 0 {
				victim = ps[0]
			}
		case "ssh":
			if ps := childPids(r.cmd.Process.Pid, "ssh"); len(ps) > 0 {
				victim = ps[0]
			}
		}
		killed := time.Now()
		if victim != 0 {
			syscall.Kill(victim, syscall.SIGKILL)
		}
		code := r.wait(40 * time.Second)
		peerGone := waitFor(30*time.Second, func() bool { return len(e.srv.Peers()) == 0 && e.udpSockets(e.l.NSB) == 0 })
		// A final file, if there is one, is never unverified.
		if _, err := os.Stat(final); err == nil && fileSum(t, final) != sum {
			t.Errorf("iteration %d (%s killed after %s, pull %v): %s is in place with the wrong bytes", it, kind, delay, pull, final)
			failures++
		}
		if !peerGone {
			t.Errorf("iteration %d (%s killed): remote peer %v or UDP sockets alive 30 s later", it, kind, e.srv.Peers())
			failures++
		}
		t.Logf("iteration %d: %s killed (pid %d) %s into a %s; exit %d after %.1f s: %s", it, kind, victim, delay.Round(time.Millisecond),
			map[bool]string{false: "push", true: "pull"}[pull], code, time.Since(killed).Seconds(), lastLineOf(r.errb.String()))
		again := e.copy(args...)
		if again.code != 0 || fileSum(t, final) != sum {
			t.Errorf("iteration %d: the copy after the crash: exit %d: %s", it, again.code, again.stderr)
			failures++
		}
		if ps := append(partials(e.srv.Home), partials(local)...); len(ps) > 0 {
			t.Errorf("iteration %d: partial files left after the next copy: %v", it, ps)
			failures++
		}
		os.Remove(filepath.Join(local, "pulled.bin"))
	}
	t.Logf("crash loop: %d iterations, %d failures", iters, failures)
}

func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestLabUnwritableCache: a remote whose cache directory the user cannot write is reported as
// such (exit 9), not as an ssh failure.
func TestLabUnwritableCache(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	cache := filepath.Join(e.srv.Home, ".cache", "farwing")
	if err := os.MkdirAll(cache, 0o755); err != nil { // owned by root: the lab user cannot write it
		t.Fatal(err)
	}
	os.Chown(filepath.Dir(cache), e.srv.UID, e.srv.GID)
	src, _ := randomFile(t, t.TempDir(), "x.bin", 1000)
	r := e.copy(src, e.srv.Host+":")
	if r.code != 9 || !strings.Contains(r.stderr, "cache directory") || strings.Contains(r.stderr, "authentication") {
		t.Fatalf("unwritable remote cache: exit %d: %s", r.code, r.stderr)
	}
}

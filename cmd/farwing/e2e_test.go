//go:build linux

package main

// End-to-end tests: the real farwing binary, real ssh/scp and sshd, through the built-in lab
// (two network namespaces joined by the userspace WAN emulator). They need root and skip without.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
	"github.com/farwing/farwing/bench/lab/sshlab"
	"github.com/farwing/farwing/lane"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// farwingBin builds the static binary once per test run: bootstrap uploads exactly this file.
func farwingBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "farwing-e2e-bin-")
		if err != nil {
			binErr = err
			return
		}
		os.Chmod(dir, 0o755)
		binPath = filepath.Join(dir, "farwing")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = err
			t.Logf("%s", out)
		}
	})
	if binErr != nil {
		t.Fatalf("build farwing: %v", binErr)
	}
	return binPath
}

type labEnv struct {
	t   *testing.T
	l   *lab.Lab
	srv *sshlab.Server
	bin string
	// limit, when set, bounds every copy: one still running then is interrupted (as Ctrl-C
	// would) and fails the test.
	limit time.Duration
}

func startLab(t *testing.T, rate float64, rtt time.Duration, loss float64) *labEnv {
	t.Helper()
	labtest.Skip(t)
	if err := sshlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin := farwingBin(t)
	l := labtest.Start(t, lab.Symmetric(rate, rtt, loss, 0, 1))
	srv, err := sshlab.Start(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &labEnv{t: t, l: l, srv: srv, bin: bin}
}

type copyRun struct {
	code    int
	stdout  string
	stderr  string
	elapsed time.Duration
	events  []map[string]any // --json's lines
	res     map[string]any   // the summary event
}

// copy runs `farwing copy` in namespace A with the lab's ssh config (unless args set -F).
func (e *labEnv) copy(args ...string) copyRun {
	e.t.Helper()
	return e.copyIn(e.l.NSA, nil, args...)
}

// copyIn runs `farwing copy` in namespace ns with env added to the environment.
func (e *labEnv) copyIn(ns string, env []string, args ...string) copyRun {
	e.t.Helper()
	full := []string{"copy", "--json"}
	if !strings.HasPrefix(strings.Join(args, " "), "-F") {
		full = append(full, "-F", e.srv.ConfigFile)
	}
	full = append(full, args...)
	cmd := e.l.Command(ns, e.bin, full...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		if e.limit > 0 {
			t := time.AfterFunc(e.limit, func() { cmd.Process.Signal(os.Interrupt) })
			defer t.Stop()
		}
		err = cmd.Wait()
	}
	r := copyRun{stdout: so.String(), stderr: se.String(), elapsed: time.Since(start)}
	if e.limit > 0 && r.elapsed >= e.limit {
		e.t.Fatalf("farwing %s was still running after %s: %s", strings.Join(args, " "), e.limit, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run farwing: %v", err)
	}
	if r.stdout != "" {
		r.events, r.res = jsonEvents(e.t, r.stdout)
	}
	return r
}

// jsonEvents checks what `farwing copy --json` printed: JSON lines, each an object with schema 1
// and an event, the first the only start, the last the only summary, no raw control or
// bidirectional character anywhere. It returns the events and the summary.
func jsonEvents(t *testing.T, out string) ([]map[string]any, map[string]any) {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("--json output does not end its last line: %q", out)
	}
	var evs []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %d is not JSON (%v): %q", i+1, err, line)
		}
		if ev["schema"] != float64(1) {
			t.Fatalf("--json line %d has schema %v: %q", i+1, ev["schema"], line)
		}
		if strings.ContainsFunc(line, func(r rune) bool {
			return r < 0x20 || r >= 0x7f && r < 0xa0 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f
		}) {
			t.Errorf("--json line %d holds a raw control or bidirectional character: %q", i+1, line)
		}
		evs = append(evs, ev)
	}
	for i, ev := range evs {
		first, last := i == 0, i == len(evs)-1
		if (ev["event"] == "start") != first || (ev["event"] == "summary") != last {
			t.Fatalf("--json event %d of %d is %v: want start first, summary last, each once", i+1, len(evs), ev["event"])
		}
		switch ev["event"] {
		case "start", "progress", "file", "skip", "send", "delete", "warning", "error", "summary":
		default:
			t.Fatalf("--json event %d is %v", i+1, ev["event"])
		}
	}
	return evs, evs[len(evs)-1]
}

// eventsOf are the events of one kind.
func eventsOf(evs []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev["event"] == kind {
			out = append(out, ev)
		}
	}
	return out
}

func randomFile(t *testing.T, dir, name string, size int) (string, string) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := blake3.Sum256(b)
	return p, hexs(sum[:])
}

func hexs(b []byte) string {
	const d = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, d[c>>4], d[c&15])
	}
	return string(out)
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := blake3.Sum256(b)
	return hexs(s[:])
}

// TestLabLoopback copies through sshd's loopback address from namespace B itself: the handshake
// agrees on 8 KiB chunks (datagrams of 8236 bytes; standard ones are at most 1452), push and pull
// arrive intact, and FARWING_JUMBO=0 keeps the standard size. The chunk size is read from the
// mean datagram (wire bytes over datagrams sent), not from wire/file bytes: a loaded machine can
// delay a loopback receiver long enough for a few hundred datagrams to be re-sent, which moves
// the ratio and not the size.
func TestLabLoopback(t *testing.T) {
	e := startLab(t, 100e6, 60*time.Millisecond, 0.01)
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "loop.bin", 24<<20+12345)
	ratio := func(r copyRun) float64 {
		v, _ := r.res["wire_ratio"].(float64)
		return v
	}
	// mean is the mean size of the datagrams a copy's sender sent (this end's lanes on a push,
	// the peer's on a pull): data chunks, and the few standard-size datagrams of its probe.
	mean := func(r copyRun) float64 {
		w, _ := r.res["wire_bytes"].(float64)
		key := "lanes"
		if r.res["direction"] == "pull" {
			key = "peer_lanes"
		}
		lanes, _ := r.res[key].([]any)
		n := 0.0
		for _, l := range lanes {
			m, _ := l.(map[string]any)
			v, _ := m["sent"].(float64)
			n += v
		}
		if n == 0 {
			return 0
		}
		return w / n
	}
	const large, stdMax = 4096, float64(lane.MaxDatagram)
	push := e.copyIn(e.l.NSB, nil, "-F", e.srv.LoopbackConfig, src, e.srv.Host+":")
	if push.code != 0 || push.res["blake3"] != sum {
		t.Fatalf("loopback push: exit %d, digest %v (want %s): %s", push.code, push.res["blake3"], sum, push.stderr)
	}
	if m := mean(push); m < large {
		t.Fatalf("loopback push: mean datagram %.0f bytes, want large chunks (> %d): %v", m, large, push.res)
	}
	back := filepath.Join(dir, "back.bin")
	pull := e.copyIn(e.l.NSB, nil, "-F", e.srv.LoopbackConfig, e.srv.Host+":loop.bin", back)
	if pull.code != 0 {
		t.Fatalf("loopback pull: exit %d: %s", pull.code, pull.stderr)
	}
	if got := fileSum(t, back); got != sum {
		t.Fatalf("loopback pull: file digest %s, want %s", got, sum)
	}
	if m := mean(pull); m < large {
		t.Fatalf("loopback pull: mean datagram %.0f bytes, want large chunks (> %d): %v", m, large, pull.res)
	}
	std := e.copyIn(e.l.NSB, []string{"FARWING_JUMBO=0"}, "-F", e.srv.LoopbackConfig, src, e.srv.Host+":std.bin")
	if std.code != 0 || std.res["blake3"] != sum {
		t.Fatalf("FARWING_JUMBO=0 push: exit %d: %s", std.code, std.stderr)
	}
	if m := mean(std); m == 0 || m > stdMax {
		t.Fatalf("FARWING_JUMBO=0 push: mean datagram %.0f bytes, want standard chunks (<= %.0f)", m, stdMax)
	}
	// A loopback interface too small for them: standard chunks.
	if out, err := e.l.Command(e.l.NSB, "ip", "link", "set", "dev", "lo", "mtu", "1500").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo mtu 1500: %v: %s", err, out)
	}
	small := e.copyIn(e.l.NSB, nil, "-F", e.srv.LoopbackConfig, src, e.srv.Host+":small.bin")
	if small.code != 0 || small.res["blake3"] != sum {
		t.Fatalf("push over lo at MTU 1500: exit %d: %s", small.code, small.stderr)
	}
	if m := mean(small); m == 0 || m > stdMax {
		t.Fatalf("push over lo at MTU 1500: mean datagram %.0f bytes, want standard chunks (<= %.0f)", m, stdMax)
	}
	t.Logf("mean datagram (wire/file bytes): push %.0f (%.4f), pull %.0f (%.4f), FARWING_JUMBO=0 %.0f (%.4f), lo MTU 1500 %.0f (%.4f)",
		mean(push), ratio(push), mean(pull), ratio(pull), mean(std), ratio(std), mean(small), ratio(small))
}

// countingSSH writes an ssh that records every session it starts (not `ssh -G`, which only reads
// the configuration, nor `ssh -O check`/`exit`, which ask the local shared-connection master) in
// log and runs the system ssh; it returns the FARWING_SSH setting for it.
func countingSSH(t *testing.T, dir, log string) string {
	t.Helper()
	real, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ssh")
	// Only ssh's own options count (those before "--"): the remote command is a script that
	// may hold " -O " itself (test -O).
	script := "#!/bin/sh\nn=1\nfor a; do case $a in --) break;; -G|-O) n=;; esac; done\n" +
		"[ -z \"$n\" ] || echo session >>'" + log + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return "FARWING_SSH=" + p
}

func sessions(t *testing.T, log string) int {
	t.Helper()
	b, _ := os.ReadFile(log)
	return strings.Count(string(b), "session\n")
}

// TestLabPushPull pushes a random 32 MiB file through 100 Mbit/s, 60 ms RTT and 1 % loss each way,
// pulls it back, and checks bytes and digests; the first copy installs the peer in one ssh session
// (the peer gzip-compressed, --json saying how many bytes and how long), the second installs nothing.
func TestLabPushPull(t *testing.T) {
	e := startLab(t, 100e6, 60*time.Millisecond, 0.01)
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "random.bin", 32<<20)
	log := filepath.Join(dir, "ssh-sessions")
	env := []string{countingSSH(t, dir, log)}

	push := e.copyIn(e.l.NSA, env, "--rate", "90M", "--ssh-persist", "0", src, e.srv.Host+":")
	if push.code != 0 {
		t.Fatalf("push: exit %d: %s", push.code, push.stderr)
	}
	exe, err := os.Stat(e.bin)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := push.res["bootstrap_bytes"].(float64)
	if n := sessions(t, log); n != 1 || push.res["bootstrap_format"] != "gzip" || sent <= 0 || sent > 0.6*float64(exe.Size()) || push.res["bootstrap_sessions"] != 1.0 {
		t.Fatalf("first contact: %d ssh sessions (want 1; --json says %v), %v bytes sent as %v for a %d-byte peer", n, push.res["bootstrap_sessions"], sent, push.res["bootstrap_format"], exe.Size())
	}
	if s, _ := push.res["bootstrap_seconds"].(float64); s <= 0 || s > push.res["seconds"].(float64) {
		t.Fatalf("first contact: bootstrap_seconds %v of %v", push.res["bootstrap_seconds"], push.res["seconds"])
	}
	t.Logf("first contact: %.0f bytes sent (peer %d), %.2f s", sent, exe.Size(), push.res["bootstrap_seconds"])
	if push.res["blake3"] != sum {
		t.Fatalf("push reported digest %v, file has %s", push.res["blake3"], sum)
	}
	if push.res["peer_uploaded"] != true {
		t.Fatalf("first contact did not report installing the peer: %v", push.res)
	}
	remote := filepath.Join(e.srv.Home, "random.bin")
	if got := fileSum(t, remote); got != sum {
		t.Fatalf("remote copy differs: %s vs %s", got, sum)
	}
	peerPath, _ := push.res["peer_path"].(string)
	st1, err := os.Stat(peerPath)
	if err != nil {
		t.Fatalf("installed peer %q: %v", peerPath, err)
	}
	if !strings.HasPrefix(peerPath, filepath.Join(e.srv.Home, ".cache", "farwing")+"/") {
		t.Fatalf("peer installed at %s, want under the remote's ~/.cache/farwing", peerPath)
	}
	checkLanes(t, "push", push.res)
	t.Logf("push: %.2f s, goodput %.1f Mbit/s, %v re-sent", push.res["seconds"], push.res["goodput_bps"].(float64)/1e6, push.res["retransmitted"])

	back := filepath.Join(dir, "back.bin")
	pull := e.copyIn(e.l.NSA, env, "--rate", "90M", e.srv.Host+":random.bin", back)
	if pull.code != 0 {
		t.Fatalf("pull: exit %d: %s", pull.code, pull.stderr)
	}
	if pull.res["peer_uploaded"] != false || pull.res["bootstrap_bytes"] != 0.0 || sessions(t, log) != 2 {
		t.Fatalf("second copy: uploaded %v, %v bytes sent, %d ssh sessions in all (want 2)", pull.res["peer_uploaded"], pull.res["bootstrap_bytes"], sessions(t, log))
	}
	st2, err := os.Stat(peerPath)
	if err != nil || !os.SameFile(st1, st2) || !st1.ModTime().Equal(st2.ModTime()) {
		t.Fatalf("peer file replaced by the second copy: %v", err)
	}
	if got := fileSum(t, back); got != sum || pull.res["blake3"] != sum {
		t.Fatalf("pulled copy differs: file %s, reported %v, want %s", got, pull.res["blake3"], sum)
	}
	if r, _ := pull.res["retransmitted"].(float64); r == 0 {
		t.Fatalf("1%% loss but no retransmissions reported: %v", pull.res)
	}
	checkLanes(t, "pull", pull.res)
	t.Logf("pull: %.2f s, goodput %.1f Mbit/s, %v re-sent", pull.res["seconds"], pull.res["goodput_bps"].(float64)/1e6, pull.res["retransmitted"])

	// Without this user's record of the install (another client machine, a cleared cache), the
	// upload's start goes ahead of the remote's answer: where the peer is there, `serve --skip`
	// drops it and the copy is right; where it is not, the upload goes on from it.
	forget := func() {
		t.Helper()
		b, err := os.ReadFile(e.bin)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		cache, _ := os.UserCacheDir()
		recs, _ := filepath.Glob(filepath.Join(cache, "farwing", "peer", "installed", "farwing-"+hex.EncodeToString(h[:8])+"-*"))
		if len(recs) == 0 {
			t.Fatal("no record of the install in this user's cache")
		}
		for _, r := range recs {
			os.Remove(r)
		}
	}
	small, smallSum := randomFile(t, dir, "small.bin", 1<<20)
	forget()
	again := e.copyIn(e.l.NSA, env, "-v", "--rate", "90M", small, e.srv.Host+":small.bin")
	if again.code != 0 || again.res["peer_uploaded"] != false || fileSum(t, filepath.Join(e.srv.Home, "small.bin")) != smallSum ||
		!strings.Contains(again.stderr, "bytes ahead of the answer") {
		t.Fatalf("peer there, no record: exit %d, uploaded %v: %s", again.code, again.res["peer_uploaded"], again.stderr)
	}
	forget()
	os.Remove(peerPath)
	again = e.copyIn(e.l.NSA, env, "-v", "--rate", "90M", e.srv.Host+":small.bin", filepath.Join(dir, "small-back.bin"))
	if again.code != 0 || again.res["peer_uploaded"] != true || fileSum(t, filepath.Join(dir, "small-back.bin")) != smallSum ||
		!strings.Contains(again.stderr, "bytes ahead of the answer") {
		t.Fatalf("no peer, no record: exit %d, uploaded %v: %s", again.code, again.res["peer_uploaded"], again.stderr)
	}
}

// checkLanes checks the lane counters of a copy's --json: four lanes at each end, this end's
// totals equal to datagrams_sent/received, the data going from the sending end's lanes to the
// receiving end's, and rx_dropped the sum of both ends' kernel drops.
func checkLanes(t *testing.T, what string, res map[string]any) {
	t.Helper()
	sum := func(key, field string) (n float64) {
		ls, _ := res[key].([]any)
		if len(ls) != 4 {
			t.Fatalf("%s: %s has %d lanes, want 4: %v", what, key, len(ls), res[key])
		}
		for _, l := range ls {
			v, ok := l.(map[string]any)[field].(float64)
			if !ok {
				t.Fatalf("%s: %s lane without %q: %v", what, key, field, l)
			}
			n += v
		}
		return n
	}
	if sum("lanes", "sent") != res["datagrams_sent"] || sum("lanes", "received") != res["datagrams_received"] {
		t.Fatalf("%s: lanes %v do not add up to datagrams_sent %v / datagrams_received %v", what, res["lanes"], res["datagrams_sent"], res["datagrams_received"])
	}
	if sum("lanes", "rx_dropped")+sum("peer_lanes", "rx_dropped") != res["rx_dropped"] {
		t.Fatalf("%s: rx_dropped %v is not the sum of the lanes' %v %v", what, res["rx_dropped"], res["lanes"], res["peer_lanes"])
	}
	from, to := "lanes", "peer_lanes" // push: this end sends the data
	if what == "pull" {
		from, to = to, from
	}
	sent, got := sum(from, "sent"), sum(to, "received")
	if got < 32<<20/1500 || got > sent || sum(to, "sent") >= sent {
		t.Fatalf("%s: the sending end's lanes sent %v datagrams, the receiving end's got %v and sent %v", what, sent, got, sum(to, "sent"))
	}
}

// TestLabDestinations checks scp's destination rules through real ssh: an existing directory as
// destination, a trailing slash, a new name.
func TestLabDestinations(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "a.bin", 3<<20+17)
	sub := filepath.Join(e.srv.Home, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(sub, e.srv.UID, e.srv.GID)
	for _, c := range []struct{ dst, want string }{
		{"sub", "sub/a.bin"},           // existing directory
		{"sub/", "sub/a.bin"},          // trailing slash
		{"sub/new.bin", "sub/new.bin"}, // new name
		{sub + "/abs.bin", "sub/abs.bin"},
	} {
		r := e.copy(src, e.srv.Host+":"+c.dst)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", c.dst, r.code, r.stderr)
		}
		if got := fileSum(t, filepath.Join(e.srv.Home, c.want)); got != sum {
			t.Fatalf("%s: %s differs", c.dst, c.want)
		}
	}
}

// TestLabErrors checks that bad input fails fast with one clear line, a distinct exit code, and no
// file that looks complete.
func TestLabErrors(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	dir := t.TempDir()
	src, _ := randomFile(t, dir, "x.bin", 1<<20)
	// The user cannot write to / or to a directory it does not own.
	ro := filepath.Join(e.srv.Home, "ro")
	os.Mkdir(ro, 0o555)
	os.WriteFile(filepath.Join(e.srv.Home, "have.bin"), []byte("remote data"), 0o644)
	readOnly := filepath.Join(e.srv.Home, "ro.bin")
	os.WriteFile(readOnly, []byte("keep me"), 0o444)
	os.Chown(readOnly, e.srv.UID, e.srv.GID)

	cases := []struct {
		name string
		args []string
		code int
		msg  string
		gone string // a path that must not exist afterwards
	}{
		{"missing source", []string{filepath.Join(dir, "nope.bin"), e.srv.Host + ":"}, 3, "no such file", filepath.Join(e.srv.Home, "nope.bin")},
		{"missing remote source", []string{e.srv.Host + ":nope.bin", filepath.Join(dir, "got.bin")}, 3, "no such file", filepath.Join(dir, "got.bin")},
		{"trailing slash, no such dir", []string{src, e.srv.Host + ":nodir/"}, 4, "does not exist", filepath.Join(e.srv.Home, "nodir")},
		{"unwritable destination", []string{src, e.srv.Host + ":ro/x.bin"}, 4, "cannot write", filepath.Join(ro, "x.bin")},
		{"read-only destination file", []string{src, e.srv.Host + ":ro.bin"}, 4, "read-only", ""},
		{"unwritable local destination", []string{e.srv.Host + ":have.bin", "/proc/x.bin"}, 4, "cannot write", "/proc/x.bin"},
		{"directory without -r", []string{dir, e.srv.Host + ":"}, 3, "-r", ""},
		{"unknown host", []string{src, "nosuchhost.invalid:"}, 5, "resolve", ""},
		{"ssh auth failure", []string{"-F", e.srv.AuthFailConfig(), src, e.srv.Host + ":"}, 5, "authentication", filepath.Join(e.srv.Home, "x.bin")},
		{"both local", []string{src, filepath.Join(dir, "y")}, 2, "remote", filepath.Join(dir, "y")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.copy(c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, c.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "farwing: ") || !strings.Contains(lines[0], c.msg) {
				t.Fatalf("want one line mentioning %q, got %q", c.msg, r.stderr)
			}
			if r.elapsed > 15*time.Second {
				t.Fatalf("took %s", r.elapsed)
			}
			if r.res["exit_code"] != float64(c.code) || r.res["error"] == "" {
				t.Fatalf("--json error object: %v", r.res)
			}
			if c.gone != "" {
				if _, err := os.Stat(c.gone); err == nil {
					t.Fatalf("%s exists after a failed copy", c.gone)
				}
			}
			noPartials(t, e.srv.Home)
			noPartials(t, dir)
		})
	}
	if b, _ := os.ReadFile(readOnly); string(b) != "keep me" {
		t.Fatalf("the read-only destination was replaced: %q", b)
	}
}

// noPartials fails if any temporary part file was left behind.
func noPartials(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".part") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// TestLabBBRProxy: on a host whose default TCP is CUBIC, first contact carries ssh over farwing's
// own ProxyCommand (its socket asks for bbr) and says so with -v, the peer installs and the copy
// arrives intact; --ssh-bbr=false leaves ssh to connect itself.
func TestLabBBRProxy(t *testing.T) {
	e := startLab(t, 100e6, 60*time.Millisecond, 0.02)
	forceCUBIC(t, e)
	if b, _ := e.l.Command(e.l.NSA, "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control").Output(); !strings.Contains(string(b), "bbr") {
		t.Skipf("the kernel offers no bbr (%s)", strings.TrimSpace(string(b)))
	}
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "small.bin", 4<<20)
	first := e.copy("-v", "--ssh-persist", "0", src, e.srv.Host+":")
	if first.code != 0 || first.res["blake3"] != sum || first.res["peer_uploaded"] != true {
		t.Fatalf("first contact over the proxy: exit %d, %v: %s", first.code, first.res, first.stderr)
	}
	if !strings.Contains(first.stderr, "through farwing's ProxyCommand, asking for bbr") {
		t.Fatalf("-v does not say that ssh went through the proxy: %s", first.stderr)
	}
	off := e.copy("-v", "--ssh-persist", "0", "--ssh-bbr=false", src, e.srv.Host+":again.bin")
	if off.code != 0 || off.res["blake3"] != sum || !strings.Contains(off.stderr, "connects itself: no bbr asked for (--ssh-bbr=false)") {
		t.Fatalf("--ssh-bbr=false: exit %d: %s", off.code, off.stderr)
	}
}

// forceCUBIC makes CUBIC the default TCP congestion control of namespace A. A namespace other than
// the first may only choose one of tcp_allowed_congestion_control, which is the machine's: CUBIC
// is added to it for the test where it is missing (that changes no default), and the list restored.
func forceCUBIC(t *testing.T, e *labEnv) {
	t.Helper()
	const allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	set := func() error {
		out, err := e.l.Command(e.l.NSA, "sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=cubic").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
	if set() == nil {
		return
	}
	was, err := os.ReadFile(allowed)
	if err != nil {
		t.Skipf("cannot make CUBIC the default: %v", err)
	}
	if err := os.WriteFile(allowed, []byte(strings.TrimSpace(string(was))+" cubic"), 0o644); err != nil {
		t.Skipf("cannot make CUBIC the default: %s: %v", allowed, err)
	}
	t.Cleanup(func() { os.WriteFile(allowed, bytes.TrimSpace(was), 0o644) })
	if err := set(); err != nil {
		t.Skipf("cannot make CUBIC the default: %v", err)
	}
}

// dropUDP makes the lab's link drop every UDP datagram from A to B (ab) and from B to A (ba), and
// returns what puts both directions back as they were.
func dropUDP(l *lab.Lab, ab, ba bool) (restore func()) {
	pa, pb := l.Path(lab.AtoB), l.Path(lab.BtoA)
	qa, qb := pa, pb
	qa.DropUDP, qb.DropUDP = ab, ba
	l.SetPath(lab.AtoB, qa)
	l.SetPath(lab.BtoA, qb)
	return func() { l.SetPath(lab.AtoB, pa); l.SetPath(lab.BtoA, pb) }
}

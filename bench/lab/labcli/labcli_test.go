//go:build linux

package labcli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
	"github.com/farwing/farwing/bench/lab/sshlab"
)

func TestParseQueue(t *testing.T) {
	rtt := 140 * time.Millisecond
	for in, want := range map[string]int{
		"1bdp": 0, "": 0, "2bdp": 14_000_000, "0.5bdp": 3_500_000,
		"65536": 65536, "256K": 256 << 10, "4M": 4 << 20, "4MiB": 4 << 20, "100kb": 100 << 10,
	} {
		got, err := ParseQueue(in, 400e6, rtt)
		if err != nil || got != want {
			t.Errorf("ParseQueue(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "-5", "0", "bdp", "-1bdp"} {
		if _, err := ParseQueue(in, 400e6, rtt); err == nil {
			t.Errorf("ParseQueue(%q) succeeded", in)
		}
	}
}

func TestMainRunsCommand(t *testing.T) {
	labtest.Skip(t)
	if err := sshlab.Check(); err != nil {
		t.Skip(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main([]string{"--rate", "50M", "--rtt", "20ms", "--loss", "0.1%", "--",
		"sh", "-c", `ssh -F "$FARWING_LAB_SSH_CONFIG" "$FARWING_LAB_HOST" 'echo ok > f; cat f; echo "$HOME"' && exit 3`},
		Options{Stdout: &stdout, Stderr: &stderr})
	t.Logf("stderr:\n%s", stderr.String())
	if code != 3 {
		t.Errorf("exit code %d, want the command's 3", code)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "ok\n") || !strings.Contains(out, "/home") {
		t.Errorf("stdout %q, want ok and the remote home", out)
	}
	if !strings.Contains(stderr.String(), "A->B delivered") {
		t.Errorf("no stats on stderr")
	}
}

func TestMainBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--rate", "fast", "--", "true"}, Options{Stdout: &stdout, Stderr: &stderr}); code != 2 {
		t.Errorf("bad --rate: exit %d, want 2 (%s)", code, stderr.String())
	}
}

func TestParseChange(t *testing.T) {
	c, err := ParseChange("8s:rate=200M")
	if err != nil || c.At != 8*time.Second || c.Rate == nil || *c.Rate != 200e6 ||
		len(c.Dirs) != 2 || c.RTT != nil || c.Loss != nil || c.Queue != "" {
		t.Fatalf("8s:rate=200M = %+v, %v", c, err)
	}
	c, err = ParseChange("1500ms:loss=1%, rtt=60ms ,queue=1bdp,dir=ba")
	if err != nil || c.At != 1500*time.Millisecond || c.Loss == nil || *c.Loss != 0.01 ||
		c.RTT == nil || *c.RTT != 60*time.Millisecond || c.Queue != "1bdp" ||
		len(c.Dirs) != 1 || c.Dirs[0] != lab.BtoA {
		t.Fatalf("loss/rtt/queue/dir = %+v, %v", c, err)
	}
	if c, err := ParseChange("0s:rate=1G,dir=AB"); err != nil || len(c.Dirs) != 1 || c.Dirs[0] != lab.AtoB {
		t.Errorf("dir=AB = %+v, %v", c, err)
	}
	for _, in := range []string{"", "8s", "8s:", "x:rate=1M", "-1s:rate=1M", "8s:rate=fast",
		"8s:rate", "8s:speed=1M", "8s:dir=ab", "8s:rate=1M,dir=up", "8s:loss=200%", "8s:queue=0", "8s:rtt=-5ms"} {
		if _, err := ParseChange(in); err == nil {
			t.Errorf("ParseChange(%q) succeeded", in)
		}
	}
}

func TestChangeApply(t *testing.T) {
	p := lab.Path{RateBps: 400e6, Delay: 70 * time.Millisecond, Loss: 0.01}
	half, _ := ParseChange("8s:rate=200M")
	got := half.Apply(p)
	want := lab.Path{RateBps: 200e6, Delay: 70 * time.Millisecond, Loss: 0.01, QueueBytes: 7_000_000}
	if got != want {
		t.Errorf("rate change: %+v, want %+v (queue keeps its bytes)", got, want)
	}
	if again := half.Apply(got); again != want {
		t.Errorf("second apply: %+v, want %+v", again, want)
	}
	q, _ := ParseChange("1s:rate=200M,rtt=100ms,queue=2bdp,loss=0")
	want = lab.Path{RateBps: 200e6, Delay: 50 * time.Millisecond, QueueBytes: 5_000_000}
	if got := q.Apply(p); got != want {
		t.Errorf("queue in bdp of the new path: %+v, want %+v", got, want)
	}
	d, _ := ParseChange("1s:rate=100M,queue=1bdp")
	if got := d.Apply(lab.Path{RateBps: 400e6, Delay: 70 * time.Millisecond, QueueBytes: 12345}); got.QueueBytes != 0 || got.RateBps != 100e6 {
		t.Errorf("queue=1bdp: %+v, want the default (0)", got)
	}
}

// TestSchedule changes a running lab's A->B path and leaves B->A alone.
func TestSchedule(t *testing.T) {
	l := labtest.Start(t, lab.Symmetric(400e6, 140*time.Millisecond, 0, 0, 1))
	c1, _ := ParseChange("50ms:rate=200M,dir=ab")
	c0, _ := ParseChange("10ms:loss=2%,dir=ab")
	late, _ := ParseChange("1h:rate=1M")
	var log lockedWriter
	var buf bytes.Buffer
	log.w = &buf
	stop := schedule(l, []Change{c1, late, c0}, time.Now(), &log)
	time.Sleep(300 * time.Millisecond)
	stop()
	ab, ba := l.Path(lab.AtoB), l.Path(lab.BtoA)
	if want := (lab.Path{RateBps: 200e6, Delay: 70 * time.Millisecond, Loss: 0.02, QueueBytes: 7_000_000}); ab != want {
		t.Errorf("A->B %+v, want %+v", ab, want)
	}
	if want := (lab.Path{RateBps: 400e6, Delay: 70 * time.Millisecond}); ba != want {
		t.Errorf("B->A %+v, want %+v (unchanged)", ba, want)
	}
	out := buf.String()
	t.Logf("log:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "A->B rate 400.0M, rtt 140ms, loss 2%") ||
		!strings.Contains(lines[1], "A->B rate 200.0M, rtt 140ms, loss 2%, queue 7000000 bytes") ||
		!strings.Contains(lines[1], "(unix 1") {
		t.Errorf("log, want the two changes in time order")
	}
}

// TestMainAt checks that --at reaches a real run: the change is logged while COMMAND runs
// and a bad --at is a usage error.
func TestMainAt(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--at", "8s:speed=1", "--", "true"}, Options{Stdout: &stdout, Stderr: &stderr}); code != 2 || !strings.Contains(stderr.String(), "unknown key") {
		t.Errorf("bad --at: exit %d, want 2 (%s)", code, stderr.String())
	}
	labtest.Skip(t)
	stderr.Reset()
	code := Main([]string{"--no-ssh", "--rate", "50M", "--rtt", "20ms", "--at", "200ms:rate=25M", "--at", "5s:rate=1M",
		"--", "sh", "-c", "echo before >&2; sleep 0.6; echo after >&2"}, Options{Stdout: &stdout, Stderr: &stderr})
	out := stderr.String()
	t.Logf("stderr:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, a2b, b2a, af := strings.Index(out, "before"), strings.Index(out, "A->B rate 25.0M"), strings.Index(out, "B->A rate 25.0M"), strings.Index(out, "after")
	if b < 0 || a2b < b || b2a < b || af < a2b || af < b2a {
		t.Errorf("want the change for both directions logged between the command's lines")
	}
	if strings.Contains(out, "rate 1.0M") {
		t.Errorf("a change due after the command ended was applied")
	}
}

// TestFormatRate: the lab's lines show rates as they are typed, and no ceiling as unlimited.
func TestFormatRate(t *testing.T) {
	for bps, want := range map[float64]string{0: "unlimited", 400e6: "400.0M", 2.5e9: "2.50G", 800e3: "800.0K", 12: "12"} {
		if got := FormatRate(bps); got != want {
			t.Errorf("FormatRate(%g) = %q, want %q", bps, got, want)
		}
	}
}

// TestMainShell: without a COMMAND the lab runs Options.Shell in namespace A, with the standard
// input given and the lab's variables, and exits with its status; without a Shell, /bin/sh.
func TestMainShell(t *testing.T) {
	labtest.Skip(t)
	shell := filepath.Join(t.TempDir(), "shell")
	os.WriteFile(shell, []byte("#!/bin/sh\nread line; echo \"$line in $FARWING_LAB_NS_A\"; exit 4\n"), 0o755)
	var stdout, stderr bytes.Buffer
	code := Main([]string{"--no-ssh", "--rate", "50M", "--rtt", "2ms"},
		Options{Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr, Shell: shell})
	t.Logf("stderr:\n%s", stderr.String())
	if out := stdout.String(); code != 4 || !strings.HasPrefix(out, "hello in ") || len(out) <= len("hello in \n") {
		t.Errorf("exit %d, stdout %q; want the shell's 4 and its line naming namespace A", code, out)
	}
	if !strings.Contains(stderr.String(), "interactive "+shell) {
		t.Errorf("stderr does not name the shell %s", shell)
	}
	stderr.Reset()
	if code := Main([]string{"--no-ssh", "--rate", "50M", "--rtt", "2ms"}, Options{Stdout: &stdout, Stderr: &stderr}); code != 0 ||
		!strings.Contains(stderr.String(), "interactive /bin/sh") {
		t.Errorf("without a Shell: exit %d; want /bin/sh, ending at once on no input (%s)", code, stderr.String())
	}
}

// TestMainVethRefuses: --veth refuses what the kernel path cannot do, in one line and with a
// usage error, before anything is started (no root needed).
func TestMainVethRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"--veth", "--rtt", "10ms"},
		{"--veth", "--loss", "1%"},
		{"--veth", "--rate", "1G", "--queue", "2bdp"},
		{"--veth", "--cpuprofile", "x.prof"},
		{"--veth", "--rate", "1G", "--at", "1s:rtt=20ms"},
		{"--veth", "--rate", "1G", "--at", "1s:loss=1%"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(append(args, "--", "true"), Options{Stdout: &stdout, Stderr: &stderr})
		out := stderr.String()
		if code != 2 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "--veth has no") || !strings.Contains(out, "netem") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line saying what --veth has not", args, code, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--veth", "--queue", "1M", "--", "true"}, Options{Stdout: &stdout, Stderr: &stderr}); code != 2 || !strings.Contains(stderr.String(), "needs a --rate") {
		t.Errorf("--veth --queue without --rate: exit %d (%s), want 2", code, stderr.String())
	}
}

// TestMainVeth: `farwing lab --veth` runs COMMAND in A with the lab's variables and sshd, ssh
// reaches B through the veth pair, --rate is an HTB class at that rate on A's and B's egress,
// --at rate= changes it, --rtt 0 and --loss 0 are accepted (the kernel path has them), and
// nothing is left behind.
func TestMainVeth(t *testing.T) {
	if err := lab.CheckVeth(); err != nil {
		t.Skipf("skipping veth lab test: %v", err)
	}
	if err := sshlab.Check(); err != nil {
		t.Skip(err)
	}
	tc, err := exec.LookPath("tc")
	if err != nil {
		t.Skip(err)
	}
	var stdout, stderr bytes.Buffer
	// A's class before the change (1.5 s is ample for one tc), ssh to B and its class, then A's
	// once the change has come (polled, at most 10 s).
	script := `tc class show dev lab0 && ssh -F "$FARWING_LAB_SSH_CONFIG" "$FARWING_LAB_HOST" 'echo ok; ` + tc + ` class show dev lab0' &&
for i in $(seq 100); do tc class show dev lab0 | grep -q 'rate 3028Mbit' && break; sleep 0.1; done; tc class show dev lab0 && echo "$FARWING_LAB_NS_A $FARWING_LAB_NS_B"`
	code := Main([]string{"--veth", "--rate", "1500M", "--rtt", "0", "--loss", "0", "--at", "1500ms:rate=3G,dir=ab", "--", "sh", "-c", script},
		Options{Stdout: &stdout, Stderr: &stderr})
	out, log := stdout.String(), stderr.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, log)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// 1514/1500 of the rate: HTB counts Ethernet frames (lab.HTBRate).
	if len(lines) != 5 || !strings.Contains(lines[0], "rate 1514Mbit ceil 1514Mbit") || lines[1] != "ok" ||
		!strings.Contains(lines[2], "rate 1514Mbit ceil 1514Mbit") || !strings.Contains(lines[3], "rate 3028Mbit ceil 3028Mbit") {
		t.Fatalf("want A's class at 1.5G, ssh's ok, B's class at 1.5G, A's at 3G after --at, then the namespaces (each × 1514/1500)")
	}
	if !strings.Contains(log, "veth, no emulator, each way rate 1.50G") || !strings.Contains(log, "A->B rate 3.00G") ||
		!strings.Contains(log, "A->B delivered") || strings.Contains(log, "B->A rate 3.00G") {
		t.Errorf("stderr: want the veth line, the change for A->B only, and the counters")
	}
	nss := strings.Fields(lines[4])
	list, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		if strings.Contains(string(list), ns) {
			t.Errorf("namespace %s left behind:\n%s", ns, list)
		}
	}
}

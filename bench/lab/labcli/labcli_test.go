package labcli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab/labtest"
	"github.com/farwing/farwing/bench/lab/sshlab"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"100M": 100e6, "1.5G": 1.5e9, "800k": 800e3, "100Mbit": 100e6, "100mbps": 100e6,
		"2500": 2500, "0": 0, "unlimited": 0,
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1M", "M"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}

func TestParseLoss(t *testing.T) {
	for in, want := range map[string]float64{"1%": 0.01, "0.01": 0.01, "0": 0, "12.5%": 0.125, "1": 1} {
		got, err := ParseLoss(in)
		if err != nil || got < want-1e-12 || got > want+1e-12 {
			t.Errorf("ParseLoss(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1%", "101%", "2"} {
		if _, err := ParseLoss(in); err == nil {
			t.Errorf("ParseLoss(%q) succeeded", in)
		}
	}
}

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
		&stdout, &stderr)
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
	if code := Main([]string{"--rate", "fast", "--", "true"}, &stdout, &stderr); code != 2 {
		t.Errorf("bad --rate: exit %d, want 2 (%s)", code, stderr.String())
	}
}

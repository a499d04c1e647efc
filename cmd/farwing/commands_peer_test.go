package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeerBuild: the peer build (-tags farwing_peer, what scripts/peers.sh makes for the release
// to carry) runs serve and version, and refuses each client command in one line that says what
// it is (exit 2), with nothing of the client's usage; it is smaller than the client.
func TestPeerBuild(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "farwing-peer")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "farwing_peer", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags farwing_peer: %v\n%s", err, out)
	}
	run := func(stdin string, args ...string) (string, int) {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		return string(out), c.ProcessState.ExitCode()
	}
	for _, name := range []string{"copy", "cp", "bench", "doctor", "lab"} {
		out, code := run("", name, "a", "host:b")
		if code != exitUsage || strings.Count(out, "\n") != 1 || !strings.Contains(out, "farwing "+name+": this is farwing's peer build") ||
			!strings.Contains(out, "runs `farwing serve` only") {
			t.Errorf("peer build, %s: exit %d, %q", name, code, out)
		}
	}
	if out, code := run("", "version"); code != 0 || !strings.HasPrefix(out, "farwing ") {
		t.Errorf("peer build, version: exit %d, %q", code, out)
	}
	if out, code := run("", "help"); code != 0 || strings.Contains(out, "farwing copy [flags]") || !strings.Contains(out, "farwing serve") {
		t.Errorf("peer build, help: exit %d, %q", code, out)
	}
	// serve runs: a control channel that ends before its hello is its own error, not a refusal.
	if out, code := run("", "serve", "--pub", "x"); code == 0 || !strings.Contains(out, "\nfarwing serve: ") {
		t.Errorf("peer build, serve on an empty control channel: exit %d, %q", code, out)
	}
	client := filepath.Join(dir, "farwing")
	cmd = exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", client, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p, _ := os.Stat(bin)
	c, _ := os.Stat(client)
	if p.Size() >= c.Size()*9/10 {
		t.Errorf("the peer build is %d bytes, the client %d: not smaller by a tenth", p.Size(), c.Size())
	}
	t.Logf("peer build %d bytes, client %d", p.Size(), c.Size())
}

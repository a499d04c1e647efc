//go:build linux

package sshlab_test

import (
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
	"github.com/farwing/farwing/bench/lab/sshlab"
)

func start(t *testing.T) (*lab.Lab, *sshlab.Server) {
	t.Helper()
	l := labtest.Start(t, lab.Symmetric(100e6, 10*time.Millisecond, 0, 0, 1))
	if err := sshlab.Check(); err != nil {
		t.Skipf("skipping sshlab test: %v", err)
	}
	s, err := sshlab.Start(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("sshlab close: %v", err)
		}
	})
	return l, s
}

func TestLogin(t *testing.T) {
	l, s := start(t)
	out, err := l.Command(l.NSA, "ssh", "-F", s.ConfigFile, s.Host, "echo", "ok").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("ssh echo ok: %v: %q", err, out)
	}
	// The home must be writable by the remote user: transfers land there.
	out, err = s.Command("sh", "-c", `'echo data > "$HOME/f" && cat "$HOME/f" && pwd'`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "data") || !strings.Contains(string(out), s.Home) {
		t.Fatalf("write to remote home: %v: %q", err, out)
	}
}

func TestAuthFailure(t *testing.T) {
	l, s := start(t)
	out, err := l.Command(l.NSA, "ssh", "-F", s.AuthFailConfig(), s.Host, "echo", "ok").CombinedOutput()
	if err == nil {
		t.Fatalf("login with an unauthorized key succeeded: %q", out)
	}
	t.Logf("unauthorized login failed as expected: %v: %s", err, strings.TrimSpace(string(out)))
}

func TestCloseRemovesUser(t *testing.T) {
	_, s := start(t)
	// A session left running must not keep Close from deleting the user.
	bg := s.Command("sleep", "30")
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	defer bg.Process.Kill()
	time.Sleep(300 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bg.Wait()
	if _, err := user.Lookup(s.User); err == nil {
		t.Errorf("user %s still exists after Close", s.User)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Close: %v", s.Dir, err)
	}
}

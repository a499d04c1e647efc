package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestSSHArgs(t *testing.T) {
	s := SSH{Config: "cfg", Identity: "id", Port: 2222, Options: []string{"A=1", "B=2"}, Jump: "j"}
	want := []string{"-F", "cfg", "-i", "id", "-p", "2222", "-o", "A=1", "-o", "B=2", "-J", "j"}
	if got := s.common("-p"); !reflect.DeepEqual(got, want) {
		t.Fatalf("ssh args %v", got)
	}
	if got := s.common("-P"); got[5] != "2222" || got[4] != "-P" {
		t.Fatalf("scp args %v", got)
	}
	if got := (SSH{}).common("-p"); len(got) != 0 {
		t.Fatalf("empty options gave %v", got)
	}
	// What a command run for the user (farwing copy, scp) is given: scp's -P, no sharing options.
	s.mux = true
	if got := s.Flags(); !reflect.DeepEqual(got, []string{"-F", "cfg", "-i", "id", "-P", "2222", "-o", "A=1", "-o", "B=2", "-J", "j"}) {
		t.Fatalf("flags %v", got)
	}
}

// TestScripts runs the probe and install scripts through a local sh with a fake home, checking
// the states: missing, installed and intact, tampered.
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum not available")
	}
	home := t.TempDir()
	id := Identity{Hash: strings.Repeat("ab", 32)}
	run := func(script string) string {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		out, _ := cmd.Output()
		return string(out)
	}
	out := run(probeScript(id, ""))
	if !strings.HasPrefix(out, "FARWING-PEER need ") || !strings.Contains(out, home+"/.cache/farwing") {
		t.Fatalf("probe on an empty home: %q", out)
	}
	// XDG_CACHE_HOME is honoured.
	cmd := exec.Command("sh", "-c", probeScript(id, ""))
	cmd.Env = []string{"HOME=" + home, "XDG_CACHE_HOME=" + home + "/xdg", "PATH=/usr/bin:/bin"}
	if o, _ := cmd.Output(); !strings.Contains(string(o), home+"/xdg/farwing") {
		t.Fatalf("XDG_CACHE_HOME ignored: %q", o)
	}
	// An upload whose hash does not match is refused and removed.
	dir := home + "/.cache/farwing"
	tmp := dir + "/.up.tmp"
	exec.Command("sh", "-c", "echo hello > "+tmp).Run()
	if out := run(installScript(id, tmp, dir+"/farwing-x", "")); !strings.Contains(out, "badhash") {
		t.Fatalf("bad upload accepted: %q", out)
	}
	if _, err := exec.Command("test", "-e", tmp).Output(); err == nil {
		t.Fatal("bad upload left behind")
	}

	// A good upload is renamed into place and started, and the cache is tidied: builds installed
	// more than 30 days ago and uploads abandoned for a day go, the rest stays.
	peer := []byte("#!/bin/sh\necho served \"$@\"\n")
	sum := sha256.Sum256(peer)
	good := Identity{Hash: hex.EncodeToString(sum[:])}
	tmp = dir + "/.farwing-up.1.2.tmp"
	os.WriteFile(tmp, peer, 0o600)
	day := 24 * time.Hour
	files := map[string]time.Duration{ // name: age
		"farwing-old": 40 * day, "farwing-recent": 2 * day, ".farwing-gone.3.4.tmp": 3 * day,
		".farwing-live.5.6.tmp": time.Hour,
	}
	for name, age := range files {
		p := dir + "/" + name
		os.WriteFile(p, []byte("x"), 0o700)
		at := time.Now().Add(-age)
		os.Chtimes(p, at, at)
	}
	final := dir + "/farwing-" + good.Hash[:16]
	out = run(installScript(good, tmp, final, "--pub 'k'"))
	if !strings.Contains(out, "FARWING-PEER ok ") || !strings.Contains(out, "served serve --pub k") {
		t.Fatalf("install of a good upload: %q", out)
	}
	for name, kept := range map[string]bool{"farwing-old": false, "farwing-recent": true, ".farwing-gone.3.4.tmp": false,
		".farwing-live.5.6.tmp": true, "farwing-" + good.Hash[:16]: true} {
		if _, err := os.Stat(dir + "/" + name); (err == nil) != kept {
			t.Errorf("after install: %s present %v, want %v", name, err == nil, kept)
		}
	}
}

func TestCompatible(t *testing.T) {
	uname := map[string]string{"linux": "Linux", "darwin": "Darwin"}[runtime.GOOS]
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if uname == "" || arch == "" {
		t.Skip("unusual platform")
	}
	if !Compatible(uname, arch) {
		t.Fatalf("%s %s should match", uname, arch)
	}
	if Compatible("SunOS", arch) || Compatible(uname, "mips") {
		t.Fatal("mismatch accepted")
	}
}

func TestShellQuote(t *testing.T) {
	got, _ := exec.Command("sh", "-c", "printf %s "+shellQuote(`it's a "path" $HOME`)).Output()
	if string(got) != `it's a "path" $HOME` {
		t.Fatalf("quoted round trip gave %q", got)
	}
}

// sshConfig is ssh -G's view of the host "h" with s's options.
func sshConfig(t *testing.T, s SSH) map[string]string {
	t.Helper()
	cfg, err := s.config(context.Background(), "h")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSharedConnection checks when Persist adds ssh connection sharing (asking the system ssh
// with -G, offline) and that the control socket's name depends on the options given.
func TestSharedConnection(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client installed")
	}
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
	cfg := func(body string) string {
		f := filepath.Join(dir, fmt.Sprintf("cfg%d", len(body)))
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, c := range []struct {
		name    string
		s       SSH
		wantMux bool
	}{
		{"default", SSH{Config: cfg(""), Persist: time.Minute}, true},
		{"off", SSH{Config: cfg("")}, false},
		{"user ControlMaster", SSH{Config: cfg("Host *\n  ControlMaster auto\n"), Persist: time.Minute}, false},
		{"user ControlPath", SSH{Config: cfg("Host h\n  ControlPath ~/.ssh/cm-%C\n"), Persist: time.Minute}, false},
		{"user -o ControlPath", SSH{Config: cfg(""), Options: []string{"ControlPath=/tmp/x"}, Persist: time.Minute}, false},
	} {
		if got := c.s.useMux(sshConfig(t, c.s)); got != c.wantMux {
			t.Errorf("%s: useMux = %v, want %v", c.name, got, c.wantMux)
		}
	}
	path := func(s SSH) string {
		s.mux = true
		for _, a := range s.common("-p") {
			if p, ok := strings.CutPrefix(a, "ControlPath="); ok {
				return p
			}
		}
		t.Fatalf("no ControlPath in %v", s.common("-p"))
		return ""
	}
	a := path(SSH{Config: cfg(""), Persist: time.Minute})
	if !strings.HasPrefix(a, filepath.Join(dir, "farwing", "ssh")+"/") || !strings.HasSuffix(a, "-%C") {
		t.Errorf("control path %s", a)
	}
	if b := path(SSH{Config: cfg(""), Identity: "other", Persist: time.Minute}); b == a {
		t.Errorf("another identity shares the control path %s", a)
	}
	if b := path(SSH{Config: cfg(""), Persist: time.Minute}); b != a {
		t.Errorf("same options, control paths %s and %s", a, b)
	}
	if st, err := os.Stat(filepath.Join(dir, "farwing", "ssh")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("control directory: %v %v", st.Mode(), err)
	}
	// A socket directory too long for a unix socket path turns sharing off.
	long := filepath.Join(dir, strings.Repeat("d", 80))
	t.Setenv("XDG_CACHE_HOME", long)
	if s := (SSH{Config: cfg(""), Persist: time.Minute}); s.useMux(sshConfig(t, s)) {
		t.Error("sharing with a socket path over 107 bytes")
	}
}

// TestDeafSharedSocket: a control socket that accepts and never answers (a stopped or hung
// master) is found out by checkMux within muxCheck and removed, so that ssh makes a new master in
// its place; dropMux removes one too. With no socket there, nothing is said to be removed.
func TestDeafSharedSocket(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client installed")
	}
	dir, err := os.MkdirTemp("", "fwb") // short: a socket path holds 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
	cfg := filepath.Join(dir, "cfg")
	os.WriteFile(cfg, []byte("Host h\n  HostName 127.0.0.1\n"), 0o600)
	var log []string
	s := SSH{Config: cfg, Persist: time.Minute, mux: true, Log: func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }}
	ctx := context.Background()
	c, err := s.config(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	path := c["controlpath"]
	if !strings.HasPrefix(path, filepath.Join(dir, "farwing", "ssh")+"/") {
		t.Fatalf("control path %q", path)
	}
	if s.checkMux(ctx, "h")() {
		t.Fatal("checkMux: a master runs where there is no socket")
	}
	for _, drop := range []bool{false, true} {
		log = nil
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		var conns []net.Conn
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c) // held, never answered
			}
		}()
		if drop {
			s.dropMux(ctx, "h")
		} else if s.checkMux(ctx, "h")() {
			t.Error("checkMux: a deaf socket answers")
		}
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
		if _, err := os.Lstat(path); err == nil || len(conns) == 0 {
			t.Errorf("drop %v: the deaf socket is still there (%v), %d connections to it", drop, err, len(conns))
		}
		if !strings.Contains(strings.Join(log, "\n"), "removed the shared ssh connection's socket") {
			t.Errorf("drop %v: log %q", drop, log)
		}
	}
}

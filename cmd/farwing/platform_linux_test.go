package main

// Issue 38: a build that carries peers reaches a remote of another CPU (linux/arm64, its peer run
// by qemu-user through binfmt_misc), and every common login shell starts the peer, in the lab with
// real sshd and ssh.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/bench/lab"
	"github.com/farwing/farwing/bench/lab/labtest"
	"github.com/farwing/farwing/bench/lab/sshlab"
)

// releaseBin builds farwing carrying the peers of platforms (scripts/peers.sh, then the tag
// farwing_peers with its overlay), as `make build` does; it returns the binary and the manifest's
// hash per platform.
func releaseBin(t *testing.T, platforms ...string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	peersDir := filepath.Join(dir, "peers")
	cmd := exec.Command(filepath.Join(root, "scripts", "peers.sh"), append([]string{peersDir}, platforms...)...)
	cmd.Env = append(os.Environ(), "VERSION=test-release")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/peers.sh: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "farwing")
	cmd = exec.Command("go", "build", "-trimpath", "-tags", "farwing_peers", "-overlay", filepath.Join(peersDir, "overlay.json"),
		"-ldflags", "-X main.version=test-release", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags farwing_peers: %v\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(peersDir, "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hashes := map[string]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fs := strings.Fields(sc.Text()); len(fs) == 4 {
			hashes[fs[0]] = fs[1]
		}
	}
	return bin, hashes
}

// setShell makes path the lab account's login shell.
func setShell(t *testing.T, srv *sshlab.Server, path string) {
	t.Helper()
	if out, err := exec.Command("usermod", "-s", path, srv.User).CombinedOutput(); err != nil {
		t.Fatalf("usermod -s %s: %v: %s", path, err, out)
	}
}

// armAccount makes the lab account look like one on an arm64 Linux host: its login shell (a
// wrapper of sh) puts first in PATH a uname that says machine; the peer itself, an arm64
// executable, runs through qemu-user (binfmt_misc), whose uname(2) says aarch64.
func armAccount(t *testing.T, srv *sshlab.Server, sys, machine string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "farwing-arm-account-") // the account must reach it: not below t.TempDir's 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	uname := "#!/bin/sh\ncase \"$*\" in\n'-s -m') echo '" + sys + " " + machine + "';;\n-m) echo '" + machine + "';;\n*) echo '" + sys + "';;\nesac\n"
	shell := "#!/bin/sh\nPATH=" + dir + ":/usr/local/bin:/usr/bin:/bin; export PATH\nexec /bin/sh \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "uname"), []byte(uname), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "login-shell"), []byte(shell), 0o755); err != nil {
		t.Fatal(err)
	}
	setShell(t, srv, filepath.Join(dir, "login-shell"))
}

// TestLabArm64Remote (issue 38, points 2 and 6): through the lab, a push to an account whose host
// is linux/arm64 installs the arm64 peer (first contact; named in the remote's cache by its own
// SHA-256, which is the manifest's), which then runs under qemu-user and reports aarch64 itself;
// a pull back finds it cached, and both copies' digests equal the source's. A remote of a platform
// the build carries no peer for gets exit 8 and the line that says so, and nothing is installed.
func TestLabArm64Remote(t *testing.T) {
	labtest.Skip(t)
	if err := sshlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the arm64 remote is emulated on an amd64 machine")
	}
	if b, err := os.ReadFile("/proc/sys/fs/binfmt_misc/qemu-aarch64"); err != nil || !strings.HasPrefix(string(b), "enabled") {
		t.Fatalf("binfmt_misc runs no arm64 executables (%v): scripts/setup.sh installs qemu-user-static and registers it", err)
	}
	bin, hashes := releaseBin(t, "linux/amd64", "linux/arm64")
	l := labtest.Start(t, lab.Symmetric(200e6, 10*time.Millisecond, 0.01, 0, 1))
	srv, err := sshlab.Start(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e := &labEnv{t: t, l: l, srv: srv, bin: bin, limit: 5 * time.Minute}
	armAccount(t, srv, "Linux", "aarch64")

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	src, sum := randomFile(t, dir, "arm.bin", 3<<20+4321)
	push := e.copyIn(l.NSA, []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}, "-v", src, srv.Host+":arm.bin")
	if push.code != 0 || push.res["blake3"] != sum || push.res["peer_uploaded"] != true {
		t.Fatalf("push to the arm64 account: exit %d, digest %v (want %s), uploaded %v: %s", push.code, push.res["blake3"], sum, push.res["peer_uploaded"], push.stderr)
	}
	arm := hashes["linux/arm64"]
	if p, _ := push.res["peer_path"].(string); !strings.HasSuffix(p, "/farwing-"+arm[:16]) {
		t.Fatalf("push: the peer started is %q, want the arm64 build farwing-%s", p, arm[:16])
	}
	cached := filepath.Join(srv.Home, ".cache", "farwing", "farwing-"+arm[:16])
	b, err := os.ReadFile(cached)
	if h := sha256.Sum256(b); err != nil || hex.EncodeToString(h[:]) != arm {
		t.Fatalf("the remote's cached arm64 peer: %v, its SHA-256 is not the manifest's %s", err, arm)
	}
	if out, _ := exec.Command("file", cached).Output(); len(out) > 0 && !strings.Contains(string(out), "aarch64") {
		t.Fatalf("the cached peer is not an arm64 executable: %s", out)
	}
	if got := fileSum(t, filepath.Join(srv.Home, "arm.bin")); got != sum {
		t.Fatalf("pushed file's digest %s, want %s", got, sum)
	}
	// The pull starts the cached arm64 peer, which says itself (uname(2) under qemu) what it runs on.
	back := filepath.Join(dir, "back.bin")
	pull := e.copyIn(l.NSA, []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}, "-v", srv.Host+":arm.bin", back)
	if pull.code != 0 || pull.res["peer_uploaded"] != false || fileSum(t, back) != sum {
		t.Fatalf("pull from the arm64 account: exit %d, uploaded %v: %s", pull.code, pull.res["peer_uploaded"], pull.stderr)
	}
	if !strings.Contains(pull.stderr, "peer found on "+srv.Host+" (Linux aarch64)") {
		t.Fatalf("pull: the peer did not report aarch64 itself: %s", pull.stderr)
	}
	t.Logf("push: %.2f s, %v bytes of peer sent; pull: %.2f s", push.elapsed.Seconds(), push.res["bootstrap_bytes"], pull.elapsed.Seconds())

	// A platform this build carries no peer for: one clear line, exit 8, nothing installed.
	for _, c := range []struct{ sys, machine, says string }{
		{"Darwin", "arm64", "is Darwin arm64 (darwin/arm64), but this farwing carries a peer for linux/amd64 and linux/arm64 only"},
		{"Linux", "riscv64", "is Linux riscv64 (linux/riscv64), but this farwing carries a peer for linux/amd64 and linux/arm64 only"},
	} {
		armAccount(t, srv, c.sys, c.machine)
		os.RemoveAll(filepath.Join(srv.Home, ".cache"))
		r := e.copyIn(l.NSA, []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}, src, srv.Host+":other.bin")
		if r.code != 8 || !strings.Contains(r.stderr, c.says) {
			t.Fatalf("push to a %s %s account: exit %d (want 8), stderr %q (want %q)", c.sys, c.machine, r.code, r.stderr, c.says)
		}
		if _, err := os.Stat(filepath.Join(srv.Home, ".cache")); err == nil {
			t.Fatalf("push to a %s %s account made its cache", c.sys, c.machine)
		}
	}
}

// TestLabLoginShells (issue 38, point 5): with the remote account's login shell set to each common
// one, first contact installs the peer and a repeat copy starts the cached one, both intact.
func TestLabLoginShells(t *testing.T) {
	e := startLab(t, 1e9, 2*time.Millisecond, 0)
	e.limit = time.Minute
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	src, sum := randomFile(t, dir, "shell.bin", 1<<20+77)
	for _, name := range []string{"sh", "dash", "bash", "zsh", "fish", "csh", "tcsh"} {
		path, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s is not installed: scripts/setup.sh installs it", name)
		}
		setShell(t, e.srv, path)
		os.RemoveAll(filepath.Join(e.srv.Home, ".cache", "farwing"))
		for i, wantUpload := range []bool{true, false} {
			dst := name + ".bin"
			r := e.copy(src, e.srv.Host+":"+dst)
			if r.code != 0 || r.res["blake3"] != sum || r.res["peer_uploaded"] != wantUpload || fileSum(t, filepath.Join(e.srv.Home, dst)) != sum {
				t.Fatalf("login shell %s, copy %d: exit %d, uploaded %v (want %v): %s", name, i+1, r.code, r.res["peer_uploaded"], wantUpload, r.stderr)
			}
		}
	}
}

package bootstrap

import (
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
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

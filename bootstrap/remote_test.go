package bootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/peers"
)

// loginShells are the login shells an account may have, each of which must run remoteCommand
// (scripts/setup.sh installs those Debian does not have by default).
var loginShells = []string{"sh", "dash", "bash", "zsh", "ksh", "fish", "csh", "tcsh"}

// shellPath is the shell's path, or skips t where it is not installed.
func shellPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: scripts/setup.sh installs it (apt-get install %s)", name, name)
	}
	return p
}

// TestRemoteCommandShells (issue 38, point 5): remoteCommand, given to each login shell as sshd
// gives it (SHELL -c LINE), has sh run the script exactly as written (quotes, `!`, backslashes,
// newlines inside quotes, every byte but NUL), with the session's input left to it byte for byte;
// the real start script, as long as it gets, passes through each shell intact too.
func TestRemoteCommandShells(t *testing.T) {
	var every []byte
	for c := 1; c < 256; c++ {
		if c != '\n' {
			every = append(every, byte(c))
		}
	}
	script := `x='it'\''s'
if [ ! -z "$x" ]; then echo "ok $x"; fi
case $x in it*) printf '%s\n' "a\\b!";; esac
y="two
lines"; echo "$y"
cat <<'END'
` + string(every) + `
END
exec cat
`
	rest := []byte("the control channel\x00\xff\n and more")
	want := "ok it's\na\\b!\ntwo\nlines\n" + string(every) + "\n" + string(rest)
	_, id := fakePeer(t, t.TempDir(), 1)
	c := catalog{builds: []build{selfBuild(id)}}
	for _, p := range []string{"linux/arm64", "darwin/amd64", "darwin/arm64"} {
		c.builds = append(c.builds, build{platform: p, hash: strings.Repeat("ab", 32), gz: []byte{1}, xz: []byte{2}})
	}
	start := peerScript(c, 0, "'--pub' 'k'", 1<<20, aheadLen) // the longest: every build, a preface and an upload ahead
	for _, name := range loginShells {
		t.Run(name, func(t *testing.T) {
			sh := shellPath(t, name)
			home := t.TempDir()
			run := func(cmdLine string, stdin []byte) string {
				cmd := exec.Command(sh, "-c", cmdLine)
				cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "SHELL=" + sh}
				cmd.Dir = home
				cmd.Stdin = bytes.NewReader(stdin)
				var errb bytes.Buffer
				cmd.Stderr = &errb
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s -c remoteCommand: %v: %s", name, err, errb.String())
				}
				return string(out)
			}
			if got := run(remoteCommand(script), rest); got != want {
				t.Fatalf("%s ran the script as %q, want %q", name, got, want)
			}
			// The start script itself, printed instead of run: byte for byte.
			show := strings.Replace(remoteCommand(start), `eval "$(`, `printf %s "$(`, 1)
			if got := run(show, nil); got != strings.TrimRight(start, "\n") {
				t.Fatalf("%s passed the start script (%d bytes on the command line) as %d bytes, not as written", name, len(remoteCommand(start)), len(got))
			}
		})
	}
}

// TestReadFuncExact: r N copies exactly N bytes and reads none past them, with a head that reads
// its input ahead through a buffer (as the BSDs' and macOS's do): perl's sysread where perl is
// there, dd bs=1 where not, and head -c where it is exact.
func TestReadFuncExact(t *testing.T) {
	greedy := "#!/bin/sh\n[ \"$1\" = -c ] || exit 1\ncat >/tmp/.farwing-greedy-$$ && head -c \"$2\" /tmp/.farwing-greedy-$$; rm -f /tmp/.farwing-greedy-$$\n"
	for _, c := range []struct {
		name   string
		tools  []string
		greedy bool
	}{{"head", []string{"sh", "head", "cat", "dd"}, false}, {"perl", []string{"sh", "cat", "dd", "perl"}, true}, {"dd", []string{"sh", "cat", "dd"}, true}} {
		t.Run(c.name, func(t *testing.T) {
			path := toolbox(t, c.tools...)
			if c.greedy {
				realHead, _ := exec.LookPath("head")
				os.WriteFile(filepath.Join(path, "head"), []byte(strings.Replace(greedy, "head -c", realHead+" -c", 1)), 0o755)
			}
			out := remoteSh(t, t.TempDir(), path, readFunc+"\nr 3; echo; r 2 >/dev/null; echo; cat", []byte("abcdefgh"))
			if out != "abc\n\nfgh" {
				t.Fatalf("r through %s: %q, want %q", c.name, out, "abc\n\nfgh")
			}
		})
	}
}

// TestStartAnyLoginShell (issue 38, point 5): through Start, with the remote account's login shell
// each of the common ones, first contact installs the peer (its SHA-256 checked there) and a
// repeat starts the cached one without an upload.
func TestStartAnyLoginShell(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	dir, ssh, _ := fakeRemote(t)
	_, id := fakePeer(t, dir, 100<<10)
	pre := []byte("{\"type\":\"hello\"}\n")
	for _, name := range loginShells {
		t.Run(name, func(t *testing.T) {
			t.Setenv("FAKE_SHELL", shellPath(t, name))
			t.Setenv("FAKE_HOME", t.TempDir())
			t.Setenv("FAKE_PATH", all)
			for i, wantUpload := range []bool{true, false} {
				p, err := Start(context.Background(), SSH{SSHPath: ssh, noAhead: true}, "h", id, []string{"--pub", "k"}, pre)
				if err != nil {
					t.Fatalf("contact %d with %s: %v", i+1, name, err)
				}
				got := make([]byte, len("served serve --pub k umask=0027\n")+len(pre))
				if _, err := io.ReadFull(p.Stdout, got); err != nil || string(got) != "served serve --pub k umask=0027\n"+string(pre) {
					t.Fatalf("contact %d with %s: control channel %q (%v)", i+1, name, got, err)
				}
				p.Close(time.Second)
				if p.Uploaded != wantUpload {
					t.Fatalf("contact %d with %s: uploaded %v, want %v", i+1, name, p.Uploaded, wantUpload)
				}
			}
		})
	}
}

// fakeUname is a toolbox's uname that says the remote is sys on machine.
func fakeUname(t *testing.T, path, sys, machine string) {
	t.Helper()
	s := "#!/bin/sh\ncase \"$*\" in\n'-s -m') echo '" + sys + " " + machine + "';;\n-s) echo '" + sys + "';;\n-m) echo '" + machine + "';;\n*) echo '" + sys + "';;\nesac\n"
	os.Remove(filepath.Join(path, "uname"))
	if err := os.WriteFile(filepath.Join(path, "uname"), []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
}

// carriedPeer is a fake peer for platform, carried (gzip form, hash), large enough that its gzip
// form goes ahead (random padding: it does not compress below aheadPart).
func carriedPeer(t *testing.T, platform string) (peers.Peer, []byte) {
	t.Helper()
	pad := make([]byte, 100<<10)
	rand.Read(pad)
	raw := []byte(fakePeerHead + "echo \"" + platform + " served $*\"\nexec cat\n#" + hex.EncodeToString(pad) + "\n")
	goos, goarch, _ := strings.Cut(platform, "/")
	return peers.Peer{OS: goos, Arch: goarch, Hash: sha256Hex(raw), Size: int64(len(raw)), Gzip: gzipped(t, raw)}, raw
}

// otherLinux is the Linux platform that is not this one's, with its uname -m.
func otherLinux() (platform, machine string) {
	if ownPlatform == "linux/arm64" {
		return "linux/amd64", "x86_64"
	}
	return "linux/arm64", "aarch64"
}

// TestStartRemotePlatform (issue 38, point 2): a build that carries peers installs on each remote
// the one for its `uname -s -m`, named there by its own SHA-256 and checked before it runs, and
// starts it; the next contact guesses it from this user's record and starts it without an
// upload; a wrong guess's upload start, written ahead, is dropped and the right build uploaded
// whole; a remote of a platform no build is carried for gets ErrPlatform saying which platform
// it is, which ones the build serves and how to get one that serves it, and nothing is made there.
func TestStartRemotePlatform(t *testing.T) {
	if !strings.HasPrefix(ownPlatform, "linux/") {
		t.Skip("the fake remote is this Linux machine")
	}
	other, machine := otherLinux()
	own, _ := carriedPeer(t, ownPlatform)
	arm, armRaw := carriedPeer(t, other)
	defer func(c func() ([]peers.Peer, error)) { carried = c }(carried)
	carried = func() ([]peers.Peer, error) { return []peers.Peer{own, arm}, nil }

	dir, ssh, log := fakeRemote(t)
	sessions := func() int { b, _ := os.ReadFile(log); return strings.Count(string(b), "session\n") }
	pre := []byte("{\"type\":\"hello\"}\n")
	path := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	fakeUname(t, path, "Linux", machine)
	home := t.TempDir()
	t.Setenv("FAKE_HOME", home)
	t.Setenv("FAKE_PATH", path)
	id := Identity{Exe: filepath.Join(dir, "not-read")} // a carrying build never reads itself
	var logged []string
	serving := other // the platform whose build the remote must start
	start := func() *Peer {
		t.Helper()
		logged = nil
		s := SSH{SSHPath: ssh, Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
		p, err := Start(context.Background(), s, "h", id, []string{"--pub", "k"}, pre)
		if err != nil {
			t.Fatal(err)
		}
		// The fake peer echoes its arguments and its input: serve would drop what went ahead
		// (--skip), the fake echoes it after the preface.
		line, err := p.Stdout.ReadString('\n')
		skip := fmt.Sprintf(" --skip %d:%d", len(pre), aheadLen)
		if err != nil || strings.TrimSuffix(strings.TrimSuffix(line, "\n"), skip) != serving+" served serve --pub k" {
			t.Fatalf("control channel starts %q (%v)", line, err)
		}
		got := make([]byte, len(pre))
		if _, err := io.ReadFull(p.Stdout, got); err != nil || !bytes.Equal(got, pre) {
			t.Fatalf("control channel: %q (%v), want the preface", got, err)
		}
		p.Close(time.Second)
		return p
	}
	// First contact: the guess is this platform's build, whose start goes ahead; the remote is
	// the other one: it drops those bytes and gets its own build, whole, in the same session.
	p := start()
	if !p.Uploaded || p.Ahead || sessions() != 1 || p.RemoteOS != "Linux "+machine {
		t.Fatalf("first contact: uploaded %v, ahead %v, %d sessions, remote %q", p.Uploaded, p.Ahead, sessions(), p.RemoteOS)
	}
	if !strings.Contains(strings.Join(logged, "\n"), "no record of farwing "+own.Hash[:16]+" on h: its upload starts with the ssh session") {
		t.Fatalf("first contact: this platform's upload did not go ahead: %q", logged)
	}
	cached := filepath.Join(home, ".cache", "farwing", "farwing-"+arm.Hash[:16])
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, armRaw) {
		t.Fatalf("the %s peer in the remote's cache: %v", other, err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "farwing", "farwing-"+own.Hash[:16])); err == nil {
		t.Fatal("this platform's peer was installed on the other platform")
	}
	// Next contact: guessed from the record, started from the cache, nothing sent.
	if p = start(); p.Uploaded || sessions() != 2 {
		t.Fatalf("second contact: uploaded %v, %d sessions", p.Uploaded, sessions())
	}
	// Without the record, the cached build is still found (by uname) and started.
	os.RemoveAll(filepath.Join(dir, "local-cache", "farwing", "peer", "installed"))
	if p = start(); p.Uploaded || sessions() != 3 {
		t.Fatalf("without the record: uploaded %v, %d sessions", p.Uploaded, sessions())
	}
	// A damaged cached build: replaced after its hash check fails.
	os.WriteFile(cached, []byte("#!/bin/sh\nexit 7\n"), 0o755)
	if p = start(); !p.Uploaded {
		t.Fatal("a damaged cached build was not replaced")
	}
	// The same home reached on a host of this platform (a home shared by hosts of two CPUs): the
	// record names the other build, which is there and intact, but this host gets its own.
	fakeUname(t, path, "Linux", map[string]string{"linux/amd64": "x86_64", "linux/arm64": "aarch64"}[ownPlatform])
	serving = ownPlatform
	if p = start(); !p.Uploaded || sessions() != 5 {
		t.Fatalf("a shared home on this platform: uploaded %v, %d sessions", p.Uploaded, sessions())
	}
	if p = start(); p.Uploaded {
		t.Fatal("a shared home on this platform: its own build, cached, is uploaded again")
	}

	// A platform no build is carried for: a clear error, nothing made on the remote.
	for _, c := range []struct{ sys, machine, names, how string }{
		{"Darwin", "arm64", "Darwin arm64 (darwin/arm64)", "make dist"},
		{"Linux", "riscv64", "Linux riscv64 (linux/riscv64),", "release builds have peers for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64 only"},
		{"Linux", "mips", "Linux mips,", "release builds have peers for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64 only"},
	} {
		fakeUname(t, path, c.sys, c.machine)
		home := t.TempDir()
		t.Setenv("FAKE_HOME", home)
		_, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, nil, pre)
		if !errors.Is(err, ErrPlatform) || !strings.Contains(err.Error(), "h is "+c.names) || !strings.Contains(err.Error(), c.how) ||
			!strings.Contains(err.Error(), "carries a peer for "+ownPlatform+" and "+other+" only") {
			t.Fatalf("remote %s %s: %v", c.sys, c.machine, err)
		}
		if _, err := os.Stat(filepath.Join(home, ".cache")); err == nil {
			t.Fatalf("remote %s %s: something was made there", c.sys, c.machine)
		}
	}

	// A plain build (none carried) says which build it is and how to get one that carries more.
	carried = func() ([]peers.Peer, error) { return nil, nil }
	fakeUname(t, path, "Linux", machine)
	_, plain := fakePeer(t, dir, 1<<10)
	_, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", plain, nil, pre)
	if !errors.Is(err, ErrPlatform) || !strings.Contains(err.Error(), "carries a peer for "+ownPlatform+" only") || !strings.Contains(err.Error(), "make dist") {
		t.Fatalf("a plain build to %s: %v", other, err)
	}
	// A plain build for a platform release builds carry no peer for (here: one that says it is
	// linux/riscv64) still serves remotes of its own platform with itself.
	defer func(p string) { ownPlatform = p }(ownPlatform)
	ownPlatform = "linux/riscv64"
	fakeUname(t, path, "Linux", "riscv64")
	t.Setenv("FAKE_HOME", t.TempDir())
	p, err = Start(context.Background(), SSH{SSHPath: ssh}, "h", plain, nil, pre)
	if err != nil || !p.Uploaded {
		t.Fatalf("a plain linux/riscv64 build to a linux/riscv64 remote: %v", err)
	}
	p.Close(time.Second)
}

// TestScriptsLint: the remote scripts, as rendered for the longest case (every build, a preface,
// an upload ahead, in gzip or xz form) and with their comments, parse in sh, dash and bash (-n), and shellcheck finds
// nothing in them (its Debian package is installed by scripts/setup.sh; the few findings that are
// meant are disabled in the scripts, each with why).
func TestScriptsLint(t *testing.T) {
	_, id := fakePeer(t, t.TempDir(), 1)
	c := catalog{builds: []build{selfBuild(id)}}
	for _, p := range []string{"linux/arm64", "darwin/amd64", "darwin/arm64"} {
		c.builds = append(c.builds, build{platform: p, hash: strings.Repeat("ab", 32), gz: []byte{1}, xz: []byte{2}})
	}
	scripts := map[string]string{
		"start.sh":       render(startTemplate(), peerScriptFor(c, 0, "'--pub' 'k'", 1<<20, aheadLen)),
		"start-plain.sh": render(startTemplate(), peerScriptFor(catalog{builds: []build{selfBuild(id)}}, 0, "", 0, 0)),
		"start-xz.sh":    render(startTemplate(), peerScriptFor(c, 1, "'--pub' 'k'", 1<<20, aheadLen)), // its upload's start ahead in xz form
		"part.sh":        render(partTemplate(), partScriptData{Priv: privFunc, Read: readFunc, Dir: shellQuote("/home/u/.cache/farwing"), Q: ".farwing-0123456789abcdef." + upID, Part: "0-5000", N: 5000}),
	}
	dir := t.TempDir()
	for name, s := range scripts {
		if strings.Contains(s, "{{") || strings.Contains(s, "<no value>") {
			t.Fatalf("%s: not rendered whole", name)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sh := range []string{"sh", "dash", "bash"} {
			if out, err := exec.Command(shellPath(t, sh), "-n", p).CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v: %s", sh, name, err, out)
			}
		}
		if _, err := exec.LookPath("shellcheck"); err != nil {
			t.Logf("shellcheck not installed (scripts/setup.sh installs it): %s checked with sh -n only", name)
			continue
		}
		if out, err := exec.Command("shellcheck", "-s", "sh", "-f", "gcc", p).CombinedOutput(); err != nil {
			t.Errorf("shellcheck %s: %v:\n%s", name, err, out)
		}
		// What is sent is the same script without its comments.
		if stripped := stripComments(s); strings.Contains(stripped, "\n#") || len(stripped) >= len(s) {
			t.Errorf("%s: comments left in what is sent", name)
		}
	}
}

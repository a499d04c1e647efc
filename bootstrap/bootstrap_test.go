package bootstrap

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

// baseTools are the commands the remote script uses besides a hash tool and gzip.
var baseTools = []string{"sh", "uname", "mkdir", "cut", "head", "dd", "rm", "chmod", "mv", "find", "cat", "env", "touch"}

// toolbox is a PATH directory holding only the named commands (links to the system's), so that the
// remote script runs as on a host without the others.
func toolbox(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range tools {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("%s not installed", name)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakePeer writes an executable that stands for the peer: it prints its arguments and umask (the
// remote shell's, 027 in these tests: the install's own 077 must not leak into it), then copies
// its standard input (the control channel) to its output; padding makes it span several upload
// chunks. It returns the file and its identity.
func fakePeer(t *testing.T, dir string, padding int) (string, Identity) {
	t.Helper()
	b := []byte("#!/bin/sh\necho \"served $* umask=$(umask)\"\nexec cat\n#")
	for i := 0; i < padding; i++ {
		b = append(b, "0123456789abcdef"[(i*7919)%16])
	}
	b = append(b, '\n')
	p := filepath.Join(dir, "peer")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, Identity{Exe: p, Hash: hex.EncodeToString(sum[:])}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// remoteSh runs script as the remote shell would: /bin/sh with only HOME and PATH, stdin given.
func remoteSh(t *testing.T, home, path, script string, stdin []byte) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "umask 027\n"+script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + path}
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("remote script: %v: %q", err, out)
	}
	return string(out)
}

func upload(format string, data []byte) []byte {
	return append([]byte(fmt.Sprintf("FARWING-UPLOAD %s %d\n", format, len(data))), data...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestStartScript runs first contact's remote script through a local sh with a fake home and a
// PATH of chosen tools: the peer is read from stdin byte-exact (what follows reaches the started
// peer untouched), started only when its SHA-256 matches, a cached peer that was tampered with
// is never run and is replaced, a short or corrupt upload is refused and removed, a remote
// without gzip asks for the raw file, and one without any SHA-256 tool says so.
func TestStartScript(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	uname := strings.TrimSpace(remoteSh(t, t.TempDir(), all, "echo $(uname -s) $(uname -m)", nil))
	bin := t.TempDir()
	exe, id := fakePeer(t, bin, 64<<10)
	raw, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	pre := []byte(`{"type":"hello","files":[1,2,3]}` + "\n")
	script := startScript(id, "--pub 'k'", len(pre))
	home := t.TempDir()
	dir := home + "/.cache/farwing"
	final := dir + "/farwing-" + id.Hash[:16]
	need := "FARWING-PEER need " + uname + " gzip,raw " + dir + "\n"
	ok := "FARWING-PEER ok " + uname + " " + final + "\n"
	served := "served serve --pub k umask=0027\n"

	// Nothing cached: the preface is dropped, the formats offered; stdin ending: nothing more.
	if out := remoteSh(t, home, all, script, pre); out != need {
		t.Fatalf("probe of an empty cache: %q, want %q", out, need)
	}
	// A gzip upload, then the control channel: the peer starts on exactly what follows.
	out := remoteSh(t, home, all, script, cat(pre, upload("gzip", gzipped(t, raw)), []byte("CONTROL\n")))
	if want := need + ok + served + "CONTROL\n"; out != want {
		t.Fatalf("gzip install: %q, want %q", out, want)
	}
	if st, err := os.Stat(final); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("installed peer: %v %v", st, err)
	}
	// Cached and intact: started at once, on the preface.
	if out := remoteSh(t, home, all, script, pre); out != ok+served+string(pre) {
		t.Fatalf("start of the cached peer: %q", out)
	}
	noTemp := func(what string) {
		t.Helper()
		if m, _ := filepath.Glob(dir + "/.farwing-*.tmp"); len(m) > 0 {
			t.Fatalf("%s: temporary files left: %v", what, m)
		}
	}
	noTemp("after install")

	// A short upload (the stream ends early), a corrupt one and a malformed header: refused,
	// nothing run, nothing left; the cached peer stays.
	gz := gzipped(t, raw)
	bad := append([]byte(nil), gz...)
	bad[len(bad)/2] ^= 0x55
	badRaw := append([]byte(nil), raw...)
	badRaw[len(badRaw)-2] ^= 1
	os.Remove(final)
	for _, c := range []struct {
		name  string
		stdin []byte
		want  string
	}{
		{"short gzip", cat(pre, []byte(fmt.Sprintf("FARWING-UPLOAD gzip %d\n", len(gz))), gz[:len(gz)/2]), "FARWING-PEER badhash\n"},
		{"short raw", cat(pre, []byte(fmt.Sprintf("FARWING-UPLOAD raw %d\n", len(raw))), raw[:len(raw)-1]), "FARWING-PEER badhash\n"},
		{"corrupt gzip", cat(pre, upload("gzip", bad), []byte("CONTROL\n")), "FARWING-PEER badhash\n"},
		{"corrupt raw", cat(pre, upload("raw", badRaw), []byte("CONTROL\n")), "FARWING-PEER badhash\n"},
		{"unknown format", cat(pre, upload("zstd", raw)), "FARWING-PEER badupload\n"},
		{"bad length", cat(pre, []byte("FARWING-UPLOAD raw 12x\n")), "FARWING-PEER badupload\n"},
		{"no header", cat(pre, []byte("hello\n")), "FARWING-PEER badupload\n"},
	} {
		if out := remoteSh(t, home, all, script, c.stdin); out != need+c.want {
			t.Errorf("%s: %q, want %q", c.name, out, need+c.want)
		}
		noTemp(c.name)
		if _, err := os.Stat(final); err == nil {
			t.Errorf("%s: a peer was installed", c.name)
		}
	}

	// A cached peer that was tampered with is not run: it is replaced by the upload.
	marker := home + "/ran"
	os.WriteFile(final, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	if out := remoteSh(t, home, all, script, cat(pre, upload("raw", raw), []byte("C2\n"))); out != need+ok+served+"C2\n" {
		t.Fatalf("replacing a tampered peer: %q", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tampered peer was run")
	}

	// Without gzip the remote asks for the raw file; with head lacking -c, dd reads it.
	os.Remove(final)
	noGzip := toolbox(t, append(baseTools, "sha256sum")...)
	needRaw := "FARWING-PEER need " + uname + " raw " + dir + "\n"
	if out := remoteSh(t, home, noGzip, script, cat(pre, upload("raw", raw), []byte("C3\n"))); out != needRaw+ok+served+"C3\n" {
		t.Fatalf("install without gzip: %q", out)
	}
	os.Remove(final)
	os.Remove(filepath.Join(noGzip, "head"))
	os.WriteFile(filepath.Join(noGzip, "head"), []byte("#!/bin/sh\necho 'head: no -c' >&2; exit 1\n"), 0o755)
	if out := remoteSh(t, home, noGzip, script, cat(pre, upload("raw", raw), []byte("C4\n"))); out != needRaw+ok+served+"C4\n" {
		t.Fatalf("install with dd for head -c: %q", out)
	}

	// Each SHA-256 tool on its own does; none at all is reported, before any upload.
	for _, tool := range []string{"sha256sum", "shasum", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("%s not installed: not tried", tool)
			continue
		}
		os.Remove(final)
		path := toolbox(t, append(baseTools, "gzip", tool)...)
		if out := remoteSh(t, home, path, script, cat(pre, upload("gzip", gz), []byte("C5\n"))); out != need+ok+served+"C5\n" {
			t.Errorf("with only %s: %q", tool, out)
		}
	}
	os.Remove(final)
	none := toolbox(t, append(baseTools, "gzip")...)
	if out := remoteSh(t, home, none, script, cat(pre, upload("gzip", gz))); out != "FARWING-PEER nohash "+uname+" "+dir+"\n" {
		t.Fatalf("without a SHA-256 tool: %q", out)
	}
}

// TestInstallTidies: installing a build removes builds installed more than 30 days ago and
// uploads abandoned for a day, and keeps the rest.
func TestInstallTidies(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	home := t.TempDir()
	dir := home + "/.cache/farwing"
	os.MkdirAll(dir, 0o755)
	_, id := fakePeer(t, t.TempDir(), 0)
	raw, _ := os.ReadFile(id.Exe)
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
	out := remoteSh(t, home, all, startScript(id, "", 0), upload("raw", raw))
	if !strings.Contains(out, "FARWING-PEER ok ") || !strings.Contains(out, "served serve") {
		t.Fatalf("install: %q", out)
	}
	for name, kept := range map[string]bool{"farwing-old": false, "farwing-recent": true, ".farwing-gone.3.4.tmp": false,
		".farwing-live.5.6.tmp": true, "farwing-" + id.Hash[:16]: true} {
		if _, err := os.Stat(dir + "/" + name); (err == nil) != kept {
			t.Errorf("after install: %s present %v, want %v", name, err == nil, kept)
		}
	}
}

// fakeSSH is an ssh that runs the remote command here, as the remote shell would (only HOME and
// PATH from FAKE_HOME and FAKE_PATH), and counts the sessions it starts in FAKE_SSH_LOG; -G fails.
const fakeSSH = `#!/bin/sh
for a; do last=$a; [ "$a" = -G ] && exit 1; done
echo session >>"$FAKE_SSH_LOG"
umask 027
exec env -i HOME="$FAKE_HOME" PATH="$FAKE_PATH" /bin/sh -c "$last"
`

// TestStartOneSession: through Start, first contact installs the peer in one ssh session (gzip
// where the remote has it, raw where not), the started peer's control channel begins with the
// preface, a second start installs nothing, and a tampered cache is replaced.
func TestStartOneSession(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	noGzip := toolbox(t, append(baseTools, "sha256sum")...)
	dir := t.TempDir()
	ssh := filepath.Join(dir, "ssh")
	os.WriteFile(ssh, []byte(fakeSSH), 0o755)
	log := filepath.Join(dir, "sessions")
	t.Setenv("FAKE_SSH_LOG", log)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "local-cache"))
	exe, id := fakePeer(t, dir, 700<<10)
	raw, _ := os.ReadFile(exe)
	pre := []byte("{\"type\":\"hello\"}\n")
	sessions := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "session\n")
	}
	var last [2]int64
	start := func(home, path string) *Peer {
		t.Helper()
		t.Setenv("FAKE_HOME", home)
		t.Setenv("FAKE_PATH", path)
		var notices []string
		s := SSH{SSHPath: ssh, Notice: func(l string) { notices = append(notices, l) },
			Uploading: func(sent, total int64) { last = [2]int64{sent, total} }}
		p, err := Start(context.Background(), s, "h", id, []string{"--pub", "k"}, pre)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(time.Second)
		for _, want := range []string{"served serve --pub k umask=0027\n", string(pre)} {
			if got := make([]byte, len(want)); func() bool { _, err := io.ReadFull(p.Stdout, got); return err != nil || string(got) != want }() {
				t.Fatalf("control channel: got %q, want %q", got, want)
			}
		}
		if p.Uploaded != (len(notices) == 1) || p.Uploaded && !strings.HasPrefix(notices[0], "installing farwing on h (") {
			t.Fatalf("uploaded %v, notices %q", p.Uploaded, notices)
		}
		return p
	}
	// Compressed builds made here more than 30 days ago go when a new one is kept.
	packed := filepath.Join(dir, "local-cache", "farwing", "peer")
	os.MkdirAll(packed, 0o700)
	for name, age := range map[string]time.Duration{"farwing-old.gz": 40 * 24 * time.Hour, "farwing-recent.gz": time.Hour} {
		os.WriteFile(filepath.Join(packed, name), []byte("x"), 0o600)
		at := time.Now().Add(-age)
		os.Chtimes(filepath.Join(packed, name), at, at)
	}
	home := t.TempDir()
	p := start(home, all)
	if _, err := os.Stat(filepath.Join(packed, "farwing-old.gz")); err == nil {
		t.Error("a compressed build made 40 days ago is kept")
	}
	if _, err := os.Stat(filepath.Join(packed, "farwing-recent.gz")); err != nil {
		t.Error("a compressed build made an hour ago is removed")
	}
	if !p.Uploaded || p.Format != "gzip" || p.SentBytes <= 0 || p.SentBytes >= int64(len(raw)) || sessions() != 1 {
		t.Fatalf("first contact: uploaded %v, %s, %d bytes of %d, %d ssh sessions", p.Uploaded, p.Format, p.SentBytes, len(raw), sessions())
	}
	if last != [2]int64{p.SentBytes, p.SentBytes} {
		t.Fatalf("upload progress ended at %v, want %d of %d", last, p.SentBytes, p.SentBytes)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "local-cache", "farwing", "peer", "farwing-"+id.Hash[:16]+".gz")); len(m) != 1 {
		t.Fatal("the compressed peer is not kept in the local cache")
	}
	if p = start(home, all); p.Uploaded || p.SentBytes != 0 || sessions() != 2 {
		t.Fatalf("second contact: uploaded %v, %d bytes, %d ssh sessions in all", p.Uploaded, p.SentBytes, sessions())
	}
	// A tampered cache on the remote: replaced, in one session.
	os.WriteFile(home+"/.cache/farwing/farwing-"+id.Hash[:16], []byte("#!/bin/sh\nexit 7\n"), 0o755)
	if p = start(home, all); !p.Uploaded || sessions() != 3 {
		t.Fatalf("tampered cache: uploaded %v, %d ssh sessions in all", p.Uploaded, sessions())
	}
	// A remote without gzip gets the file as it is.
	if p = start(t.TempDir(), noGzip); !p.Uploaded || p.Format != "raw" || p.SentBytes != int64(len(raw)) || sessions() != 4 {
		t.Fatalf("without gzip: uploaded %v, %s, %d bytes, %d ssh sessions in all", p.Uploaded, p.Format, p.SentBytes, sessions())
	}
	// A corrupt local cache of the compressed peer is not sent: it is made again.
	gzCache := filepath.Join(dir, "local-cache", "farwing", "peer", "farwing-"+id.Hash[:16]+".gz")
	os.WriteFile(gzCache, gzipped(t, []byte("not the peer")), 0o600)
	if p = start(t.TempDir(), all); !p.Uploaded || p.Format != "gzip" {
		t.Fatalf("with a corrupt local cache: uploaded %v, %s", p.Uploaded, p.Format)
	}
	// A gzip that fails at once (reading none of the upload): refused with a clear error, the
	// upload's writer not left hanging, nothing installed.
	broken := toolbox(t, append(baseTools, "sha256sum")...)
	os.WriteFile(filepath.Join(broken, "gzip"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	badHome := t.TempDir()
	t.Setenv("FAKE_HOME", badHome)
	t.Setenv("FAKE_PATH", broken)
	if _, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, nil, pre); !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "did not check out (badhash)") {
		t.Fatalf("with a broken gzip: %v", err)
	}
	if _, err := os.Stat(badHome + "/.cache/farwing/farwing-" + id.Hash[:16]); err == nil {
		t.Fatal("a peer that did not check out was installed")
	}
	// No SHA-256 tool there: a clear error, no upload.
	t.Setenv("FAKE_HOME", t.TempDir())
	t.Setenv("FAKE_PATH", toolbox(t, append(baseTools, "gzip")...))
	if _, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, nil, pre); !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("without a SHA-256 tool: %v", err)
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

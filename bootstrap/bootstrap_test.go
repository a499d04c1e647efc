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
	"slices"
	"strconv"
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
	// What a command run for the user (farwing copy, scp) is given: scp's -P, no sharing options,
	// even where a start's session shares the connection.
	se := &session{SSH: s, ctlDir: "/tmp/fw", mux: true}
	if got := se.Flags(); !reflect.DeepEqual(got, []string{"-F", "cfg", "-i", "id", "-P", "2222", "-o", "A=1", "-o", "B=2", "-J", "j"}) {
		t.Fatalf("flags %v", got)
	}
}

// baseTools are the commands the remote script uses besides a hash tool and gzip.
var baseTools = []string{"sh", "uname", "mkdir", "head", "dd", "rm", "chmod", "mv", "find", "cat", "env", "touch", "wc", "ls", "mkfifo"}

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

// fakePeerHead starts the fake peers' scripts: started with --announce PATH (a cached peer), it
// prints the status line serve would, and with --chdir DIR it goes there, as serve does; it drops
// both flags from its arguments.
const fakePeerHead = "#!/bin/sh\nif [ \"$2\" = --announce ]; then printf 'FARWING-PEER ok %s %s %s\\n' \"$(uname -s)\" \"$(uname -m)\" \"$3\"; a=$1; shift 3; set -- \"$a\" \"$@\"; fi\n" +
	"if [ \"$2\" = --chdir ]; then cd \"$3\" || exit 1; a=$1; shift 3; set -- \"$a\" \"$@\"; fi\n"

// fakePeer writes an executable that stands for the peer: it prints its arguments and umask (the
// remote shell's, 027 in these tests: the install's own 077 must not leak into it), then copies
// its standard input (the control channel) to its output; padding makes it span several upload
// chunks. It returns the file and its identity.
func fakePeer(t *testing.T, dir string, padding int) (string, Identity) {
	t.Helper()
	b := []byte(fakePeerHead + "echo \"served $* umask=$(umask)\"\nexec cat\n#")
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
	out, err := remoteCmd(home, path, script, stdin).Output()
	if err != nil {
		t.Fatalf("remote script: %v: %q", err, out)
	}
	return string(out)
}

// upID is the upload id of the scripted uploads.
const upID = "0123456789abcdef"

// testPiece is the size of the scripted uploads' parts.
const testPiece = 16 << 10

func upHeader(format string, n int) []byte {
	return []byte(fmt.Sprintf("FARWING-UPLOAD %s %d %s\n", format, n, upID))
}

// pieces cuts n bytes into parts of size bytes (the last shorter).
func pieces(n, size int) []part {
	var ps []part
	for o := 0; o < n; o += size {
		ps = append(ps, part{o, min(size, n-o)})
	}
	return ps
}

// sendParts are the main session's parts of data, in the order given.
func sendParts(data []byte, ps ...part) []byte {
	var b []byte
	for _, c := range ps {
		b = append(b, fmt.Sprintf("FARWING-PART %d %d\n", c.off, c.n)...)
		b = append(b, data[c.off:c.off+c.n]...)
	}
	return b
}

func joinLine(ps ...part) []byte {
	var s []string
	for _, c := range ps {
		s = append(s, c.String())
	}
	return []byte("FARWING-JOIN " + strings.Join(s, " ") + "\n")
}

// acks are the script's acknowledgements of the main session's parts ps.
func acks(ps ...part) string {
	var s string
	for _, c := range ps {
		s += fmt.Sprintf("FARWING-GOT %d %d\n", c.off, c.n)
	}
	return s
}

// upload is a whole upload of data in format over the main session: the header, parts of
// testPiece bytes in order, the join.
func upload(format string, data []byte) []byte {
	ps := pieces(len(data), testPiece)
	return cat(upHeader(format, len(data)), sendParts(data, ps...), joinLine(ps...))
}

// stored is what the script answers to upload(format, data) before its status.
func stored(data []byte) string { return acks(pieces(len(data), testPiece)...) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestStartScript runs first contact's remote script through a local sh with a fake home and a
// PATH of chosen tools: the peer is read from stdin byte-exact (what follows reaches the started
// peer untouched), started only when its SHA-256 matches, a cached peer that was tampered with
// is never run and is replaced, a corrupt upload or one cut short is refused and removed, a
// malformed header is refused, a remote without gzip asks for the raw file, and one without any
// SHA-256 tool says so.
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
	script := startScript(id, "--pub 'k'", len(pre), 0)
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
	gz := gzipped(t, raw)
	out := remoteSh(t, home, all, script, cat(pre, upload("gzip", gz), []byte("CONTROL\n")))
	if want := need + stored(gz) + ok + served + "CONTROL\n"; out != want {
		t.Fatalf("gzip install: %q, want %q", out, want)
	}
	if st, err := os.Stat(final); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("installed peer: %v %v", st, err)
	}
	// Cached and intact: started at once, on the preface.
	if out := remoteSh(t, home, all, script, pre); out != ok+served+string(pre) {
		t.Fatalf("start of the cached peer: %q", out)
	}
	noTemp(t, dir, "after install")

	// An upload cut short (the stream ends within a part, or before the join), a corrupt one
	// and a malformed header: refused or abandoned, nothing run, nothing left; no peer stays.
	bad := append([]byte(nil), gz...)
	bad[len(bad)/2] ^= 0x55
	badRaw := append([]byte(nil), raw...)
	badRaw[len(badRaw)-2] ^= 1
	os.Remove(final)
	ps := pieces(len(raw), testPiece)
	for _, c := range []struct {
		name  string
		stdin []byte
		want  string
	}{
		{"cut within a part", cat(pre, upHeader("raw", len(raw)), sendParts(raw, ps[:2]...)[:testPiece+100]), acks(ps[:2]...)},
		{"cut before the join", cat(pre, upHeader("raw", len(raw)), sendParts(raw, ps...)), acks(ps...)},
		{"corrupt gzip", cat(pre, upload("gzip", bad), []byte("CONTROL\n")), stored(bad) + "FARWING-PEER badhash\n"},
		{"corrupt raw", cat(pre, upload("raw", badRaw), []byte("CONTROL\n")), stored(raw) + "FARWING-PEER badhash\n"},
		{"unknown format", cat(pre, upload("zstd", raw)), "FARWING-PEER badupload\n"},
		{"bad length", cat(pre, []byte("FARWING-UPLOAD raw 12x "+upID+"\n")), "FARWING-PEER badupload\n"},
		{"no id", cat(pre, []byte("FARWING-UPLOAD raw 12\n")), "FARWING-PEER badupload\n"},
		{"bad id", cat(pre, []byte("FARWING-UPLOAD raw 12 ../../../x/yyyyyy\n")), "FARWING-PEER badupload\n"},
		{"no header", cat(pre, []byte("hello\n")), "FARWING-PEER badupload\n"},
	} {
		if out := remoteSh(t, home, all, script, c.stdin); out != need+c.want {
			t.Errorf("%s: %q, want %q", c.name, out, need+c.want)
		}
		noTemp(t, dir, c.name)
		if _, err := os.Stat(final); err == nil {
			t.Errorf("%s: a peer was installed", c.name)
		}
	}

	// A cached peer that was tampered with is not run: it is replaced by the upload.
	marker := home + "/ran"
	os.WriteFile(final, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	if out := remoteSh(t, home, all, script, cat(pre, upload("raw", raw), []byte("C2\n"))); out != need+stored(raw)+ok+served+"C2\n" {
		t.Fatalf("replacing a tampered peer: %q", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tampered peer was run")
	}

	// Without gzip the remote asks for the raw file; with head lacking -c, dd reads it.
	os.Remove(final)
	noGzip := toolbox(t, append(baseTools, "sha256sum")...)
	needRaw := "FARWING-PEER need " + uname + " raw " + dir + "\n"
	if out := remoteSh(t, home, noGzip, script, cat(pre, upload("raw", raw), []byte("C3\n"))); out != needRaw+stored(raw)+ok+served+"C3\n" {
		t.Fatalf("install without gzip: %q", out)
	}
	os.Remove(final)
	os.Remove(filepath.Join(noGzip, "head"))
	os.WriteFile(filepath.Join(noGzip, "head"), []byte("#!/bin/sh\necho 'head: no -c' >&2; exit 1\n"), 0o755)
	if out := remoteSh(t, home, noGzip, script, cat(pre, upload("raw", raw), []byte("C4\n"))); out != needRaw+stored(raw)+ok+served+"C4\n" {
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
		if out := remoteSh(t, home, path, script, cat(pre, upload("gzip", gz), []byte("C5\n"))); out != need+stored(gz)+ok+served+"C5\n" {
			t.Errorf("with only %s: %q", tool, out)
		}
	}
	os.Remove(final)
	none := toolbox(t, append(baseTools, "gzip")...)
	if out := remoteSh(t, home, none, script, cat(pre, upload("gzip", gz))); out != "FARWING-PEER nohash "+uname+" "+dir+"\n" {
		t.Fatalf("without a SHA-256 tool: %q", out)
	}
}

// noTemp fails when dir holds temporary files: unpacked uploads or parts.
func noTemp(t *testing.T, dir, what string) {
	t.Helper()
	if m, _ := filepath.Glob(dir + "/.farwing-*.tmp"); len(m) > 0 {
		t.Fatalf("%s: temporary files left: %v", what, m)
	}
}

// TestStartScriptParts: the upload's parts may come in any order and from other ssh connections
// (partScript), and make the peer byte-exact; a part written short or corrupt fails the hash
// check; numbers that are not plain decimals or lie outside the upload, and joins that do not
// tile it, are refused; a join naming a part that is not there is answered with the missing
// parts, runs nothing, and completes once they are sent.
func TestStartScriptParts(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	uname := strings.TrimSpace(remoteSh(t, t.TempDir(), all, "echo $(uname -s) $(uname -m)", nil))
	exe, id := fakePeer(t, t.TempDir(), 100<<10)
	raw, _ := os.ReadFile(exe)
	gz := gzipped(t, raw)
	script := startScript(id, "", 0, 0)
	home := filepath.Join(t.TempDir(), "my home") // a space in the paths of the parts
	os.Mkdir(home, 0o755)
	dir := home + "/.cache/farwing"
	final := dir + "/farwing-" + id.Hash[:16]
	need := "FARWING-PEER need " + uname + " gzip,raw " + dir + "\n"
	ok := "FARWING-PEER ok " + uname + " " + final + "\n"
	served := "served serve umask=0027\n"
	ps := pieces(len(raw), testPiece) // 7 parts
	rev := slices.Clone(ps)
	slices.Reverse(rev)
	installed := func(what string) {
		t.Helper()
		b, err := os.ReadFile(final)
		if err != nil || !bytes.Equal(b, raw) {
			t.Fatalf("%s: installed peer: %v, byte-exact %v", what, err, bytes.Equal(b, raw))
		}
		noTemp(t, dir, what)
		os.Remove(final)
	}
	notRun := func(what string) {
		t.Helper()
		if _, err := os.Stat(final); err == nil {
			t.Fatalf("%s: a peer was installed", what)
		}
		noTemp(t, dir, what)
	}

	// Parts in reverse order.
	out := remoteSh(t, home, all, script, cat(upHeader("raw", len(raw)), sendParts(raw, rev...), joinLine(ps...), []byte("C1\n")))
	if want := need + acks(rev...) + ok + served + "C1\n"; out != want {
		t.Fatalf("parts in reverse order: %q, want %q", out, want)
	}
	installed("parts in reverse order")

	// Parts stored by other connections' script (one part each, written first), the rest over
	// the main session; gzip.
	helper := func(c part, data []byte) string {
		t.Helper()
		return remoteSh(t, home, all, partScript(dir, id.Hash[:16], upID, c), data[c.off:c.off+c.n])
	}
	gzParts := []part{{0, 100}, {100, 200}, {300, len(gz) - 300}}
	for _, c := range gzParts[1:] {
		if out := helper(c, gz); out != "FARWING-STORED "+c.String()+"\n" {
			t.Fatalf("part script: %q", out)
		}
		p := dir + "/.farwing-" + id.Hash[:16] + "." + upID + "." + c.String() + ".tmp"
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("stored part %s: %v %v", p, st, err)
		}
	}
	out = remoteSh(t, home, all, script, cat(upHeader("gzip", len(gz)), sendParts(gz, gzParts[0]), joinLine(gzParts...), []byte("C2\n")))
	if want := need + acks(gzParts[0]) + ok + served + "C2\n"; out != want {
		t.Fatalf("parts from other connections: %q, want %q", out, want)
	}
	installed("parts from other connections")

	// The part script stores nothing and says nothing when its input is short.
	cmd := exec.Command("/bin/sh", "-c", partScript(dir, id.Hash[:16], upID, part{0, 5000}))
	cmd.Env = []string{"HOME=" + home, "PATH=" + all}
	cmd.Stdin = bytes.NewReader(raw[:4999])
	if out, err := cmd.Output(); err == nil || len(out) > 0 {
		t.Fatalf("part script with a short input: %v, %q", err, out)
	}
	noTemp(t, dir, "a short part")

	// A part stored short, or corrupt, by another connection: the hash check fails, nothing is
	// run, the parts are removed.
	name := func(c part) string { return dir + "/.farwing-" + id.Hash[:16] + "." + upID + "." + c.String() + ".tmp" }
	for _, c := range []struct {
		what string
		data []byte
	}{{"short", raw[ps[2].off : ps[2].off+ps[2].n-1]}, {"corrupt", append([]byte{raw[ps[2].off] ^ 1}, raw[ps[2].off+1:ps[2].off+ps[2].n]...)}} {
		os.WriteFile(name(ps[2]), c.data, 0o600)
		others := append(slices.Clone(ps[:2]), ps[3:]...)
		out := remoteSh(t, home, all, script, cat(upHeader("raw", len(raw)), sendParts(raw, others...), joinLine(ps...), []byte("C\n")))
		if want := need + acks(others...) + "FARWING-PEER badhash\n"; out != want {
			t.Errorf("a %s part: %q, want %q", c.what, out, want)
		}
		notRun("a " + c.what + " part")
	}

	// A join naming parts that are not there: named back, nothing run; sent then, and joined
	// again: installed. The stream ending there instead: nothing left.
	out = remoteSh(t, home, all, script, cat(upHeader("raw", len(raw)), sendParts(raw, ps[0], ps[3]), joinLine(ps...)))
	if want := need + acks(ps[0], ps[3]) + "FARWING-MISSING " + ps[1].String() + " " + ps[2].String() + " " + strings.Join(func() []string {
		var s []string
		for _, c := range ps[4:] {
			s = append(s, c.String())
		}
		return s
	}(), " ") + "\n"; out != want {
		t.Fatalf("join with missing parts: %q, want %q", out, want)
	}
	notRun("join with missing parts")
	rest := append(slices.Clone(ps[1:3]), ps[4:]...)
	out = remoteSh(t, home, all, script, cat(upHeader("raw", len(raw)), sendParts(raw, ps[0]), joinLine(ps...), sendParts(raw, rest...), sendParts(raw, ps[3]), joinLine(ps...), []byte("C3\n")))
	if !strings.HasPrefix(out, need+acks(ps[0])+"FARWING-MISSING ") || !strings.HasSuffix(out, "\n"+acks(rest...)+acks(ps[3])+ok+served+"C3\n") {
		t.Fatalf("join, missing parts sent, join: %q", out)
	}
	installed("missing parts sent")

	// Numbers that are not plain decimals or lie outside the upload, and joins that do not tile
	// it exactly: refused, nothing run, parts already stored removed.
	n := len(raw)
	hdr := upHeader("raw", n)
	first := sendParts(raw, ps[0])
	for _, c := range []struct {
		what  string
		stdin []byte
	}{
		{"offset past the end", cat(hdr, []byte(fmt.Sprintf("FARWING-PART %d 1\n", n)))},
		{"part past the end", cat(hdr, []byte(fmt.Sprintf("FARWING-PART %d 2\n", n-1)))},
		{"empty part", cat(hdr, []byte("FARWING-PART 0 0\n"))},
		{"negative offset", cat(hdr, []byte("FARWING-PART -1 5\n"))},
		{"leading zero", cat(hdr, []byte("FARWING-PART 010 5\n"))},
		{"eleven digits", cat(hdr, []byte("FARWING-PART 10000000000 5\n"))},
		{"not a number", cat(hdr, []byte("FARWING-PART 1x 5\n"))},
		{"a glob", cat(hdr, []byte("FARWING-PART * 5\n"))},
		{"one number", cat(hdr, []byte("FARWING-PART 5\n"))},
		{"three numbers", cat(hdr, []byte("FARWING-PART 0 5 6\n"))},
		{"unknown line", cat(hdr, first, []byte("FARWING-WHAT 0 5\n"))},
		{"join with a gap", cat(hdr, first, joinLine(ps[0], ps[2]))},
		{"join with an overlap", cat(hdr, first, joinLine(ps[0], part{ps[0].n - 1, n - ps[0].n + 1}))},
		{"join short of the end", cat(hdr, first, joinLine(ps[:len(ps)-1]...))},
		{"join past the end", cat(hdr, first, joinLine(ps[0], part{ps[0].n, n}))},
		{"join of nothing", cat(hdr, first, []byte("FARWING-JOIN\n"))},
		{"join with a path", cat(hdr, first, []byte("FARWING-JOIN 0-../../x\n"))},
		{"empty upload", []byte("FARWING-UPLOAD raw 0 " + upID + "\n")},
		{"upload of eleven digits", []byte("FARWING-UPLOAD raw 10000000000 " + upID + "\n")},
	} {
		want := need + "FARWING-PEER badupload\n"
		if bytes.Contains(c.stdin, first) {
			want = need + acks(ps[0]) + "FARWING-PEER badupload\n"
		}
		if out := remoteSh(t, home, all, script, c.stdin); out != want {
			t.Errorf("%s: %q, want %q", c.what, out, want)
		}
		notRun(c.what)
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
	out := remoteSh(t, home, all, startScript(id, "", 0, 0), upload("raw", raw))
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
// PATH from FAKE_HOME and FAKE_PATH), and counts the sessions it starts in FAKE_SSH_LOG ("session",
// and "helper" for an extra upload connection, told by its BatchMode=yes); -G fails. With
// FAKE_THROTTLE set, a main session's input goes through the test binary at that many bytes a
// second (FAKE_TEST_BIN). Extra connections: the first to make the directory FAKE_HELPER_FAIL
// fails as ssh would without a key, the first to make FAKE_HELPER_HANG hangs, the first to make
// FAKE_HELPER_LOSE stores its part and confirms it, but the part is then removed (as if it had
// gone to another machine).
const fakeSSH = `#!/bin/sh
for a; do last=$a; [ "$a" = -G ] && exit 1; done
echo session >>"$FAKE_SSH_LOG"
umask 027
case " $* " in
*" BatchMode=yes "*)
  echo helper >>"$FAKE_SSH_LOG"
  if [ -n "$FAKE_HELPER_FAIL" ] && mkdir "$FAKE_HELPER_FAIL" 2>/dev/null; then echo "Permission denied (publickey)." >&2; exit 255; fi
  if [ -n "$FAKE_HELPER_HANG" ] && mkdir "$FAKE_HELPER_HANG" 2>/dev/null; then exec sleep 60; fi
  if [ -n "$FAKE_HELPER_LOSE" ] && mkdir "$FAKE_HELPER_LOSE" 2>/dev/null; then
    out=$(env -i HOME="$FAKE_HOME" PATH="$FAKE_PATH" /bin/sh -c "$last") || exit 1
    rm -f "$FAKE_HOME"/.cache/farwing/.farwing-*."${out#FARWING-STORED }".tmp
    echo "$out"; exit 0
  fi;;
*)
  if [ -n "$FAKE_THROTTLE" ]; then
    BOOTSTRAP_TEST_THROTTLE=$FAKE_THROTTLE "$FAKE_TEST_BIN" | env -i HOME="$FAKE_HOME" PATH="$FAKE_PATH" /bin/sh -c "$last"
    exit
  fi;;
esac
exec env -i HOME="$FAKE_HOME" PATH="$FAKE_PATH" ${FAKE_SHELL:-/bin/sh} -c "$last"
`

// fakeRemote sets up Start's test double of ssh: fakeSSH in a temporary directory (returned with
// it), logging each session it runs to the file log, and a local cache of this user's own there
// (XDG_CACHE_HOME) holding no gzip form and no record yet. FAKE_HOME and FAKE_PATH (the remote's
// home and tools) are the test's to set.
func fakeRemote(t *testing.T) (dir, ssh, log string) {
	t.Helper()
	dir = t.TempDir()
	ssh, log = filepath.Join(dir, "ssh"), filepath.Join(dir, "sessions")
	if err := os.WriteFile(ssh, []byte(fakeSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_SSH_LOG", log)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "local-cache"))
	return dir, ssh, log
}

// TestMain: with BOOTSTRAP_TEST_THROTTLE set, the test binary copies its standard input to its
// output at that many bytes a second (the fake ssh's slow main session); with
// BOOTSTRAP_TEST_MASTER set it is a shared connection's master (fakeMaster).
func TestMain(m *testing.M) {
	if path := os.Getenv("BOOTSTRAP_TEST_MASTER"); path != "" {
		fakeMaster(path)
	}
	if r, err := strconv.Atoi(os.Getenv("BOOTSTRAP_TEST_THROTTLE")); err == nil && r > 0 {
		buf := make([]byte, max(1, r/20))
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 {
				if _, err := os.Stdout.Write(buf[:n]); err != nil {
					os.Exit(1)
				}
				time.Sleep(time.Duration(n) * time.Second / time.Duration(r))
			}
			if err != nil {
				os.Exit(0)
			}
		}
	}
	os.Exit(m.Run())
}

// TestStartForgedSelfRecord: a record of this program's hash that names another build, with that
// build's compressed form beside it in this user's cache (what anyone who can write there could
// leave), does not get that build installed: the install hashes the executable, removes the
// record and installs the real build in a second session.
func TestStartForgedSelfRecord(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	dir, ssh, log := fakeRemote(t)
	exe, id := fakePeer(t, dir, 64<<10)
	raw, _ := os.ReadFile(exe)
	_, other := fakePeer(t, t.TempDir(), 65<<10)
	otherRaw, _ := os.ReadFile(other.Exe)
	packed := filepath.Join(dir, "local-cache", "farwing", "peer")
	if err := os.MkdirAll(packed, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(packed, "farwing-"+other.Hash[:16]+".gz"), gzipped(t, otherRaw), 0o600)
	key, err := fileKey(exe)
	if err != nil {
		t.Fatal(err)
	}
	rec := selfRecord(localPeerDir("self"), exe)
	os.MkdirAll(filepath.Dir(rec), 0o700)
	if err := os.WriteFile(rec, []byte(key+" "+other.Hash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, _ := selfHash(exe); h != other.Hash {
		t.Fatalf("the forged record is not what selfHash reads: %s", h)
	}
	home := t.TempDir()
	t.Setenv("FAKE_HOME", home)
	t.Setenv("FAKE_PATH", all)
	p, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", Identity{Exe: exe}, []string{"--pub", "k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "served serve --pub k umask=0027\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(p.Stdout, got); err != nil || string(got) != want {
		t.Fatalf("control channel: %q, %v", got, err)
	}
	p.Close(time.Second)
	cache := home + "/.cache/farwing/farwing-"
	if b, err := os.ReadFile(cache + id.Hash[:16]); err != nil || !bytes.Equal(b, raw) {
		t.Fatalf("the real build is not installed byte-exact: %v", err)
	}
	if _, err := os.Stat(cache + other.Hash[:16]); err == nil {
		t.Fatal("the build the forged record named was installed")
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "session\n") != 2 {
		t.Fatalf("%d ssh sessions, want 2 (the first closed at need)", strings.Count(string(b), "session\n"))
	}
	if got := reasons(p); !slices.Equal(got, []reason{0, wrongSelfHash}) || !strings.Contains(p.attempts[1].why, "recorded SHA-256 was not its own") {
		t.Fatalf("attempts %+v, want the second made for wrongSelfHash", p.attempts)
	}
	if h, _ := selfHash(exe); h != id.Hash {
		t.Fatalf("after the install selfHash = %s, want the real %s", h, id.Hash)
	}
}

// TestStartOneSession: through Start, first contact installs the peer in one ssh session (gzip
// where the remote has it, raw where not), the started peer's control channel begins with the
// preface, a second start installs nothing, and a tampered cache is replaced.
func TestStartOneSession(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	noGzip := toolbox(t, append(baseTools, "sha256sum")...)
	dir, ssh, log := fakeRemote(t)
	exe, id := fakePeer(t, dir, 700<<10)
	raw, _ := os.ReadFile(exe)
	pre := []byte("{\"type\":\"hello\"}\n")
	sessions := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "session\n")
	}
	var last [2]int64
	self := id
	start := func(home, path string) *Peer {
		t.Helper()
		t.Setenv("FAKE_HOME", home)
		t.Setenv("FAKE_PATH", path)
		var notices []string
		s := SSH{SSHPath: ssh, Notice: func(l string) { notices = append(notices, l) },
			Uploading: func(sent, total int64) { last = [2]int64{sent, total} }}
		p, err := Start(context.Background(), s, "h", self, []string{"--pub", "k"}, pre)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(time.Second)
		for _, want := range []string{"served serve --pub k umask=0027\n", string(pre)} {
			if got := make([]byte, len(want)); func() bool { _, err := io.ReadFull(p.Stdout, got); return err != nil || string(got) != want }() {
				t.Fatalf("control channel: got %q, want %q", got, want)
			}
		}
		// The preface came once (after the join, or after ok): the peer, which echoes its input,
		// says nothing more once its input ends.
		<-p.Prefaced()
		p.Stdin.Close()
		if rest, _ := io.ReadAll(p.Stdout); len(rest) != 0 {
			t.Fatalf("control channel: %q more after the preface", rest)
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
	if !p.Uploaded || p.Format != "gzip" || p.SentBytes <= 0 || p.SentBytes >= int64(len(raw)) || sessions() != 1 || p.UploadSessions != 1 {
		t.Fatalf("first contact: uploaded %v, %s, %d bytes of %d, %d ssh sessions (%d said)", p.Uploaded, p.Format, p.SentBytes, len(raw), sessions(), p.UploadSessions)
	}
	if last != [2]int64{p.SentBytes, p.SentBytes} {
		t.Fatalf("upload progress ended at %v, want %d of %d", last, p.SentBytes, p.SentBytes)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "local-cache", "farwing", "peer", "farwing-"+id.Hash[:16]+".gz")); len(m) != 1 {
		t.Fatal("the compressed peer is not kept in the local cache")
	}
	// The client passes its executable without the hash, which Start makes while ssh's
	// configuration is read: the same build, found.
	self = Identity{Exe: exe}
	if p = start(home, all); p.Uploaded || p.SentBytes != 0 || sessions() != 2 {
		t.Fatalf("second contact: uploaded %v, %d bytes, %d ssh sessions in all", p.Uploaded, p.SentBytes, sessions())
	}
	self = id
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
	// An executable that cannot be read: a clear error before anything runs remotely.
	if _, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", Identity{Exe: filepath.Join(dir, "gone")}, nil, pre); err == nil || !strings.Contains(err.Error(), "own executable") {
		t.Fatalf("an executable that is gone: %v", err)
	}
	// No SHA-256 tool there: a clear error, no upload.
	t.Setenv("FAKE_HOME", t.TempDir())
	t.Setenv("FAKE_PATH", toolbox(t, append(baseTools, "gzip")...))
	if _, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, nil, pre); !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("without a SHA-256 tool: %v", err)
	}
}

// TestUploadParallel: through Start and the fake ssh, a main session whose input is throttled
// makes the upload go over extra ssh connections too (each the user's ssh with BatchMode and
// its own TCP connection), and the peer arrives byte-exact and runs; an extra connection that
// fails, one that hangs and one whose part goes missing on the remote leave their ranges to the
// main session, and the peer still arrives byte-exact. -v says what happened.
func TestUploadParallel(t *testing.T) {
	noGzip := toolbox(t, append(baseTools, "sha256sum")...) // raw: the upload is the peer's size
	dir, ssh, _ := fakeRemote(t)                            // each case logs its sessions apart
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_TEST_BIN", bin)
	t.Setenv("FAKE_PATH", noGzip)
	exe, id := fakePeer(t, dir, 256<<10)
	raw, _ := os.ReadFile(exe)
	pre := []byte("{\"type\":\"hello\"}\n")
	// 64 KiB/s alone would take 4 s; after 0.3 s that is judged too slow.
	tune := &uploadTuning{piece: 16 << 10, window0: 32 << 10, windowMax: 256 << 10, drain: time.Second,
		rateSpan: 250 * time.Millisecond, decide: 300 * time.Millisecond, slow: time.Second, helpers: 3, minShare: 8 << 10}
	for _, c := range []struct {
		name string
		env  string // FAKE_HELPER_... set for the run
		log  string // what -v must say
	}{
		{"throttled", "", "more ssh connections"},
		{"one fails, one hangs", "FAKE_HELPER_FAIL FAKE_HELPER_HANG", "failed (exit status 255: Permission denied (publickey).); the main session sends its part"},
		{"a part goes missing", "FAKE_HELPER_LOSE", "are not where the main session's are; it sends them"},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "sessions")
			home := t.TempDir()
			t.Setenv("FAKE_SSH_LOG", log)
			t.Setenv("FAKE_HOME", home)
			t.Setenv("FAKE_THROTTLE", "65536")
			for _, v := range []string{"FAKE_HELPER_FAIL", "FAKE_HELPER_HANG", "FAKE_HELPER_LOSE"} {
				t.Setenv(v, "")
				if strings.Contains(c.env, v) {
					t.Setenv(v, filepath.Join(t.TempDir(), "token"))
				}
			}
			var logged []string
			var last [2]int64
			s := SSH{SSHPath: ssh, upload: tune, Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) },
				Uploading: func(sent, total int64) { last = [2]int64{sent, total} }}
			p, err := Start(context.Background(), s, "h", id, nil, pre)
			if err != nil {
				t.Fatalf("start: %v; log %q", err, logged)
			}
			defer p.Close(time.Second)
			for _, want := range []string{"served serve umask=0027\n", string(pre)} {
				if got := make([]byte, len(want)); func() bool { _, err := io.ReadFull(p.Stdout, got); return err != nil || string(got) != want }() {
					t.Fatalf("control channel: got %q, want %q", got, want)
				}
			}
			b, _ := os.ReadFile(log)
			helpers := strings.Count(string(b), "helper\n")
			if inst, err := os.ReadFile(p.Path); err != nil || !bytes.Equal(inst, raw) {
				t.Fatalf("installed peer: %v, byte-exact %v", err, bytes.Equal(inst, raw))
			}
			if !p.Uploaded || p.Format != "raw" || p.SentBytes != int64(len(raw)) || helpers < 1 || p.UploadSessions != 1+helpers ||
				strings.Count(string(b), "session\n") != 1+helpers {
				t.Fatalf("uploaded %v as %s, %d bytes of %d; %d extra connections run, %d said; sessions log %q", p.Uploaded, p.Format,
					p.SentBytes, len(raw), helpers, p.UploadSessions-1, b)
			}
			if last != [2]int64{int64(len(raw)), int64(len(raw))} {
				t.Fatalf("upload progress ended at %v, want %d of %d", last, len(raw), len(raw))
			}
			all := strings.Join(logged, "\n")
			t.Logf("-v:\n%s", all)
			if !strings.Contains(all, "upload slow (") || !strings.Contains(all, c.log) || !strings.Contains(all, fmt.Sprintf("over %d ssh connections", 1+helpers)) {
				t.Fatalf("-v said %q, want %q", all, c.log)
			}
			noTemp(t, home+"/.cache/farwing", c.name)
		})
	}
}

// TestPlatformOf: every name uname gives for the platforms farwing builds for maps to Go's, and
// nothing else does.
func TestPlatformOf(t *testing.T) {
	for _, c := range []struct{ sys, machine, want string }{
		{"Linux", "x86_64", "linux/amd64"}, {"Linux", "amd64", "linux/amd64"},
		{"Linux", "aarch64", "linux/arm64"}, {"Linux", "arm64", "linux/arm64"},
		{"Darwin", "arm64", "darwin/arm64"}, {"Darwin", "x86_64", "darwin/amd64"},
		{"FreeBSD", "amd64", "freebsd/amd64"},
		{"Linux", "armv7l", "linux/arm"}, {"Linux", "riscv64", "linux/riscv64"}, {"OpenBSD", "amd64", "openbsd/amd64"},
		{"SunOS", "x86_64", ""}, {"Linux", "mips", ""}, {"linux", "x86_64", ""}, {"", "", ""},
	} {
		if got := platformOf(c.sys, c.machine); got != c.want {
			t.Errorf("platformOf(%q, %q) = %q, want %q", c.sys, c.machine, got, c.want)
		}
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
	dir, err := os.MkdirTemp("", "fws") // short: the control directory holds at most 40 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
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
		if got := sessionOf(c.s).useMux(sshConfig(t, c.s)); got != c.wantMux {
			t.Errorf("%s: useMux = %v, want %v", c.name, got, c.wantMux)
		}
	}
	path := func(s SSH) string {
		flags := sessionOf(s).flags(true)
		for _, a := range flags {
			if p, ok := strings.CutPrefix(a, "ControlPath="); ok {
				return p
			}
		}
		t.Fatalf("no ControlPath in %v", flags)
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
	// A socket directory too long for a unix socket path turns sharing off: one where the master
	// binds its socket first (the path, a dot and 16 characters) is too long is, though the
	// path itself would fit (ssh failed then, exit 255).
	if maxControlPath != 40 && runtime.GOOS == "linux" {
		t.Errorf("the longest control directory is %d bytes, want 40 (107 - 67)", maxControlPath)
	}
	for _, n := range []int{maxControlPath, maxControlPath + 1, 107 - 50, 80} {
		base, err := os.MkdirTemp("", "fwl") // short, below t.TempDir's length
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(base)
		cache := base + "/" + strings.Repeat("d", n-len(base+"/"+"/farwing/ssh"))
		t.Setenv("XDG_CACHE_HOME", cache)
		want := n <= maxControlPath
		if s := (SSH{Config: cfg(""), Persist: time.Minute}); sessionOf(s).useMux(sshConfig(t, s)) != want {
			t.Errorf("control directory of %d bytes: sharing %v, want %v", n, !want, want)
		}
	}
}

// TestDeafSharedSocket: a control socket that accepts and never answers (a stopped or hung
// master) is found out by checkMux within muxCheck and removed, so that ssh makes a new master in
// its place; dropMux removes one too. With no socket there, nothing is said to be removed.
func TestDeafSharedSocket(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client installed")
	}
	s, dir, logged := muxTestSSH(t, "fwb")
	ctx := context.Background()
	c, err := s.configWith(ctx, "h", s.flags(true))
	if err != nil {
		t.Fatal(err)
	}
	path := c["controlpath"]
	if !strings.HasPrefix(path, filepath.Join(dir, "farwing", "ssh")+"/") {
		t.Fatalf("control path %q", path)
	}
	if live, _ := s.checkMux(ctx, "h")(); live {
		t.Fatal("checkMux: a master runs where there is no socket")
	}
	for _, drop := range []bool{false, true} {
		*logged = nil
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
		} else if live, _ := s.checkMux(ctx, "h")(); live {
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
		if !strings.Contains(strings.Join(*logged, "\n"), "removed the shared ssh connection's socket") {
			t.Errorf("drop %v: log %q", drop, *logged)
		}
	}
}

// muxTestSSH is a start's session that shares connections to host "h" (127.0.0.1), whose cache
// and home are a new temporary directory dir of a short name (a socket path holds 107 bytes), and
// whose -v lines go to *logged.
func muxTestSSH(t *testing.T, prefix string) (s *session, dir string, logged *[]string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
	cfg := filepath.Join(dir, "cfg")
	os.WriteFile(cfg, []byte("Host h\n  HostName 127.0.0.1\n"), 0o600)
	logged = new([]string)
	s = sessionOf(SSH{Config: cfg, Persist: time.Minute, Log: func(f string, a ...any) { *logged = append(*logged, fmt.Sprintf(f, a...)) }})
	s.mux = true
	return s, dir, logged
}

// sessionOf is the session Start would begin with s (newSession): its control directory, where
// Persist asks for one and it is private.
func sessionOf(s SSH) *session {
	se, _, _ := newSession(s)
	return se
}

// startScript is the remote script for id alone, as a plain build (its own platform) has it.
func startScript(id Identity, serveArgs string, prefaceLen, aheadLen int) string {
	return peerScript(catalog{builds: []build{selfBuild(id)}}, 0, serveArgs, prefaceLen, aheadLen)
}

// selfBuild is id as the build of this executable.
func selfBuild(id Identity) build { return build{platform: ownPlatform, hash: id.Hash, exe: id.Exe} }

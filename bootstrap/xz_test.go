package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/peers"
)

// xzed is b compressed by this machine's xz as scripts/peers.sh does (the test is skipped
// without xz).
func xzed(t *testing.T, b []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz not installed")
	}
	cmd := exec.Command("xz", "-T1", "--x86", "--lzma2=preset=9e,dict=8MiB", "-c")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz: %v", err)
	}
	return out
}

// TestBuildFormat: the form a build travels in is xz where it is carried so and the remote has
// xz (and its xz did not fail before), else gzip where the remote has gzip, else raw; the form
// written ahead is the one a remote with both would get, and what newAhead sends.
func TestBuildFormat(t *testing.T) {
	gz, both := build{gz: []byte{1}}, build{gz: []byte{1}, xz: []byte{2}}
	for _, c := range []struct {
		b       build
		formats string
		noXz    bool
		want    string
	}{
		{both, "xz,gzip,raw", false, "xz"},
		{both, "xz,gzip,raw", true, "gzip"},
		{both, "gzip,raw", false, "gzip"},
		{both, "xz,raw", false, "xz"},
		{both, "xz,raw", true, "raw"},
		{both, "raw", false, "raw"},
		{gz, "xz,gzip,raw", false, "gzip"},
		{gz, "xz,raw", false, "raw"},
	} {
		if got := c.b.format(c.formats, c.noXz); got != c.want {
			t.Errorf("format(%q, noXz %v) with xz form %v: %s, want %s", c.formats, c.noXz, c.b.xz != nil, got, c.want)
		}
	}
	// Ahead goes the xz form only where it is longer than the part sent ahead (newAhead).
	big := build{gz: []byte{1}, xz: make([]byte, aheadPart+1)}
	if big.aheadFormat() != "xz" || both.aheadFormat() != "gzip" || gz.aheadFormat() != "gzip" {
		t.Fatalf("ahead: %s, %s, %s", big.aheadFormat(), both.aheadFormat(), gz.aheadFormat())
	}
}

// TestStartXz: a build carried in xz form as well goes in that form, its start ahead of the
// answer, to a remote that has xz, and is unpacked and checked there; a remote without xz drops
// what went ahead and gets the gzip form in the same session; a remote whose xz makes something
// else of it (here a stand-in that unpacks nothing) runs nothing, and a second session installs
// the gzip form.
func TestStartXz(t *testing.T) {
	if !strings.HasPrefix(ownPlatform, "linux/") {
		t.Skip("the fake remote is this Linux machine")
	}
	own, raw := carriedPeer(t, ownPlatform)
	own.Xz = xzed(t, raw)
	if len(own.Xz) <= aheadPart || len(own.Xz) >= len(own.Gzip) {
		t.Fatalf("xz form %d bytes, gzip %d", len(own.Xz), len(own.Gzip))
	}
	defer func(c func() ([]peers.Peer, error)) { carried = c }(carried)
	carried = func() ([]peers.Peer, error) { return []peers.Peer{own}, nil }

	dir, ssh, log := fakeRemote(t)
	sessions := func() int { b, _ := os.ReadFile(log); return strings.Count(string(b), "session\n") }
	pre := []byte("{\"type\":\"hello\"}\n")
	withXz := toolbox(t, append(baseTools, "xz", "gzip", "sha256sum")...)
	noXz := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	badXz := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	if err := os.WriteFile(filepath.Join(badXz, "xz"), []byte("#!/bin/sh\ncat >/dev/null\necho not the build\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := Identity{Exe: filepath.Join(dir, "not-read")} // a carrying build never reads itself
	for _, c := range []struct {
		name, path, format string
		ahead              bool
		sessions           int
		reasons            []reason
	}{
		{"a remote with xz", withXz, "xz", true, 1, []reason{0}},
		{"a remote without xz", noXz, "gzip", false, 1, []reason{0}},
		{"a remote whose xz fails", badXz, "gzip", false, 2, []reason{0, xzFailed}},
	} {
		home := t.TempDir()
		t.Setenv("FAKE_HOME", home)
		t.Setenv("FAKE_PATH", c.path)
		os.RemoveAll(filepath.Join(dir, "local-cache", "farwing", "peer", "installed")) // first contact: the upload's start goes ahead
		before := sessions()
		var logged []string
		s := SSH{SSHPath: ssh, Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
		p, err := Start(context.Background(), s, "h", id, []string{"--pub", "k"}, pre)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		line, err := p.Stdout.ReadString('\n')
		if err != nil || line != ownPlatform+" served serve --pub k\n" {
			t.Fatalf("%s: control channel starts %q (%v)", c.name, line, err)
		}
		got := make([]byte, len(pre))
		if _, err := io.ReadFull(p.Stdout, got); err != nil || !bytes.Equal(got, pre) {
			t.Fatalf("%s: control channel: %q (%v), want the preface", c.name, got, err)
		}
		p.Close(time.Second)
		if !p.Uploaded || p.Format != c.format || p.Ahead != c.ahead || sessions()-before != c.sessions || !slices.Equal(reasons(p), c.reasons) {
			t.Fatalf("%s: uploaded %v in %s, ahead %v, %d sessions, attempts %v; want %s, ahead %v, %d, %v\n%s", c.name, p.Uploaded, p.Format,
				p.Ahead, sessions()-before, reasons(p), c.format, c.ahead, c.sessions, c.reasons, strings.Join(logged, "\n"))
		}
		want := map[string][]byte{"xz": own.Xz, "gzip": own.Gzip}[c.format]
		if p.SentBytes != int64(len(want)) {
			t.Fatalf("%s: %d bytes sent, want the %s form's %d", c.name, p.SentBytes, c.format, len(want))
		}
		if b, err := os.ReadFile(filepath.Join(home, ".cache", "farwing", "farwing-"+own.Hash[:16])); err != nil || !bytes.Equal(b, raw) {
			t.Fatalf("%s: the peer in the remote's cache is not the build: %v", c.name, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(home, ".cache", "farwing")); len(ents) != 1 {
			t.Fatalf("%s: the remote's cache holds %d files, want the build alone", c.name, len(ents))
		}
	}
}

// TestStartScriptStreams: the remote script unpacks the parts as they come where they come in
// order (one unpacker, whose output is the build), and where they do not (the parts of extra
// connections, or here the main session's in reverse) unpacks the joined parts once all are
// there; without mkfifo it does the latter. Every way installs the build byte-exact and leaves
// no temporary file.
func TestStartScriptStreams(t *testing.T) {
	for _, format := range []string{"gzip", "xz"} {
		real, err := exec.LookPath(format)
		if err != nil {
			t.Skipf("%s not installed", format)
		}
		exe, id := randomPeer(t, t.TempDir(), 100<<10) // several parts even compressed
		raw, _ := os.ReadFile(exe)
		packed := map[string]func(*testing.T, []byte) []byte{"gzip": gzipped, "xz": xzed}[format](t, raw)
		calls := filepath.Join(t.TempDir(), "calls")
		// The tool is a wrapper that counts its runs.
		tools := toolbox(t, append(baseTools, "sha256sum")...)
		noFifo := toolbox(t, append(slices.DeleteFunc(slices.Clone(baseTools), func(s string) bool { return s == "mkfifo" }), "sha256sum")...)
		for _, dir := range []string{tools, noFifo} {
			w := "#!/bin/sh\necho \"$*\" >>" + shellQuote(calls) + "\nexec " + shellQuote(real) + " \"$@\"\n"
			if err := os.WriteFile(filepath.Join(dir, format), []byte(w), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		script := startScript(id, "", 0, 0)
		ps := pieces(len(packed), testPiece)
		rev := slices.Clone(ps)
		slices.Reverse(rev)
		for _, c := range []struct {
			name, path string
			order      []part
			runs       int
		}{
			{"in order", tools, ps, 1},
			{"in reverse", tools, rev, 2},
			{"without mkfifo", noFifo, ps, 1},
		} {
			os.Remove(calls)
			home := t.TempDir()
			dir := home + "/.cache/farwing"
			in := cat(upHeader(format, len(packed)), sendParts(packed, c.order...), joinLine(ps...), []byte("CONTROL\n"))
			out := remoteSh(t, home, c.path, script, in)
			if !strings.HasSuffix(out, "served serve umask=0027\nCONTROL\n") {
				t.Fatalf("%s, parts %s: %q", format, c.name, out)
			}
			if b, err := os.ReadFile(dir + "/farwing-" + id.Hash[:16]); err != nil || !bytes.Equal(b, raw) {
				t.Fatalf("%s, parts %s: the installed peer is not the build (%v)", format, c.name, err)
			}
			noTemp(t, dir, format+", parts "+c.name)
			if len(ps) < 3 {
				t.Fatalf("%s: %d parts", format, len(ps))
			}
			if b, _ := os.ReadFile(calls); strings.Count(string(b), "\n") != c.runs {
				t.Fatalf("%s, parts %s: %s ran %q, want %d runs", format, c.name, format, b, c.runs)
			}
		}
	}
}

package bootstrap

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartScriptAhead: with an upload's start written after the preface (ahead.go), the remote
// script reads it as the upload's beginning where it has gzip and the peer is missing (the rest
// follows as usual and the peer starts on what comes after the join), drops it where it has no
// gzip (the raw upload that follows installs), and where the peer is there starts it with --skip
// naming the preface's and those bytes' lengths.
func TestStartScriptAhead(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	noGzip := toolbox(t, append(baseTools, "sha256sum")...)
	uname := strings.TrimSpace(remoteSh(t, t.TempDir(), all, "echo $(uname -s) $(uname -m)", nil))
	exe, id := randomPeer(t, t.TempDir(), 256<<10)
	raw, _ := os.ReadFile(exe)
	gz := gzipped(t, raw)
	pre := []byte(`{"type":"hello"}` + "\n")
	// What the client writes ahead: the padded upload line and the first part (aheadPart).
	ahead := (&ahead{id: upID, format: "gzip"}).start(gz)
	if len(ahead) != aheadLen || len(gz) <= aheadPart {
		t.Fatalf("%d bytes ahead, want %d; gzip form %d bytes", len(ahead), aheadLen, len(gz))
	}
	ps := append([]part{{0, aheadPart}}, pieces(len(gz)-aheadPart, testPiece)...)
	for i := 1; i < len(ps); i++ {
		ps[i].off += aheadPart
	}
	script := startScript(id, "--pub 'k'", len(pre), len(ahead))
	home := t.TempDir()
	dir := home + "/.cache/farwing"
	final := dir + "/farwing-" + id.Hash[:16]
	ok := "FARWING-PEER ok " + uname + " " + final + "\n"

	// Missing, with gzip: the bytes ahead are the upload's first part.
	out := remoteSh(t, home, all, script, cat(pre, ahead, sendParts(gz, ps[1:]...), joinLine(ps...), []byte("CONTROL\n")))
	want := "FARWING-PEER need " + uname + " gzip,raw " + dir + "\n" + acks(ps...) + ok + "served serve --pub k umask=0027\nCONTROL\n"
	if out != want {
		t.Fatalf("install with the upload's start ahead: %q, want %q", out, want)
	}
	noTemp(t, dir, "after install")
	// There: started with --skip (the fake peer echoes all its input; serve drops them).
	skip := fmt.Sprintf(" --skip %d:%d", len(pre), len(ahead))
	if out := remoteSh(t, home, all, script, cat(pre, ahead, []byte("C2\n"))); out != ok+"served serve --pub k"+skip+" umask=0027\n"+string(cat(pre, ahead))+"C2\n" {
		t.Fatalf("start of the cached peer with an upload's start ahead: %q", out)
	}
	// Missing, without gzip: dropped; the raw upload after it installs.
	os.Remove(final)
	needRaw := "FARWING-PEER need " + uname + " raw " + dir + "\n"
	if out := remoteSh(t, home, noGzip, script, cat(pre, ahead, upload("raw", raw), []byte("C3\n"))); out != needRaw+stored(raw)+ok+"served serve --pub k umask=0027\nC3\n" {
		t.Fatalf("install without gzip, the upload's start ahead dropped: %q", out)
	}
	noTemp(t, dir, "after the raw install")
}

// randomPeer is fakePeer with n random hex digits of padding: its gzip form is about half its
// size, long enough for a first part written ahead.
func randomPeer(t *testing.T, dir string, n int) (string, Identity) {
	t.Helper()
	r := make([]byte, n/2)
	rand.Read(r)
	b := []byte(fakePeerHead + "echo \"served $* umask=$(umask)\"\nexec cat\n#" + hex.EncodeToString(r) + "\n")
	p := filepath.Join(dir, "peer")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, Identity{Exe: p, Hash: hex.EncodeToString(sum[:])}
}

// TestStartAhead: through Start and the fake ssh, a build never installed on the host starts its
// upload with the ssh session (Peer.Ahead): compressed meanwhile on its first install anywhere,
// from this user's cache after that; it installs byte-exact in one session and records the
// host; the next start writes nothing ahead; a host that has the peer though the record is gone
// gets its serve started with --skip for exactly the bytes written ahead; a damaged cached gzip
// form costs one more session and still installs the right build; a small build (a test's) that
// has to be compressed first writes nothing ahead.
func TestStartAhead(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	dir, ssh, log := fakeRemote(t)
	t.Setenv("FAKE_PATH", all)
	exe, id := randomPeer(t, dir, aheadMin+(100<<10))
	raw, _ := os.ReadFile(exe)
	pre := []byte("{\"type\":\"hello\"}\n")
	sessions := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "session\n")
	}
	// The control channel's start: the peer's line, then what it echoes of its input.
	control := func(p *Peer, want string) {
		t.Helper()
		got := make([]byte, len(want))
		if _, err := io.ReadFull(p.Stdout, got); err != nil || string(got) != want {
			t.Fatalf("control channel: got %q (%v), want %q", got, err, want)
		}
		<-p.Prefaced()
		p.Stdin.Close()
		if rest, _ := io.ReadAll(p.Stdout); len(rest) != 0 {
			t.Fatalf("control channel: %q more", rest)
		}
		p.Close(time.Second)
	}
	start := func(home string) *Peer {
		t.Helper()
		t.Setenv("FAKE_HOME", home)
		p, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, []string{"--pub", "k"}, pre)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	served := "served serve --pub k umask=0027\n"
	remotePeer := func(home string) string { return home + "/.cache/farwing/farwing-" + id.Hash[:16] }

	// The first contact ever compresses the build meanwhile and writes its start ahead.
	home1 := t.TempDir()
	if p := start(home1); !p.Uploaded || !p.Ahead || p.Format != "gzip" || sessions() != 1 {
		t.Fatalf("first contact ever: uploaded %v, ahead %v, %s, %d sessions", p.Uploaded, p.Ahead, p.Format, sessions())
	} else {
		control(p, served+string(pre))
	}
	if got, err := os.ReadFile(remotePeer(home1)); err != nil || string(got) != string(raw) {
		t.Fatalf("installed peer differs from the build (%v)", err)
	}
	recs, _ := filepath.Glob(filepath.Join(dir, "local-cache", "farwing", "peer", "installed", "farwing-"+id.Hash[:16]+"-*"))
	if len(recs) != 1 {
		t.Fatalf("records after first contact: %v", recs)
	}
	// Another account (the record names the host; here the same name, so forget it).
	if err := Forget(context.Background(), SSH{SSHPath: ssh}, "h", id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(recs[0]); err == nil {
		t.Fatal("Forget left the record")
	}
	home2 := t.TempDir()
	p := start(home2)
	if !p.Uploaded || !p.Ahead || p.Format != "gzip" || sessions() != 2 || p.UploadSessions != 1 || p.ResentBytes != 0 {
		t.Fatalf("first contact with the gzip form cached: uploaded %v, ahead %v, %s, %d sessions, %d said, %d re-sent",
			p.Uploaded, p.Ahead, p.Format, sessions(), p.UploadSessions, p.ResentBytes)
	}
	control(p, served+string(pre))
	if got, err := os.ReadFile(remotePeer(home2)); err != nil || string(got) != string(raw) {
		t.Fatalf("installed peer differs from the build (%v)", err)
	}
	// Recorded: nothing ahead, nothing uploaded.
	if p := start(home2); p.Uploaded || p.Ahead || sessions() != 3 {
		t.Fatalf("second contact: uploaded %v, ahead %v, %d sessions", p.Uploaded, p.Ahead, sessions())
	} else {
		control(p, served+string(pre))
	}
	// The peer is there but the record is gone: serve is told to skip what went ahead.
	Forget(context.Background(), SSH{SSHPath: ssh}, "h", id)
	p = start(home2)
	if p.Uploaded || sessions() != 4 {
		t.Fatalf("peer there, no record: uploaded %v, %d sessions", p.Uploaded, sessions())
	}
	gzForm, _ := os.ReadFile(packedCache(localPeerDir(), selfBuild(id)))
	wire := fmt.Sprintf("FARWING-UPLOAD gzip %d ", len(gzForm))
	line, _ := p.Stdout.ReadString('\n')
	if want := "served serve --pub k --skip " + strconv.Itoa(len(pre)) + ":"; !strings.HasPrefix(line, want) {
		t.Fatalf("peer there, no record: %q, want it to start with %q", line, want)
	}
	var aheadLen int
	fmt.Sscanf(strings.TrimPrefix(line, "served serve --pub k --skip "+strconv.Itoa(len(pre))+":"), "%d", &aheadLen)
	got := make([]byte, len(pre)+aheadLen)
	if _, err := io.ReadFull(p.Stdout, got); err != nil || string(got[:len(pre)]) != string(pre) || !strings.HasPrefix(string(got[len(pre):]), wire) ||
		!strings.HasSuffix(string(got), string(gzForm[:min(len(gzForm), aheadPart)])) {
		t.Fatalf("peer there, no record: its input is not the preface and %d bytes of the upload's start (%v)", aheadLen, err)
	}
	control(p, "")
	// A damaged cached gzip form, no record, peer missing: the session that said need is closed,
	// a second one uploads a good build.
	Forget(context.Background(), SSH{SSHPath: ssh}, "h", id)
	damaged := must(os.ReadFile(packedCache(localPeerDir(), selfBuild(id))))
	damaged[len(damaged)/2] ^= 0x55
	os.WriteFile(packedCache(localPeerDir(), selfBuild(id)), damaged, 0o600)
	home3 := t.TempDir()
	if p := start(home3); !p.Uploaded || p.Ahead || sessions() != 6 || !slices.Equal(reasons(p), []reason{0, damagedGzip}) {
		t.Fatalf("damaged gzip form: uploaded %v, ahead %v, %d sessions in all (want 6), attempts %+v", p.Uploaded, p.Ahead, sessions(), p.attempts)
	} else {
		control(p, served+string(pre))
	}
	if got, err := os.ReadFile(remotePeer(home3)); err != nil || string(got) != string(raw) {
		t.Fatalf("after a damaged gzip form: installed peer differs from the build (%v)", err)
	}
	if _, err := os.Stat(packedCache(localPeerDir(), selfBuild(id))); err != nil || !gzipOf(must(os.ReadFile(packedCache(localPeerDir(), selfBuild(id)))), id.Hash) {
		t.Fatal("the damaged gzip form was not made again")
	}
	// A build too small to be sure of a first part, compressed first: nothing ahead.
	_, small := fakePeer(t, t.TempDir(), 100<<10)
	t.Setenv("FAKE_HOME", t.TempDir())
	if p, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", small, []string{"--pub", "k"}, pre); err != nil || !p.Uploaded || p.Ahead {
		t.Fatalf("small build: %v", err)
	} else {
		control(p, served+string(pre))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestStartAheadOkControlAfterWire: where the peer is there though no record says so, Start
// returns on its ok while the upload's start may still be being compressed; the peer answers once
// it has read the preface. What the caller writes after that answer (a pull's accept, the bench's
// and the doctor's requests, which do not wait for Prefaced) must come after the bytes serve was
// told to --skip, or serve drops the caller's message and reads the upload's start as control.
func TestStartAheadOkControlAfterWire(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	dir, ssh, _ := fakeRemote(t) // no gzip form cached: compressed meanwhile
	t.Setenv("FAKE_PATH", all)
	// A build large enough that compressing it takes longer than the remote's ok and answer.
	exe, id := randomPeer(t, dir, 24<<20)
	home := t.TempDir()
	t.Setenv("FAKE_HOME", home)
	// The peer is there (installed from elsewhere): the remote says ok.
	os.MkdirAll(home+"/.cache/farwing", 0o755)
	if err := os.WriteFile(home+"/.cache/farwing/farwing-"+id.Hash[:16], must(os.ReadFile(exe)), 0o755); err != nil {
		t.Fatal(err)
	}
	pre := []byte("{\"type\":\"hello\"}\n")
	p, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, []string{"--pub", "k"}, pre)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	// The peer's answer (the fake peer's line; a real one says ready after reading the preface).
	line, err := p.Stdout.ReadString('\n')
	if err != nil || !strings.Contains(line, " --skip ") {
		t.Fatalf("peer there: %q (%v)", line, err)
	}
	// The caller answers at once, as a pull's accept would.
	if _, err := io.WriteString(p.Stdin, "CONTROL\n"); err != nil {
		t.Fatal(err)
	}
	<-p.Prefaced()
	p.Stdin.Close()
	in, _ := io.ReadAll(p.Stdout) // what serve would read: the preface, the bytes it skips, the rest
	if len(in) != len(pre)+aheadLen+len("CONTROL\n") {
		t.Fatalf("peer's input: %d bytes, want %d", len(in), len(pre)+aheadLen+len("CONTROL\n"))
	}
	if skipped := in[len(pre) : len(pre)+aheadLen]; strings.Contains(string(skipped), "CONTROL\n") || string(in[len(pre)+aheadLen:]) != "CONTROL\n" {
		i := strings.Index(string(in), "CONTROL\n")
		t.Fatalf("the caller's message is at byte %d of the peer's input, inside the %d bytes serve drops after the %d of the preface", i, aheadLen, len(pre))
	}
}

// TestStartAheadLongPreface: serve refuses --skip with a preface longer than 1 MiB (its maxSkip:
// a pull's hello names every source path given, JSON-escaped), so such a preface must not go with
// an upload's start ahead: the peer that is there would not start at all.
func TestStartAheadLongPreface(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	dir, ssh, _ := fakeRemote(t)
	t.Setenv("FAKE_PATH", all)
	// A peer that reads its input as serve does (not echoing it: 1 MiB would fill the pipes).
	r := make([]byte, (aheadMin+(100<<10))/2)
	rand.Read(r)
	b := []byte(fakePeerHead + "echo \"served $*\"\nexec cat >/dev/null\n#" + hex.EncodeToString(r) + "\n")
	sum := sha256.Sum256(b)
	id := Identity{Exe: filepath.Join(dir, "peer"), Hash: hex.EncodeToString(sum[:])}
	os.WriteFile(id.Exe, b, 0o755)
	home := t.TempDir()
	t.Setenv("FAKE_HOME", home)
	os.MkdirAll(home+"/.cache/farwing", 0o755)
	if err := os.WriteFile(home+"/.cache/farwing/farwing-"+id.Hash[:16], b, 0o755); err != nil {
		t.Fatal(err)
	}
	pre := []byte("{\"type\":\"hello\",\"paths\":[\"" + strings.Repeat("a", 1<<20) + "\"]}\n")
	p, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, []string{"--pub", "k"}, pre)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	line, err := p.Stdout.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var l, a int64
	if _, after, ok := strings.Cut(line, " --skip "); ok {
		fmt.Sscanf(after, "%d:%d", &l, &a)
		if l > 1<<20 || a > 1<<20 {
			t.Fatalf("serve started with --skip %d:%d, which it refuses (at most %d each)", l, a, 1<<20)
		}
	}
}

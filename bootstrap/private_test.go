package bootstrap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// remoteCmd is the command remoteSh runs: script in /bin/sh with only HOME and PATH, umask 027,
// stdin given.
func remoteCmd(home, path, script string, stdin []byte) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", "umask 027\n"+script)
	cmd.Env = []string{"HOME=" + home, "PATH=" + path}
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd
}

// otherUID is a user id that is not this user's (giving a file to it needs root).
func otherUID() int {
	if os.Getuid() == 65534 {
		return 65533
	}
	return 65534
}

// statUID is the owner of the file st describes.
func statUID(st os.FileInfo) uint32 { return st.Sys().(*syscall.Stat_t).Uid }

// TestRemoteCacheNotPrivate (issue 37, point 6): a remote cache directory that another user could
// write (mode 0777 or 0775: a shared XDG_CACHE_HOME, umask 002 with a shared group), that is a
// symbolic link or that belongs to another user is never used: an intact build of this very hash
// cached there is not run (someone could swap it between the hash check and exec), nothing is
// uploaded into it, and the script says unsafe with why, which Start turns into an error naming
// the directory and the fix. A directory the script makes is 0700 whatever the session's umask;
// a cached build that is not this user's own is not run but replaced; an extra upload connection
// stores nothing in a directory that is not private.
func TestRemoteCacheNotPrivate(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "sha256sum")...)
	uname := strings.TrimSpace(remoteSh(t, t.TempDir(), all, "echo $(uname -s) $(uname -m)", nil))
	exe, id := fakePeer(t, t.TempDir(), 1<<10)
	raw, _ := os.ReadFile(exe)
	script := startScript(id, "", 0, 0)

	// Made by the script: 0700 under umask 027 (remoteSh's), where mkdir -p gave 0750.
	home := t.TempDir()
	dir := home + "/.cache/farwing"
	if out := remoteSh(t, home, all, script, nil); out != "FARWING-PEER need "+uname+" gzip,raw "+dir+"\n" {
		t.Fatalf("probe of an empty cache: %q", out)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the cache directory the script made: %v %v, want mode 0700", st.Mode(), err)
	}

	// A private directory elsewhere, for the link to point at.
	elsewhere := filepath.Join(t.TempDir(), "farwing")
	os.Mkdir(elsewhere, 0o700)
	for _, c := range []struct {
		why  string
		make func(dir string) error
	}{
		{"mode", func(dir string) error { os.MkdirAll(dir, 0o700); return os.Chmod(dir, 0o777) }},
		{"mode", func(dir string) error { os.MkdirAll(dir, 0o700); return os.Chmod(dir, 0o775) }},
		{"mode", func(dir string) error { os.MkdirAll(dir, 0o700); return os.Chmod(dir, 0o1777) }},
		{"link", func(dir string) error { os.MkdirAll(filepath.Dir(dir), 0o700); return os.Symlink(elsewhere, dir) }},
		{"owner", func(dir string) error { os.MkdirAll(dir, 0o700); return os.Chown(dir, otherUID(), -1) }},
	} {
		home := t.TempDir()
		dir := home + "/.cache/farwing"
		if err := c.make(dir); err != nil {
			t.Logf("%s: cannot make such a directory here (%v): not tried", c.why, err)
			continue
		}
		peer := dir + "/farwing-" + id.Hash[:16]
		if c.why == "link" {
			peer = elsewhere + "/farwing-" + id.Hash[:16]
		}
		if err := os.WriteFile(peer, raw, 0o755); err != nil {
			t.Fatal(err)
		}
		mode := "?"
		if st, err := os.Lstat(dir); err == nil {
			mode = st.Mode().String()
		}
		want := "FARWING-PEER unsafe " + uname + " " + c.why + " " + dir + "\n"
		// The cached build is intact: before the check it was run at once.
		if out := remoteSh(t, home, all, script, upload("raw", raw)); out != want {
			t.Errorf("cache directory %s (%s): %q, want %q", dir, mode, out, want)
		}
		noTemp(t, filepath.Dir(peer), c.why)
		st, err := parseStatus(want)
		if err != nil || st.Why != c.why || st.Path != dir {
			t.Fatalf("%q parsed as %+v, %v", want, st, err)
		}
		msg := unsafeCache("h", st).Error()
		if !strings.Contains(msg, dir) || !strings.Contains(msg, map[string]string{"mode": "chmod go-w", "link": "symbolic link", "owner": "another user"}[c.why]) {
			t.Errorf("%s: error %q", c.why, msg)
		}
	}

	// A cached build of this hash that another user owns, in a private directory (left from when
	// it was not): not run, replaced by the upload.
	home = t.TempDir()
	dir = home + "/.cache/farwing"
	os.MkdirAll(dir, 0o700)
	peer := dir + "/farwing-" + id.Hash[:16]
	os.WriteFile(peer, raw, 0o755)
	if err := os.Chown(peer, otherUID(), -1); err == nil {
		out := remoteSh(t, home, all, script, cat(upload("raw", raw), []byte("C\n")))
		if want := "FARWING-PEER need " + uname + " gzip,raw " + dir + "\n" + stored(raw) + "FARWING-PEER ok " + uname + " " + peer + "\nserved serve umask=0027\nC\n"; out != want {
			t.Errorf("a cached build of another user's: %q, want %q", out, want)
		}
		if st, err := os.Stat(peer); err != nil || int(statUID(st)) != os.Getuid() {
			t.Errorf("the build of another user's was not replaced: %v", err)
		}
	} else {
		t.Logf("cannot give a file to another user here (%v): a build of another user's is not tried", err)
	}

	// An extra upload connection: nothing stored where the directory is open to others.
	home = t.TempDir()
	dir = home + "/.cache/farwing"
	os.MkdirAll(dir, 0o700)
	os.Chmod(dir, 0o777)
	cmd := remoteCmd(home, all, partScript(dir, id.Hash[:16], upID, part{0, 5}), []byte("12345"))
	if out, err := cmd.Output(); err == nil || len(out) != 0 {
		t.Errorf("a part stored in a directory open to others: %q, %v", out, err)
	}
	if m, _ := filepath.Glob(dir + "/.farwing-*"); len(m) != 0 {
		t.Errorf("files left in a directory open to others: %v", m)
	}

	// Through Start: a clear error naming the directory and the fix; nothing run.
	_, ssh, _ := fakeRemote(t)
	home = t.TempDir()
	dir = home + "/.cache/farwing"
	os.MkdirAll(dir, 0o700)
	os.Chmod(dir, 0o777)
	os.WriteFile(dir+"/farwing-"+id.Hash[:16], raw, 0o755)
	t.Setenv("FAKE_HOME", home)
	t.Setenv("FAKE_PATH", all)
	_, err := Start(context.Background(), SSH{SSHPath: ssh}, "h", id, nil, nil)
	if !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), dir+" can be written by other users") || !strings.Contains(err.Error(), "chmod go-w '"+dir+"'") {
		t.Fatalf("Start with a remote cache open to others: %v", err)
	}
}

// TestLocalCacheNotPrivate (issue 37, point 6): this user's cache directories are used only where
// no one else could have written them. A control directory (farwing/ssh) open to others, or one
// that is a link, gives no ControlPath (ssh would connect to a socket planted there as to the
// host) and Start says so in one line, with the fix; a record of this executable's hash in a
// peer/self open to others, naming another build, is not believed; a compressed build there is
// not read and none is written; farwing/ itself open to others turns all of them off in one line.
// In a private directory, a link planted at an install record's name or at the name a temporary
// file had (FILE.PID.tmp) is never written through.
func TestLocalCacheNotPrivate(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	t.Setenv("XDG_CACHE_HOME", cache)
	fw := filepath.Join(cache, "farwing")
	exe, id := fakePeer(t, dir, 0)
	_, other := fakePeer(t, t.TempDir(), 1)
	key, err := fileKey(exe)
	if err != nil {
		t.Fatal(err)
	}
	controlPath := func() string {
		for _, a := range sessionOf(SSH{Persist: time.Minute}).flags(true) {
			if p, ok := strings.CutPrefix(a, "ControlPath="); ok {
				return p
			}
		}
		return ""
	}
	notices := func() []string {
		_, ssh, _ := fakeRemote(t)
		t.Setenv("XDG_CACHE_HOME", cache) // fakeRemote's is another
		t.Setenv("FAKE_HOME", t.TempDir())
		t.Setenv("FAKE_PATH", toolbox(t, baseTools...)) // no hash tool: Start ends at nohash
		var said []string
		s := SSH{SSHPath: ssh, Persist: time.Minute, Notice: func(l string) { said = append(said, l) }}
		Start(context.Background(), s, "h", id, nil, nil)
		return said
	}

	// All private: used. (With the build's gzip form there, Start compresses nothing.)
	raw, _ := os.ReadFile(exe)
	keepFile(packedCache(localPeerDir(), selfBuild(id)), gzipped(t, raw))
	if p := controlPath(); !strings.HasPrefix(p, filepath.Join(fw, "ssh")+"/") {
		t.Fatalf("control path %q in a private directory", p)
	}
	if packedCache(localPeerDir(), selfBuild(id)) == "" || selfRecord(localPeerDir("self"), exe) == "" {
		t.Fatal("no cache in private directories")
	}
	if n := notices(); len(n) != 0 {
		t.Fatalf("notices with private directories: %q", n)
	}

	// farwing/ssh open to others, then a link to a private directory: no sharing, one line.
	ssh := filepath.Join(fw, "ssh")
	os.Chmod(ssh, 0o777)
	if p := controlPath(); p != "" {
		t.Errorf("control path %q in a directory open to others", p)
	}
	if sessionOf(SSH{Persist: time.Minute}).useMux(map[string]string{}) {
		t.Error("sharing with a control directory open to others")
	}
	if n := notices(); len(n) != 1 || !strings.HasPrefix(n[0], "not sharing the ssh connection: ") || !strings.Contains(n[0], "chmod go-w "+ssh) {
		t.Errorf("notices with farwing/ssh open to others: %q", n)
	}
	os.Remove(ssh)
	priv := filepath.Join(dir, "priv")
	os.Mkdir(priv, 0o700)
	os.Symlink(priv, ssh)
	if p := controlPath(); p != "" {
		t.Errorf("control path %q through a link", p)
	}
	os.Remove(ssh)

	// peer/self open to others, holding a record that names another build for this executable
	// (what anyone could leave there): not believed, not replaced.
	rec := selfRecord(localPeerDir("self"), exe)
	self := filepath.Dir(rec)
	os.MkdirAll(self, 0o700)
	os.Chmod(self, 0o777)
	if err := os.WriteFile(rec, []byte(key+" "+other.Hash+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if h, err := selfHash(exe); err != nil || h != id.Hash {
		t.Errorf("selfHash with peer/self open to others = %s, %v; want the real %s", h, err, id.Hash)
	}
	if b, _ := os.ReadFile(rec); !strings.Contains(string(b), other.Hash) {
		t.Errorf("a record written in a directory open to others: %q", b)
	}
	os.Chmod(self, 0o700)
	os.Remove(rec)

	// peer/ open to others: no compressed build read or written, no install record, one line.
	peer := filepath.Join(fw, "peer")
	os.Remove(packedCache(localPeerDir(), selfBuild(id)))
	os.Chmod(peer, 0o775)
	if c := packedCache(localPeerDir(), selfBuild(id)); c != "" {
		t.Errorf("compressed build %s read from a directory open to others", c)
	}
	if r := installedRecord(id.Hash, nil, "h"); r != "" {
		t.Errorf("install record %s in a directory open to others", r)
	}
	if _, err := payload(localPeerDir(), selfBuild(id), "gzip"); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(peer, "*.gz")); len(m) != 0 {
		t.Errorf("compressed builds written to a directory open to others: %v", m)
	}
	if n := notices(); len(n) != 1 || !strings.HasPrefix(n[0], "not using this user's cache of farwing builds: ") || !strings.Contains(n[0], peer) {
		t.Errorf("notices with farwing/peer open to others: %q", n)
	}
	os.Chmod(peer, 0o700)

	// farwing/ itself open to others: nothing of it used, one line for both.
	os.Chmod(fw, 0o777)
	if controlPath() != "" || packedCache(localPeerDir(), selfBuild(id)) != "" || selfRecord(localPeerDir("self"), exe) != "" || installedRecord(id.Hash, nil, "h") != "" {
		t.Error("a cache used below a farwing/ open to others")
	}
	if n := notices(); len(n) != 1 || !strings.Contains(n[0], "nor sharing the ssh connection") || !strings.Contains(n[0], "chmod go-w "+fw) {
		t.Errorf("notices with farwing/ open to others: %q", n)
	}
	os.Chmod(fw, 0o700)

	// In a private directory, links where files are made are not followed.
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	gz := packedCache(localPeerDir(), selfBuild(id))
	if err := os.Symlink(victim, gz+"."+strconv.Itoa(os.Getpid())+".tmp"); err != nil {
		t.Fatal(err)
	}
	keepFile(gz, []byte("gzip form"))
	if b, _ := os.ReadFile(gz); string(b) != "gzip form" {
		t.Errorf("keepFile wrote %q", b)
	}
	rec = installedRecord(id.Hash, nil, "h")
	target := filepath.Join(dir, "made-through-a-link")
	os.Symlink(target, rec)
	noteInstalled(rec)
	if _, err := os.Lstat(target); err == nil {
		t.Error("noteInstalled made a file through a link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("a file written through a link: victim holds %q", b)
	}
}

// TestRemoteAncestorSwap (issue 37, second read): where a directory above the remote cache can be
// written by others (a shared group's 0775 ~/.cache or XDG_CACHE_HOME, no sticky bit), another
// user can rename farwing/ away and put a directory of theirs at its name after the script checked
// it. The script works inside the directory it checked and names nothing in it by a path from
// above, so what it hashes is what it runs, a cached build or an upload's: here a hash tool makes
// the swap right after it hashed the build (or the unpacked upload), with another build at the
// name, and the script still runs its own. The peer is told the session's starting directory
// (--chdir), so it works where a session started without farwing would.
func TestRemoteAncestorSwap(t *testing.T) {
	all := toolbox(t, append(baseTools, "gzip", "cp")...)
	real, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Skip("sha256sum not installed")
	}
	b := []byte(fakePeerHead + "echo \"served $* cwd=$(pwd)\"\nexec cat\n")
	sum := sha256.Sum256(b)
	id := Identity{Hash: hex.EncodeToString(sum[:])}
	h16 := id.Hash[:16]
	evil := filepath.Join(t.TempDir(), "evil")
	os.WriteFile(evil, []byte("#!/bin/sh\necho \"PWNED: ran the other user's build\"\n"), 0o755)
	uname := strings.TrimSpace(remoteSh(t, t.TempDir(), all, "echo $(uname -s) $(uname -m)", nil))

	// bash's exec builtin runs a relative name by the path of the directory cd went to, whatever
	// is there now: bash as the login shell too, where it is here.
	shells := []string{"/bin/sh"}
	if bash, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, bash)
	}
	for i := range 2 * len(shells) {
		shell, install := shells[i/2], i%2 == 1
		home := t.TempDir()
		cache := filepath.Join(home, ".cache")
		os.Mkdir(cache, 0o775) // group-writable, as umask 002 makes it
		d := filepath.Join(cache, "farwing")
		os.Mkdir(d, 0o700)
		p := filepath.Join(d, "farwing-"+h16)
		var stdin []byte
		want := "FARWING-PEER ok " + uname + " " + p + "\n"
		if install {
			stdin = upload("raw", b)
			want = "FARWING-PEER need " + uname + " gzip,raw " + d + "\n" + stored(b) + want
		} else {
			os.WriteFile(p, b, 0o755)
		}
		// The other user, once the build is hashed: farwing/ renamed away, a directory of theirs
		// at its name, their build at the names of the checked build and of the hashed file.
		swapped := filepath.Join(home, "swapped")
		tool := "#!/bin/sh\n" + real + " \"$@\"; e=$?\ncase \"$1\" in *farwing-*) if mkdir " + shellQuote(swapped) + " 2>/dev/null; then\n" +
			"  mv " + shellQuote(d) + " " + shellQuote(d+".old") + " && mkdir " + shellQuote(d) + " &&\n" +
			"  cp " + shellQuote(evil) + " " + shellQuote(p) + " && cp " + shellQuote(evil) + " " + shellQuote(d) + "/\"${1##*/}\"\nfi;; esac\nexit $e\n"
		os.WriteFile(filepath.Join(all, "sha256sum"), []byte(tool), 0o755)
		start := t.TempDir()
		cmd := remoteCmd(home, all, startScript(id, "--pub 'k'", 0, 0), cat(stdin, []byte("C\n")))
		cmd.Path, cmd.Dir = shell, start
		out, err := cmd.CombinedOutput()
		if _, serr := os.Stat(swapped); serr != nil {
			t.Fatalf("%s, install %v: the hash tool made no swap: %v %q", shell, install, err, out)
		}
		if want += "served serve --pub k cwd=" + start + "\nC\n"; string(out) != want {
			t.Errorf("%s, install %v, farwing/ swapped after the hash check: %q (%v), want %q", shell, install, out, err, want)
		}
		os.Remove(filepath.Join(all, "sha256sum"))
	}

	// v checks the directory it entered: one whose physical name is not farwing (what a link
	// swapped in after [ -L ] would lead to) is not used; a private farwing/ is, and is entered.
	dir := filepath.Join(t.TempDir(), "farwing")
	os.Mkdir(dir, 0o700)
	for arg, want := range map[string]string{dir: "ok " + dir, dir + "/..": "link " + filepath.Dir(dir), dir + "/gone": "nodir " + filepath.Dir(dir)} {
		if out := remoteSh(t, filepath.Dir(dir), all, privFunc+"\ncd "+shellQuote(filepath.Dir(dir))+"\nif v "+shellQuote(arg)+"; then c=ok; fi; echo $c $(pwd)", nil); out != want+"\n" {
			t.Errorf("v %s: %q, want %q", arg, out, want)
		}
	}
}

// installedRecord is the record of hash for host in this user's cache (installedRecords), for
// the tests that look for one.
func installedRecord(hash string, cfg map[string]string, host string) string {
	return installedRecords(localPeerDir("installed"), cfg, host).of(hash)
}

// Package bootstrap reaches a remote host with the system's OpenSSH: one ssh session checks for the
// Farwing peer this build installs on the remote's platform (a build it carries, or itself) in the
// remote's cache, receives it on its standard input (gzip-compressed where the remote has gzip)
// when it is missing or wrong, checks its SHA-256 and starts `farwing serve`, whose stdin/stdout
// become the control channel.
package bootstrap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// ErrSSH marks failures of ssh itself: unknown host, refused connection, failed authentication.
var ErrSSH = errors.New("ssh")

// ErrPlatform marks a remote whose OS or architecture this binary cannot run on.
var ErrPlatform = errors.New("unsupported remote platform")

// ErrInstall marks a remote where the peer cannot be installed: its cache directory cannot be
// created or written, it has no tool to check a SHA-256, or the uploaded build did not check out.
var ErrInstall = errors.New("cannot install the peer")

// SSH is the user's configuration for reaching a host: the options passed through to the system
// ssh, and who is told what first contact does. It is the caller's: Start never changes it, and
// what Start finds and decides for one host (this user's cache directories, whether the
// connection is shared, the ProxyCommand, the attempts of first contact) is that start's session.
type SSH struct {
	Config   string   // -F
	Identity string   // -i
	Port     int      // -p for ssh, -P for scp
	Options  []string // -o, repeatable
	Jump     string   // -J
	Verbose  bool     // show ssh's own messages as they come
	// Persist keeps a shared ssh connection open for this long after the copy (OpenSSH
	// ControlMaster/ControlPersist, as Ansible does by default), so the next copy to the host
	// starts without a new ssh handshake: about 13 round trips, 1.9 s at 140 ms. 0 turns it off.
	// It is not used where the user's ssh configuration already shares connections for the
	// host (ControlMaster or ControlPath set), nor where the socket path would be too long.
	Persist time.Duration
	// Notice, when set, is told what first contact is doing that takes time (one line, e.g.
	// "installing farwing on HOST (10.2 MB)"), for a terminal that would otherwise stay silent,
	// and which of this user's cache directories it does not use because others could write
	// them (cacheNotice).
	Notice func(line string)
	// Uploading, when set, is told how much of the peer the remote has stored while it is
	// installed (stored of total bytes, as acknowledged; the last call with stored == total).
	Uploading func(sent, total int64)
	// BBR lets Start carry ssh's connection over farwing's own ProxyCommand (ssh-proxy), whose
	// TCP socket asks for BBR, where the kernel's default is a loss-based one and the user's
	// ssh configuration connects directly (bbrProxy).
	BBR bool
	// Log, when set, is told what Start decided (-v).
	Log     func(format string, args ...any)
	SSHPath string // default "ssh"
	// Tests' settings, given with the rest and never changed either.
	upload  *uploadTuning // nil: defaultUpload
	noAhead bool          // write no upload ahead of the remote's answer (ahead.go)
}

// Flags are the ssh flags as `farwing copy` and scp take them (-F -i -P -o -J), without the
// connection-sharing options a start's session adds: what a command run on the user's behalf is
// given.
func (s SSH) Flags() []string { return s.common("-P") }

// common are the user's own ssh flags, with portFlag for the port (-p for ssh, -P for scp).
func (s SSH) common(portFlag string) []string {
	var a []string
	if s.Config != "" {
		a = append(a, "-F", s.Config)
	}
	if s.Identity != "" {
		a = append(a, "-i", s.Identity)
	}
	if s.Port != 0 {
		a = append(a, portFlag, strconv.Itoa(s.Port))
	}
	for _, o := range s.Options {
		a = append(a, "-o", o)
	}
	if s.Jump != "" {
		a = append(a, "-J", s.Jump)
	}
	return a
}

// program is the ssh program: SSHPath, or ssh from PATH.
func (s SSH) program() string {
	if s.SSHPath == "" {
		return "ssh"
	}
	return s.SSHPath
}

// config is ssh's view of its configuration for host (`ssh -G`) with the user's flags, keys in
// lower case.
func (s SSH) config(ctx context.Context, host string) (map[string]string, error) {
	return s.configWith(ctx, host, s.common("-p"))
}

// configWith is config with flags as ssh's flags.
func (s SSH) configWith(ctx context.Context, host string, flags []string) (map[string]string, error) {
	args := append(slices.Clone(flags), "-G", "--", host)
	out, err := exec.CommandContext(ctx, s.program(), args...).Output()
	if err != nil {
		return nil, fmt.Errorf("%w: ssh -G %s: %v", ErrSSH, host, err)
	}
	cfg := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			if k = strings.ToLower(k); cfg[k] == "" {
				cfg[k] = strings.TrimSpace(v)
			}
		}
	}
	return cfg, nil
}

// Peer is a running `farwing serve` on the remote host.
type Peer struct {
	cmd      *exec.Cmd
	Stdin    io.WriteCloser
	Stdout   *bufio.Reader
	stderr   *tail
	Uploaded bool   // this call installed the peer (first contact or a new build)
	Path     string // the peer's path on the remote host
	RemoteOS string // uname -s and -m of the remote
	// Took is the first contact's time: from Start to the remote's word that the peer runs
	// (including the ssh handshake and, when Uploaded, the upload and its check).
	Took time.Duration
	// SentBytes is the size of the peer as it crossed (0 unless Uploaded), in Format: "gzip" or
	// "raw"; parts sent twice (over a slow main session and another connection) are not counted
	// here but in ResentBytes. UploadSessions is how many ssh sessions carried parts of it: 1,
	// more where the main session was slow.
	SentBytes      int64
	Format         string
	UploadSessions int
	ResentBytes    int64
	// Ahead: the upload's start went with the ssh session, before the remote said need (ahead.go).
	Ahead bool
	// HostName is the address ssh connects to for the host (`ssh -G`), so that UDP goes to the
	// same place even when the host is an alias from ssh_config; "" if ssh did not say.
	HostName string
	prefaced chan struct{} // closed when the preface has been written
	// skipped is closed when the remote said ok with an upload's start going ahead: serve drops
	// those bytes whatever they are, so they need not wait for the build to be compressed.
	skipped  chan struct{}
	serve    []string  // the peer's command line, as the script runs it
	began    time.Time // when ssh was started
	session  *session  // what the start that made it found and decided (Start's, once it returns)
	waitOnce sync.Once
	waitErr  error
}

// Args is the ssh command line that started the peer (remoteCommand last), followed by the
// command the remote script, which went on ssh's input, ran: `farwing serve` with its arguments
// (the public key among them).
func (p *Peer) Args() []string { return slices.Concat(p.cmd.Args, p.serve) }

// Identity is this build's identity: the SHA-256 of the running executable.
type Identity struct {
	Exe  string
	Hash string // hex SHA-256
}

// Self hashes the running executable (or finds its hash in this user's cache: selfHash).
func Self() (Identity, error) {
	exe, err := os.Executable()
	if err != nil {
		return Identity{}, err
	}
	h, err := selfHash(exe)
	return Identity{Exe: exe, Hash: h}, err
}

// hashFile returns the SHA-256 of the file at p (hex).
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pruneDays is the age (days since upload) past which installing a build removes other builds
// from the remote's cache.
const pruneDays = 30

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// emptySHA256 is the SHA-256 of no bytes: the remote script's check that it has a tool to hash with.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// peerScript is first contact in one ssh session (run by sh whatever the login shell:
// remoteCommand). It starts the cached peer of c for the remote's platform, found by
// `uname -s -m` (a platform c has none for is said as need with it: Start explains), when it is
// there and intact. (Not the one this user last found there without asking uname: a home
// directory shared by hosts of two CPUs holds the other's build too, and env, told to run a
// foreign executable, has sh read it as a script.) The peer is named in the cache by its own
// SHA-256 and checked against it before it runs, and must be this user's own file (not a link) in a cache directory that is private (privFunc); the
// peer prints the status line itself (AnnounceFlag). It makes a missing cache directory with mode
// 0700, and says unsafe (nothing run, nothing read) where the directory is not private. Once
// checked, the directory is the shell's working directory and everything in it is named relative
// to it (privFunc: a directory above it that others can write cannot swap it), the build too,
// started through env (bash's exec builtin would run ./NAME by the path cd took, wherever that
// leads by then), with ChdirFlag naming the directory the session started in. With
// --skip it is told to drop the aheadLen bytes of an upload's start that follow the preface,
// where the client wrote them (ahead.go): the start of guess's upload. Otherwise it reads and drops
// the preface (prefaceLen bytes the client sent before the answer), and, without gzip or where the
// remote's build is not guess, those aheadLen bytes (else they are the upload's start, read as
// below), reports what is needed with the formats it can unpack, and reads the peer from its
// standard input in parts: a line "FARWING-UPLOAD FORMAT N ID" (N: the upload's size, ID: 16 hex
// digits the client chose at random), then any number of "FARWING-PART OFFSET LEN" lines, each
// followed by exactly LEN bytes, which it stores as DIR/.farwing-HASH16.ID.OFFSET-LEN.tmp (mode
// 0600) and acknowledges with "FARWING-GOT OFFSET LEN". Other ssh connections may store parts
// there too (partScript). "FARWING-JOIN OFFSET-LEN ..." names the parts that make the upload, in
// order: they must tile 0..N exactly (else badupload); those not there are named back in
// "FARWING-MISSING OFFSET-LEN ...", and the client sends them and joins again. A complete join is
// concatenated and unpacked into a temporary file (mode 0600; the peer itself runs with the
// session's umask) of the cache directory, and the parts removed. Only a file whose SHA-256 is
// this build's is made executable, renamed into place atomically and started, on the rest of the
// same stdin: the control channel. Nothing of its input is read after the join but by the peer
// (the shell's read stops at the join's newline; the parts are files by then), so the client may
// send the control channel's preface right after the join (it does where the main session carried
// every part; otherwise the remote may answer MISSING and read on, and the preface waits for ok).
// A short or corrupt part fails the hash check. Every number must be decimal without leading zeros, at most 10 digits, and every
// part inside N (else badupload: nothing run, this upload's parts removed). Installing a build is
// also when the cache is tidied: other builds installed more than pruneDays ago, and uploads
// abandoned for a day (parts included), are removed (a build still in use elsewhere is uploaded
// again by its next copy; a running peer is not affected).
//
// Only POSIX shell and tools: uname, head -c (readFunc), env, ls, gzip where present, and a
// SHA-256 tool (openssl, sha256sum, shasum or sha256; none: the state nohash).
func peerScript(c catalog, guess int, serveArgs string, prefaceLen, aheadLen int) string {
	return stripComments(render(startTemplate, peerScriptFor(c, guess, serveArgs, prefaceLen, aheadLen)))
}

// peerScriptFor is what start.sh is given for peerScript.
func peerScriptFor(c catalog, guess int, serveArgs string, prefaceLen, aheadLen int) peerScriptData {
	d := peerScriptData{Hash: hashFunc, Priv: privFunc, Read: readFunc, Empty: emptySHA256, PruneDays: pruneDays,
		Announce: AnnounceFlag, Chdir: ChdirFlag, Serve: serveArgs, PrefaceLen: prefaceLen, AheadLen: aheadLen,
		Guess: c.builds[guess].h16()}
	for _, b := range c.builds {
		if pat := unamePatterns(b.platform); pat != "" {
			d.Builds = append(d.Builds, scriptBuild{Patterns: pat, H16: b.h16(), Hash: b.hash})
		}
	}
	return d
}

// Start reaches host, installs the peer when needed and starts it as `farwing serve ARGS`.
// serveArgs must be public (they show in the remote's process list) and are shell-quoted here.
// preface is written to the peer's stdin at once, before the remote answers: the caller's first
// control messages travel with the ssh session's start instead of a round trip later (a shell that
// does not start the peer never reads them).
//
// An id without a Hash is hashed here (its Exe, or its record in this user's cache: selfHash),
// while ssh's configuration is read.
func Start(ctx context.Context, s SSH, host string, id Identity, serveArgs []string, preface []byte) (*Peer, error) {
	c := newCatalog(id)
	se, peerErr, ctlErr := newSession(s) // no ctlDir where ssh/ is not this user's alone: no sharing
	var hashed chan error
	if self := c.self(); self >= 0 && id.Hash == "" {
		hashed = make(chan error, 1)
		go func() {
			var err error
			c.builds[self].hash, err = selfHashIn(se.selfDir(), id.Exe, hashFile)
			hashed <- err
		}()
	}
	for _, line := range cacheNotice(peerErr, ctlErr) {
		s.notice(line)
	}
	// One `ssh -G` (offline) answers both whether to share the connection and where ssh goes.
	// Whether a shared connection of ours is there and answers is asked meanwhile (its socket
	// is this user's, whatever ssh -G says).
	var checked chan func() (bool, int)
	if se.ctlDir != "" {
		checked = make(chan func() (bool, int), 1)
		go func() { checked <- se.checkMux(ctx, host) }()
	}
	se.cfg, _ = s.config(ctx, host)
	se.mux = se.useMux(se.cfg)
	if checked != nil {
		say := <-checked
		if se.mux {
			se.muxLive, se.muxPid = say()
		}
	}
	if hashed != nil {
		if err := <-hashed; err != nil {
			return nil, fmt.Errorf("cannot read this program's own executable: %w", err)
		}
	}
	exe, _ := os.Executable()
	var why string
	se.proxy, why = s.bbrProxy(host, se.cfg, exe, congestion)
	if s.Log != nil {
		if se.proxy != "" {
			s.Log("ssh to %s through farwing's ProxyCommand, asking for bbr on its TCP connection (%s)", escape.Text(host), why)
		} else {
			s.Log("ssh to %s connects itself: no bbr asked for (%s)", escape.Text(host), why)
		}
	}
	p, err := se.firstContact(ctx, host, c, serveArgs, preface)
	if p != nil {
		p.HostName, p.session = se.cfg["hostname"], se
	}
	return p, err
}

// muxedHandshake is how many times a session over a shared connection (its channel's round trip,
// the remote shell and the peer's start) a new ssh connection takes: ssh's own handshake is some
// 13 round trips where the shared session needs two. On the lab (140 ms) a session over the shared
// connection answered in 0.35 s and a new connection in 1.95 s (0 %) to 2–6 s (3 % loss).
const muxedHandshake = 6

// anotherConnection is what an extra ssh connection for the upload costs before it carries
// anything, judged from setup, the time from ssh's start to the remote's first line of the main
// session: about as much where that session made its own connection, muxedHandshake times as much
// where it rode the shared one. (Taking the shared session's time for it, first copies over a
// shared connection at 3 % loss opened seven more connections that then took 5.9–8.9 s, where the
// main session alone installed in 1.4–2.0 s.)
func anotherConnection(setup time.Duration, muxed bool) time.Duration {
	if muxed {
		return muxedHandshake * setup
	}
	return setup
}

// payload is the peer as it travels in format: the executable as it is (raw), or compressed with
// gzip. A carried build is carried compressed, and checked against its hash here. This executable's
// compressed form is kept in this user's cache, so only the first install of a build compresses
// it (about 0.4 s for 10 MB); a cached one is used only when it unpacks to this build.
func payload(dir string, b build, format string) ([]byte, error) {
	if b.gz != nil {
		if format != "gzip" {
			return gunzipOf(b.gz, b.hash)
		}
		if !gzipOf(b.gz, b.hash) {
			return nil, fmt.Errorf("carried peer damaged: it does not unpack to %s", b.hash)
		}
		return b.gz, nil
	}
	id := b.identity()
	if format != "gzip" {
		return readIdentity(id)
	}
	cache := packedCache(dir, b)
	if cache != "" {
		if b, err := os.ReadFile(cache); err == nil && gzipOf(b, id.Hash) {
			return b, nil
		}
	}
	raw, err := readIdentity(id)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw) // a bytes.Buffer does not fail
	zw.Close()
	if cache != "" {
		keepFile(cache, buf.Bytes())
	}
	return buf.Bytes(), nil
}

// tidyPacked removes from dir the files named farwing-* (compressed builds, records of this
// build's hash) made more than pruneDays ago, as installing does on the remote, except keep, and
// keepFile's temporary files left for a day.
func tidyPacked(dir, keep string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil || p == keep || !info.Mode().IsRegular() {
			continue
		}
		age := time.Since(info.ModTime())
		if strings.HasPrefix(e.Name(), "farwing-") && age > pruneDays*24*time.Hour || strings.HasPrefix(e.Name(), ".tmp-") && age > 24*time.Hour {
			os.Remove(p)
		}
	}
}

// packedPeer is a payload made while ssh connects.
type packedPeer struct {
	data []byte
	err  error
}

// packedCache is where this user's cache keeps the gzip form of this executable's build, in dir
// (peer/: newSession's peerDir, localPeerDir's) ("" when there is no cache, or for a carried
// build: it is carried compressed).
func packedCache(dir string, b build) string {
	if dir == "" || b.exe == "" || len(b.hash) < 16 {
		return ""
	}
	return filepath.Join(dir, "farwing-"+b.h16()+".gz")
}

// localPeerDir is where this user's cache keeps what it knows of the peer: builds' gzip forms,
// with sub the records of this executable's hash (self) or of installs (installed). It is ""
// where there is no cache, or where it is not private (cacheDir): nothing is read from it or
// written to it then. (Start looks at each once: newSession.)
func localPeerDir(sub ...string) string {
	dir, err := cacheDir(append([]string{"peer"}, sub...)...)
	if err != nil {
		return ""
	}
	return dir
}

// readIdentity reads the executable id names, checking that it is still that build.
func readIdentity(id Identity) ([]byte, error) {
	b, err := os.ReadFile(id.Exe)
	if err != nil {
		return nil, err
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != id.Hash {
		return nil, fmt.Errorf("%s changed while running (its SHA-256 is no longer %s)", id.Exe, id.Hash)
	}
	return b, nil
}

// gzipOf reports whether b is a gzip stream of the bytes whose SHA-256 is hash.
func gzipOf(b []byte, hash string) bool {
	_, err := gunzipOf(b, hash)
	return err == nil
}

// peerStatus is a line of the remote shell: "FARWING-PEER STATE OS ARCH PATH" for the states ok
// (PATH: the running peer), nodir and nohash (PATH: the cache directory); "FARWING-PEER need OS
// ARCH FORMATS PATH" (FORMATS: what it can unpack, comma-separated, e.g. "gzip,raw");
// "FARWING-PEER unsafe OS ARCH WHY PATH" (the cache directory is not private, WHY: link, owner or
// mode; privFunc); or a bare "FARWING-PEER STATE" (badhash, norename, badupload).
type peerStatus struct{ State, OS, Arch, Formats, Why, Path string }

// maxStatus bounds the status line: a remote that never ends its line cannot fill memory.
const maxStatus = 4096

// parseStatus checks a status line: a known state, and for ok, need, nodir, nohash and unsafe an
// OS, an architecture and an absolute path (which may hold spaces), for need the formats too, for
// unsafe why.
func parseStatus(line string) (peerStatus, error) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "FARWING-PEER ")
	if !ok || len(line) > maxStatus {
		return peerStatus{}, errors.New("not a status line")
	}
	state, _, _ := strings.Cut(rest, " ")
	st := peerStatus{State: state}
	switch st.State {
	case "ok", "nodir", "nohash":
		f := strings.SplitN(rest, " ", 4)
		if len(f) != 4 || f[1] == "" || f[2] == "" || !strings.HasPrefix(f[3], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Path = f[1], f[2], f[3]
	case "need":
		f := strings.SplitN(rest, " ", 5)
		if len(f) != 5 || f[1] == "" || f[2] == "" || f[3] == "" || !strings.HasPrefix(f[4], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Formats, st.Path = f[1], f[2], f[3], f[4]
	case "unsafe":
		f := strings.SplitN(rest, " ", 5)
		if len(f) != 5 || f[1] == "" || f[2] == "" || !slices.Contains([]string{"link", "owner", "mode"}, f[3]) || !strings.HasPrefix(f[4], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Why, st.Path = f[1], f[2], f[3], f[4]
	case "badhash", "norename", "badupload":
		if rest != st.State {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
	default:
		return peerStatus{}, fmt.Errorf("unknown status %q", rest)
	}
	return st, nil
}

// run starts script on host (remoteCommand), writes preface to its stdin and returns the peer with
// the first status line. With within above 0 it gives up when the line has not come by then, killing
// ssh, with errMuxSilent.
func (s *session) run(ctx context.Context, host, script string, preface []byte, ahead *ahead, within time.Duration) (*Peer, peerStatus, error) {
	cmd := s.sshCmd(ctx, host, remoteCommand(script), s.mux)
	if opts := withEnvPreface(cmd, preface); opts != nil {
		// The options go before the host (cmd.Args: ssh, the options, "--", host, command).
		cmd.Args = slices.Insert(cmd.Args, 1, opts...)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, peerStatus{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, peerStatus{}, err
	}
	// A shared connection's master holds on to ssh's stderr; never let Wait hang on it.
	cmd.WaitDelay = 2 * time.Second
	p := &Peer{cmd: cmd, Stdin: stdin, Stdout: bufio.NewReaderSize(stdout, 64<<10), stderr: &tail{}, prefaced: make(chan struct{}),
		skipped: make(chan struct{})}
	cmd.Stderr = p.stderr
	if s.Verbose {
		// ssh's own messages and the remote's standard error, escaped: the remote's text never
		// reaches the terminal raw.
		cmd.Stderr = io.MultiWriter(escape.NewWriter(os.Stderr), p.stderr)
	}
	p.began = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, peerStatus{}, fmt.Errorf("%w: cannot run ssh: %v", ErrSSH, err)
	}
	go p.writePreface(preface, ahead)
	type read struct {
		st  peerStatus
		err error
	}
	got := make(chan read, 1)
	go func() {
		st, err := p.status(host)
		got <- read{st, err}
	}()
	var limit <-chan time.Time
	if within > 0 {
		t := time.NewTimer(within)
		defer t.Stop()
		limit = t.C
	}
	select {
	case r := <-got:
		if r.err != nil {
			return nil, peerStatus{}, r.err
		}
		return p, r.st, nil
	case <-limit:
		p.cmd.Process.Kill()
		p.Wait()
		<-got
		return nil, peerStatus{}, errMuxSilent
	}
}

// Prefaced is closed once the preface is written to the peer's stdin: what the caller writes
// there after it cannot come before it.
func (p *Peer) Prefaced() <-chan struct{} { return p.prefaced }

// writePreface writes the caller's first control messages at once, before the remote answers,
// and after them the start of an upload where one goes ahead, or as many bytes of filler where the
// remote said ok before it was compressed (a failed write shows up as a missing status line or a
// closed control channel).
func (p *Peer) writePreface(preface []byte, ahead *ahead) {
	if len(preface) > 0 {
		p.Stdin.Write(preface)
	}
	if ahead != nil {
		// Where the remote said ok, serve drops these bytes unread: the upload's start or filler
		// of the same length will do, whichever is ready.
		var wire []byte
		select {
		case <-ahead.wrote:
			wire = ahead.wire
		case <-p.skipped:
			wire = aheadFiller()
		}
		p.Stdin.Write(wire)
	}
	close(p.prefaced)
}

// status reads the remote shell's next status line; on anything else it ends ssh and explains.
func (p *Peer) status(host string) (peerStatus, error) {
	raw, err := p.Stdout.ReadSlice('\n') // at most the reader's 64 KiB
	return p.statusOf(host, raw, err)
}

// uploadLine reads the remote script's next line during the upload: an acknowledgement, a list
// of missing parts or, the last, a status line; on anything else it ends ssh and explains.
func (p *Peer) uploadLine(host string) (uploadLine, error) {
	raw, err := p.Stdout.ReadSlice('\n')
	if line := string(raw); err == nil && (strings.HasPrefix(line, "FARWING-GOT ") || strings.HasPrefix(line, "FARWING-MISSING ")) {
		l, perr := parseUploadLine(line)
		if perr != nil {
			p.Close(time.Second)
			return uploadLine{}, fmt.Errorf("%w: %s answered with a %v during the upload: %s", ErrSSH, host, perr, escape.Quote(strings.TrimSpace(line)))
		}
		return l, nil
	}
	st, err := p.statusOf(host, raw, err)
	if err != nil {
		return uploadLine{}, err
	}
	return uploadLine{st: &st}, nil
}

// statusOf checks raw, a line read with err, as a status line; on anything else it ends ssh and
// explains.
func (p *Peer) statusOf(host string, raw []byte, err error) (peerStatus, error) {
	line := string(raw)
	st, perr := parseStatus(line)
	if err != nil || perr != nil {
		if err == nil && strings.HasPrefix(line, "FARWING-PEER ") {
			p.Close(time.Second)
			return peerStatus{}, fmt.Errorf("%w: %s answered with a %v", ErrSSH, host, perr) // %q inside: escaped
		}
		if err != nil && len(raw) == 0 {
			// The remote ended without a word (a peer that died before its first write prints
			// its own status line): let ssh finish, with its exit status and the remote's
			// standard error, before judging.
			p.exited(2 * time.Second)
		}
		p.cmd.Process.Kill()
		werr := p.Wait()
		return peerStatus{}, sshError(host, p.stderr.String(), werr, line)
	}
	return st, nil
}

// sshError turns ssh's exit and stderr into one line that says what went wrong.
func sshError(host, stderr string, err error, got string) error {
	msg := escape.Text(lastMeaningful(stderr))
	switch {
	case strings.Contains(stderr, "Could not resolve hostname"):
		return fmt.Errorf("%w: cannot resolve host %s (%s)", ErrSSH, host, msg)
	case strings.Contains(stderr, "Permission denied ("):
		// ssh's own refusal, "user@host: Permission denied (publickey,password)."; scp's
		// "scp: PATH: Permission denied" is about a file, and falls through.
		return fmt.Errorf("%w: authentication to %s failed (%s); check your key, ssh-agent or -i", ErrSSH, host, msg)
	case strings.Contains(stderr, "Connection refused"), strings.Contains(stderr, "timed out"),
		strings.Contains(stderr, "No route to host"), strings.Contains(stderr, "Network is unreachable"):
		return fmt.Errorf("%w: cannot connect to %s (%s)", ErrSSH, host, msg)
	case msg != "":
		return fmt.Errorf("%w: %s: %s", ErrSSH, host, msg)
	case got != "":
		return fmt.Errorf("%w: %s answered %s instead of starting the peer (is the login shell printing text?)", ErrSSH, host, escape.Quote(strings.TrimSpace(got)))
	default:
		return fmt.Errorf("%w: ssh to %s ended: %v", ErrSSH, host, err)
	}
}

func lastMeaningful(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "Warning: Permanently added") {
			return strings.TrimPrefix(l, "ssh: ")
		}
	}
	return ""
}

// Stderr is what the remote side (ssh and the peer) wrote to standard error, last 8 KiB.
func (p *Peer) Stderr() string { return p.stderr.String() }

// Ended explains why the control channel to the peer closed (err: what the reader saw), waiting
// up to wait for ssh to exit: the local ssh killed, the connection lost, the peer gone with its
// last words (escaped). While ssh is still running after wait it returns err.
func (p *Peer) Ended(err error, wait time.Duration) error {
	if !p.exited(wait) {
		return err
	}
	last := escape.Text(lastMeaningful(p.stderr.String()))
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		if last != "" {
			return fmt.Errorf("%w: %s", err, last)
		}
		return err
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return fmt.Errorf("%w: the local ssh process (pid %d) was killed by signal %d (%s)", ErrSSH, ee.Pid(), ws.Signal(), ws.Signal())
	case ee.ExitCode() == 255:
		if last == "" {
			last = "no message"
		}
		return fmt.Errorf("%w: the ssh connection ended (ssh exit status 255: %s)", ErrSSH, last)
	case ee.ExitCode() > 128 && ee.ExitCode() < 128+65:
		return fmt.Errorf("%w: it was killed by signal %d (%s)", err, ee.ExitCode()-128, syscall.Signal(ee.ExitCode()-128))
	case last != "":
		return fmt.Errorf("%w: it exited with status %d (%s)", err, ee.ExitCode(), last)
	}
	return fmt.Errorf("%w: it exited with status %d", err, ee.ExitCode())
}

// exited waits up to within for ssh to exit, and reports whether it has (Wait then returns at once).
func (p *Peer) exited(within time.Duration) bool {
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}

// Wait waits for the ssh process to end.
func (p *Peer) Wait() error {
	p.waitOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	return p.waitErr
}

// Close ends the session: it closes the control channel, on which the remote peer exits, and
// gives ssh grace to leave on its own before killing it. The transfer's outcome is already known
// here, so waiting a round trip for ssh's own exit would only add to the copy's time.
func (p *Peer) Close(grace time.Duration) {
	p.Stdin.Close()
	if grace <= 0 {
		go p.Wait() // reap it when it leaves
		return
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-done
	}
}

// tail keeps the last 8 KiB written to it.
type tail struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if t.b.Len() > 8<<10 {
		rest := append([]byte(nil), t.b.Bytes()[t.b.Len()-8<<10:]...)
		t.b.Reset()
		t.b.Write(rest)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

// muxCheck bounds the wait for a shared connection's master to answer `ssh -O check` or `ssh -O
// exit`: it answers from this host, at once, unless it is stopped or hung (or whatever holds
// the socket is not an ssh master).
const muxCheck = 3 * time.Second

// muxAnswer bounds the wait for the first line of the remote's answer over a shared connection
// that answered muxCheck: a round trip or two on a live connection (the remote shell's start, a
// hash of the peer, and a cached peer's start to its ready, tens of milliseconds), forever on one
// a network change left dead, where ssh's keepalive gives up after about a minute.
const muxAnswer = 5 * time.Second

// errMuxSilent is run's error for a session over a shared connection that did not answer in time.
var errMuxSilent = errors.New("the shared ssh connection did not answer")

// checkMux asks the shared connection's master for host whether it runs (`ssh -O check`). One
// that does not answer within muxCheck is stopped or hung: it is ended and its socket removed, so
// that ssh makes a new master in its place (retireHung); where none answers, masters that no
// socket reaches are ended (clearOrphans). It returns a function that says what it found
// (Notice, Log) and returns true when a master answered that it runs, with the pid it gave (0
// where it did not): for the caller to call once it knows that the connection is shared.
func (s *session) checkMux(ctx context.Context, host string) func() (bool, int) {
	snap := make(chan []int, 1) // the masters there as the check begins (a /proc scan, ms: meanwhile)
	go func() { snap <- s.mastersHere() }()
	out, hung, err := s.control(ctx, host, "check")
	before := <-snap
	switch {
	case hung:
		s.retireHung(ctx, host, before)
		return func() (bool, int) {
			s.notice(fmt.Sprintf("the shared ssh connection to %s did not answer within %s; connecting anew", escape.Text(host), muxCheck))
			return false, 0
		}
	case err != nil:
		s.clearOrphans(ctx, host, before)
		return func() (bool, int) {
			s.logf("no shared ssh connection to %s yet (%s)", escape.Text(host), escape.Text(lastMeaningful(out)))
			return false, 0
		}
	}
	return func() (bool, int) {
		s.logf("riding on the shared ssh connection to %s (%s)", escape.Text(host), escape.Text(lastMeaningful(out)))
		return true, masterPID(out)
	}
}

// dropMux ends the shared connection for host, whose master answered checkMux (as muxPid) but
// whose sessions carry nothing: `ssh -O exit`, and the master is killed where it has not ended a
// moment later (one waiting on a dead connection); its socket is removed (retireSilent).
func (s *session) dropMux(ctx context.Context, host string) { s.retireSilent(ctx, host, s.muxPid) }

// control runs `ssh -O cmd` for host's shared connection within muxCheck: its output, whether
// it ran out of time, and how it ended.
func (s *session) control(ctx context.Context, host, cmd string) (string, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, muxCheck)
	defer cancel()
	c := exec.CommandContext(cctx, s.program(), append(s.flags(true), "-O", cmd, "--", host)...)
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	return string(out), cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil, err
}

// socketPath is the path of the shared connection's socket for host (from `ssh -G`), "" where
// it is not one in this user's control directory.
func (s *session) socketPath(ctx context.Context, host string) string {
	cfg, err := s.configWith(ctx, host, s.flags(true))
	dir := s.ctlDir
	path := cfg["controlpath"]
	if err != nil || dir == "" || !strings.HasPrefix(path, dir+"/") || strings.Contains(path[len(dir)+1:], "/") {
		return ""
	}
	return path
}

// removeSocket removes the shared connection's socket at path (socketPath), if it is a socket.
func (s SSH) removeSocket(path string) {
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		return
	}
	if err := os.Remove(path); err != nil {
		s.logf("cannot remove the shared ssh connection's socket %s: %v", path, err)
		return
	}
	s.logf("removed the shared ssh connection's socket %s", path)
}

func (s SSH) notice(line string) {
	if s.Notice != nil {
		s.Notice(line)
	} else {
		s.logf("%s", line)
	}
}

func (s SSH) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log(format, args...)
	}
}

// Package bootstrap reaches a remote host with the system's OpenSSH: it checks for a Farwing peer of
// this exact build in the remote's cache, installs it over scp when missing, and starts
// `farwing serve`, whose stdin/stdout become the control channel.
package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// ErrSSH marks failures of ssh or scp themselves: unknown host, refused connection, failed
// authentication.
var ErrSSH = errors.New("ssh")

// ErrPlatform marks a remote whose OS or architecture this binary cannot run on.
var ErrPlatform = errors.New("unsupported remote platform")

// ErrInstall marks a remote where the peer cannot be installed: its cache directory cannot be
// created or written.
var ErrInstall = errors.New("cannot install the peer")

// SSH holds the options passed through to the system ssh and scp.
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
	// "installing farwing on HOST (10.2 MB)"), for a terminal that would otherwise stay silent.
	Notice func(line string)
	// Log, when set, is told what Start does with a shared connection (-v).
	Log     func(format string, args ...any)
	mux     bool   // Start found that Persist applies to this host
	muxLive bool   // Start found a shared connection that answers locally: the first session rides on it
	SSHPath string // default "ssh"
	SCPPath string // default "scp"
}

// Flags are the ssh flags as `farwing copy` and scp take them (-F -i -P -o -J), without the
// connection-sharing options Start adds: what a command run on the user's behalf is given.
func (s SSH) Flags() []string {
	s.mux = false
	return s.common("-P")
}

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
	if s.mux {
		if dir, err := controlDir(); err == nil {
			// The socket's name covers the options given here as well as ssh's %C (local host,
			// remote host, port, user), so a copy with another -F, -i, -o or -J never rides on a
			// connection that was authenticated or configured differently.
			h := sha256.Sum256([]byte(strings.Join(a, "\x00")))
			a = append(a, "-o", "ControlMaster=auto", "-o", "ControlPath="+dir+"/"+hex.EncodeToString(h[:4])+"-%C",
				"-o", "ControlPersist="+strconv.Itoa(int(max(s.Persist, time.Second)/time.Second)))
		}
	}
	return a
}

// maxControlPath is the longest control socket directory used: a unix socket path holds 107
// bytes, and the name is 8 hex digits, a dash and %C's 40.
const maxControlPath = 107 - 50

// useMux says whether Persist should add its own connection sharing, given ssh's configuration
// for the host (`ssh -G`): not when the user's configuration shares connections already (a
// ControlMaster or a ControlPath), and not when the socket directory's path is too long.
func (s SSH) useMux(cfg map[string]string) bool {
	if s.Persist <= 0 || cfg == nil {
		return false
	}
	if dir, err := controlDir(); err != nil || len(dir) > maxControlPath {
		return false
	}
	// -G leaves an unset ControlPath out, and "none" too (so that one cannot be told apart).
	cm := cfg["controlmaster"]
	return (cm == "" || cm == "false") && cfg["controlpath"] == ""
}

// config is ssh's view of its configuration for host (`ssh -G`), keys in lower case.
func (s SSH) config(ctx context.Context, host string) (map[string]string, error) {
	p := s.SSHPath
	if p == "" {
		p = "ssh"
	}
	args := append(s.common("-p"), "-G", "--", host)
	out, err := exec.CommandContext(ctx, p, args...).Output()
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

// controlDir is where shared ssh connection sockets live: private to the user, short enough for
// a unix socket path.
func controlDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := base + "/farwing/ssh"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

func (s SSH) sshCmd(ctx context.Context, host, remoteCmd string) *exec.Cmd {
	p := s.SSHPath
	if p == "" {
		p = "ssh"
	}
	args := append(s.common("-p"), "-T", "-o", "ServerAliveInterval=15", "--", host, remoteCmd)
	return exec.CommandContext(ctx, p, args...)
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
	// HostName is the address ssh connects to for the host (`ssh -G`), so that UDP goes to the
	// same place even when the host is an alias from ssh_config; "" if ssh did not say.
	HostName string
	waitOnce sync.Once
	waitErr  error
}

// Args is the ssh command line that started the peer (the remote script and `farwing serve` with
// its public key are in its last argument).
func (p *Peer) Args() []string { return append([]string(nil), p.cmd.Args...) }

// Identity is this build's identity: the SHA-256 of the running executable.
type Identity struct {
	Exe  string
	Hash string // hex SHA-256
}

// Self hashes the running executable.
func Self() (Identity, error) {
	exe, err := os.Executable()
	if err != nil {
		return Identity{}, err
	}
	f, err := os.Open(exe)
	if err != nil {
		return Identity{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Identity{}, err
	}
	return Identity{Exe: exe, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// pruneDays is the age (days since upload) past which installing a build removes other builds
// from the remote's cache.
const pruneDays = 30

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hashCmd prints a file's SHA-256 with whichever tool the remote has, OpenSSL first: it uses the
// CPU's SHA instructions where coreutils' sha256sum may not (an 8 MB peer: 8 against 17 ms, on
// every start).
const hashCmd = `(openssl dgst -sha256 -r "$1" 2>/dev/null || sha256sum "$1" 2>/dev/null || shasum -a 256 "$1" 2>/dev/null) | cut -c1-64`

// probeScript starts the cached peer when it is there and intact, or reports what is needed.
func probeScript(id Identity, serveArgs string) string {
	return `h() { ` + hashCmd + `; }
d="${XDG_CACHE_HOME:-$HOME/.cache}/farwing"
p="$d/farwing-` + id.Hash[:16] + `"
s=$(uname -s); m=$(uname -m)
if [ -x "$p" ] && [ "$(h "$p")" = "` + id.Hash + `" ]; then
  echo "FARWING-PEER ok $s $m $p"
  exec "$p" serve ` + serveArgs + `
fi
if mkdir -p "$d" 2>/dev/null && [ -w "$d" ]; then echo "FARWING-PEER need $s $m $d"; else echo "FARWING-PEER nodir $s $m $d"; fi`
}

// installScript checks the uploaded file, renames it into place and starts it. Installing a
// build is also when the cache is tidied: other builds installed more than pruneDays ago, and
// uploads abandoned for a day, are removed (a build still in use elsewhere is uploaded again by
// its next copy; a running peer is not affected).
func installScript(id Identity, tmp, final, serveArgs string) string {
	return `h() { ` + hashCmd + `; }
t=` + shellQuote(tmp) + `; p=` + shellQuote(final) + `
if [ "$(h "$t")" != "` + id.Hash + `" ]; then rm -f "$t"; echo "FARWING-PEER badhash"; exit 0; fi
chmod 755 "$t" && mv -f "$t" "$p" || { rm -f "$t"; echo "FARWING-PEER norename"; exit 0; }
find "${p%/*}" -maxdepth 1 -type f \( -name 'farwing-*' -mtime +` + fmt.Sprint(pruneDays) + ` -o -name '.farwing-*.tmp' -mtime +1 \) ! -name "${p##*/}" -exec rm -f {} + 2>/dev/null
echo "FARWING-PEER ok $(uname -s) $(uname -m) $p"
exec "$p" serve ` + serveArgs
}

// Start reaches host, installs the peer when needed and starts it as `farwing serve ARGS`.
// serveArgs must be public (they show in the remote's process list) and are shell-quoted here.
// preface is written to the peer's stdin at once, before the remote answers: the caller's first
// control messages travel with the ssh session's start instead of a round trip later (a shell that
// does not start the peer never reads them).
func Start(ctx context.Context, s SSH, host string, id Identity, serveArgs []string, preface []byte) (*Peer, error) {
	// Whether a shared connection of ours is there and answers is asked meanwhile (its socket
	// is this user's, whatever ssh -G says).
	var checked chan func() bool
	if s.Persist > 0 {
		checked = make(chan func() bool, 1)
		m := s
		m.mux = true
		go func() { checked <- m.checkMux(ctx, host) }()
	}
	// One `ssh -G` (offline) answers both whether to share the connection and where ssh goes.
	cfg, _ := s.config(ctx, host)
	s.mux = s.useMux(cfg)
	if checked != nil {
		say := <-checked
		if s.mux {
			s.muxLive = say()
		}
	}
	p, err := s.start(ctx, host, id, serveArgs, preface)
	if p != nil {
		p.HostName = cfg["hostname"]
	}
	return p, err
}

func (s SSH) start(ctx context.Context, host string, id Identity, serveArgs []string, preface []byte) (*Peer, error) {
	var qa []string
	for _, a := range serveArgs {
		qa = append(qa, shellQuote(a))
	}
	args := strings.Join(qa, " ")
	within := time.Duration(0)
	if s.muxLive {
		within = muxAnswer
	}
	p, st, err := s.run(ctx, host, probeScript(id, args), preface, within)
	if errors.Is(err, errMuxSilent) {
		// The shared connection's master is there, but its connection carries nothing (a
		// network change left it dead): drop it, and start again over a new one.
		s.notice(fmt.Sprintf("the shared ssh connection to %s did not answer within %s; closing it and connecting again", escape.Text(host), muxAnswer))
		s.dropMux(ctx, host)
		p, st, err = s.run(ctx, host, probeScript(id, args), preface, 0)
	}
	if err != nil {
		return nil, err
	}
	if st.State == "ok" {
		p.RemoteOS, p.Path = st.OS+" "+st.Arch, st.Path
		return p, nil
	}
	p.Close(3 * time.Second)
	if st.State != "need" && st.State != "nodir" {
		return nil, fmt.Errorf("%w: unexpected answer from %s: %s", ErrSSH, host, escape.Text(st.State))
	}
	if !Compatible(st.OS, st.Arch) {
		return nil, fmt.Errorf("%w: %s is %s %s, but this farwing is built for %s/%s; install a matching build on %s",
			ErrPlatform, host, escape.Text(st.OS), escape.Text(st.Arch), runtime.GOOS, runtime.GOARCH, host)
	}
	if st.State == "nodir" {
		return nil, fmt.Errorf("%w on %s: its cache directory %s cannot be created or written; fix its permissions, or set XDG_CACHE_HOME for that account",
			ErrInstall, host, escape.Text(st.Path))
	}
	dir := st.Path
	final := dir + "/farwing-" + id.Hash[:16]
	tmp := fmt.Sprintf("%s/.farwing-%s.%d.%d.tmp", dir, id.Hash[:16], os.Getpid(), time.Now().UnixNano()%1e6)
	if s.Notice != nil {
		size := "?"
		if st, err := os.Stat(id.Exe); err == nil {
			size = fmt.Sprintf("%.1f MB", float64(st.Size())/1e6)
		}
		s.Notice(fmt.Sprintf("installing farwing on %s (%s)", escape.Text(host), size))
	}
	if err := s.upload(ctx, host, id.Exe, tmp); err != nil {
		return nil, err
	}
	p, st, err = s.run(ctx, host, installScript(id, tmp, final, args), preface, 0)
	if err != nil {
		return nil, err
	}
	if st.State != "ok" {
		p.Close(3 * time.Second)
		return nil, fmt.Errorf("%w on %s: the uploaded build did not check out (%s)", ErrInstall, host, escape.Text(st.State))
	}
	p.Uploaded = true
	p.RemoteOS, p.Path = st.OS+" "+st.Arch, st.Path
	return p, nil
}

// peerStatus is the remote shell's first line: "FARWING-PEER STATE OS ARCH PATH" for the states
// ok (PATH: the running peer), need and nodir (PATH: the cache directory), or a bare
// "FARWING-PEER STATE" (badhash, norename).
type peerStatus struct{ State, OS, Arch, Path string }

// maxStatus bounds the status line: a remote that never ends its line cannot fill memory.
const maxStatus = 4096

// parseStatus checks a status line: a known state, and for ok, need and nodir an OS, an
// architecture and an absolute path (which may hold spaces).
func parseStatus(line string) (peerStatus, error) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "FARWING-PEER ")
	if !ok || len(line) > maxStatus {
		return peerStatus{}, errors.New("not a status line")
	}
	f := strings.SplitN(rest, " ", 4)
	st := peerStatus{State: f[0]}
	switch st.State {
	case "ok", "need", "nodir":
		if len(f) != 4 || f[1] == "" || f[2] == "" || !strings.HasPrefix(f[3], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Path = f[1], f[2], f[3]
	case "badhash", "norename":
	default:
		return peerStatus{}, fmt.Errorf("unknown status %q", rest)
	}
	return st, nil
}

// run starts `sh -c script` on host and returns the peer with its first status line. With within
// above 0 it gives up when the line has not come by then, killing ssh, with errMuxSilent.
func (s SSH) run(ctx context.Context, host, script string, preface []byte, within time.Duration) (*Peer, peerStatus, error) {
	cmd := s.sshCmd(ctx, host, "sh -c "+shellQuote(script))
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
	p := &Peer{cmd: cmd, Stdin: stdin, Stdout: bufio.NewReaderSize(stdout, 64<<10), stderr: &tail{}}
	cmd.Stderr = p.stderr
	if s.Verbose {
		// ssh's own messages and the remote's standard error, escaped: the remote's text never
		// reaches the terminal raw.
		cmd.Stderr = io.MultiWriter(escape.NewWriter(os.Stderr), p.stderr)
	}
	if err := cmd.Start(); err != nil {
		return nil, peerStatus{}, fmt.Errorf("%w: cannot run ssh: %v", ErrSSH, err)
	}
	if len(preface) > 0 {
		go stdin.Write(preface) // a failed write shows up as the missing status line below
	}
	type read struct {
		line string
		err  error
	}
	got := make(chan read, 1)
	go func() {
		raw, err := p.Stdout.ReadSlice('\n') // at most the reader's 64 KiB
		got <- read{string(raw), err}
	}()
	var limit <-chan time.Time
	if within > 0 {
		t := time.NewTimer(within)
		defer t.Stop()
		limit = t.C
	}
	var r read
	select {
	case r = <-got:
	case <-limit:
		p.cmd.Process.Kill()
		p.Wait()
		return nil, peerStatus{}, errMuxSilent
	}
	line, err := r.line, r.err
	st, perr := parseStatus(line)
	if err != nil || perr != nil {
		if err == nil && strings.HasPrefix(line, "FARWING-PEER ") {
			p.Close(time.Second)
			return nil, peerStatus{}, fmt.Errorf("%w: %s answered with a %v", ErrSSH, host, perr) // %q inside: escaped
		}
		p.cmd.Process.Kill()
		werr := p.Wait()
		return nil, peerStatus{}, sshError(host, p.stderr.String(), werr, line)
	}
	return p, st, nil
}

// muxCheck bounds the wait for a shared connection's master to answer `ssh -O check` or `ssh -O
// exit`: it answers from this host, at once, unless it is stopped or hung (or whatever holds
// the socket is not an ssh master).
const muxCheck = 3 * time.Second

// muxAnswer bounds the wait for the first line of the remote's answer over a shared connection
// that answered muxCheck: a round trip or two on a live connection (the remote shell's start and a
// hash of the peer, a few milliseconds), forever on one a network change left dead, where ssh's
// keepalive gives up after about a minute.
const muxAnswer = 5 * time.Second

// errMuxSilent is run's error for a session over a shared connection that did not answer in time.
var errMuxSilent = errors.New("the shared ssh connection did not answer")

// checkMux asks the shared connection's master for host whether it runs (`ssh -O check`). One
// that does not answer within muxCheck is stopped or hung: its socket is removed, so that ssh
// makes a new master in its place. It returns a function that says what it found (Notice, Log)
// and returns true when a master answered that it runs: for the caller to call once it knows
// that the connection is shared.
func (s SSH) checkMux(ctx context.Context, host string) func() bool {
	out, hung, err := s.control(ctx, host, "check")
	switch {
	case hung:
		s.removeSocket(ctx, host)
		return func() bool {
			s.notice(fmt.Sprintf("the shared ssh connection to %s did not answer within %s; connecting anew", escape.Text(host), muxCheck))
			return false
		}
	case err != nil:
		return func() bool {
			s.logf("no shared ssh connection to %s yet (%s)", escape.Text(host), escape.Text(lastMeaningful(out)))
			return false
		}
	}
	return func() bool {
		s.logf("riding on the shared ssh connection to %s (%s)", escape.Text(host), escape.Text(lastMeaningful(out)))
		return true
	}
}

// dropMux ends the shared connection for host (`ssh -O exit`), or removes its socket when the
// master does not answer that either.
func (s SSH) dropMux(ctx context.Context, host string) {
	if _, hung, err := s.control(ctx, host, "exit"); hung || err != nil {
		s.removeSocket(ctx, host)
	}
}

// control runs `ssh -O cmd` for host's shared connection within muxCheck: its output, whether
// it ran out of time, and how it ended.
func (s SSH) control(ctx context.Context, host, cmd string) (string, bool, error) {
	p := s.SSHPath
	if p == "" {
		p = "ssh"
	}
	cctx, cancel := context.WithTimeout(ctx, muxCheck)
	defer cancel()
	c := exec.CommandContext(cctx, p, append(s.common("-p"), "-O", cmd, "--", host)...)
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	return string(out), cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil, err
}

// removeSocket removes the shared connection's socket for host (its name from `ssh -G`), if it
// is a socket in this user's control directory; a master still running there, stopped or hung,
// is left alone and serves nobody.
func (s SSH) removeSocket(ctx context.Context, host string) {
	cfg, err := s.config(ctx, host)
	dir, derr := controlDir()
	path := cfg["controlpath"]
	if err != nil || derr != nil || !strings.HasPrefix(path, dir+"/") || strings.Contains(path[len(dir)+1:], "/") {
		s.logf("cannot find the shared ssh connection's socket for %s", escape.Text(host))
		return
	}
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

func (s SSH) upload(ctx context.Context, host, local, remote string) error {
	path := s.SCPPath
	if path == "" {
		path = "scp"
	}
	// OpenSSH ≥ 9 scp speaks SFTP, which some servers do not offer; then retry with the legacy
	// scp protocol (-O), which others have turned off instead.
	var errb tail
	for _, legacy := range []bool{false, true} {
		args := s.common("-P")
		if legacy {
			args = append(args, "-O")
		}
		args = append(args, "-q", "--", local, host+":"+remote)
		cmd := exec.CommandContext(ctx, path, args...)
		errb = tail{}
		cmd.Stderr = &errb
		err := cmd.Run()
		if err == nil {
			return nil
		}
		if legacy || ctx.Err() != nil || !strings.Contains(errb.String(), "Connection closed") &&
			!strings.Contains(errb.String(), "subsystem request failed") {
			return sshError(host, errb.String(), err, "")
		}
	}
	return nil
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

// Compatible reports whether a remote `uname -s`/`uname -m` can run this binary.
func Compatible(osName, arch string) bool {
	goos := map[string]string{"Linux": "linux", "Darwin": "darwin", "FreeBSD": "freebsd", "OpenBSD": "openbsd", "NetBSD": "netbsd"}[osName]
	goarch := map[string]string{"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
		"i386": "386", "i686": "386", "armv7l": "arm", "armv6l": "arm", "riscv64": "riscv64", "ppc64le": "ppc64le", "s390x": "s390x"}[arch]
	return goos == runtime.GOOS && goarch == runtime.GOARCH
}

// Stderr is what the remote side (ssh and the peer) wrote to standard error, last 8 KiB.
func (p *Peer) Stderr() string { return p.stderr.String() }

// Ended explains why the control channel to the peer closed (err: what the reader saw), waiting
// up to wait for ssh to exit: the local ssh killed, the connection lost, the peer gone with its
// last words (escaped). While ssh is still running after wait it returns err.
func (p *Peer) Ended(err error, wait time.Duration) error {
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(wait):
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

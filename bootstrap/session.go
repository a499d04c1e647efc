package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/privdir"
)

// session is one Start's state, apart from the user's configuration (SSH, kept as the caller gave
// it): this user's cache directories, each checked once; ssh's view of the host; whether its
// connection is shared and what was found of the shared one; the ProxyCommand; and first
// contact's attempts. Start makes it, and the Peer it returns carries it.
type session struct {
	SSH
	cfg map[string]string // ssh's configuration for the host (`ssh -G`; nil: ssh did not say)
	// This user's cache directories (private.go), made and checked once: "" where there is no
	// cache or the directory is not private (nothing is read or written there then).
	peerDir      string        // farwing/peer: the builds' gzip forms
	installedDir string        // farwing/peer/installed: the records of installs (installRecords)
	selfDir      func() string // farwing/peer/self, the records of this executable's hash: on first use
	ctlDir       string        // farwing/ssh, the shared connections' sockets; "" too where Persist is 0
	mux          bool          // Persist applies to this host: its ssh sessions share a connection (useMux)
	muxLive      bool          // a shared connection answered checkMux: the first session rides on it
	muxPid       int           // ... and the pid its master gave (0: none said)
	proxy        string        // the ProxyCommand chosen ("" none: bbrProxy)
	attempts     []attempt     // first contact's, in order, each with why the one before it was given up (contact.go)
}

// newSession is the session of a start with s, before ssh is asked anything: this user's cache
// directories checked once (cacheDir, privdir.MakeIn), farwing/ and below it peer/ and, where
// Persist asks for a shared connection, ssh/, since a socket someone else planted there would get
// ssh's session (OpenSSH's mux client does not check who owns the master it connects to). It
// returns why peer/ or ssh/ is not used (cacheNotice; farwing/'s error is both).
func newSession(s SSH) (se *session, peerErr, ctlErr error) {
	se = &session{SSH: s}
	fw, err := cacheDir()
	peerErr = err
	if err == nil {
		se.peerDir, peerErr = privdir.MakeIn(fw, "peer")
	}
	se.installedDir = subDir(se.peerDir, "installed")
	se.selfDir = sync.OnceValue(func() string { return subDir(se.peerDir, "self") })
	if s.Persist > 0 {
		ctlErr = err
		if err == nil {
			se.ctlDir, ctlErr = privdir.MakeIn(fw, "ssh")
		}
	}
	return se, peerErr, ctlErr
}

// flags are the user's ssh flags (common, -p) and, where shared, the options that share the
// connection: a ControlPath in the control directory (none where there is none), whose master
// the first ssh that finds none there makes and keeps for Persist.
func (s *session) flags(shared bool) []string {
	a := s.common("-p")
	if shared && s.ctlDir != "" {
		// The socket's name covers the options given here as well as ssh's %C (local host,
		// remote host, port, user), so a copy with another -F, -i, -o or -J never rides on a
		// connection that was authenticated or configured differently.
		h := sha256.Sum256([]byte(strings.Join(a, "\x00")))
		a = append(a, "-o", "ControlMaster=auto", "-o", "ControlPath="+s.ctlDir+"/"+hex.EncodeToString(h[:4])+"-%C",
			"-o", "ControlPersist="+strconv.Itoa(int(max(s.Persist, time.Second)/time.Second)))
	}
	return a
}

// maxControlPath is the longest control socket directory used: a unix socket path holds 107
// bytes on Linux (103 on the BSDs and macOS), the name is 8 hex digits, a dash and %C's 40 after
// the directory's slash, and a master first binds its socket at that path with a dot and 16
// random characters added (OpenSSH's muxserver_listen), failing the whole ssh command where that
// is too long ("unix_listener: path ... too long for Unix domain socket", exit 255): 40 bytes.
const maxControlPath = len(syscall.RawSockaddrUnix{}.Path) - 1 - len("/12345678-") - 40 - len(".0123456789abcdef")

// useMux says whether Persist should add its own connection sharing, given ssh's configuration
// for the host (`ssh -G`): not when the user's configuration shares connections already (a
// ControlMaster or a ControlPath), and not when there is no control directory to use or its
// path is too long.
func (s *session) useMux(cfg map[string]string) bool {
	if s.ctlDir == "" || cfg == nil || len(s.ctlDir) > maxControlPath {
		return false
	}
	// -G leaves an unset ControlPath out, and "none" too (so that one cannot be told apart).
	cm := cfg["controlmaster"]
	return (cm == "" || cm == "false") && cfg["controlpath"] == ""
}

// sshCmd runs remoteCmd on host with the user's ssh options, the shared connection's where
// shared, and the session's ProxyCommand, after first (options that must win: ssh keeps the
// first value it is given).
func (s *session) sshCmd(ctx context.Context, host, remoteCmd string, shared bool, first ...string) *exec.Cmd {
	args := append(slices.Concat(first, s.flags(shared)), "-T", "-o", "ServerAliveInterval=15")
	if s.proxy != "" {
		args = append(args, "-o", "ProxyCommand="+s.proxy)
	}
	args = append(args, "--", host, remoteCmd)
	return exec.CommandContext(ctx, s.program(), args...)
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

package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

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

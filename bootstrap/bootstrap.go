// Package bootstrap reaches a remote host with the system's OpenSSH: one ssh session checks for the
// Farwing peer this build installs on the remote's platform (a build it carries, or itself) in the
// remote's cache, receives it on its standard input (xz-compressed where it is carried so and the
// remote has xz, else gzip-compressed where the remote has gzip) when it is missing or wrong,
// checks its SHA-256 and starts `farwing serve`, whose stdin/stdout become the control channel.
package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
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
		p.HostName, p.attempts = se.cfg["hostname"], se.attempts
		p.se, p.host = se, host
	}
	return p, err
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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/benchpeer"
	"github.com/farwing/farwing/internal/doctorpeer"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/xfer"
)

// cmdServe is the remote peer, started over ssh by bootstrap: the control channel is stdin/stdout.
func cmdServe(ctx context.Context, tun tuning.Settings, args []string) int {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pub := fs.String("pub", "", "the client's ephemeral X25519 public key (set by farwing copy)")
	portRange := fs.String("port", "", "bind the four UDP lanes in this port range, LO-HI (farwing copy --port)")
	skip := fs.String("skip", "", "drop A bytes of the control channel after its first L, L:A (an upload's start the client wrote ahead; set by first contact)")
	announce := fs.String(strings.TrimPrefix(bootstrap.AnnounceFlag, "--"), "", "print the status line of a peer started from this path before the first control message, in the same write (set by first contact)")
	chdir := fs.String(strings.TrimPrefix(bootstrap.ChdirFlag, "--"), "", "first go to this directory: the one the ssh session started in (set by first contact, which starts the peer inside its cache directory)")
	relay := fs.String(strings.TrimPrefix(bootstrap.RelayFlag, "--"), "", "relay between standard input and output and this local socket of a running peer (a copy's lane where UDP and TCP are blocked; set by farwing copy)")
	if err := fs.Parse(args); err != nil {
		return badFlags("serve", err)
	}
	if *relay != "" {
		signal.Ignore(syscall.SIGPIPE)
		if err := xfer.Relay(ctx, *relay, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(stderr, "farwing serve: %v\n", err)
			return exitCode(err) // 10 for a socket that is no copy's relay socket
		}
		return 0
	}
	enter(*chdir)
	ports, err := session.ParsePortRange(*portRange)
	if err != nil {
		return badFlags("serve", err)
	}
	var in io.Reader = os.Stdin
	if *skip != "" {
		keep, drop, err := parseSkip(*skip)
		if err != nil {
			return badFlags("serve", err)
		}
		in = &skipReader{r: os.Stdin, keep: keep, drop: drop}
	}
	// A copy of the control channel's preface may have come with the exec request, in the
	// environment (bootstrap.EnvPreface): read at once, then checked against standard input's.
	if v, ok := os.LookupEnv(bootstrap.EnvPreface); ok {
		os.Unsetenv(bootstrap.EnvPreface)
		if pre, err := bootstrap.DecodeEnvPreface(v); err == nil {
			in = xfer.EnvPrefaced(in, pre)
		}
	}
	// The peer outlives its client only long enough to clean up: a write to the control channel
	// after the client left must be an error it handles (removing partial files, the bench's
	// directory), not a SIGPIPE that kills it first; sshd's SIGHUP ends it the same way.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	var out io.Writer = os.Stdout
	if *announce != "" {
		out = &prefixWriter{w: out, prefix: []byte(bootstrap.OKLine(*announce))}
	}
	if err := xfer.Serve(ctx, in, out, *pub, xfer.ServeOptions{SSHConnection: os.Getenv("SSH_CONNECTION"), Ports: ports,
		Tuning: tun, DebugLog: debugLog, Roles: peerRoles}); err != nil {
		fmt.Fprintf(stderr, "farwing serve: %v\n", err)
		return exitCode(err)
	}
	return 0
}

// peerRoles are the roles the peer serves besides a copy's: farwing bench's and farwing doctor's.
var peerRoles = map[string]xfer.Role{xfer.RoleBench: benchpeer.Serve, xfer.RoleDoctor: doctorpeer.Serve}

// enter makes dir the working directory, "" leaving it as it is: first contact starts the peer
// inside the remote's cache directory (bootstrap.ChdirFlag) and names the directory the session
// started in. Where that cannot be entered again, the peer works in /, as sshd starts a session
// whose home it cannot enter; nothing of the peer's work is named relative to it (remote paths
// are resolved against the home directory), so it only keeps the peer out of the cache directory.
func enter(dir string) {
	if dir != "" && os.Chdir(dir) != nil {
		os.Chdir("/")
	}
}

// maxSkip bounds both numbers of --skip: the preface is a few control messages, the upload's
// start one part (bootstrap's aheadPart and its two lines).
const maxSkip = 1 << 20

// parseSkip reads --skip's L:A: decimal, each at most maxSkip.
func parseSkip(v string) (keep, drop int64, err error) {
	l, a, ok := strings.Cut(v, ":")
	k, err1 := strconv.ParseInt(l, 10, 64)
	d, err2 := strconv.ParseInt(a, 10, 64)
	if !ok || err1 != nil || err2 != nil || k < 0 || d < 0 || k > maxSkip || d > maxSkip {
		return 0, 0, errors.New("--skip wants L:A, two byte counts of at most 1 MiB")
	}
	return k, d, nil
}

// skipReader passes the first keep bytes of r, then reads and drops the next drop bytes, then
// passes the rest: the control channel with an upload's start that the remote shell did not need
// taken out of it.
type skipReader struct {
	r          io.Reader
	keep, drop int64
}

func (s *skipReader) Read(b []byte) (int, error) {
	if s.keep > 0 {
		n, err := s.r.Read(b[:min(int64(len(b)), s.keep)])
		s.keep -= int64(n)
		return n, err
	}
	if s.drop > 0 {
		n, err := io.CopyN(io.Discard, s.r, s.drop)
		if s.drop -= n; err != nil {
			return 0, err
		}
	}
	return s.r.Read(b)
}

// prefixWriter writes prefix with the first write to w: the status line goes out in one write
// with the first control message (bootstrap.AnnounceFlag).
type prefixWriter struct {
	w      io.Writer
	prefix []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if p.prefix == nil {
		return p.w.Write(b)
	}
	_, err := p.w.Write(append(p.prefix, b...))
	p.prefix = nil
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

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
	if err := fs.Parse(args); err != nil {
		return badFlags("serve", err)
	}
	ports, err := session.ParsePortRange(*portRange)
	if err != nil {
		return badFlags("serve", err)
	}
	// The peer outlives its client only long enough to clean up: a write to the control channel
	// after the client left must be an error it handles (removing partial files, the bench's
	// directory), not a SIGPIPE that kills it first; sshd's SIGHUP ends it the same way.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	if err := xfer.Serve(ctx, os.Stdin, os.Stdout, *pub, xfer.ServeOptions{SSHConnection: os.Getenv("SSH_CONNECTION"), Ports: ports,
		Tuning: tun, DebugLog: debugLog}); err != nil {
		fmt.Fprintf(stderr, "farwing serve: %v\n", err)
		return xfer.ExitCode(err)
	}
	return 0
}

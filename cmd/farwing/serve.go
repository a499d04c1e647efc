package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/internal/xfer"
)

// cmdServe is the remote peer, started over ssh by bootstrap: the control channel is stdin/stdout.
func cmdServe(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pub := fs.String("pub", "", "the client's ephemeral X25519 public key (set by farwing copy)")
	if err := fs.Parse(args); err != nil {
		return badFlags("serve", err)
	}
	if err := xfer.Serve(ctx, os.Stdin, os.Stdout, *pub, xfer.ServeOptions{SSHConnection: os.Getenv("SSH_CONNECTION")}); err != nil {
		fmt.Fprintf(stderr, "farwing serve: %v\n", err)
		return xfer.ExitCode(err)
	}
	return 0
}

//go:build farwing_peer

package main

import (
	"context"
	"fmt"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/tuning"
)

// The peer build (-tags farwing_peer: scripts/peers.sh) is what a release build carries and
// first contact installs on a remote host: `farwing serve` and nothing a client needs (copy,
// bench, doctor, lab, ssh's ProxyCommand), so that it is as small as it can be on the wire.

const usage = `farwing — the remote peer that farwing installs on a host over ssh

Usage:
  farwing serve     the remote peer (started over ssh by farwing copy, bench and doctor)
  farwing version

This build runs the remote end of a copy only. Copy from this host with a client build of
farwing (a release archive, or go install github.com/farwing/farwing/cmd/farwing@latest).
`

// clientCommands are the commands only a client has, with what a client build does with each.
var clientCommands = map[string]string{"copy": "copy", "cp": "copy", "bench": "bench a path", "doctor": "check a path",
	"lab": "run the lab", bootstrap.ProxyCommand: "carry ssh's connection (its ProxyCommand)"}

// clientCommand refuses a client's command in one line that says what this build is.
func clientCommand(_ context.Context, _ tuning.Settings, args []string) (code int, ok bool) {
	purpose, ok := clientCommands[args[0]]
	if !ok {
		return 0, false
	}
	fmt.Fprintf(stderr, "farwing %s: this is farwing's peer build (installed on hosts by first contact), which runs `farwing serve` only; use a client build of farwing to %s (a release archive or go install)\n",
		args[0], purpose)
	return exitUsage, true
}

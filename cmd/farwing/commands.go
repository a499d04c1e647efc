//go:build !farwing_peer

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/tuning"
)

const usage = `farwing — fast file copy over long, lossy networks

Usage:
  farwing copy [flags] SRC... [user@]host:DST     push local files to a host
  farwing copy [flags] [user@]host:SRC... DST     pull files from a host
  farwing bench [flags] [user@]host               compare with TCP and scp on the path to host
  farwing bench --lab [flags]                     the same through the built-in emulated WAN (root)
  farwing doctor [flags] [user@]host              check the path to host: ssh, UDP, buffers, MTU, CPU, clock
  farwing lab [flags] -- COMMAND                  run COMMAND through an emulated WAN (root)
  farwing version
  farwing serve                                   the remote peer (started over ssh)

Run 'farwing copy --help', 'farwing bench --help' and 'farwing doctor --help' for their flags.

Exit status:
  0 success; 1 other failure; 2 bad command line; 3 source missing or unreadable;
  4 destination not writable; 5 ssh failed (host, connection, authentication);
  6 no UDP path (no reply within 5 s) or it died; 7 verification failed;
  8 remote platform unsupported; 9 the peer could not be installed on the remote host;
  10 the other end broke the protocol (an unsafe or unrequested file name, a malformed
  message); 130 interrupted.
`

// clientCommand runs the commands of the client (all but serve, version and help), which the
// peer build leaves out (commands_peer.go); ok is false for a command that is none of them.
func clientCommand(ctx context.Context, tun tuning.Settings, args []string) (code int, ok bool) {
	switch args[0] {
	case "copy", "cp":
		defer tuning.StartProfile(tun.Profile, "client")()
		return cmdCopy(ctx, tun, os.Stdin, args[1:]), true
	case "bench":
		return cmdBench(ctx, tun, args[1:]), true
	case "doctor":
		return cmdDoctor(ctx, tun, args[1:]), true
	case "lab":
		return cmdLab(ctx, os.Stdin, args[1:]), true
	case bootstrap.ProxyCommand: // ssh's ProxyCommand, started by bootstrap (not listed)
		if len(args) != 3 {
			fmt.Fprintf(stderr, "farwing %s: needs HOST PORT (it is ssh's ProxyCommand)\n", args[0])
			return exitUsage, true
		}
		if err := bootstrap.Proxy(args[1], args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(stderr, oneLine(err))
			return 255, true
		}
		return 0, true
	}
	return 0, false
}

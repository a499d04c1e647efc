package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/xfer"
)

var stdout, stderr io.Writer = os.Stdout, os.Stderr

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

func run(args []string) int {
	xfer.Version = version
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The environment and standard input are read here, once; the commands get them as values.
	tun := tuning.FromEnv(os.Getenv)
	tun.Apply()
	switch args[0] {
	case "copy", "cp":
		defer tuning.StartProfile(tun.Profile, "client")()
		return cmdCopy(ctx, tun, os.Stdin, args[1:])
	case "serve":
		return cmdServe(ctx, tun, args[1:])
	case "bench":
		return cmdBench(ctx, tun, args[1:])
	case "doctor":
		return cmdDoctor(ctx, tun, args[1:])
	case "lab":
		return cmdLab(ctx, os.Stdin, args[1:])
	case bootstrap.ProxyCommand: // ssh's ProxyCommand, started by bootstrap (not listed)
		if len(args) != 3 {
			fmt.Fprintf(stderr, "farwing %s: needs HOST PORT (it is ssh's ProxyCommand)\n", args[0])
			return exitUsage
		}
		if err := bootstrap.Proxy(args[1], args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(stderr, oneLine(err))
			return 255
		}
		return 0
	case "version", "--version":
		return cmdVersion()
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "farwing: unknown command %q; run 'farwing help'\n", args[0])
	return exitUsage
}

// debugLog is the engines' debug logger (FARWING_DEBUG): a line on standard error per call.
func debugLog(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }

// oneLine is an error as the one line the CLI prints: nothing in it that a terminal would act on,
// since errors carry remote text.
func oneLine(err error) string { return escape.Text(strings.ReplaceAll(err.Error(), "\n", " ")) }

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parseFlags parses a command's flags: done with exit 0 for --help, done with exit 2 and one
// line (badFlags) for a bad flag, not done when the command goes on.
func parseFlags(fs *pflag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, pflag.ErrHelp):
		return 0, true
	}
	return badFlags(fs.Name(), err), true
}

// badFlags reports a command line pflag refused, in one line naming the problem and where the
// flags are listed (pflag prints nothing itself when errors are returned), and returns exit 2.
func badFlags(cmd string, err error) int {
	fmt.Fprintf(stderr, "farwing %s: %s; see 'farwing %s --help'\n", cmd, oneLine(err), cmd)
	return exitUsage
}

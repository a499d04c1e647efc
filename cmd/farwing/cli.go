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

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/xfer"
)

var stdout, stderr io.Writer = os.Stdout, os.Stderr

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
	case "serve":
		return cmdServe(ctx, tun, args[1:])
	case "version", "--version":
		return cmdVersion()
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	// The client's commands: absent from the peer build (commands.go, commands_peer.go).
	if code, ok := clientCommand(ctx, tun, args); ok {
		return code
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

package main

import (
	"context"
	"io"
	"os"

	"github.com/farwing/farwing/bench/lab/labcli"
)

// cmdLab runs a command through the built-in WAN emulator (see bench/lab), with the standard
// input run passes down; without a command, the user's $SHELL.
func cmdLab(_ context.Context, stdin io.Reader, args []string) int {
	return labcli.Main(args, labcli.Options{Stdin: stdin, Stdout: stdout, Stderr: stderr, Shell: os.Getenv("SHELL")})
}

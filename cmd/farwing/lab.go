package main

import (
	"context"

	"github.com/farwing/farwing/bench/lab/labcli"
)

// cmdLab runs a command through the built-in WAN emulator (see bench/lab).
func cmdLab(_ context.Context, args []string) int { return labcli.Main(args, stdout, stderr) }

// Command farwing-lab is `farwing lab` as a standalone binary, for use
// before (or without) the main farwing command.
package main

import (
	"os"

	"github.com/farwing/farwing/bench/lab/labcli"
)

func main() { os.Exit(labcli.Main(os.Args[1:], os.Stdout, os.Stderr)) }

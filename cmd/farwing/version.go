package main

import (
	"fmt"
	"runtime"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func cmdVersion() int {
	fmt.Fprintf(stdout, "farwing %s %s/%s %s\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return 0
}

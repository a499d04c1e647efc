//go:build !linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errLabLinux is why farwing lab and farwing bench --lab do not run here: the lab (bench/lab)
// joins two network namespaces with TUN devices, which only Linux has.
var errLabLinux = errors.New("the lab needs Linux (network namespaces, TUN); run it on a Linux machine")

// cmdLab is farwing lab where there is no lab: one line saying so, and the bad command line's exit.
func cmdLab(_ context.Context, _ io.Reader, _ []string) int {
	fmt.Fprintf(stderr, "farwing lab: %v\n", errLabLinux)
	return exitUsage
}

//go:build !linux

package main

import (
	"context"
	"fmt"

	"github.com/farwing/farwing/bench"
)

// labHere refuses --lab where there is no lab: check's error, a bad command line.
func labHere() error { return fmt.Errorf("--lab: %w", errLabLinux) }

// runLab is not reached: check has refused --lab.
func (b *benchOptions) runLab(context.Context, string, []string) (*bench.Ledger, error) {
	return nil, errLabLinux
}

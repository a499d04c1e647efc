//go:build !linux

package main

import (
	"context"
	"fmt"

	"github.com/farwing/farwing/bench"
)

// checkLab refuses --lab where there is no lab: check's error, a bad command line.
func (b *benchOptions) checkLab() error { return fmt.Errorf("--lab: %w", errLabLinux) }

// runLab is not reached: checkLab has refused --lab.
func (b *benchOptions) runLab(context.Context, string, []string) (*bench.Ledger, error) {
	return nil, errLabLinux
}

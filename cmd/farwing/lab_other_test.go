//go:build !linux

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestLabNeedsLinux: without Linux, farwing lab and farwing bench --lab say in one line that the
// lab needs it, with the bad command line's exit, and start nothing.
func TestLabNeedsLinux(t *testing.T) {
	for _, args := range [][]string{
		{"lab"},
		{"lab", "--rate", "400M", "--", "true"},
		{"bench", "--lab"},
		{"bench", "--lab", "--rows", "farwing,fairness,halving"},
	} {
		var errs bytes.Buffer
		stderr = &errs
		code := run(args)
		stderr = os.Stderr
		msg := strings.TrimSuffix(errs.String(), "\n")
		if code != 2 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "farwing "+args[0]+": ") || !strings.Contains(msg, "needs Linux") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line saying the lab needs Linux", args, code, errs.String())
		}
	}
}

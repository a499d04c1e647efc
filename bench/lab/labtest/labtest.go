//go:build linux

// Package labtest holds test helpers for package lab, kept apart so that
// binaries using lab do not link the testing package.
package labtest

import (
	"testing"

	"github.com/farwing/farwing/bench/lab"
)

// Skip skips t with the reason when this machine cannot run a lab (not
// root, no /dev/net/tun, no `ip`).
func Skip(t testing.TB) {
	t.Helper()
	if err := lab.Check(); err != nil {
		t.Skipf("skipping lab test: %v", err)
	}
}

// Start skips when no lab of cfg's kind can run (a veth lab needs no TUN:
// lab.CheckVeth), otherwise starts one and closes it when the test ends.
func Start(t testing.TB, cfg lab.Config) *lab.Lab {
	t.Helper()
	if cfg.Veth {
		if err := lab.CheckVeth(); err != nil {
			t.Skipf("skipping veth lab test: %v", err)
		}
	} else {
		Skip(t)
	}
	l, err := lab.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab close: %v", err)
		}
		if err := l.Err(); err != nil {
			t.Errorf("lab forwarding: %v", err)
		}
	})
	return l
}

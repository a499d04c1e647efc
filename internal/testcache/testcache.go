// Package testcache keeps tests' writers out of the user's cache directory: a test binary's
// TestMain calls Main, and the registry of partial files (copy.SweepPartials) goes to a directory
// of the test run's own, removed at the end.
package testcache

import (
	"os"
	"testing"
)

// Main points XDG_CACHE_HOME at a fresh directory, runs the tests and exits with their status.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "farwing-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

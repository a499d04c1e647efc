package xfer

import (
	"os"
	"testing"
)

// TestMain keeps the tests' writers out of the user's cache directory: their registry of partial
// files (copy.SweepPartials) goes to a directory of the test run's own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "farwing-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

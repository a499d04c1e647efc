package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary the end-to-end tests built (farwingBin) once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

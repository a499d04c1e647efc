//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary the end-to-end tests built (farwingBin) once they are done. With
// FARWING_TEST_CUBIC_PROXY set, the test binary is instead ssh's ProxyCommand over a CUBIC socket
// (cubicProxy), for TestLabParallelUpload.
func TestMain(m *testing.M) {
	if os.Getenv("FARWING_TEST_CUBIC_PROXY") != "" && len(os.Args) == 3 {
		os.Exit(cubicProxy(os.Args[1], os.Args[2]))
	}
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

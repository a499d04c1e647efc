//go:build !linux

package xfer

import (
	"runtime"
	"syscall"
)

// maxRSS is this process's peak resident memory in bytes, from getrusage: bytes on macOS, KiB on
// the BSDs.
func maxRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}

//go:build !linux

package xfer

import "runtime"

// rssBytes converts getrusage's ru_maxrss: bytes on macOS, KiB on the BSDs (taken as KiB).
func rssBytes(maxrss int64) int64 {
	if runtime.GOOS == "darwin" {
		return maxrss
	}
	return maxrss << 10
}

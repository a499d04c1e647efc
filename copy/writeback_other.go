//go:build !linux

package copy

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback is a no-op where sync_file_range does not exist; fsync does all the work.
func startWriteback(*os.File, int64, int64) {}

// setDirect: direct I/O is used on Linux only.
func setDirect(*os.File, bool) bool { return false }

func directOK([]byte, int64) bool { return false }

// dataSync: only direct I/O calls it, and that is Linux only.
func dataSync(int) {}

// syncData commits fd's data (a checkpoint counts only synced data).
func syncData(fd int) error { return unix.Fsync(fd) }

package copy

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to disk without waiting for
// it, so that the fsync before the rename finds little left to do: the disk works while the
// transfer runs instead of after it.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// setDirect turns O_DIRECT on or off for f and reports whether it is now on (unchanged when the
// kernel refuses). Filesystems that do not support it (tmpfs, some FUSE ones) refuse with EINVAL,
// and the writer stays buffered.
func setDirect(f *os.File, on bool) bool {
	fd := uintptr(f.Fd())
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return !on
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	if _, err := unix.FcntlInt(fd, unix.F_SETFL, fl); err != nil {
		return !on
	}
	return on
}

// directOK reports whether data can be written at off with direct I/O.
func directOK(data []byte, off int64) bool {
	return len(data) > 0 && len(data)%directAlign == 0 && off%directAlign == 0 &&
		uintptr(unsafe.Pointer(&data[0]))%directAlign == 0
}

// dataSync commits fd's data and the metadata needed to read it back (fdatasync).
func dataSync(fd int) { _ = unix.Fdatasync(fd) }

// syncData is dataSync that reports its error (a checkpoint counts only synced data).
func syncData(fd int) error { return unix.Fdatasync(fd) }

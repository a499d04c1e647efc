package privdir

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/farwing/farwing/internal/escape"
)

// OpenRegular opens p, a file of one of Farwing's own directories (a path record, a bench's file),
// for reading where it is a regular file, not through a symbolic link and without blocking on a
// FIFO or a device on the way; it returns the file's own status (fstat).
func OpenRegular(p string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", escape.Quote(filepath.Base(p)))
	}
	return f, fi, nil
}

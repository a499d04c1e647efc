// Package privdir checks the directories Farwing keeps its own state in (its cache, the shared ssh
// connections' sockets, the partial-file registry, path records): a directory another user can
// write, or one that is a symbolic link, could hand this user a socket, a file or a program of
// someone else's, so it is refused with an error naming it and the fix.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotPrivate is what Check's errors wrap.
var ErrNotPrivate = errors.New("not a private directory")

// Check reports whether dir is a directory (not a symbolic link to one) owned by this user that no
// other user may write (no group or other write bit). Its error names dir, what is wrong and what
// to do.
func Check(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return check(dir, fi, os.Getuid())
}

func check(dir string, fi fs.FileInfo, uid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link; remove it, farwing makes the directory itself", ErrNotPrivate, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory; remove it, farwing makes the directory itself", ErrNotPrivate, dir)
	case !ok:
		return fmt.Errorf("%w: %s: its owner cannot be read", ErrNotPrivate, dir)
	case int(st.Uid) != uid:
		return fmt.Errorf("%w: %s belongs to user id %d, not to this user (%d); remove it, farwing makes the directory itself",
			ErrNotPrivate, dir, st.Uid, uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: %s (mode %04o) can be written by other users; run chmod go-w %s",
			ErrNotPrivate, dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// Make creates dir where it is missing (mode 0700, and its missing parents too) and checks it
// (Check).
func Make(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		if cerr := Check(dir); cerr != nil && errors.Is(cerr, ErrNotPrivate) {
			return cerr // something else stands at dir's name: say what
		}
		return err
	}
	return Check(dir)
}

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
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrNotPrivate is what Check's errors wrap.
var ErrNotPrivate = errors.New("not a private directory")

// Check reports whether dir is a directory (not a symbolic link to one) owned by this user that no
// other user may write (no group or other write bit), below directories no other user can rename
// it out of (ancestors). Its error names the directory at fault, what is wrong and what to do.
func Check(dir string) error {
	if err := checkSelf(dir); err != nil {
		return err
	}
	return ancestors(dir, os.Getuid(), privateGroup)
}

// checkSelf is Check without the directories above dir.
func checkSelf(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return check(dir, fi, os.Getuid())
}

// ancestors checks every directory above dir (its real path: links resolved, as OpenSSH's
// safe_path does) the way OpenSSH checks the directories above a key file: owned by root or this
// user, and writable by no one else unless sticky (/tmp) or, for the group, where the group is
// this user's own (a user-private group, umask 002's usual setting). Another user who could
// write one could rename dir away and put a directory of theirs in its place, after any check of
// dir itself.
func ancestors(dir string, uid int, private func(gid uint32) bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return err
	}
	for p := parent; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		sticky := fi.Mode()&fs.ModeSticky != 0
		switch {
		case !ok:
			return fmt.Errorf("%w: %s, above %s: its owner cannot be read", ErrNotPrivate, p, dir)
		case st.Uid != 0 && int(st.Uid) != uid:
			return fmt.Errorf("%w: %s, above %s, belongs to user id %d, who could replace what is below it; keep farwing's cache in a directory of your own (XDG_CACHE_HOME)",
				ErrNotPrivate, p, dir, st.Uid)
		case !sticky && (fi.Mode()&0o002 != 0 || fi.Mode()&0o020 != 0 && !private(st.Gid)):
			return fmt.Errorf("%w: %s (mode %04o), above %s, can be written by other users, who could replace what is below it; run chmod go-w %s",
				ErrNotPrivate, p, fi.Mode().Perm(), dir, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// privateGroup reports whether gid is this user's own group: the user's primary group, named as
// the user (a user-private group).
func privateGroup(gid uint32) bool {
	u, err := user.Current()
	if err != nil || u.Gid != strconv.FormatUint(uint64(gid), 10) {
		return false
	}
	g, err := user.LookupGroupId(u.Gid)
	return err == nil && g.Name == u.Username
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

// MakeIn is Make for name inside parent, a directory that has just passed Make or Check (or
// MakeIn): it creates parent/name where it is missing (mode 0700) and checks it, with the same
// errors, but not the directories above it again: those are parent, which Check found private,
// and the ones Check walked above parent. It returns parent/name.
func MakeIn(parent, name string) (string, error) {
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		if cerr := checkSelf(dir); cerr != nil && errors.Is(cerr, ErrNotPrivate) {
			return "", cerr // something else stands at dir's name: say what
		}
		return "", err
	}
	if err := checkSelf(dir); err != nil {
		return "", err
	}
	return dir, nil
}

package copy

// --delete: after a tree copy that succeeded, what the destination has below the copy's
// directories and the source does not.

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// Deletion is one entry Delete removed (or, dry, would remove): its name as the file list would
// name it, and where it is.
type Deletion struct {
	Name string
	Path string
	Dir  bool
}

// Delete removes, in each directory of files (the list of a copy that succeeded: every entry in
// place), the entries the list does not have, as rsync --delete does: a directory with all below
// it, deepest first; never one that filter excludes (the rules protect what they leave out at the
// destination, as rsync's do by default), and never a directory that holds such an entry (it stays,
// with what is protected in it); never a temporary file or resume record of a copy (the sweep's).
// It touches only what is below the destination's directories of the list: each is opened from
// the target's root one element at a time without following a symbolic link (openat,
// O_NOFOLLOW), what it holds is looked at and removed through that descriptor (fstatat,
// unlinkat), and a directory to remove is opened the same way, so a symbolic link is removed as
// a link, never followed; a directory of the list that is a link now stops it (ErrDest), and one
// that is not there is passed over. An empty list deletes nothing. With dry it removes nothing and reports what it would remove. done (nil:
// none) is told of each entry as it is removed; the count is returned.
func (t *Target) Delete(files []File, filter *Filter, dry bool, done func(Deletion)) (int, error) {
	if len(files) == 0 {
		return 0, nil
	}
	listed := make(map[string]bool, len(files))
	for _, f := range files {
		listed[f.Name] = true
	}
	d := &deleter{t: t, filter: filter, dry: dry, done: done}
	root, err := unix.Open(t.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrDest, t.root, err)
	}
	defer unix.Close(root)
	dirs := &dirs{root: t.root, rootFD: root}
	for _, f := range files {
		if !f.Dir {
			continue
		}
		fd, err := dirs.walk(t.rel(f.Name), 0, false)
		if errors.Is(err, unix.ENOENT) {
			continue // not there (yet: a dry run): nothing in it to delete
		}
		if err != nil {
			return d.n, err
		}
		err = d.extraneous(fd, f.Name, listed)
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return d.n, err
		}
	}
	return d.n, nil
}

// deleter is one run of Delete.
type deleter struct {
	t      *Target
	filter *Filter
	dry    bool
	done   func(Deletion)
	n      int
}

// extraneous removes what the directory dirfd (the list's dir) holds that the list does not.
func (d *deleter) extraneous(dirfd int, dir string, listed map[string]bool) error {
	names, err := readNames(dirfd)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(d.t.Path(dir)), err)
	}
	for _, e := range names {
		name := dir + "/" + e
		if listed[name] || isPart(e) || isRecord(e) {
			continue
		}
		if _, err := d.remove(dirfd, e, name); err != nil {
			return err
		}
	}
	return nil
}

// remove removes the entry base of dirfd (name in the list's terms) unless the filter protects
// it, a directory with what is below it; it reports whether the entry is gone. A name longer than
// a path stops it (ErrDest): each level of a directory being removed keeps its name, so a chain
// of directories deeper than a path (which another user can make below the destination) would
// cost memory of its depth squared.
func (d *deleter) remove(dirfd int, base, name string) (bool, error) {
	if len(name) > maxName {
		dir, _, _ := cutLast(name[:maxName/16])
		return false, fmt.Errorf("%w: cannot delete what is below %s: a name there is longer than %d bytes, which the copy's names never are; delete it by hand",
			ErrDest, escape.Text(d.t.Path(dir)), maxName)
	}
	p := d.t.Path(name)
	st, err := statAt(dirfd, base, false)
	if errors.Is(err, unix.ENOENT) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(p), err)
	}
	dir := st.IsDir()
	if d.filter.Excluded(name, dir) {
		return false, nil
	}
	if dir {
		fd, err := openDirAt(dirfd, base, 0, false)
		if err != nil {
			return false, fmt.Errorf("%w: %s changed while it was deleted (%v); nothing below it was followed", ErrDest, escape.Text(p), err)
		}
		names, err := readNames(fd)
		all := err == nil
		for _, e := range names {
			gone, rerr := d.remove(fd, e, name+"/"+e)
			if rerr != nil {
				unix.Close(fd)
				return false, rerr
			}
			all = all && gone
		}
		unix.Close(fd)
		if err != nil {
			return false, fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(p), err)
		}
		if !all {
			return false, nil // it holds what the rules protect: it stays, as in rsync
		}
	}
	if !d.dry {
		flags := 0
		if dir {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(dirfd, base, flags); err != nil && !errors.Is(err, unix.ENOENT) {
			return false, fmt.Errorf("%w: cannot delete %s: %v", ErrDest, escape.Text(p), err)
		}
	}
	d.n++
	if d.done != nil {
		d.done(Deletion{Name: name, Path: filepath.Clean(p), Dir: dir})
	}
	return true, nil
}

// isRecord reports whether name is a resume record's name (resume.go), exactly.
func isRecord(name string) bool {
	_, ok := stem(name, recSuffix)
	return ok
}

package copy

// This file holds target resolution: where a transfer's files land (scp's rules) and the
// checks of the destination before anything is written.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// Target is where a transfer's files land, resolved with scp's rules. Every file lands below
// root, which the user named (directly, or as the parent of the destination); nothing below root
// is reached through a symbolic link.
type Target struct {
	root string
	into bool   // the destination is an existing directory: files go inside it under their names
	base string // !into: the name that replaces the transfer's top-level name
	// fresh are top-level names only the remote chose (MatchRequest): the copy must make them.
	fresh map[string]bool
}

// Fresh marks top-level names of the list that only the remote chose (MatchRequest's answer for
// a request of "host:", "~", "." or "x/.."): each must be made by this copy, and one that stands
// at the destination already is refused (ErrDest), now and again when the writer makes it. A
// destination that did not exist gets the client's name (scp's rule), which is the client's own.
func (t *Target) Fresh(names []string) error {
	for _, n := range names {
		if t.fresh == nil {
			t.fresh = map[string]bool{}
		}
		t.fresh[n] = true
		if _, err := os.Lstat(t.Path(n)); !errors.Is(err, os.ErrNotExist) {
			return t.freshErr(n)
		}
	}
	return nil
}

// freshErr is the error for a name only the remote chose that the destination has already.
func (t *Target) freshErr(name string) error {
	return fmt.Errorf("%w: the remote named what this request brings %s, and %s exists already; a name only the remote knows "+
		"(a request of its home directory, \".\" or \"x/..\") never lands on what is there: name the remote directory (host:/home/NAME) or copy into a new directory",
		ErrDest, escape.Quote(name), escape.Text(t.Path(name)))
}

// ResolveTarget applies scp's rules for DST: an existing directory (or a path ending in "/")
// receives the sources under their own names; otherwise a single source is written as DST.
func ResolveTarget(dst string, files []File) (*Target, error) {
	t, err := resolveTarget(dst, files)
	if err != nil {
		return nil, err
	}
	return t, t.check(files, nil)
}

// resolveTarget is ResolveTarget without the check of what stands at the destination.
func resolveTarget(dst string, files []File) (*Target, error) {
	if err := checkRegistry(); err != nil {
		return nil, err
	}
	if dst == "" {
		dst = "."
	}
	tops := map[string]bool{}
	topIsDir := false
	for _, f := range files {
		top, _, _ := strings.Cut(f.Name, "/")
		tops[top] = true
		if f.Name == top && f.Dir {
			topIsDir = true
		}
	}
	st, err := os.Stat(dst)
	switch {
	case err == nil && st.IsDir():
		if err := probeWritable(dst); err != nil {
			return nil, err
		}
		return &Target{root: dst, into: true}, nil
	case err == nil:
		if len(tops) > 1 {
			return nil, fmt.Errorf("%w: %s is not a directory (several sources need a directory)", ErrDest, dst)
		}
		if topIsDir {
			return nil, fmt.Errorf("%w: cannot replace file %s with a directory", ErrDest, dst)
		}
	case errors.Is(err, os.ErrNotExist):
		if HasTrailingSlash(dst) {
			return nil, fmt.Errorf("%w: directory %s does not exist", ErrDest, dst)
		}
		if len(tops) > 1 {
			return nil, fmt.Errorf("%w: directory %s does not exist (several sources need a directory)", ErrDest, dst)
		}
	default:
		return nil, fmt.Errorf("%w: %s: %v", ErrDest, dst, unwrapPath(err))
	}
	parent, base := splitDest(dst)
	if base == "." || base == ".." {
		return nil, fmt.Errorf("%w: %s does not exist (and %q names no new entry of %s)", ErrDest, dst, base, parent)
	}
	pst, err := os.Stat(parent)
	if err != nil || !pst.IsDir() {
		return nil, fmt.Errorf("%w: directory %s does not exist", ErrDest, parent)
	}
	if err := probeWritable(parent); err != nil {
		return nil, err
	}
	return &Target{root: parent, base: base}, nil
}

// splitDest splits dst, which is not a directory, at its last slash into the directory it is in
// and its name, as the system resolves them: the text before the slash is never cleaned, since
// "missing/.." is in "missing", which does not exist (cleaned, it named the directory "missing"
// is in, which the copy then became, and --delete emptied), and "l/../x" is beside what the link
// l points to.
func splitDest(dst string) (parent, base string) {
	i := strings.LastIndexByte(dst, '/')
	switch {
	case i < 0:
		return ".", dst
	case i == 0:
		return "/", dst[1:]
	}
	return dst[:i], dst[i+1:]
}

// rel is where the file called name (a plan name) is written, relative to root, slash-separated.
func (t *Target) rel(name string) string {
	if t.into {
		return name
	}
	if _, rest, ok := strings.Cut(name, "/"); ok {
		return t.base + "/" + rest
	}
	return t.base
}

// Path is where the file called name (a plan name) is written.
func (t *Target) Path(name string) string {
	return filepath.Join(t.root, filepath.FromSlash(t.rel(name)))
}

// check refuses, before anything is sent, a destination that the writer would refuse: a
// directory of a name that is a symbolic link or not a directory, a directory where a file goes
// or the other way round, a read-only file to replace (unless it is one of have: files already
// there, which are not replaced). The writer checks again as it writes.
func (t *Target) check(files []File, have []int) error {
	kept := map[int]bool{}
	for _, i := range have {
		kept[i] = true
	}
	okDir := map[string]bool{"": true}
	var checkDir func(rel string) error
	checkDir = func(rel string) error {
		if okDir[rel] {
			return nil
		}
		if dir, _, ok := cutLast(rel); ok {
			if err := checkDir(dir); err != nil {
				return err
			}
		} else if err := checkDir(""); err != nil {
			return err
		}
		st, err := os.Lstat(filepath.Join(t.root, filepath.FromSlash(rel)))
		if err == nil && !st.IsDir() {
			return fmt.Errorf("%w: refusing to write below %s: it is a symbolic link or not a directory", ErrDest,
				escape.Text(filepath.Join(t.root, rel)))
		}
		okDir[rel] = true
		return nil
	}
	for i, f := range files {
		rel := t.rel(f.Name)
		if dir, _, ok := cutLast(rel); ok {
			if err := checkDir(dir); err != nil {
				return err
			}
		}
		p := filepath.Join(t.root, filepath.FromSlash(rel))
		if kept[i] {
			continue
		}
		if !f.Dir {
			if err := checkReplace(unix.AT_FDCWD, p, p, f.what()); err != nil {
				return err
			}
			continue
		}
		st, err := os.Lstat(p)
		switch {
		case err != nil:
		case st.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%w: refusing to write below %s: it is a symbolic link or not a directory", ErrDest, escape.Text(p))
		case !st.IsDir():
			return fmt.Errorf("%w: cannot replace %s with a directory", ErrDest, escape.Text(p))
		default:
			okDir[rel] = true
		}
	}
	return nil
}

func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".farwing-probe-*")
	if err != nil {
		return fmt.Errorf("%w: cannot write to %s: %v", ErrDest, dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

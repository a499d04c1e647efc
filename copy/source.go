package copy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/farwing/farwing/internal/escape"
)

// ErrSource marks problems with the source files (missing, unreadable, a directory without -r).
var ErrSource = errors.New("source")

// Sources is a resolved list of source files: the plan's File entries and where each lives on disk.
type Sources struct {
	Files []File
	Paths []string // local path of each entry of Files
}

// Collect resolves source arguments the way scp does: a file is sent under its base name; a
// directory needs recursive and is sent as base/... . The sources are only read, never changed.
func Collect(args []string, recursive bool) (*Sources, error) {
	s := &Sources{}
	seen := map[string]bool{}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrSource, a, unwrapPath(err))
		}
		base := filepath.Base(filepath.Clean(a))
		if base == "/" || base == "." || base == ".." {
			abs, _ := filepath.Abs(a)
			base = filepath.Base(abs)
		}
		if seen[base] {
			return nil, fmt.Errorf("%w: two sources are both named %q", ErrSource, base)
		}
		seen[base] = true
		switch {
		case st.Mode().IsRegular():
			if err := readable(a); err != nil {
				return nil, err
			}
			if err := s.add(base, a, st); err != nil {
				return nil, err
			}
		case st.IsDir():
			if !recursive {
				return nil, fmt.Errorf("%w: %s is a directory (use -r to copy directories)", ErrSource, a)
			}
			if err := s.walk(a, base); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: %s is not a regular file", ErrSource, a)
		}
	}
	return s, nil
}

// add lists the file p under name, which must pass ValidName: a name the receiver would refuse is
// refused here, before anything is sent.
func (s *Sources) add(name, p string, st fs.FileInfo) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("%w: %s: cannot be sent (%v); rename it or leave it out", ErrSource, escape.Text(p), err)
	}
	f := File{Name: name, Mode: st.Mode().Perm(), MTime: st.ModTime().UnixNano()}
	if st.IsDir() {
		f.Dir = true
	} else {
		f.Size = st.Size()
	}
	s.Files = append(s.Files, f)
	s.Paths = append(s.Paths, p)
	return nil
}

func (s *Sources) walk(root, base string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrSource, p, unwrapPath(err))
		}
		rel, _ := filepath.Rel(root, p)
		name := base
		if rel != "." {
			name = base + "/" + filepath.ToSlash(rel)
		}
		st, err := d.Info()
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrSource, p, unwrapPath(err))
		}
		switch {
		case d.IsDir():
			return s.add(name, p, st) // directories are created even when empty
		case st.Mode().IsRegular():
			if err := readable(p); err != nil {
				return err
			}
			return s.add(name, p, st)
		default:
			// Symlinks, devices, sockets: skipped like scp -r skips special files.
		}
		return nil
	})
}

func readable(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, p, unwrapPath(err))
	}
	return f.Close()
}

// Open returns an Opener over the sources' paths.
func (s *Sources) Open() Opener {
	return func(i int) (io.ReaderAt, io.Closer, error) {
		f, err := os.Open(s.Paths[i])
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrSource, s.Paths[i], unwrapPath(err))
		}
		return f, f, nil
	}
}

// unwrapPath drops the "op path:" prefix of a *fs.PathError, since callers name the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// HasTrailingSlash reports whether a path argument ends in a separator.
func HasTrailingSlash(p string) bool { return strings.HasSuffix(p, "/") }

package copy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// ErrSource marks problems with the source files (missing, unreadable, a directory without -r).
var ErrSource = errors.New("source")

// Sources is a resolved list of source entries: the plan's File entries and where each lives on
// disk, and what was left out.
type Sources struct {
	Files   []File
	Paths   []string // local path of each entry of Files
	Skipped Skipped  // what Collect left out; the caller warns (Skipped.Warning)
}

// CollectOptions are how Collect walks the sources.
type CollectOptions struct {
	Recursive bool // -r: directories, with everything below them
	// Follow (-L) sends what a symbolic link below a directory points to, as rsync -L does;
	// otherwise the link is sent as a link, its target text unchanged (rsync -a).
	Follow bool
	// HardLinks (-H): a regular file whose device and inode were already listed is sent as a
	// hard link to that earlier entry, not as a second copy of its bytes.
	HardLinks bool
}

// Skipped counts what Collect leaves out, with one path of each kind as an example: devices,
// sockets and FIFOs (Special), and with Follow the symbolic links that lead back to a directory
// they are in (Loops).
type Skipped struct {
	Special        int    `json:"special,omitempty"`
	SpecialExample string `json:"special_example,omitempty"`
	Loops          int    `json:"loops,omitempty"`
	LoopExample    string `json:"loop_example,omitempty"`
}

// Warning is the one line that tells the user what was skipped ("" when nothing was). The
// example paths are escaped: on a pull they are the remote's.
func (s Skipped) Warning() string {
	var parts []string
	if s.Special > 0 {
		parts = append(parts, fmt.Sprintf("skipped %d special file(s) (devices, sockets, FIFOs), e.g. %s", s.Special, escape.Text(s.SpecialExample)))
	}
	if s.Loops > 0 {
		parts = append(parts, fmt.Sprintf("skipped %d symbolic link(s) that lead back to a directory they are in (-L), e.g. %s", s.Loops, escape.Text(s.LoopExample)))
	}
	return strings.Join(parts, "; ")
}

// Check bounds a peer's report (a pull's remote sends its Skipped): counts not negative, example
// paths not longer than a path.
func (s Skipped) Check() error {
	if s.Special < 0 || s.Loops < 0 || len(s.SpecialExample) > maxName || len(s.LoopExample) > maxName {
		return fmt.Errorf("%w: a malformed report of skipped files", ErrName)
	}
	return nil
}

func (s *Skipped) special(p string) {
	if s.Special == 0 {
		s.SpecialExample = p
	}
	s.Special++
}

func (s *Skipped) loop(p string) {
	if s.Loops == 0 {
		s.LoopExample = p
	}
	s.Loops++
}

// Collect resolves source arguments the way scp does: a file is sent under its base name; a
// directory needs o.Recursive and is sent as base/... . A symbolic link given as an argument is
// followed, as scp and rsync -a do with "link" (not "link/"): what it points to is sent under the
// link's name. Below a directory, symbolic links are sent as links (or followed with o.Follow),
// and devices, sockets and FIFOs are left out and counted in Skipped. The sources are only
// read, never changed.
func Collect(args []string, o CollectOptions) (*Sources, error) {
	c := &collector{o: o, s: &Sources{}, inodes: map[devIno]string{}}
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
			if err := c.file(a, base, st); err != nil {
				return nil, err
			}
		case st.IsDir():
			if !o.Recursive {
				return nil, fmt.Errorf("%w: %s is a directory (use -r to copy directories)", ErrSource, a)
			}
			if err := c.dir(a, base, st, nil); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: %s is not a regular file", ErrSource, a)
		}
	}
	return c.s, nil
}

// devIno identifies a file on the sending side.
type devIno struct{ dev, ino uint64 }

func idOf(st fs.FileInfo) devIno {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return devIno{uint64(sys.Dev), uint64(sys.Ino)}
	}
	return devIno{}
}

// collector walks the sources for Collect.
type collector struct {
	o      CollectOptions
	s      *Sources
	inodes map[devIno]string // HardLinks: the first name listed for a file with several links
	blocks uint64            // the blocks of the regular files listed so far (at most MaxBlocks)
}

// add lists the entry f found at p; its name must pass ValidName: a name the receiver would
// refuse is refused here, before anything is sent.
func (c *collector) add(f File, p string) error {
	if err := ValidName(f.Name); err != nil {
		return fmt.Errorf("%w: %s: cannot be sent (%v); rename it or leave it out", ErrSource, escape.Text(p), err)
	}
	// The name is the end of the path (base name and below): one string holds both, which halves
	// what a list of long names costs the sending side.
	if n := len(p) - len(f.Name); n > 0 && p[n-1] == os.PathSeparator && p[n:] == f.Name {
		f.Name = p[n:]
	}
	c.s.Files = append(c.s.Files, f)
	c.s.Paths = append(c.s.Paths, p)
	return nil
}

// file lists the regular file p (st: its own or, followed, its target's) as name: as a hard link
// to an earlier entry when HardLinks finds its inode listed already.
func (c *collector) file(p, name string, st fs.FileInfo) error {
	f := File{Name: name, Mode: st.Mode().Perm(), MTime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && c.o.HardLinks && sys.Nlink > 1 {
		id := idOf(st)
		if first, ok := c.inodes[id]; ok {
			f.Hard = first
			return c.add(f, p)
		}
		c.inodes[id] = name
	}
	if err := readable(p); err != nil {
		return err
	}
	f.Size = st.Size()
	c.blocks += blocksOf(f.Size)
	if uint64(f.Size) > MaxSize || c.blocks > MaxBlocks {
		return fmt.Errorf("%w: %s: the sources add up to more than the %d bytes (4 PiB) one copy can hold; copy them in parts",
			ErrSource, escape.Text(p), int64(MaxSize))
	}
	id := idOf(st)
	f.Dev, f.Ino = id.dev, id.ino
	return c.add(f, p)
}

// dir lists the directory p (st) as name and everything below it, in name order. ancestors are
// the directories above it in this walk: a directory reached again below itself (a link with
// Follow, a bind mount) is a loop and is skipped.
func (c *collector) dir(p, name string, st fs.FileInfo, ancestors []devIno) error {
	if err := c.add(File{Name: name, Mode: st.Mode().Perm(), MTime: st.ModTime().UnixNano(), Dir: true}, p); err != nil {
		return err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, p, unwrapPath(err))
	}
	ancestors = append(ancestors, idOf(st))
	for _, e := range ents {
		cp, cn := filepath.Join(p, e.Name()), name+"/"+e.Name()
		lst, err := os.Lstat(cp)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrSource, cp, unwrapPath(err))
		}
		if err := c.entry(cp, cn, lst, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// entry lists what stands at p (lst: its Lstat) below a directory.
func (c *collector) entry(p, name string, lst fs.FileInfo, ancestors []devIno) error {
	st := lst
	if lst.Mode()&fs.ModeSymlink != 0 {
		if !c.o.Follow {
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrSource, p, unwrapPath(err))
			}
			if err := ValidLink(target); err != nil {
				return fmt.Errorf("%w: %s: cannot be sent (%v); leave it out or copy with -L", ErrSource, escape.Text(p), err)
			}
			return c.add(File{Name: name, Mode: lst.Mode().Perm(), MTime: lst.ModTime().UnixNano(), Link: target}, p)
		}
		var err error
		if st, err = os.Stat(p); err != nil {
			target, _ := os.Readlink(p)
			return fmt.Errorf("%w: %s is a symbolic link to %s, which -L cannot follow (%v); copy without -L to keep it as a link",
				ErrSource, escape.Text(p), escape.Quote(target), unwrapPath(err))
		}
	}
	switch {
	case st.IsDir():
		id := idOf(st)
		for _, a := range ancestors {
			if a == id {
				c.s.Skipped.loop(p)
				return nil
			}
		}
		return c.dir(p, name, st, ancestors)
	case st.Mode().IsRegular():
		return c.file(p, name, st)
	default:
		c.s.Skipped.special(p) // a device, socket or FIFO: rsync -a without -D leaves them out too
		return nil
	}
}

// readable checks that this process may read the file p, so that an unreadable file stops the
// copy before anything is sent: with faccessat (effective ids, ACLs), one system call where an
// open and a close were two, and a descriptor (a walk of 100,000 files on tmpfs: 1.3-1.7 s before,
// 1.1 s after). A file that
// passes and still cannot be opened (a network file system's own refusal) is reported by the
// reader, naming it.
func readable(p string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, p, err)
	}
	return nil
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

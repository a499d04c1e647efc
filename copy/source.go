package copy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

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

	// What Open needs to open each entry as it was listed: the source arguments, and for each
	// entry the argument it was found under; whether links below them were followed.
	args   []string
	argOf  []int32
	follow bool
	// relative: the names are relative to the one argument, a directory (--files-from), not
	// headed by its base name.
	relative bool
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
	// Filter leaves out the entries its rules exclude, and does not descend into an excluded
	// directory (nil: none).
	Filter *Filter
	// FilesFrom (--files-from), when not nil, lists what to send: paths relative to the one
	// source argument, a directory (ReadFilesFrom; a peer's list is checked here again). They
	// keep these names, with the directories above them; a listed directory brings what is
	// below it only with Recursive.
	FilesFrom []string
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
	c := &collector{o: o, s: &Sources{args: args, follow: o.Follow}, inodes: map[devIno]string{}}
	if o.FilesFrom != nil {
		return c.s, c.filesFrom(args)
	}
	seen := map[string]bool{}
	for ai, a := range args {
		c.arg = int32(ai)
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
		if o.Filter.Excluded(base, st.IsDir()) {
			continue
		}
		switch {
		case st.Mode().IsRegular():
			if err := c.file(a, base, st); err != nil {
				return nil, err
			}
		case st.IsDir():
			if !o.Recursive {
				return nil, fmt.Errorf("%w: %s is a directory (use -r to copy directories)", ErrSource, a)
			}
			fd, err := openDir(unix.AT_FDCWD, a, a, st, true)
			if err != nil {
				return nil, err
			}
			err = c.dir(a, base, st, fd, nil)
			unix.Close(fd)
			if err != nil {
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
	switch sys := st.Sys().(type) {
	case *syscall.Stat_t:
		return devIno{uint64(sys.Dev), uint64(sys.Ino)}
	case *unix.Stat_t:
		return devIno{uint64(sys.Dev), uint64(sys.Ino)}
	}
	return devIno{}
}

// links is the number of hard links of st's file (0: unknown).
func links(st fs.FileInfo) uint64 {
	switch sys := st.Sys().(type) {
	case *syscall.Stat_t:
		return uint64(sys.Nlink)
	case *unix.Stat_t:
		return uint64(sys.Nlink)
	}
	return 0
}

// collector walks the sources for Collect.
type collector struct {
	o      CollectOptions
	s      *Sources
	inodes map[devIno]string // HardLinks: the first name listed for a file with several links
	blocks uint64            // the blocks of the regular files listed so far (at most MaxBlocks)
	arg    int32             // the index of the argument being walked
	// listed are the names listed so far, with --files-from only, whose paths can overlap.
	listed map[string]bool
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
	if c.listed != nil {
		c.listed[f.Name] = true
	}
	c.s.Files = append(c.s.Files, f)
	c.s.Paths = append(c.s.Paths, p)
	c.s.argOf = append(c.s.argOf, c.arg)
	return nil
}

// file lists the regular file p (st: its own or, followed, its target's) as name: as a hard link
// to an earlier entry when HardLinks finds its inode listed already.
func (c *collector) file(p, name string, st fs.FileInfo) error {
	f := File{Name: name, Mode: st.Mode().Perm(), MTime: st.ModTime().UnixNano()}
	if c.o.HardLinks && links(st) > 1 {
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
	switch {
	case uint64(f.Size) > MaxSize:
		return fmt.Errorf("%w: %s is %d bytes, more than the %d bytes (4 PiB) one copy can hold", ErrSource, escape.Text(p), f.Size, int64(MaxSize))
	case c.blocks > MaxBlocks:
		return fmt.Errorf("%w: %s: the sources add up to more than the %d bytes (4 PiB) one copy can hold; copy them in parts",
			ErrSource, escape.Text(p), int64(MaxSize))
	}
	id := idOf(st)
	f.Dev, f.Ino = id.dev, id.ino
	return c.add(f, p)
}

// dir lists the directory p (st) as name and everything below it, in name order. ancestors are
// the directories above it in this walk: a directory reached again below itself (a link with
// Follow, a bind mount) is a loop and is skipped. dirfd is p opened and checked to be st
// (openDir): its entries are read and looked at through it, never by path, so a directory
// another user swaps for a link (to ~victim/.ssh) while the walk is under way lists nothing of
// what the link leads to.
func (c *collector) dir(p, name string, st fs.FileInfo, dirfd int, ancestors []devIno) error {
	if err := c.add(File{Name: name, Mode: st.Mode().Perm(), MTime: st.ModTime().UnixNano(), Dir: true}, p); err != nil {
		return err
	}
	if !c.o.Recursive {
		return nil // a directory --files-from lists, without -r
	}
	names, err := readNames(dirfd)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(p), err)
	}
	ancestors = append(ancestors, idOf(st))
	for _, e := range names {
		cp, cn := filepath.Join(p, e), name+"/"+e
		lst, err := statAt(dirfd, e, false)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(cp), err)
		}
		if err := c.entry(cp, cn, lst, dirfd, ancestors); err != nil {
			return err
		}
	}
	return nil
}

// readNames lists the entries of the directory dirfd, in name order.
func readNames(dirfd int) ([]string, error) {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// openDir opens the directory name in dirfd (following a link only when follow is set) and checks
// that it is the directory st, which the walk looked at: what stands at the name since is refused.
func openDir(dirfd int, name, p string, st fs.FileInfo, follow bool) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	changed := fmt.Errorf("%w: %s changed while it was listed (another directory, or a link, stands at its name); copy again", ErrSource, escape.Text(p))
	fd, err := unix.Openat(dirfd, name, flags, 0)
	switch {
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		return -1, changed
	case err != nil:
		return -1, fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(p), err)
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || (devIno{uint64(now.Dev), uint64(now.Ino)}) != idOf(st) {
		unix.Close(fd)
		return -1, changed
	}
	return fd, nil
}

// entry lists what stands at p (lst: its lstat through dirfd, as name base of p) below a directory.
func (c *collector) entry(p, name string, lst fs.FileInfo, dirfd int, ancestors []devIno) error {
	st := lst
	base := filepath.Base(p)
	link := lst.Mode()&fs.ModeSymlink != 0
	if link {
		if !c.o.Follow {
			if c.o.Filter.Excluded(name, false) {
				return nil
			}
			target, err := readlinkAt(dirfd, base)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(p), err)
			}
			if err := ValidLink(target); err != nil {
				return fmt.Errorf("%w: %s: cannot be sent (%v); leave it out or copy with -L", ErrSource, escape.Text(p), err)
			}
			return c.add(File{Name: name, Mode: lst.Mode().Perm(), MTime: lst.ModTime().UnixNano(), Link: target}, p)
		}
		var err error
		if st, err = statAt(dirfd, base, true); err != nil {
			target, _ := readlinkAt(dirfd, base)
			return fmt.Errorf("%w: %s is a symbolic link to %s, which -L cannot follow (%v); copy without -L to keep it as a link",
				ErrSource, escape.Text(p), escape.Quote(target), err)
		}
	}
	if c.o.Filter.Excluded(name, st.IsDir()) {
		return nil // an excluded directory is not descended, as in rsync
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
		fd, err := openDir(dirfd, base, p, st, link)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return c.dir(p, name, st, fd, ancestors)
	case st.Mode().IsRegular():
		return c.file(p, name, st)
	default:
		c.s.Skipped.special(p) // a device, socket or FIFO: rsync -a without -D leaves them out too
		return nil
	}
}

// readlinkAt is the target text of the symbolic link name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		m, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(b[:m]), nil
		}
		if n > maxLink+1 {
			return "", fmt.Errorf("a symbolic link target of more than %d bytes", maxLink)
		}
	}
}

// statAt is what stands at name in dirfd (follow: what a link there points to), as an
// fs.FileInfo whose Sys is its *unix.Stat_t.
func statAt(dirfd int, name string, follow bool) (fs.FileInfo, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if follow {
		flags = 0
	}
	si := &statInfo{name: name}
	if err := unix.Fstatat(dirfd, name, &si.st, flags); err != nil {
		return nil, err
	}
	return si, nil
}

// statInfo is an fs.FileInfo of a stat(2) result.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }
func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch uint32(s.st.Mode) & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// readable checks that this process may read the file p, so that an unreadable file stops the
// copy before anything is sent: with faccessat (effective ids, ACLs), one system call where an
// open and a close were two, and a descriptor (a walk of 100,000 files on tmpfs: 1.3-1.7 s before,
// 1.1 s after). A file that
// passes and still cannot be opened (a network file system's own refusal) is reported by the
// reader, naming it.
func readable(p string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(p), err)
	}
	return nil
}

// Open returns an Opener of the listed regular files that opens each as it was listed, never
// another file put at its name since: below its source argument (which is followed, as Collect
// follows it), each directory of its name is opened relative to its parent and the file relative
// to its directory, without following a symbolic link (unless Collect followed them: -L), and
// without blocking (O_NONBLOCK: a FIFO put there does not hold the copy); then the open file must
// be a regular file of the listed device, inode, size and modification time. Anything else is an
// error naming the file (ErrSource, exit 3): the copy stops rather than send the wrong bytes
// under the listed name, or skip a file the receiver expects (docs/PROTOCOL.md, Names).
func (s *Sources) Open() Opener {
	o := &opener{s: s, dirFD: -1, last: s.lastFile()}
	return o.open
}

// opener opens the sources' files for Open, keeping the descriptor of the last directory it
// opened a file in: files are listed, and read, directory by directory.
type opener struct {
	mu    sync.Mutex
	s     *Sources
	dirFD int    // the last directory, -1 for none
	arg   int32  // its argument
	dir   string // its path below the argument
	last  int    // the index of the list's last regular file
}

func (o *opener) open(i int) (io.ReaderAt, io.Closer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.s
	f, p := s.Files[i], s.Paths[i]
	if i >= len(s.argOf) { // Sources made by hand (tests): no listing to go by but the path
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		return o.checked(fd, err, f, p)
	}
	arg := s.args[s.argOf[i]]
	_, rest, below := strings.Cut(f.Name, "/")
	if s.relative {
		rest, below = f.Name, true
	}
	if !below { // the argument itself, followed as Collect followed it
		fd, err := unix.Open(arg, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		return o.checked(fd, err, f, p)
	}
	nofollow := unix.O_NOFOLLOW
	if s.follow {
		nofollow = 0
	}
	dir, base, _ := cutLast(rest)
	if o.dirFD < 0 || o.arg != s.argOf[i] || o.dir != dir {
		o.closeDir()
		fd, err := unix.Open(arg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		for _, e := range strings.Split(dir, "/") {
			if err != nil || e == "" {
				break
			}
			var next int
			next, err = unix.Openat(fd, e, unix.O_RDONLY|unix.O_DIRECTORY|nofollow|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			fd = next
		}
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return nil, nil, fmt.Errorf("%w: %s: a directory on its path is no longer the one listed (a symbolic link or a file now); nothing of it was sent", ErrSource, escape.Text(p))
			}
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(p), err)
		}
		o.dirFD, o.arg, o.dir = fd, s.argOf[i], dir
	}
	fd, err := unix.Openat(o.dirFD, base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|nofollow|unix.O_CLOEXEC, 0)
	if i == o.last {
		o.closeDir() // the list's last file: nothing to keep the directory open for
	}
	return o.checked(fd, err, f, p)
}

// lastFile is the index of the last regular file of the list (-1: none).
func (s *Sources) lastFile() int {
	for i := len(s.Files) - 1; i >= 0; i-- {
		if s.Files[i].Regular() {
			return i
		}
	}
	return -1
}

// checked is the file fd opened for f (listed at p), if it is the file that was listed.
func (o *opener) checked(fd int, err error, f File, p string) (io.ReaderAt, io.Closer, error) {
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("%w: %s is a symbolic link now, not the file that was listed; nothing of it was sent", ErrSource, escape.Text(p))
		}
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrSource, escape.Text(p), err)
	}
	file := os.NewFile(uintptr(fd), p)
	st, err := file.Stat()
	if err == nil && !sameListed(f, st) {
		err = errChanged
	}
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("%w: %s %v; nothing of it was sent (copy again to send it as it is now)", ErrSource, escape.Text(p), err)
	}
	return file, file, nil
}

var errChanged = errors.New("changed after it was listed (another file, size or modification time)")

// sameListed reports whether st is the regular file f was listed as: the same device and inode
// (where the listing has them), size and modification time.
func sameListed(f File, st fs.FileInfo) bool {
	id := idOf(st)
	return st.Mode().IsRegular() && st.Size() == f.Size && st.ModTime().UnixNano() == f.MTime &&
		(f.Dev == 0 && f.Ino == 0 || id.dev == f.Dev && id.ino == f.Ino)
}

func (o *opener) closeDir() {
	if o.dirFD >= 0 {
		unix.Close(o.dirFD)
		o.dirFD = -1
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

// filesFrom lists the paths of --files-from (c.o.FilesFrom) below the one argument, a directory:
// in name order, so that a directory comes before what is below it; each with the directories
// above it (listed as they are, not filtered: rsync's implied directories), each once. The
// directories on a path are opened one by one below the argument, never through a symbolic link,
// so no listed path leads out of it; what stands at the path itself is listed as a tree's entry
// (a link as a link, or followed with -L; a directory with its contents only with -r).
func (c *collector) filesFrom(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: --files-from takes one source, the directory its paths are in (%d given)", ErrSource, len(args))
	}
	if err := CheckFilesFrom(c.o.FilesFrom); err != nil {
		return err
	}
	a := args[0]
	st, err := os.Stat(a)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSource, a, unwrapPath(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (--files-from lists paths inside the source directory)", ErrSource, a)
	}
	root, err := openDir(unix.AT_FDCWD, a, a, st, true)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	c.s.relative, c.listed = true, map[string]bool{}
	paths := slices.Clone(c.o.FilesFrom)
	slices.Sort(paths)
	for _, name := range paths {
		if c.listed[name] {
			continue // below a directory listed before it, with -r
		}
		if err := c.listedPath(a, root, idOf(st), name); err != nil {
			return err
		}
	}
	return nil
}

// listedPath lists the --files-from path name below the argument a (opened as root, rootID).
func (c *collector) listedPath(a string, root int, rootID devIno, name string) error {
	elems := strings.Split(name, "/")
	dirfd, ancestors := root, []devIno{rootID}
	var implied []File // the directories above name, not listed yet
	defer func() {
		if dirfd != root {
			unix.Close(dirfd)
		}
	}()
	for i, e := range elems[:len(elems)-1] {
		dn := strings.Join(elems[:i+1], "/")
		dp := filepath.Join(a, filepath.FromSlash(dn))
		lst, err := statAt(dirfd, e, false)
		if err != nil {
			return fmt.Errorf("%w: %s (from --files-from): %v", ErrSource, escape.Text(dp), err)
		}
		if !lst.IsDir() {
			return fmt.Errorf("%w: %s (on the path of %s, from --files-from) is not a directory; a symbolic link there is never followed", ErrSource, escape.Text(dp), escape.Quote(name))
		}
		if !c.listed[dn] {
			implied = append(implied, File{Name: dn, Mode: lst.Mode().Perm(), MTime: lst.ModTime().UnixNano(), Dir: true})
		}
		fd, err := openDir(dirfd, e, dp, lst, false)
		if err != nil {
			return err
		}
		if dirfd != root {
			unix.Close(dirfd)
		}
		dirfd, ancestors = fd, append(ancestors, idOf(lst))
	}
	p := filepath.Join(a, filepath.FromSlash(name))
	lst, err := statAt(dirfd, elems[len(elems)-1], false)
	if err != nil {
		return fmt.Errorf("%w: %s (from --files-from): %v", ErrSource, escape.Text(p), err)
	}
	if c.o.Filter != nil {
		// The directories above an excluded path are not listed for it (as in rsync).
		dir := lst.IsDir()
		if st, err := statAt(dirfd, elems[len(elems)-1], true); err == nil && c.o.Follow {
			dir = st.IsDir()
		}
		if c.o.Filter.Excluded(name, dir) {
			return nil
		}
	}
	for _, f := range implied {
		if err := c.add(f, filepath.Join(a, filepath.FromSlash(f.Name))); err != nil {
			return err
		}
	}
	return c.entry(p, name, lst, dirfd, ancestors)
}

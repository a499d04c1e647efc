package copy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/privdir"
)

// The destination side of a transfer writes every byte below one directory, its root, and never
// through a symbolic link: each directory of a name is opened relative to its parent with
// O_NOFOLLOW (openat), whether the link stood there before the copy or the copy made it, as
// OpenSSH's scp and rsync do after their CVEs. Files are written to a temporary name in their
// directory, mode 0600 and locked (flock) while they are being written, and renamed into place
// only once verified and synced. Symbolic and hard links are made at such a name too (symlinkat,
// linkat: neither follows a link) and renamed over what stands at theirs; a link's target text is
// stored, never resolved. A temporary file whose writer died (SIGKILL, a crash) is unlocked,
// and removed by the next copy into that directory and by the housekeeping at the start of every
// copy (SweepPartials), unless it has a resume record younger than a week (resume.go): then it
// waits for the copy that resumes it.

// partMarker is in the name of every temporary file: ".NAME.farwing-RANDOM.part".
const partMarker = ".farwing-"

// isPart reports whether name is a temporary file's name as partName makes them, exactly (a user's
// ".notes.farwing-draft.part" is not one: the sweep removes what matches).
func isPart(name string) bool {
	_, ok := stem(name, partSuffix)
	return ok
}

// partBase is the most of a base name a temporary name embeds: what leaves room, within an
// element's 255 bytes, for the dot, the marker, 12 hex digits and ".part".
const partBase = maxElement - len("."+partMarker+".part") - 12

func partName(base string) string {
	var rnd [6]byte
	rand.Read(rnd[:])
	if len(base) > partBase { // a long name: its temporary name keeps a prefix of it
		n := partBase
		for n > 0 && !utf8.RuneStart(base[n]) {
			n--
		}
		base = base[:n]
	}
	return "." + base + partMarker + hex.EncodeToString(rnd[:]) + ".part"
}

// dirs opens a destination's directories below its root, each once per Writer.
type dirs struct {
	root   string // the root's path (the user's destination or its parent)
	rootFD int    // -1 until opened
	cur    string // relative path of curFD ("" is the root)
	curFD  int
	swept  map[string]bool
}

func newDirs(root string) *dirs {
	return &dirs{root: root, rootFD: -1, curFD: -1, swept: map[string]bool{}}
}

// open returns a descriptor of the directory rel (slash-separated, relative to the root; "" for
// the root), creating missing directories with mode perm. Every element is opened with
// O_NOFOLLOW: a symbolic link, or anything but a directory, stops it with ErrDest. The descriptor
// stays the writer's (it is kept for the next call with the same rel).
func (d *dirs) open(rel string, perm os.FileMode) (int, error) {
	if err := d.openRoot(); err != nil {
		return -1, err
	}
	if rel == d.cur {
		return d.curFD, nil
	}
	if d.curFD != d.rootFD {
		unix.Close(d.curFD)
	}
	d.cur, d.curFD = "", d.rootFD
	fd, err := d.walk(rel, perm, true)
	if err != nil {
		return -1, err
	}
	d.cur, d.curFD = rel, fd
	if !d.swept[rel] {
		d.swept[rel] = true
		sweepDir(fd)
	}
	return fd, nil
}

// openRoot opens the root, once.
func (d *dirs) openRoot() error {
	if d.rootFD >= 0 {
		return nil
	}
	fd, err := unix.Open(d.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDest, d.root, err)
	}
	d.rootFD, d.cur, d.curFD = fd, "", fd
	d.swept[""] = true
	sweepDir(fd)
	return nil
}

// walk opens the directory rel below the root (which openRoot has opened) element by element, each
// relative to its parent with O_NOFOLLOW, creating missing ones with mode perm if create is set.
// The caller closes the descriptor unless it is the root's.
func (d *dirs) walk(rel string, perm os.FileMode, create bool) (int, error) {
	fd := d.rootFD
	if rel == "" {
		return fd, nil
	}
	done := ""
	for _, e := range strings.Split(rel, "/") {
		next, err := openDirAt(fd, e, perm, create)
		if fd != d.rootFD {
			unix.Close(fd)
		}
		if done != "" {
			done += "/"
		}
		done += e
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return -1, fmt.Errorf("%w: refusing to write below %s: it is a symbolic link or not a directory",
					ErrDest, escape.Text(filepath.Join(d.root, done)))
			}
			return -1, fmt.Errorf("%w: %s: %w", ErrDest, escape.Text(filepath.Join(d.root, done)), err)
		}
		fd = next
	}
	return fd, nil
}

// openDirAt opens directory name in dirfd without following a link, creating it (mode perm) if
// it is missing and create is set.
func openDirAt(dirfd int, name string, perm os.FileMode, create bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if create && errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(dirfd, name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		fd, err = unix.Openat(dirfd, name, flags, 0)
	}
	return fd, err
}

func (d *dirs) close() {
	if d.curFD >= 0 && d.curFD != d.rootFD {
		unix.Close(d.curFD)
	}
	if d.rootFD >= 0 {
		unix.Close(d.rootFD)
	}
	d.rootFD, d.curFD, d.cur = -1, -1, ""
}

// sweepDir removes the temporary files in the directory dirfd that no writer holds any more.
func sweepDir(dirfd int) {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if strings.HasPrefix(n, ".") && strings.Contains(n, partMarker) {
				sweepEntry(dirfd, n)
			}
		}
		if err != nil || len(names) == 0 {
			return
		}
	}
}

// removeIfStale removes the temporary file name in dirfd if it is a regular file that no writer
// holds locked. It reports whether it removed it. (A writer that loses its file to a sweep
// between creating and locking it sees that and takes another name: createPart.)
func removeIfStale(dirfd int, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // a writer holds it
	}
	return unix.Unlinkat(dirfd, name, 0) == nil
}

// createPart creates a temporary file for base in dirfd: mode 0600, locked for as long as it is
// open.
func createPart(dirfd int, dir, base string) (*os.File, string, error) {
	for range 8 {
		tmp := partName(base)
		fd, err := unix.Openat(dirfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("%w: cannot create a file in %s: %v%s", ErrDest, escape.Text(dir), err, destHint(err))
		}
		if !lockedAt(fd, dirfd, tmp) {
			unix.Close(fd) // a sweep took it between its creation and the lock: another name
			continue
		}
		return os.NewFile(uintptr(fd), filepath.Join(dir, tmp)), tmp, nil
	}
	return nil, "", fmt.Errorf("%w: cannot create a temporary file in %s", ErrDest, escape.Text(dir))
}

// lockedAt locks the file fd, just created as name in dirfd, and reports whether it got the lock
// and name still names it: a sweep that saw the file before the lock may have removed it.
func lockedAt(fd, dirfd int, name string) bool {
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false
	}
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Fstatat(dirfd, name, &b, unix.AT_SYMLINK_NOFOLLOW) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// checkReplace refuses to put a file, a symbolic or a hard link (what, for messages) where name
// stands in dirfd (unix.AT_FDCWD: name is a path) if that is a directory, or a file this user may
// not write (scp refuses a read-only destination too); a link there is replaced, not followed.
// path names it in messages.
func checkReplace(dirfd int, name, path, what string) error {
	_, err := replaceable(dirfd, name, path, what)
	return err
}

// replaceable is checkReplace that also returns the regular file it found at name (nil: none, or
// something else that may be replaced), for the rename that replaces it (its mode, holdReplaced).
func replaceable(dirfd int, name, path, what string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(path), err)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil, fmt.Errorf("%w: cannot replace directory %s with %s", ErrDest, escape.Text(path), what)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, nil
	case unix.Faccessat(dirfd, name, unix.W_OK, unix.AT_EACCESS) != nil:
		return nil, fmt.Errorf("%w: %s exists and is read-only (mode %04o); remove it or make it writable first",
			ErrDest, escape.Text(path), st.Mode&0o7777)
	}
	return &st, nil
}

// The partial-file registry: every Writer that writes files keeps an entry in the user's cache
// directory (farwing/partial/), locked for its lifetime, listing its temporary files. An entry
// nobody holds belongs to a writer that died; SweepPartials removes the files it lists (if they
// are still unlocked temporary files) and the entry.

func registryDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "farwing", "partial"), nil
}

// checkRegistry makes the registry's directory where it is missing, and refuses one that is not
// this user's alone (privdir.Check): its entries name files that SweepPartials removes, so an
// entry someone else wrote there could have this user's copy remove that user's partial files
// anywhere. A cache directory that cannot be made (a read-only home) only means no registry.
func checkRegistry() error {
	dir, err := registryDir()
	if err != nil {
		return nil
	}
	if err := privdir.Make(dir); errors.Is(err, privdir.ErrNotPrivate) {
		return fmt.Errorf("%w: farwing's registry of partial files: %v", ErrDest, err)
	}
	return nil
}

// registry is one Writer's entry.
type registry struct{ f *os.File }

// newRegistry creates and locks an entry; nil (no registry, only the sweep of directories) when
// the cache directory cannot be written or is not this user's alone (checkRegistry).
func newRegistry() *registry {
	dir, err := registryDir()
	if err != nil || privdir.Make(dir) != nil {
		return nil
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(dfd)
	for range 8 {
		var rnd [8]byte
		rand.Read(rnd[:])
		name := hex.EncodeToString(rnd[:]) + ".list"
		fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil
		}
		if lockedAt(fd, dfd, name) {
			return &registry{f: os.NewFile(uintptr(fd), filepath.Join(dir, name))}
		}
		unix.Close(fd)
	}
	return nil
}

// add records the absolute path of a temporary file.
func (r *registry) add(p string) {
	if r != nil {
		if abs, err := filepath.Abs(p); err == nil {
			r.f.WriteString(abs + "\n")
		}
	}
}

// close removes the entry: every file it listed is renamed into place or removed.
func (r *registry) close() {
	if r != nil {
		os.Remove(r.f.Name())
		r.f.Close()
	}
}

// SweepPartials is the housekeeping of temporary files: for every registry entry whose writer
// died, it removes the temporary files that entry lists (only unlocked files whose names are
// temporary files' names, never through a symbolic link) and the entry; a file with a resume
// record younger than a week is kept, and so is the entry's line for it. It returns how many
// files it removed.
func SweepPartials() int {
	dir, err := registryDir()
	if err != nil || privdir.Check(dir) != nil {
		return 0
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".list") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			continue // its writer is alive
		}
		b, _ := os.ReadFile(p)
		var kept []string // partial files kept for a resume: the entry stays for them
		for _, line := range strings.Split(string(b), "\n") {
			if !filepath.IsAbs(line) || !isPart(filepath.Base(line)) {
				continue
			}
			gone, keep := sweepPartPath(line)
			if gone {
				removed++
			}
			if keep {
				kept = append(kept, line)
			}
		}
		if len(kept) == 0 {
			os.Remove(p)
		} else if len(kept) < len(strings.Split(strings.TrimSpace(string(b)), "\n")) {
			_ = os.WriteFile(p, []byte(strings.Join(kept, "\n")+"\n"), 0o600)
		}
		f.Close()
	}
	return removed
}

// sweepPartPath sweeps the temporary file at the absolute path p (sweepEntry), opening its
// directory without following a link at its last element. It reports whether it removed the
// file, and whether the file is still there, kept for a resume.
func sweepPartPath(p string) (removed, kept bool) {
	fd, err := unix.Open(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	removed = sweepEntry(fd, filepath.Base(p))
	return removed, !removed && partExists(fd, filepath.Base(p))
}

package copy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// What is already there: before any data moves, the receiving end looks at each regular file of
// the list at its destination and tells the sender which ones it already has; those leave the
// block plan (Plan.Skip) and are neither read nor sent nor rewritten.

// Compare is how the receiver decides that a destination file is the source's.
type Compare int

const (
	// QuickCheck: the same size and modification time, as rsync does by default. The time is
	// compared to the nanosecond, or to the second where the destination's time has no fraction
	// (a filesystem that keeps whole seconds).
	QuickCheck Compare = iota
	// Checksum (--checksum): the same size and whole-file BLAKE3; the sender hashes every file
	// before the copy (File.Sum) and the receiver hashes its own.
	Checksum
	// IgnoreTimes (--ignore-times): nothing is taken as there; every file is sent.
	IgnoreTimes
)

// String is the name the control protocol uses ("" for QuickCheck).
func (c Compare) String() string {
	switch c {
	case Checksum:
		return "checksum"
	case IgnoreTimes:
		return "none"
	}
	return ""
}

// ParseCompare reads a Compare from the control protocol.
func ParseCompare(s string) (Compare, error) {
	switch s {
	case "":
		return QuickCheck, nil
	case "checksum":
		return Checksum, nil
	case "none":
		return IgnoreTimes, nil
	}
	return 0, fmt.Errorf("unknown comparison %s", escape.Quote(s))
}

// sameTime says whether a destination file's time (sec, nsec) is the source's mtime (unix
// nanoseconds): QuickCheck's rule.
func sameTime(mtime int64, sec, nsec int64) bool {
	if nsec == 0 {
		s := mtime / 1e9
		if mtime%1e9 < 0 {
			s-- // floor: the second the time falls in
		}
		return s == sec
	}
	return mtime == sec*1e9+nsec
}

// ResolveTargetHave is ResolveTarget that also finds, with c, the regular files of files that the
// destination already has: their indexes, ascending. Those are not checked for being replaceable
// (a read-only file that is already there is left alone, as rsync does).
func ResolveTargetHave(dst string, files []File, c Compare) (*Target, []int, error) {
	t, err := resolveTarget(dst, files)
	if err != nil {
		return nil, nil, err
	}
	have, err := t.have(files, c)
	if err != nil {
		return nil, nil, err
	}
	return t, have, t.check(files, have)
}

// have lists the regular files of files already at their destination. Nothing is followed: each
// directory is opened below the root without following links, the file itself must be a regular
// file there (not a link to one). A file that cannot be looked at is not there: it is sent, and
// the writer reports what stops it.
func (t *Target) have(files []File, c Compare) ([]int, error) {
	if c == IgnoreTimes {
		return nil, nil
	}
	rootFD, err := unix.Open(t.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDest, t.root, err)
	}
	d := &dirs{root: t.root, rootFD: rootFD, curFD: rootFD}
	defer d.close()
	cur, curFD, curErr := "", rootFD, error(nil)
	defer func() {
		if curFD >= 0 && curFD != rootFD {
			unix.Close(curFD)
		}
	}()
	var have []int
	for i, f := range files {
		if !f.Regular() {
			continue
		}
		dir, base, _ := cutLast(t.rel(f.Name))
		if dir != cur {
			if curFD >= 0 && curFD != rootFD {
				unix.Close(curFD)
			}
			cur = dir
			curFD, curErr = d.walk(dir, 0, false)
		}
		if curErr != nil {
			continue // missing (or not a plain directory: the writer refuses it)
		}
		if ok, err := haveFile(curFD, base, f, c); err != nil {
			return nil, err
		} else if ok {
			have = append(have, i)
		}
	}
	return have, nil
}

// haveFile says whether base in dirfd is f by c's rule.
func haveFile(dirfd int, base string, f File, c Compare) (bool, error) {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != f.Size {
		return false, nil
	}
	if c == QuickCheck {
		sec, nsec := st.Mtim.Unix()
		return sameTime(f.MTime, sec, nsec), nil
	}
	want, err := hex.DecodeString(f.Sum)
	if err != nil || len(want) != 32 {
		return false, fmt.Errorf("%w: %s: no valid BLAKE3 digest to compare with (--checksum)", ErrName, escape.Quote(f.Name))
	}
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	file := os.NewFile(uintptr(fd), base)
	defer file.Close()
	fst, err := file.Stat()
	if err != nil || !fst.Mode().IsRegular() || fst.Size() != f.Size {
		return false, nil
	}
	sum, err := HashFile(file, f.Size)
	if err != nil {
		return false, nil
	}
	return sum == [32]byte(want), nil
}

// HashFile returns the BLAKE3 digest of the first size bytes of r, computed as a transfer does
// (block nodes of the file's tree, tree.go): b3sum's digest of the file. A file shorter than size
// is an error.
func HashFile(r io.ReaderAt, size int64) ([32]byte, error) {
	var tree fileTree
	n := uint32(blocksOf(size)) // filePlan bounds size
	if err := eachBlock(r, size, 0, n, func(_ uint32, s *BlockSum) { tree.add(s) }); err != nil {
		return [32]byte{}, err
	}
	return tree.sum(), nil
}

// eachBlock hashes blocks from to n (exclusive) of r, as blocks of a file of size bytes (the
// transfer's digest of each: tree.go), and hands each block's sum to fn in order. r must hold
// those blocks whole: a shorter r is an error.
func eachBlock(r io.ReaderAt, size int64, from, n uint32, fn func(b uint32, s *BlockSum)) error {
	plan, err := filePlan(size)
	if err != nil {
		return err
	}
	buf := make([]byte, BlockSize)
	var h BlockHasher
	for b := from; b < n; b++ {
		off := int64(b) * BlockSize
		ln := blockLen(size, b)
		if m, err := r.ReadAt(buf[:ln], off); m < ln {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		h.Reset(plan, b, ln)
		h.Range(buf[:ln], 0, ln)
		s := h.Sum()
		fn(b, &s)
	}
	return nil
}

// HashPath is HashFile of the regular file at p, whose size must be size.
func HashPath(p string, size int64) ([32]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return [32]byte{}, fmt.Errorf("%w: %s: %v", ErrSource, p, unwrapPath(err))
	}
	defer f.Close()
	sum, err := HashFile(f, size)
	if err != nil {
		return sum, fmt.Errorf("%w: %s: changed while it was hashed (%v)", ErrSource, p, err)
	}
	return sum, nil
}

// keep checks the skipped file f, already at its destination, and with preserve (-p) gives it
// what such a copy would have given it besides its bytes: the source's mode (less the umask) and
// modification time. Without -p it keeps its own, as scp and rsync leave a file that is there.
// Its contents are never touched.
func (w *Writer) keep(f File) error {
	dir, base, _ := cutLast(w.target.rel(f.Name))
	final := w.target.Path(f.Name)
	dfd, err := w.dirs.open(dir, 0o755)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: %s changed during the copy: it is no longer the file that was there", ErrDest, escape.Text(final))
	}
	if _, ok := w.hardSums[f.Name]; ok {
		// Hard links of the list to this file link to the inode kept here (hardlink checks it).
		w.hardIDs[f.Name] = devIno{uint64(st.Dev), uint64(st.Ino)}
	}
	if !w.preserve {
		return nil // a file already there keeps its mode and times, as scp and rsync leave them
	}
	if mode := uint32(f.Mode.Perm() &^ umask); uint32(st.Mode)&0o7777 != mode {
		if err := chmodNoFollow(dfd, base, mode); err != nil {
			return fmt.Errorf("%w: chmod %s: %v", ErrDest, escape.Text(final), err)
		}
	}
	if sec, nsec := st.Mtim.Unix(); sec*1e9+nsec != f.MTime {
		ts := unix.NsecToTimespec(f.MTime)
		_ = unix.UtimesNanoAt(dfd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// chmodNoFollow sets the mode of the regular file base in dirfd, never of what a link there
// points to: through a descriptor of the file opened without following links, or, where it
// cannot be opened for reading (mode 0200, say), fchmodat's own no-follow flag where the system
// has it.
func chmodNoFollow(dirfd int, base string, mode uint32) error {
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unix.Fchmodat(dirfd, base, mode, unix.AT_SYMLINK_NOFOLLOW)
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, mode)
}

// AddSums hashes every regular file of s into its File.Sum, for Checksum: the receiver compares
// them with what it has before anything is sent. Each is opened as Open opens it for the copy:
// the file that was listed, never another put at its name since (a link to someone's key, a FIFO).
func (s *Sources) AddSums() error {
	open := s.Open()
	for i, f := range s.Files {
		if !f.Regular() {
			continue
		}
		r, c, err := open(i)
		if err != nil {
			return err
		}
		sum, err := HashFile(r, f.Size)
		c.Close()
		if err != nil {
			return fmt.Errorf("%w: %s: changed while it was hashed (%v)", ErrSource, escape.Text(s.Paths[i]), err)
		}
		s.Files[i].Sum = hex.EncodeToString(sum[:])
	}
	return nil
}

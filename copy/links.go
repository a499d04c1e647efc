package copy

// This file holds the writer's links: symbolic and hard links, and the local copy made where
// the destination cannot link.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// symlink creates the symbolic link f with its target text as it came: at a temporary name in
// its directory (symlinkat: the text is never resolved), then renamed over whatever file or link
// stands at its name. Nothing this writer writes ever goes through it (every directory is opened
// without following links).
func (w *Writer) symlink(f File) error {
	rel := w.target.rel(f.Name)
	dir, base, _ := cutLast(rel)
	final := w.target.Path(f.Name)
	fd, err := w.dirs.open(dir, 0o755)
	if err != nil {
		return err
	}
	if err := checkReplace(fd, base, final, "a symbolic link"); err != nil {
		return err
	}
	tmp, err := makeAt(fd, base, func(tmp string) error { return unix.Symlinkat(f.Link, fd, tmp) })
	if err != nil {
		return fmt.Errorf("%w: cannot create symbolic link %s: %v", ErrDest, escape.Text(final), err)
	}
	if w.preserve {
		ts := unix.NsecToTimespec(f.MTime)
		_ = unix.UtimesNanoAt(fd, tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW) // lutimes
	}
	if err := unix.Renameat(fd, tmp, fd, base); err != nil {
		unix.Unlinkat(fd, tmp, 0)
		return fmt.Errorf("%w: rename into %s: %v", ErrDest, escape.Text(final), err)
	}
	return nil
}

// makeAt makes an entry with make at a fresh temporary name for base in dirfd and returns the
// name.
func makeAt(dirfd int, base string, make func(tmp string) error) (string, error) {
	var err error
	for range 8 {
		tmp := partName(base)
		if err = make(tmp); !errors.Is(err, unix.EEXIST) {
			return tmp, err
		}
	}
	return "", err
}

// hardlink makes f a hard link to the earlier file of the plan it names, which this writer has
// placed (checkTree: a regular file listed before it), under a temporary name, then renamed
// over what stands at its name. Where the destination cannot link (another filesystem below the
// destination, one without hard links), the file is copied there instead and checked against
// the digest it arrived with.
func (w *Writer) hardlink(f File) error {
	odir, obase, _ := cutLast(w.target.rel(f.Hard))
	rel := w.target.rel(f.Name)
	dir, base, _ := cutLast(rel)
	final := w.target.Path(f.Name)
	if err := w.dirs.openRoot(); err != nil {
		return err
	}
	ofd, err := w.dirs.walk(odir, 0, false)
	if err != nil {
		return err
	}
	defer func() {
		if ofd != w.dirs.rootFD {
			unix.Close(ofd)
		}
	}()
	fd, err := w.dirs.open(dir, 0o755)
	if err != nil {
		return err
	}
	if err := checkReplace(fd, base, final, "a hard link"); err != nil {
		return err
	}
	tmp, err := makeAt(fd, base, func(tmp string) error { return w.calls.Linkat(ofd, obase, fd, tmp, 0) })
	switch {
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EPERM), errors.Is(err, unix.EMLINK), errors.Is(err, unix.EOPNOTSUPP):
		return w.copyLocal(ofd, obase, f)
	case err != nil:
		return fmt.Errorf("%w: cannot link %s to %s: %v", ErrDest, escape.Text(final), escape.Text(w.target.Path(f.Hard)), err)
	}
	// linkat does not follow a link at its source: what it linked must be the regular file this
	// writer placed there (its device and inode), not whatever replaced it since.
	var st unix.Stat_t
	id, placed := w.hardIDs[f.Hard]
	if err := unix.Fstatat(fd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		!placed || (devIno{uint64(st.Dev), uint64(st.Ino)}) != id {
		unix.Unlinkat(fd, tmp, 0)
		return fmt.Errorf("%w: %s is no longer the regular file this copy wrote; not linking %s to it", ErrDest,
			escape.Text(w.target.Path(f.Hard)), escape.Text(final))
	}
	if err := unix.Renameat(fd, tmp, fd, base); err != nil {
		unix.Unlinkat(fd, tmp, 0)
		return fmt.Errorf("%w: rename into %s: %v", ErrDest, escape.Text(final), err)
	}
	return nil
}

// localCopyRatio bounds what copyLocal writes in all: at most this many times the bytes of the
// files received.
const localCopyRatio = 3

// copyLocal writes the hard link f as a copy of the file it names (obase in directory ofd), read
// without following a link and checked against that file's digest, then placed like a received
// file.
func (w *Writer) copyLocal(ofd int, obase string, f File) error {
	j := w.hardFirst[f.Hard] // checkTree: a hard link names an earlier regular file
	first := w.plan.Files[j]
	kept := w.plan.Skipped(j) // the file was already there (Plan.Skip): no digest came with it
	// A list of one file and many hard links to it must not make the destination write many
	// times what was received (each link a full copy where the filesystem cannot link).
	if w.localCopied+first.Size > localCopyRatio*w.receivedBytes {
		return fmt.Errorf("%w: the destination cannot make the hard link %s, and copying %s for it would write more than %d times the bytes received; copy without -H",
			ErrDest, escape.Text(w.target.Path(f.Name)), escape.Text(w.target.Path(f.Hard)), localCopyRatio)
	}
	w.localCopied += first.Size
	sfd, err := unix.Openat(ofd, obase, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(w.target.Path(f.Hard)), err)
	}
	var st unix.Stat_t
	if id, ok := w.hardIDs[f.Hard]; unix.Fstat(sfd, &st) != nil || !ok || (devIno{uint64(st.Dev), uint64(st.Ino)}) != id {
		unix.Close(sfd)
		return fmt.Errorf("%w: %s is no longer the regular file this copy wrote; not copying it to %s", ErrDest,
			escape.Text(w.target.Path(f.Hard)), escape.Text(w.target.Path(f.Name)))
	}
	src := os.NewFile(uintptr(sfd), w.target.Path(f.Hard))
	defer src.Close()
	rel := w.target.rel(f.Name)
	wf := &wfile{w: w, idx: -1, dirFD: -1, final: w.target.Path(f.Name)}
	wf.dir, wf.base, _ = cutLast(rel)
	fd, err := w.dirs.open(wf.dir, 0o755)
	if err != nil {
		return err
	}
	tf, tmp, err := createPart(fd, filepath.Dir(wf.final), wf.base)
	if err != nil {
		return err
	}
	wf.f, wf.tmp = tf, tmp
	w.temps[wf] = true
	w.reg.add(tf.Name())
	h := blake3.New()
	if _, err := io.Copy(io.MultiWriter(tf, h), src); err != nil {
		return fmt.Errorf("%w: copy %s to %s: %v", ErrDest, escape.Text(src.Name()), escape.Text(wf.final), unwrapPath(err))
	}
	if got, want := [32]byte(h.Sum(nil)), w.hardSums[f.Hard]; got != want && !kept {
		return fmt.Errorf("%w: %s changed after it was written; its copy for %s does not match", ErrVerify, escape.Text(src.Name()), escape.Text(wf.final))
	}
	return w.place(wf, first)
}

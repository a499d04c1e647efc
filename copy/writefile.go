package copy

// This file holds the writing of one file: its temporary file, blocks, checkpoints of its resume
// record, verification and placing under its final name.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// writebackEvery is how much written data the writer lets accumulate before it starts the
// kernel's writeback of it.
const writebackEvery = 32 << 20

type wfile struct {
	w       *Writer     // the writer of this file
	flushed int64       // writeback (buffered) or a data sync (direct) started below this offset
	direct  bool        // f has O_DIRECT on
	syncing atomic.Bool // a background fdatasync of a direct file is running
	idx     int
	f       *os.File
	dir     string // the file's directory, relative to the target's root
	tmp     string // the temporary file's name in dir
	base    string // the file's name in dir
	final   string // its path

	// Resume records (nil rec: none): a checkpoint every w.ckEvery bytes syncs the data and
	// then writes the record, on its own goroutine, one at a time (ckBusy), under ckMu.
	rec      *record
	dirFD    int       // the file's directory (a descriptor of its own, for checkpoints)
	ckAt     int64     // offset up to which the last checkpoint started
	ckTime   time.Time // when
	ckBusy   atomic.Bool
	ckMu     sync.Mutex
	ckStop   bool // no more checkpoints: the file is placed or abandoned
	recorded bool // a record of it is on disk

	// A file compared block by block (delta.go): its old file, open, and the next of its kept
	// blocks to copy from it (fillKept).
	old      *os.File
	oldFile  *oldFile
	nextKept int
}

func (w *Writer) open(i int) error {
	w.tree = w.plan.startTree(i)
	wf := &wfile{w: w, idx: i, dirFD: -1}
	w.cur = wf
	if w.sink {
		return nil
	}
	rel := w.target.rel(w.plan.Files[i].Name)
	wf.dir, wf.base, _ = cutLast(rel)
	wf.final = w.target.Path(w.plan.Files[i].Name)
	dir := filepath.Dir(wf.final)
	fd, err := w.dirs.open(wf.dir, 0o755)
	if err != nil {
		return err
	}
	if err := checkReplace(fd, wf.base, wf.final, "a file"); err != nil {
		return err
	}
	if p := w.resume.take(i); p != nil {
		return w.reopen(wf, fd, p)
	}
	if err := w.openOld(wf, fd); err != nil {
		return err
	}
	f, tmp, err := createPart(fd, dir, wf.base)
	if err != nil {
		wf.closeOld()
		return err
	}
	wf.f, wf.tmp = f, tmp
	w.temps[wf] = true
	w.reg.add(f.Name())
	if sz := w.plan.Files[i].Size; sz > 0 {
		if sz > w.ckEvery { // a smaller file is placed before its first checkpoint could come
			w.startRecords(wf, fd, 0)
		}
		// Reserve the length; blocks fill it in. A length the file system cannot hold (EFBIG)
		// fails the copy here, never later as a file shorter than what was verified.
		if err := w.calls.Truncate(f, sz); err != nil {
			return fmt.Errorf("%w: %s: cannot make a file of %d bytes: %v", ErrDest, escape.Text(wf.final), sz, unwrapPath(err))
		}
		// Direct I/O for files of a block or more: the page cache costs more CPU than the disk
		// (on this project's VM, buffered writes took 1.9 CPU s/GiB with fsync, O_DIRECT 0.07),
		// and a copied file is not read back soon. WriterOptions.NoDirectIO turns it off.
		wf.direct = sz >= BlockSize && w.directIO && setDirect(f, true)
	}
	return nil
}

// reopen continues the kept partial file p of the file wf (Partials.Apply: its kept blocks
// matched the sender's digests and are not sent), in directory fd.
func (w *Writer) reopen(wf *wfile, fd int, p *partial) error {
	if err := w.openOld(wf, fd); err != nil { // compared past the kept blocks too
		return err
	}
	p.f, wf.f, wf.tmp = nil, p.f, p.tmp
	w.temps[wf] = true
	w.reg.add(wf.f.Name())
	wf.recorded = true
	w.startRecords(wf, fd, w.plan.Kept(wf.idx))
	if sz := w.plan.Files[wf.idx].Size; sz >= BlockSize && w.directIO {
		wf.direct = setDirect(wf.f, true)
	}
	return nil
}

// startRecords sets up the resume records of wf, in directory fd, whose first kept blocks are
// already there.
func (w *Writer) startRecords(wf *wfile, fd int, kept uint32) {
	if !w.records {
		return
	}
	var st unix.Stat_t
	dfd, err := unix.Dup(fd)
	if err != nil || unix.Fstat(int(wf.f.Fd()), &st) != nil {
		if err == nil {
			unix.Close(dfd)
		}
		return
	}
	unix.CloseOnExec(dfd)
	rec := newRecord(wf.base, w.plan.Files[wf.idx])
	rec.PartIno = uint64(st.Ino)
	rec.Blocks = kept
	wf.rec, wf.dirFD = &rec, dfd
	wf.ckAt = int64(kept) * BlockSize
	wf.flushed = wf.ckAt
}

// checkpoint starts a checkpoint of wf once its writer's interval (ckEvery) more of it has been written up to
// end (a block boundary): on its own goroutine, the data is synced and then the record written
// with the blocks below end. One runs at a time; a file placed or abandoned waits for it (stop).
func (wf *wfile) checkpoint(end int64) {
	if wf.rec == nil || end-wf.ckAt < wf.w.ckEvery || time.Since(wf.ckTime) < wf.w.ckGap || !wf.ckBusy.CompareAndSwap(false, true) {
		return
	}
	wf.ckAt, wf.ckTime = end, time.Now()
	rec := *wf.rec
	rec.Blocks = uint32(end / BlockSize)
	rc, err := wf.f.SyscallConn()
	if err != nil {
		wf.ckBusy.Store(false)
		return
	}
	wf.w.stats.checkpoints.Add(1)
	syncData := wf.w.calls.SyncData
	go func() {
		defer wf.ckBusy.Store(false)
		wf.ckMu.Lock()
		defer wf.ckMu.Unlock()
		if wf.ckStop {
			return
		}
		var serr error
		// Control holds the descriptor open for the call, even if the file is closed meanwhile.
		if err := rc.Control(func(fd uintptr) { serr = syncData(int(fd)) }); err != nil || serr != nil {
			return
		}
		if writeRecordAt(wf.dirFD, wf.tmp, rec) == nil {
			wf.recorded = true
		}
	}()
}

// stop ends wf's checkpoints, waiting for one under way, and reports whether a record of it is
// on disk.
func (wf *wfile) stop() bool {
	wf.ckMu.Lock()
	defer wf.ckMu.Unlock()
	wf.ckStop = true
	return wf.recorded
}

// dropRecord removes wf's record, if it has one, and its directory descriptor.
func (wf *wfile) dropRecord() {
	if wf.rec != nil && wf.dirFD >= 0 {
		if wf.recorded {
			removeRecordAt(wf.dirFD, wf.tmp)
		}
		unix.Close(wf.dirFD)
		wf.dirFD = -1
	}
}

// directAlign is the alignment direct I/O asks of buffers, offsets and lengths: the page size,
// which covers every logical block size in use.
const directAlign = 4096

// write writes one block at off: with direct I/O while the block is aligned (every block but a
// file's last, whose unaligned end goes through the page cache after direct I/O is switched
// off), buffered otherwise, starting the kernel's writeback behind the data as it goes.
func (wf *wfile) write(data []byte, off int64) error {
	if wf.direct {
		n := len(data) &^ (directAlign - 1)
		if n > 0 && directOK(data[:n], off) {
			if _, err := wf.f.WriteAt(data[:n], off); err == nil {
				wf.w.stats.directBytes.Add(int64(n))
				data, off = data[n:], off+int64(n)
				wf.syncBehind(off)
			} else if !errors.Is(err, syscall.EINVAL) {
				return err
			} // EINVAL: the filesystem refuses this direct write after all; go buffered
		}
		if len(data) == 0 {
			return nil
		}
		wf.direct = setDirect(wf.f, false)
	}
	if _, err := wf.f.WriteAt(data, off); err != nil {
		return err
	}
	// Blocks arrive in order, so the file fills from the front: start writeback behind it.
	if end := off + int64(len(data)); end-wf.flushed >= writebackEvery {
		startWriteback(wf.f, wf.flushed, end-wf.flushed)
		wf.flushed = end
	}
	return nil
}

// dataSyncEvery is how much a direct-I/O file grows between background data syncs, unless
// WriterOptions.DataSyncEvery says otherwise. The fsync before the rename costs about as much
// as what was written since the last one (this project's VM: 64 MiB 70 ms, 16 MiB 20 ms, 1 MiB
// 2 ms), and it is the only one the copy waits for: 16 MiB leaves it ~20 ms at most.
const dataSyncEvery = 16 << 20

// syncBehind starts a background fdatasync of a direct-I/O file once its writer's syncEvery
// more of it is written (one at a time). Direct writes leave no dirty pages, but the extents they
// fill are committed by the next journal commit; without these the fsync before the rename
// committed them all, 0.04–0.25 s per GiB on this project's VM after the last block.
func (wf *wfile) syncBehind(end int64) {
	if end-wf.flushed < wf.w.syncEvery || !wf.syncing.CompareAndSwap(false, true) {
		return
	}
	wf.flushed = end
	rc, err := wf.f.SyscallConn()
	if err != nil {
		wf.syncing.Store(false)
		return
	}
	wf.w.stats.dataSyncs.Add(1)
	go func() {
		defer wf.syncing.Store(false)
		// Control holds the descriptor open for the call, even if the file is closed meanwhile.
		_ = rc.Control(func(fd uintptr) { dataSync(int(fd)) })
	}()
}

func (w *Writer) finish(ctx context.Context, i int) error {
	wf := w.cur
	f := w.plan.Files[i]
	if err := w.fillKept(wf, uint32(blocksOf(f.Size))); err != nil {
		return err
	}
	wf.closeOld()
	got := w.tree.sum()
	want, err := w.digest(ctx, i)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: %s: whole-file digest %x differs from the sender's %x", ErrVerify, f.Name, got[:8], want[:8])
	}
	res := FileResult{Name: f.Name, Size: f.Size, Sum: hex.EncodeToString(got[:])}
	if _, ok := w.hardSums[f.Name]; ok {
		w.hardSums[f.Name] = got
		var st unix.Stat_t
		if wf.f != nil && unix.Fstat(int(wf.f.Fd()), &st) == nil {
			w.hardIDs[f.Name] = devIno{uint64(st.Dev), uint64(st.Ino)}
		}
	}
	w.receivedBytes += f.Size
	w.cur = nil
	w.nextFile = i + 1
	if w.sink {
		w.placed(res)
		return nil
	}
	res.Path = wf.final
	if f.Size < batchFileMax {
		wf.stop()
		w.pending = append(w.pending, pendingFile{wf: wf, f: f, res: res})
		w.pendingBytes += f.Size
		if len(w.pending) >= batchFiles || w.pendingBytes >= batchBytes {
			return w.flush()
		}
		return nil
	}
	if err := w.flush(); err != nil { // files are placed in the plan's order
		return err
	}
	if err := w.place(wf, f); err != nil {
		return err
	}
	w.placed(res)
	return nil
}

// writeErr is the error of op (write, fsync, chmod) on the temporary file of wf: it names the file
// the copy was writing by its final name, and for what a user can act on says what to do.
func writeErr(op string, wf *wfile, err error) error {
	err = unwrapPath(err)
	return fmt.Errorf("%w: %s %s: %v%s", ErrDest, op, escape.Text(wf.final), err, destHint(err))
}

// destHint is what to do about a destination's error err ("" if nothing to say).
func destHint(err error) string {
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return " (free space there, or choose another destination, then run the same command again)"
	case errors.Is(err, unix.EROFS):
		return " (the destination's filesystem is mounted read-only)"
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return " (the destination is not writable by this user: check its permissions)"
	case errors.Is(err, unix.EFBIG):
		return " (the file is larger than the destination allows: ulimit -f, or the filesystem's limit)"
	}
	return ""
}

// place syncs the verified temporary file of f, gives it its mode (and, with preserve, its
// times) and renames it into place, then syncs its directory. The file stays open, and locked,
// until it has its final name.
func (w *Writer) place(wf *wfile, f File) error {
	wf.stop()
	if err := wf.f.Sync(); err != nil {
		return writeErr("fsync", wf, err)
	}
	fd, err := w.dirs.open(wf.dir, 0o755)
	if err != nil {
		return err
	}
	if err := w.rename(wf, f, fd); err != nil {
		return err
	}
	_ = unix.Fsync(fd)
	return nil
}

// rename gives the synced temporary file of f its mode (and, with preserve, its times) and
// renames it into place in its directory fd, then closes it. The mode is the source's less the
// umask for a new file; a file that replaces a regular file of this user's keeps that file's
// permission bits without -p (as scp and rsync leave an existing file's mode: a private file
// stays private), never those of a file someone else put there (0666, in a shared directory).
func (w *Writer) rename(wf *wfile, f File, fd int) error {
	was, err := replaceable(fd, wf.base, wf.final, "a file") // one look at what stands there
	if err != nil {
		return err
	}
	mode := newMode(f, was, w.preserve)
	if err := wf.f.Chmod(mode); err != nil {
		return writeErr("chmod", wf, err)
	}
	if w.preserve {
		ts := unix.NsecToTimespec(f.MTime)
		_ = unix.UtimesNanoAt(fd, wf.tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	old := holdReplaced(fd, wf.base, was)
	if err := unix.Renameat(fd, wf.tmp, fd, wf.base); err != nil {
		if old != nil {
			old.Close()
		}
		return fmt.Errorf("%w: rename into %s: %v", ErrDest, escape.Text(wf.final), err)
	}
	if old != nil {
		w.replaced = append(w.replaced, old)
		if len(w.replaced) > maxReplacedHeld {
			go w.replaced[0].Close()
			w.replaced = w.replaced[1:]
		}
	}
	delete(w.temps, wf)
	wf.f.Close()
	wf.dropRecord()
	return nil
}

// newMode is the permission bits of the file f that replaces was (nil: nothing there): the
// source's less the umask, or, without preserve, those of a regular file of this user's that it
// replaces (not the bits of a file someone else put there).
func newMode(f File, was *unix.Stat_t, preserve bool) os.FileMode {
	if was != nil && !preserve && int(was.Uid) == os.Geteuid() {
		return os.FileMode(was.Mode & 0o777)
	}
	return f.Mode.Perm() &^ umask
}

// replacedHoldMin is the size from which a file that a copy replaces is kept open across the
// rename and closed only when the writer closes (after the sender has the result). Renaming over
// the last link of a large file frees its blocks inside the rename: 1.0 s for 1 GiB on this
// project's VM (ext4, mounted with discard), which sat between the last block and the receiver's
// confirmation. An open file keeps its inode, so the freeing happens at the final close instead.
const replacedHoldMin = 64 << 20

// maxReplacedHeld bounds how many replaced files the writer holds open at once.
const maxReplacedHeld = 8

// holdReplaced opens the regular file name in dirfd (was: what replaceable found there, nil for
// none) that a rename is about to replace when it is at least replacedHoldMin long, and returns it
// (nil otherwise, and on any error).
func holdReplaced(dirfd int, name string, was *unix.Stat_t) *os.File {
	if was == nil || was.Size < replacedHoldMin {
		return nil
	}
	var st unix.Stat_t
	ofd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	if unix.Fstat(ofd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(ofd)
		return nil
	}
	return os.NewFile(uintptr(ofd), name)
}

// closeAll closes fs (replaced files: their blocks are freed now, off the transfer's path).
func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// openOld opens, in its directory fd, the old file that the kept blocks of wf (a file compared
// block by block) are copied from: the file this end offered, still as it was then.
func (w *Writer) openOld(wf *wfile, fd int) error {
	d := w.plan.delta[wf.idx]
	if d == nil || len(d.keep) == 0 {
		return nil
	}
	o := w.deltas.take(wf.idx)
	var err error
	if o == nil || o.bad {
		err = errors.New("it could not be read")
	} else {
		wf.old, err = openOldAt(fd, o)
	}
	if err != nil {
		return fmt.Errorf("%w: %s changed during the copy (%v); run the same command again", ErrDest, escape.Text(wf.final), err)
	}
	wf.oldFile = o
	return nil
}

// fillKept copies into wf's temporary file, in order, its kept blocks below block end (the
// file's block index) from the old file, each checked against this end's digest of it when it
// was compared, and adds them to the file's digest: the file fills from the front, kept and
// received blocks alike, so a checkpoint's count of blocks holds both.
func (w *Writer) fillKept(wf *wfile, end uint32) error {
	d := w.plan.delta[wf.idx]
	if d == nil || w.sink || wf.nextKept >= len(d.keep) || d.keep[wf.nextKept] >= end {
		return nil
	}
	size := w.plan.Files[wf.idx].Size
	fp, err := filePlan(size)
	if err != nil {
		return err
	}
	if w.keepBuf == nil {
		w.keepBuf = NewBlockBuffer()
	}
	for ; wf.nextKept < len(d.keep) && d.keep[wf.nextKept] < end; wf.nextKept++ {
		b := d.keep[wf.nextKept]
		off, data := int64(b)*BlockSize, w.keepBuf[:blockLen(size, b)]
		if n, err := wf.old.ReadAt(data, off); n < len(data) {
			return fmt.Errorf("%w: read %s: %v", ErrDest, escape.Text(wf.final), err)
		}
		s := fp.Sum(b, data)
		if !s.Matches([32]byte(wf.oldFile.sums[32*b:])) {
			return fmt.Errorf("%w: %s changed during the copy (its block %d is no longer the one compared); run the same command again", ErrDest, escape.Text(wf.final), b)
		}
		if err := wf.write(data, off); err != nil {
			return writeErr("write", wf, err)
		}
		w.tree.add(&s)
	}
	return nil
}

// closeOld closes wf's old file, if it has one open.
func (wf *wfile) closeOld() {
	if wf.old != nil {
		wf.old.Close()
		wf.old = nil
	}
}

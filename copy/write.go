package copy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/escape"
)

// ErrDest marks problems with the destination (missing directory, not writable, not a directory).
var ErrDest = errors.New("destination")

// ErrVerify marks data that failed verification: a block or whole-file digest mismatch.
var ErrVerify = errors.New("verification failed")

// FileResult is one received and verified file.
type FileResult struct {
	Name string `json:"name"`
	Path string `json:"path,omitempty"`
	Size int64  `json:"size"`
	Sum  string `json:"blake3"`
}

// Writer receives blocks in order, verifies them and assembles files. Every file is written to a
// temporary name in its destination directory, checked against the sender's whole-file digest,
// fsynced and only then renamed into place; Abort removes whatever is unfinished. Not safe for
// concurrent use.
type Writer struct {
	plan     *Plan
	target   *Target
	sink     bool
	preserve bool
	directIO bool // files of a block or more are written with O_DIRECT
	digest   func(ctx context.Context, file int) ([32]byte, error)
	done     func(FileResult)

	next     uint32 // next block expected
	nextFile int    // next file to finalize
	cur      *wfile
	temps    map[*wfile]bool // temporary files not yet renamed into place
	// receivedBytes is what the received files placed so far hold; localCopied what copyLocal
	// wrote (bounded by localCopyRatio of it).
	receivedBytes, localCopied int64
	replaced                   []*os.File // files the copy replaced, held open until Close (holdReplaced)
	results                    []FileResult
	pending                    []pendingFile // verified small files waiting to be placed (flush)
	pendingBytes               int64
	tree                       fileTree
	dirs                       *dirs     // the destination's directories, opened without following links
	reg                        *registry // this writer's entry in the partial-file registry
	// hardSums holds the whole-file digests of the files that hard links of the plan name, for
	// the copy made where the destination cannot link (copyLocal).
	hardSums map[string][32]byte
	// hardIDs holds the device and inode of those files as placed: a hard link is made only to
	// the file this writer put there, not to whatever stands at its name since.
	hardIDs map[string]devIno
	// hardFirst is the plan index of each file that hard links name (copyLocal copies it).
	hardFirst map[string]int
	// madeDirs are the directories of the plan as mkdir made or found them, by their paths
	// relative to the root: finishDirs sets the modes of those only.
	madeDirs map[string]madeDir
	records  bool      // write resume records (resume.go)
	resume   *Partials // the kept partial files of resumed files
	deltas   *Deltas   // the old files of the files compared block by block
	keepBuf  []byte    // a kept block copied from an old file (fillKept)
	kept     bool      // Interrupt left partial files for a resume: the registry entry stays

	ckEvery   int64         // a checkpoint every this many bytes of a file (WriterOptions.CheckpointEvery)
	ckGap     time.Duration // at least this long apart
	syncEvery int64         // a direct-I/O file's background data sync every this many bytes
	calls     WriterCalls   // every field set
	stats     struct{ checkpoints, directBytes, dataSyncs, batches atomic.Int64 }
}

// madeDir is a directory of the plan as mkdir left it: its device and inode, and whether it stood
// at the destination before the copy, with its mode then (without -p it keeps it).
type madeDir struct {
	id      devIno
	existed bool
	mode    uint32
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	Sink     bool // verify but discard: nothing touches the disk
	Preserve bool // keep the source's modification time
	// Digest waits for the sender's whole-file digest of file i.
	Digest func(ctx context.Context, file int) ([32]byte, error)
	// Records: the files are written with resume records, and an interrupted copy leaves them
	// for the next one (Interrupt); off with --no-resume.
	Records bool
	// Resume holds the partial files of the files the plan resumes (Partials.Apply).
	Resume *Partials
	// Delta holds the old files of the files the plan compared block by block (ApplyDeltas):
	// their kept blocks are copied from them.
	Delta *Deltas
	// Done, when set, is told of each file once it is verified and in place (in sink mode:
	// verified), on the goroutine that writes.
	Done func(FileResult)
	// NoDirectIO: never write with O_DIRECT (FARWING_DIRECT=0, tuning.Settings.NoDirectIO).
	NoDirectIO bool
	// CheckpointEvery is how much of a file the writer receives between two checkpoints of its
	// resume record (0: checkpointEvery, at most one per checkpointGap). A writer given its own
	// interval checkpoints at each one, however soon: tests that interrupt copies of small files
	// set it.
	CheckpointEvery int64
	// DataSyncEvery is how much a direct-I/O file grows between two background data syncs (0:
	// dataSyncEvery).
	DataSyncEvery int64
	// Calls are system calls the writer makes, replaced by tests that make them fail; the zero
	// value is the system's.
	Calls WriterCalls
}

// WriterCalls are system calls a Writer makes through its options, so that a test can make them
// fail; a nil field is the system's call.
type WriterCalls struct {
	// SyncData makes the data of a partial file durable before a checkpoint writes its record
	// (fdatasync; the record counts only synced data).
	SyncData func(fd int) error
	// Sync makes a file of a batch durable before it is placed (fsync).
	Sync func(f *os.File) error
	// Linkat makes a hard link (linkat(2)); where the destination cannot link (EXDEV, EPERM,
	// EMLINK, EOPNOTSUPP) the writer copies the file instead.
	Linkat func(olddirfd int, oldpath string, newdirfd int, newpath string, flags int) error
	// Truncate gives a new partial file its length (ftruncate), which the file system may refuse
	// (EFBIG: a length beyond what it can hold).
	Truncate func(f *os.File, size int64) error
}

// WriterStats counts what a Writer did.
type WriterStats struct {
	Checkpoints int64 // checkpoints of resume records started
	DirectBytes int64 // bytes written with direct I/O
	DataSyncs   int64 // background data syncs of direct-I/O files started
	Batches     int64 // batches of small files placed (flush)
}

// Stats returns the writer's counts so far; it may be called on any goroutine.
func (w *Writer) Stats() WriterStats {
	return WriterStats{Checkpoints: w.stats.checkpoints.Load(), DirectBytes: w.stats.directBytes.Load(),
		DataSyncs: w.stats.dataSyncs.Load(), Batches: w.stats.batches.Load()}
}

// NewWriter returns a Writer for plan into target (target may be nil in sink mode).
func NewWriter(plan *Plan, target *Target, o WriterOptions) *Writer {
	w := &Writer{plan: plan, target: target, sink: o.Sink, preserve: o.Preserve, digest: o.Digest, records: o.Records && !o.Sink, resume: o.Resume, deltas: o.Delta, done: o.Done, directIO: !o.NoDirectIO,
		temps: map[*wfile]bool{}, madeDirs: map[string]madeDir{}, hardSums: map[string][32]byte{}, hardIDs: map[string]devIno{}, hardFirst: map[string]int{},
		ckEvery: o.CheckpointEvery, syncEvery: o.DataSyncEvery, calls: o.Calls}
	if w.ckEvery <= 0 {
		w.ckEvery, w.ckGap = checkpointEvery, checkpointGap
	}
	if w.syncEvery <= 0 {
		w.syncEvery = dataSyncEvery
	}
	if w.calls.SyncData == nil {
		w.calls.SyncData = syncData
	}
	if w.calls.Sync == nil {
		w.calls.Sync = (*os.File).Sync
	}
	if w.calls.Linkat == nil {
		w.calls.Linkat = unix.Linkat
	}
	if w.calls.Truncate == nil {
		w.calls.Truncate = (*os.File).Truncate
	}
	for _, f := range plan.Files {
		if f.Hard != "" {
			w.hardSums[f.Hard] = [32]byte{}
		}
	}
	for i, f := range plan.Files {
		if _, ok := w.hardSums[f.Name]; ok && f.Regular() {
			w.hardFirst[f.Name] = i
		}
	}
	if !w.sink {
		SweepPartials()
		w.dirs = newDirs(target.root)
		w.reg = newRegistry()
	}
	return w
}

// Results lists the files finished so far.
func (w *Writer) Results() []FileResult { return w.results }

// Next is the next block the writer expects.
func (w *Writer) Next() uint32 { return w.next }

// WriteBlock verifies block b against hash and writes it. Blocks must come in order.
func (w *Writer) WriteBlock(ctx context.Context, b uint32, data []byte, hash [32]byte) error {
	s := w.plan.Sum(b, data)
	return w.WriteChecked(ctx, b, data, &s, s.Matches(hash))
}

// WriteChecked writes block b, which the caller has hashed with Plan.Sum (possibly on another
// goroutine) and compared with the sender's digest (ok: BlockSum.Matches; false fails the
// transfer with ErrVerify). Blocks must come in order; the whole-file digest is built from sum.
func (w *Writer) WriteChecked(ctx context.Context, b uint32, data []byte, sum *BlockSum, ok bool) error {
	if b != w.next {
		return fmt.Errorf("internal: block %d written out of order (want %d)", b, w.next)
	}
	file, off, n := w.plan.Locate(b)
	if n != len(data) {
		return fmt.Errorf("internal: block %d has %d bytes, want %d", b, len(data), n)
	}
	if !ok {
		return fmt.Errorf("%w: block %d of %s (offset %d) does not match the sender's digest", ErrVerify, b, w.plan.Files[file].Name, off)
	}
	if err := w.finishUpTo(ctx, file); err != nil {
		return err
	}
	if w.cur == nil || w.cur.idx != file {
		if err := w.open(file); err != nil {
			return err
		}
	}
	if err := w.fillKept(w.cur, uint32(off/BlockSize)); err != nil {
		return err
	}
	if wf := w.cur; wf.f != nil {
		if err := wf.write(data, off); err != nil {
			return writeErr("write", wf, err)
		}
	}
	w.tree.add(sum)
	w.next++
	if first, nb := w.plan.FileBlocks(file); b == first+nb-1 {
		return w.finish(ctx, file)
	}
	if wf := w.cur; wf.f != nil {
		wf.checkpoint(off + int64(len(data))) // not after a file's last block: it is placed now
	}
	return nil
}

// Finish finalizes the remaining files (those with no blocks after the last block written).
func (w *Writer) Finish(ctx context.Context) error {
	if w.next != w.plan.NumBlocks() {
		return fmt.Errorf("internal: finish after %d of %d blocks", w.next, w.plan.NumBlocks())
	}
	if err := w.finishUpTo(ctx, len(w.plan.Files)); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	return w.finishDirs()
}

// finishUpTo finalizes every entry before index file that has no blocks left to come:
// directories are created, links made, empty files written.
func (w *Writer) finishUpTo(ctx context.Context, file int) error {
	for w.nextFile < file {
		i := w.nextFile
		f := w.plan.Files[i]
		if f.Regular() && w.plan.Skipped(i) {
			if !w.sink {
				if err := w.keep(f); err != nil {
					return err
				}
			}
			w.nextFile++
			continue
		}
		if f.Regular() {
			if _, nb := w.plan.FileBlocks(i); nb > 0 {
				return fmt.Errorf("internal: file %s skipped", f.Name)
			}
			if err := w.open(i); err != nil {
				return err
			}
			if err := w.finish(ctx, i); err != nil {
				return err
			}
			continue
		}
		if !w.sink {
			var err error
			switch {
			case f.Dir:
				err = w.mkdir(f)
			case f.Link != "":
				err = w.symlink(f)
			default:
				if err = w.flush(); err == nil { // the file it links to is in place
					err = w.hardlink(f)
				}
			}
			if err != nil {
				return err
			}
		}
		w.nextFile++
	}
	return nil
}

// mkdir creates the directory f, or opens the one already there, writable by this user until
// finishDirs gives it its mode. A directory that was there keeps its mode without -p (scp's and
// rsync's rule: a copy into ~ must not open a private directory to others, or close it to its
// owner): its mode is noted, and where this user could not write it, u+rwx is added until
// finishDirs gives the mode back. A top-level name only the remote chose (Target.Fresh) must be
// made by this copy: one already there is refused, never merged into.
func (w *Writer) mkdir(f File) error {
	rel := w.target.rel(f.Name)
	parent, base, _ := cutLast(rel)
	pfd, err := w.dirs.open(parent, 0o755)
	if err != nil {
		return err
	}
	err = unix.Mkdirat(pfd, base, uint32(f.Mode.Perm()|0o700))
	made := err == nil
	switch {
	case err != nil && !errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%w: mkdir %s: %v", ErrDest, escape.Text(w.target.Path(f.Name)), err)
	case !made && w.target.fresh[f.Name]:
		return w.target.freshErr(f.Name)
	}
	fd, err := w.dirs.open(rel, 0o755) // never through a link: one standing there stops the copy
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(w.target.Path(f.Name)), err)
	}
	w.madeDirs[rel] = madeDir{id: devIno{uint64(st.Dev), uint64(st.Ino)}, existed: !made, mode: uint32(st.Mode) & 0o7777}
	if !made && st.Mode&0o700 != 0o700 {
		_ = unix.Fchmod(fd, uint32(st.Mode)&0o7777|0o700) // given back by finishDirs
	}
	return nil
}

// finishDirs gives the directories of the plan their modes once everything in them is written,
// deepest first, so that a directory without write or search permission is closed only after its
// contents: a directory this copy made gets the source's mode less the umask (as a new file
// does), one that was there keeps its own (mkdir), and with -p every one gets the source's mode
// and its modification time.
func (w *Writer) finishDirs() error {
	if w.sink {
		return nil
	}
	for i := len(w.plan.Files) - 1; i >= 0; i-- {
		f := w.plan.Files[i]
		if !f.Dir {
			continue
		}
		rel := w.target.rel(f.Name)
		parent, base, _ := cutLast(rel)
		pfd, err := w.dirs.open(parent, 0o755)
		if err != nil {
			return err
		}
		d := w.madeDirs[rel]
		if d.existed && !w.preserve && d.mode&0o700 == 0o700 {
			continue // there before, and left as it was
		}
		mode := d.mode
		if !d.existed || w.preserve {
			mode = uint32(f.Mode.Perm() &^ umask)
		}
		fd, err := openDirAt(pfd, base, 0, false)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrDest, escape.Text(w.target.Path(f.Name)), err)
		}
		// The directory this copy made or found there, not another put at its name since (in a
		// destination others may write, one of this user's private directories moved there).
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || (devIno{uint64(st.Dev), uint64(st.Ino)}) != d.id {
			unix.Close(fd)
			return fmt.Errorf("%w: %s was replaced by another directory during the copy; its mode and time were left as they are",
				ErrDest, escape.Text(w.target.Path(f.Name)))
		}
		err = unix.Fchmod(fd, mode)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("%w: chmod %s: %v", ErrDest, escape.Text(w.target.Path(f.Name)), err)
		}
		if w.preserve {
			ts := unix.NsecToTimespec(f.MTime)
			_ = unix.UtimesNanoAt(pfd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	return nil
}

// placed records the file res as verified and in place.
func (w *Writer) placed(res FileResult) {
	w.results = append(w.results, res)
	if w.done != nil {
		w.done(res)
	}
}

// umask is the process's file mode creation mask, read once at start: files get their source's
// permissions less it, as a new file would (the temporary file is 0600 until it is complete).
var umask = func() os.FileMode {
	m := unix.Umask(0o022)
	unix.Umask(m)
	return os.FileMode(m)
}()

// Abort removes every temporary file not yet renamed into place, and its resume record, and
// closes the writer.
func (w *Writer) Abort() {
	for wf := range w.temps {
		wf.stop()
		wf.f.Close()
		wf.closeOld()
		wf.dropRecord()
		if fd, err := w.dirs.open(wf.dir, 0o755); err == nil {
			unix.Unlinkat(fd, wf.tmp, 0)
		}
	}
	w.temps = map[*wfile]bool{}
	w.Close()
}

// Interrupt ends a copy that did not finish: a temporary file with a resume record on disk is
// left, with the record, for the next copy to resume (the record counts only blocks synced
// before it was written); every other one is removed, as Abort does.
func (w *Writer) Interrupt() {
	_ = w.flush() // verified files waiting for their batch are placed
	for wf := range w.temps {
		if w.records && wf.rec != nil && wf.stop() {
			wf.f.Close()
			wf.closeOld()
			if wf.dirFD >= 0 {
				unix.Close(wf.dirFD)
				wf.dirFD = -1
			}
			delete(w.temps, wf)
			w.kept = true
		}
	}
	w.Abort()
}

// Close releases the writer's directories and its registry entry; temporary files still there
// (a transfer that did not finish) are left to Abort or to a later sweep.
func (w *Writer) Close() {
	if len(w.replaced) > 0 {
		go closeAll(w.replaced)
		w.replaced = nil
	}
	if w.dirs != nil {
		w.dirs.close()
	}
	if len(w.temps) == 0 {
		if w.kept && w.reg != nil {
			w.reg.f.Close() // the entry stays for the kept files: SweepPartials reads it
		} else {
			w.reg.close()
		}
		w.reg = nil
	}
}

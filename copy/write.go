package copy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrDest marks problems with the destination (missing directory, not writable, not a directory).
var ErrDest = errors.New("destination")

// ErrVerify marks data that failed verification: a block or whole-file digest mismatch.
var ErrVerify = errors.New("verification failed")

// Target is where a transfer's files land, resolved with scp's rules.
type Target struct {
	dst  string
	into bool // dst is an existing directory: files go inside it under their names
}

// ResolveTarget applies scp's rules for DST: an existing directory (or a path ending in "/")
// receives the sources under their own names; otherwise a single source is written as DST.
func ResolveTarget(dst string, files []File) (*Target, error) {
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
		return &Target{dst: dst, into: true}, nil
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
	parent := filepath.Dir(filepath.Clean(dst))
	pst, err := os.Stat(parent)
	if err != nil || !pst.IsDir() {
		return nil, fmt.Errorf("%w: directory %s does not exist", ErrDest, parent)
	}
	if err := probeWritable(parent); err != nil {
		return nil, err
	}
	return &Target{dst: filepath.Clean(dst)}, nil
}

// Path is where the file called name (a plan name) is written.
func (t *Target) Path(name string) string {
	if t.into {
		return filepath.Join(t.dst, filepath.FromSlash(name))
	}
	_, rest, _ := strings.Cut(name, "/")
	return filepath.Join(t.dst, filepath.FromSlash(rest))
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
	digest   func(ctx context.Context, file int) ([32]byte, error)

	next     uint32 // next block expected
	nextFile int    // next file to finalize
	cur      *wfile
	temps    map[string]bool
	results  []FileResult
	tree     fileTree
}

// writebackEvery is how much written data the writer lets accumulate before it starts the
// kernel's writeback of it.
const writebackEvery = 32 << 20

type wfile struct {
	flushed int64 // writeback started below this offset
	direct  bool  // f has O_DIRECT on
	idx     int
	f       *os.File
	tmp     string
	final   string
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	Sink     bool // verify but discard: nothing touches the disk
	Preserve bool // keep the source's modification time
	// Digest waits for the sender's whole-file digest of file i.
	Digest func(ctx context.Context, file int) ([32]byte, error)
}

// NewWriter returns a Writer for plan into target (target may be nil in sink mode).
func NewWriter(plan *Plan, target *Target, o WriterOptions) *Writer {
	return &Writer{plan: plan, target: target, sink: o.Sink, preserve: o.Preserve, digest: o.Digest,
		temps: map[string]bool{}}
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
	if wf := w.cur; wf.f != nil {
		if err := wf.write(data, off); err != nil {
			return fmt.Errorf("%w: write %s: %v", ErrDest, wf.tmp, unwrapPath(err))
		}
	}
	w.tree.add(sum)
	w.next++
	if first, nb := w.plan.FileBlocks(file); b == first+nb-1 {
		return w.finish(ctx, file)
	}
	return nil
}

// Finish finalizes the remaining files (those with no blocks after the last block written).
func (w *Writer) Finish(ctx context.Context) error {
	if w.next != w.plan.NumBlocks() {
		return fmt.Errorf("internal: finish after %d of %d blocks", w.next, w.plan.NumBlocks())
	}
	return w.finishUpTo(ctx, len(w.plan.Files))
}

// finishUpTo finalizes every file before index file that has no blocks left to come.
func (w *Writer) finishUpTo(ctx context.Context, file int) error {
	for w.nextFile < file {
		i := w.nextFile
		f := w.plan.Files[i]
		if _, nb := w.plan.FileBlocks(i); nb > 0 && !f.Dir {
			return fmt.Errorf("internal: file %s skipped", f.Name)
		}
		if f.Dir {
			if !w.sink {
				p := w.target.Path(f.Name)
				if err := os.MkdirAll(p, f.Mode.Perm()|0o700); err != nil {
					return fmt.Errorf("%w: %v", ErrDest, err)
				}
			}
			w.nextFile++
			continue
		}
		if err := w.open(i); err != nil {
			return err
		}
		if err := w.finish(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) open(i int) error {
	w.tree.reset()
	wf := &wfile{idx: i}
	w.cur = wf
	if w.sink {
		return nil
	}
	wf.final = w.target.Path(w.plan.Files[i].Name)
	dir := filepath.Dir(wf.final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrDest, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	wf.tmp = filepath.Join(dir, "."+filepath.Base(wf.final)+".farwing-"+hex.EncodeToString(rnd[:])+".part")
	f, err := os.OpenFile(wf.tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, w.plan.Files[i].Mode.Perm()|0o200)
	if err != nil {
		return fmt.Errorf("%w: cannot create a file in %s: %v", ErrDest, dir, unwrapPath(err))
	}
	w.temps[wf.tmp] = true
	wf.f = f
	if sz := w.plan.Files[i].Size; sz > 0 {
		_ = f.Truncate(sz) // reserve the length; blocks fill it in
		// Direct I/O for files of a block or more: the page cache costs more CPU than the disk
		// (on this project's VM, buffered writes took 1.9 CPU s/GiB with fsync, O_DIRECT 0.07),
		// and a copied file is not read back soon. FARWING_DIRECT=0 turns it off.
		wf.direct = sz >= BlockSize && directIO && setDirect(f, true)
	}
	return nil
}

// directAlign is the alignment direct I/O asks of buffers, offsets and lengths: the page size,
// which covers every logical block size in use.
const directAlign = 4096

// directBytes counts bytes written with direct I/O (for tests).
var directBytes atomic.Int64

// directIO says whether the writer may use O_DIRECT (FARWING_DIRECT=0 turns it off).
var directIO = os.Getenv("FARWING_DIRECT") != "0"

// write writes one block at off: with direct I/O while the block is aligned (every block but a
// file's last, whose unaligned end goes through the page cache after direct I/O is switched
// off), buffered otherwise, starting the kernel's writeback behind the data as it goes.
func (wf *wfile) write(data []byte, off int64) error {
	if wf.direct {
		n := len(data) &^ (directAlign - 1)
		if n > 0 && directOK(data[:n], off) {
			if _, err := wf.f.WriteAt(data[:n], off); err == nil {
				directBytes.Add(int64(n))
				data, off = data[n:], off+int64(n)
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

func (w *Writer) finish(ctx context.Context, i int) error {
	wf := w.cur
	f := w.plan.Files[i]
	got := w.tree.sum()
	want, err := w.digest(ctx, i)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: %s: whole-file digest %x differs from the sender's %x", ErrVerify, f.Name, got[:8], want[:8])
	}
	res := FileResult{Name: f.Name, Size: f.Size, Sum: hex.EncodeToString(got[:])}
	if !w.sink {
		if err := wf.f.Sync(); err != nil {
			return fmt.Errorf("%w: fsync %s: %v", ErrDest, wf.tmp, err)
		}
		if err := wf.f.Close(); err != nil {
			return fmt.Errorf("%w: close %s: %v", ErrDest, wf.tmp, err)
		}
		if f.Mode.Perm()&0o200 == 0 {
			_ = os.Chmod(wf.tmp, f.Mode.Perm()) // the temp file was created writable
		}
		if w.preserve {
			mt := time.Unix(0, f.MTime)
			_ = os.Chtimes(wf.tmp, mt, mt)
		}
		if err := os.Rename(wf.tmp, wf.final); err != nil {
			return fmt.Errorf("%w: rename into %s: %v", ErrDest, wf.final, unwrapLink(err))
		}
		delete(w.temps, wf.tmp)
		syncDir(filepath.Dir(wf.final))
		res.Path = wf.final
	}
	w.results = append(w.results, res)
	w.cur = nil
	w.nextFile = i + 1
	return nil
}

func unwrapLink(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Abort removes every temporary file not yet renamed into place.
func (w *Writer) Abort() {
	if w.cur != nil && w.cur.f != nil {
		w.cur.f.Close()
	}
	for t := range w.temps {
		os.Remove(t)
	}
	w.temps = map[string]bool{}
}

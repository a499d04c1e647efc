package copy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// smallTree writes n small files (0–5,000 bytes) over two directories below dir/t, and one file
// above batchFileMax between them, with distinct modification times; it returns their contents
// by name relative to dir.
func smallTree(t *testing.T, dir string, n int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("t/d%d/f%04d", i%2, i)
		_, b := writeFile(t, dir, name, (i*397)%5001)
		mt := time.Unix(1_600_000_000+int64(i), 0)
		os.Chtimes(filepath.Join(dir, name), mt, mt)
		want[name] = b
	}
	_, b := writeFile(t, dir, "t/d0/m-big", batchFileMax+BlockSize/2)
	want["t/d0/m-big"] = b
	return want
}

// streamTree copies src into dst through a writer with options o (Digest set here), reading
// and writing at once with a few block buffers, as a transfer does. stop, when set, is asked
// after each block whether to stop there; the writer is returned unfinished then.
func streamTree(t *testing.T, src *Sources, dst string, o WriterOptions, stop func(*Plan, *Block) bool) (*Writer, *Plan, error) {
	t.Helper()
	plan, target := planTarget(t, src, dst)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := NewPool(8)
	out := make(chan *Block, 8)
	var mu sync.Mutex
	sums := map[int][32]byte{}
	readErr := make(chan error, 1)
	go func() {
		readErr <- Read(ctx, plan, src.Open(), pool, out, func(i int, s [32]byte) { mu.Lock(); sums[i] = s; mu.Unlock() })
		close(out)
	}()
	defer func() {
		cancel()
		for b := range out {
			pool.Put(b.Data)
		}
	}()
	// Whole-file digests come after the file's last block is read; the writer waits for them.
	o.Digest = func(ctx context.Context, i int) ([32]byte, error) {
		for {
			mu.Lock()
			s, ok := sums[i]
			mu.Unlock()
			if ok {
				return s, nil
			}
			time.Sleep(time.Millisecond)
		}
	}
	w := NewWriter(plan, target, o)
	for b := range out {
		err := w.WriteBlock(ctx, b.ID, b.Data, b.Hash)
		stopped := err == nil && stop != nil && stop(plan, b)
		pool.Put(b.Data)
		if err != nil {
			return w, plan, err
		}
		if stopped {
			return w, plan, nil
		}
	}
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	return w, plan, w.Finish(ctx)
}

// TestWriterBatches: small files are placed in batches, not one at a time, and still each is
// told of (Done) only once it stands in place with its bytes, in the plan's order; modes and
// (with preserve) times are kept; a larger file between them is placed in order too.
func TestWriterBatches(t *testing.T) {
	root, dst := t.TempDir(), t.TempDir()
	const n = 600
	want := smallTree(t, root, n)
	src, err := Collect([]string{filepath.Join(root, "t")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	o := WriterOptions{Preserve: true, Done: func(r FileResult) {
		got, err := os.ReadFile(r.Path)
		rel, _ := filepath.Rel(dst, r.Path)
		if err != nil || !bytes.Equal(got, want[rel]) {
			t.Errorf("%s is reported done but does not hold its bytes yet (%v)", rel, err)
		}
		order = append(order, r.Name)
	}}
	w, _, err := streamTree(t, src, dst, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	res := w.Results()
	if len(res) != n+1 || len(order) != n+1 {
		t.Fatalf("%d results, %d done calls, want %d", len(res), len(order), n+1)
	}
	var names []string
	for _, f := range src.Files {
		if f.Regular() {
			names = append(names, f.Name)
		}
	}
	if strings.Join(order, ",") != strings.Join(names, ",") {
		t.Errorf("done in another order than the plan's")
	}
	// 601 files: at least ceil(600/batchFiles) batches, and not many more (one per file would be
	// 600): the big file flushes what waits before it.
	if got := w.Stats().Batches; got < n/batchFiles+1 || got > n/batchFiles+3 {
		t.Errorf("%d batches for %d small files, want %d to %d", got, n, n/batchFiles+1, n/batchFiles+3)
	}
	for rel, b := range want {
		p := filepath.Join(dst, rel)
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s differs from the source (%v)", rel, err)
		}
		st, _ := os.Stat(p)
		sst, _ := os.Stat(filepath.Join(root, rel))
		if st.Mode() != sst.Mode()&^umask || !st.ModTime().Equal(sst.ModTime()) {
			t.Errorf("%s: mode %v mtime %v, source %v %v", rel, st.Mode(), st.ModTime(), sst.Mode(), sst.ModTime())
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dst, "t", "*", ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// TestWriterBatchSyncFails: a file whose sync fails in its batch stops the copy with an error
// naming it; it and every file after it are left under no final name (Abort removes their
// temporary files), the batches before it stay in place.
func TestWriterBatchSyncFails(t *testing.T) {
	root, dst := t.TempDir(), t.TempDir()
	const n = 600
	smallTree(t, root, n)
	src, err := Collect([]string{filepath.Join(root, "t")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	// The plan lists d0's 300 files (and the big one), then d1's: d1's first batch is its
	// files f0001–f0511, the second (the last) the rest, f0513–f0599, where the failing one is.
	bad := "f0521"
	fsync := func(f *os.File) error {
		// The temporary file's own name (".f0521.farwing-RANDOM.part"), not its random part,
		// which can hold the digits too.
		if strings.HasPrefix(filepath.Base(f.Name()), "."+bad+".") {
			return &os.PathError{Op: "fsync", Path: f.Name(), Err: errors.New("input/output error")}
		}
		return f.Sync()
	}
	w, _, err := streamTree(t, src, dst, WriterOptions{Calls: WriterCalls{Sync: fsync}}, nil)
	w.Abort()
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a failed sync: %v, want a destination error naming %s", err, bad)
	}
	for i := range n {
		_, serr := os.Stat(filepath.Join(dst, "t", fmt.Sprintf("d%d/f%04d", i%2, i)))
		if wantPlaced := i%2 == 0 || i < 512; (serr == nil) != wantPlaced {
			t.Errorf("f%04d: in place %v, want %v", i, serr == nil, wantPlaced)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dst, "t", "*", ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// TestWriterBatchSyncFailsOnce: a batch whose sync failed is not placed by the interruption that
// follows, even where a second sync would succeed (after a failed fsync the data may be gone).
func TestWriterBatchSyncFailsOnce(t *testing.T) {
	root, dst := t.TempDir(), t.TempDir()
	smallTree(t, root, 20)
	src, err := Collect([]string{filepath.Join(root, "t")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	fsync := func(f *os.File) error {
		if strings.Contains(f.Name(), "f0003") && failed.CompareAndSwap(false, true) {
			return &os.PathError{Op: "fsync", Path: f.Name(), Err: errors.New("input/output error")}
		}
		return f.Sync()
	}
	w, _, err := streamTree(t, src, dst, WriterOptions{Calls: WriterCalls{Sync: fsync}}, nil)
	w.Interrupt()
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "f0003") {
		t.Fatalf("a failed sync: %v", err)
	}
	// d1's files (odd numbers, f0001–f0019) were one batch, placed at the end: the failed one.
	for i := 1; i < 20; i += 2 {
		if _, err := os.Stat(filepath.Join(dst, "t", fmt.Sprintf("d1/f%04d", i))); err == nil {
			t.Errorf("f%04d is in place after its batch's sync failed", i)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dst, "t", "*", ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// TestWriterInterruptPlacesBatch: an interrupted copy places the verified files that wait for
// their batch (they are complete and checked), and removes the unfinished one.
func TestWriterInterruptPlacesBatch(t *testing.T) {
	root, dst := t.TempDir(), t.TempDir()
	want := smallTree(t, root, 50)
	src, err := Collect([]string{filepath.Join(root, "t")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	// Every block up to the big file's first: the small files of d0 before it are verified.
	big := -1
	w, plan, err := streamTree(t, src, dst, WriterOptions{}, func(plan *Plan, b *Block) bool {
		for i, f := range plan.Files {
			if f.Name == "t/d0/m-big" {
				big = i
			}
		}
		first, _ := plan.FileBlocks(big)
		return b.ID == first
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.pending) == 0 {
		t.Fatal("no file waits for its batch: the test does not test the interruption of one")
	}
	w.Interrupt()
	for i, f := range plan.Files {
		if !f.Regular() || i >= big || !strings.HasPrefix(f.Name, "t/d0/") {
			continue
		}
		got, err := os.ReadFile(filepath.Join(dst, f.Name))
		if err != nil || !bytes.Equal(got, want[f.Name]) {
			t.Errorf("%s: verified before the interruption but not in place (%v)", f.Name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "t/d0/m-big")); err == nil {
		t.Error("the unfinished big file stands in place")
	}
	if m, _ := filepath.Glob(filepath.Join(dst, "t", "*", ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

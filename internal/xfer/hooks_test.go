package xfer

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"sync"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestInProcessEventHooks: Options.File is told of every file copied, once, with its name, size
// and the BLAKE3 of the source, on a push (at the verdict) and on a pull (as each is placed);
// Options.Skip of every file the destination has, with nothing told to File; Options.Progress
// ends with a final report of every byte.
func TestInProcessEventHooks(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 0.01, Delay: 2 * time.Millisecond}, 3)
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]int{"t/a.bin": 2<<20 + 7, "t/sub/b.bin": 999, "t/empty": 0}
	sums := tree(t, src, files)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []fcopy.FileResult
	var skipped map[string]int64
	var last Progress
	o := e.options()
	o.Recursive, o.Preserve = true, true
	o.File = func(f fcopy.FileResult) { mu.Lock(); got = append(got, f); mu.Unlock() }
	o.Skip = func(name string, size int64) { skipped[name] = size }
	o.Progress = func(p Progress) { last = p }
	check := func(what string) {
		t.Helper()
		if len(got) != len(files) {
			t.Errorf("%s: File told of %d files, want %d: %v", what, len(got), len(files), got)
		}
		seen := map[string]bool{}
		for _, f := range got {
			sum, ok := sums[f.Name]
			if !ok || seen[f.Name] || f.Size != int64(files[f.Name]) || f.Sum != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: File told of %+v", what, f)
			}
			seen[f.Name] = true
		}
		if !last.Final || last.Bytes != 2<<20+7+999 || last.Total != last.Bytes {
			t.Errorf("%s: last progress report %+v", what, last)
		}
		if len(skipped) != 0 {
			t.Errorf("%s: Skip told of %v", what, skipped)
		}
	}
	skipped = map[string]int64{}
	if _, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote); err != nil {
		t.Fatalf("push: %v", err)
	}
	check("push")

	got, skipped = nil, map[string]int64{}
	if _, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote); err != nil {
		t.Fatalf("second push: %v", err)
	}
	if len(got) != 0 || len(skipped) != len(files) {
		t.Errorf("second push: File told of %v, Skip of %v", got, skipped)
	}
	for name, size := range files {
		if s, ok := skipped[name]; !ok || s != int64(size) {
			t.Errorf("second push: Skip told of %s as %d bytes (%v), want %d", name, s, ok, size)
		}
	}

	got, skipped = nil, map[string]int64{}
	if _, err := Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back); err != nil {
		t.Fatalf("pull: %v", err)
	}
	check("pull")
}

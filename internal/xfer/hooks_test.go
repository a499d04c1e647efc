package xfer

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestInProcessEventHooks: Options.File is told of every file copied, once, with its name, size
// and the BLAKE3 of the source, on a push (as the remote confirms each) and on a pull (as each
// is placed);
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

// TestInProcessPushFileEventsAsPlaced: on a push, Options.File hears of files as the remote
// places them, not at the end. A tree of 300 small files and one large one, last in the list, is
// pushed while the client's digest of the large file is held back on its way to the remote: until
// it arrives the remote cannot verify that file, nor send its verdict, nor end. File events must
// come while it is held (the remote confirmed the small files it placed in the meantime); then
// every file is told of exactly once, with the BLAKE3 of its source.
func TestInProcessPushFileEventsAsPlaced(t *testing.T) {
	e := newEnv(t, lanetest.Link{Delay: time.Millisecond}, 11)
	src, remote := t.TempDir(), t.TempDir()
	files := map[string]int{"t/zz.bin": 9<<20 + 3}
	for i := range 300 {
		files[fmt.Sprintf("t/s/f%03d", i)] = 1000 + i
	}
	sums := tree(t, src, files)
	top := filepath.Join(src, "t")
	list, err := fcopy.Collect([]string{top}, fcopy.CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	big := -1
	for i, f := range list.Files {
		if f.Name == "t/zz.bin" {
			big = i
		} else if f.Regular() && big >= 0 {
			t.Fatalf("%s comes after the large file in the list: the test needs it last", f.Name)
		}
	}

	var mu sync.Mutex
	var got []fcopy.FileResult
	first := make(chan struct{}) // closed at the first file event
	o := e.options()
	o.Recursive = true
	o.File = func(f fcopy.FileResult) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			close(first)
		}
		got = append(got, f)
	}
	heldFor, toldWhileHeld := time.Duration(0), -1
	o.Start = e.filterClient(func(line []byte) []byte {
		var m Msg
		if json.Unmarshal(line, &m) == nil && m.T == KindDigest && m.File == big {
			start := time.Now()
			select {
			case <-first:
			case <-time.After(10 * time.Second): // bounded: the copy still ends, and the test fails
			}
			mu.Lock()
			heldFor, toldWhileHeld = time.Since(start), len(got)
			mu.Unlock()
		}
		return line
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Push(ctx, o, []string{top}, "host", remote)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if toldWhileHeld < 0 {
		t.Fatal("the client never sent the large file's digest")
	}
	if toldWhileHeld == 0 {
		t.Fatalf("no file event while the remote waited %s for the last file's digest: the files it had placed were confirmed only at the end", heldFor.Round(time.Millisecond))
	}
	t.Logf("%d file events while the last file's digest was held (%s)", toldWhileHeld, heldFor.Round(time.Millisecond))
	if len(got) != len(files) || len(res.Files) != len(files) {
		t.Fatalf("File told of %d files, the result holds %d, want %d", len(got), len(res.Files), len(files))
	}
	seen := map[string]bool{}
	for k, f := range got {
		sum, ok := sums[f.Name]
		if !ok || seen[f.Name] || f.Size != int64(files[f.Name]) || f.Sum != hex.EncodeToString(sum[:]) {
			t.Errorf("file event %d: %+v", k, f)
		}
		seen[f.Name] = true
		if k < toldWhileHeld && f.Name == "t/zz.bin" {
			t.Errorf("the large file was told of while its digest was still held")
		}
		if res.Files[k] != f {
			t.Errorf("file event %d is %+v, the result's %+v", k, f, res.Files[k])
		}
	}
	sameTree(t, filepath.Join(remote, "t"), stripTop(sums))
}

package copy

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCollectMemory: the list Collect builds of 2,000 entries of long names keeps, per entry, its
// File, its path and little else: the name is the end of the path's string, not a second copy.
func TestCollectMemory(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("n", 100)
	for d := range 4 {
		dir := filepath.Join(root, "t", fmt.Sprintf("d%d-%s", d, long))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 499 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d-%s", f, long)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h0 := heap()
	s, err := Collect([]string{filepath.Join(root, "t")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	h1 := heap()
	runtime.KeepAlive(s)
	n := len(s.Files)
	pathLen := 0
	for i, f := range s.Files {
		if !strings.HasSuffix(s.Paths[i], "/"+f.Name) {
			t.Fatalf("entry %d: name %q, path %q", i, f.Name, s.Paths[i])
		}
		pathLen += len(s.Paths[i])
	}
	per := float64(h1-h0) / float64(n)
	// A File (112 bytes), a path (its length, rounded up to a size class) and a slot in Paths (16),
	// with the slices' growth: a second copy of each name would add some 220 bytes.
	limit := 112 + 16 + 1.25*float64(pathLen)/float64(n) + 100
	t.Logf("%d entries, paths of %d bytes on average: %.0f bytes per entry kept (limit %.0f)", n, pathLen/n, per, limit)
	if n != 2001 {
		t.Fatalf("%d entries", n)
	}
	if per > limit {
		t.Fatalf("Collect keeps %.0f bytes per entry, more than %.0f", per, limit)
	}
}

package copy

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/blake3"
)

// TestHashFile: HashFile is b3sum's digest of the file, at block boundaries and off them.
func TestHashFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 1023, BlockSize, BlockSize + 1, 3*BlockSize + 12345} {
		p, b := writeFile(t, dir, "f", size)
		sum, err := HashPath(p, int64(size))
		if err != nil || sum != blake3.Sum256(b) {
			t.Fatalf("size %d: %x, %v; want %x", size, sum[:8], err, blake3.Sum256(b))
		}
	}
	p, _ := writeFile(t, dir, "short", 100)
	if _, err := HashPath(p, 101); err == nil {
		t.Fatal("a file shorter than its listed size hashed without an error")
	}
}

// TestHave: which destination files count as already there, by each rule. Quick check: the same
// size and modification time (to the nanosecond); a different time or size, a link at the name,
// or no file, is sent. --checksum: the same size and BLAKE3, whatever the times; a
// file of the same size and time but other bytes is sent. --ignore-times: nothing is there.
func TestHave(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	mtime := time.Unix(1_700_000_000, 123_456_789)
	other := mtime.Add(time.Second)
	type file struct {
		name      string
		dst       string // "same", "bytes" (same size, other bytes), "size", "link", "" (none)
		dstTime   time.Time
		quick, cs bool // taken as there by the quick check, by --checksum
	}
	cases := []file{
		{"same", "same", mtime, true, true},
		{"newer", "same", other, false, true},
		{"nsec", "same", mtime.Add(time.Nanosecond), false, true},
		{"changed", "bytes", mtime, true, false}, // the quick check's blind spot, which --checksum closes
		{"changed-time", "bytes", other, false, false},
		{"size", "size", mtime, false, false},
		{"link", "link", mtime, false, false},
		{"missing", "", mtime, false, false},
		{"sub/same", "same", mtime, true, true},
	}
	var paths []string
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.MkdirAll(filepath.Join(dst, "t", "sub"), 0o755)
	for _, c := range cases {
		p, b := writeFile(t, src, c.name, 5000)
		os.Chtimes(p, mtime, mtime)
		paths = append(paths, p)
		q := filepath.Join(dst, "t", c.name)
		switch c.dst {
		case "same":
			os.WriteFile(q, b, 0o600)
		case "bytes":
			os.WriteFile(q, bytes.Repeat([]byte{'x'}, len(b)), 0o600)
		case "size":
			os.WriteFile(q, b[:len(b)-1], 0o600)
		case "link":
			os.WriteFile(filepath.Join(dir, "elsewhere"), b, 0o600)
			os.Chtimes(filepath.Join(dir, "elsewhere"), mtime, mtime)
			os.Symlink(filepath.Join(dir, "elsewhere"), q)
		}
		if c.dst != "" && c.dst != "link" {
			os.Chtimes(q, c.dstTime, c.dstTime)
		}
	}
	s, err := Collect([]string{src}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Files {
		s.Files[i].Name = "t" + s.Files[i].Name[len("src"):]
	}
	if err := s.AddSums(); err != nil {
		t.Fatal(err)
	}
	for _, cmp := range []Compare{QuickCheck, Checksum, IgnoreTimes} {
		_, have, err := ResolveTargetHave(dst, s.Files, cmp)
		if err != nil {
			t.Fatalf("%v: %v", cmp, err)
		}
		var got, want []string
		for _, i := range have {
			got = append(got, s.Files[i].Name)
		}
		for _, c := range cases {
			if cmp == QuickCheck && c.quick || cmp == Checksum && c.cs {
				want = append(want, "t/"+c.name)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("compare %q: there %q, want %q", cmp, got, want)
		}
	}
	// A sum that is not one is a malformed list under --checksum.
	s.Files[1].Sum = "zz"
	if _, _, err := ResolveTargetHave(dst, s.Files, Checksum); err == nil {
		t.Error("--checksum took a file list with a malformed digest")
	}
}

// TestSameTime: a destination time with no fraction of a second (a filesystem that keeps
// seconds) matches any source time in that second, before 1970 too; otherwise to the nanosecond.
func TestSameTime(t *testing.T) {
	for _, c := range []struct {
		mtime, sec, nsec int64
		same             bool
	}{
		{1_700_000_000_123_456_789, 1_700_000_000, 123_456_789, true},
		{1_700_000_000_123_456_789, 1_700_000_000, 123_456_788, false},
		{1_700_000_000_123_456_789, 1_700_000_000, 0, true},
		{1_700_000_000_123_456_789, 1_700_000_001, 0, false},
		{-1, -1, 0, true}, // 1969-12-31 23:59:59.999999999
		{-1, 0, 0, false},
		{-1_000_000_000, -1, 0, true},
	} {
		if got := sameTime(c.mtime, c.sec, c.nsec); got != c.same {
			t.Errorf("sameTime(%d, %d, %d) = %v", c.mtime, c.sec, c.nsec, got)
		}
	}
}

// TestPlanSkip: a report of what the receiver has must name regular files of the list, each once,
// ascending; a refused one leaves the plan as it was. Skipped files lose their blocks and the rest
// are numbered anew.
func TestPlanSkip(t *testing.T) {
	files := []File{{Name: "d", Dir: true}, {Name: "d/a", Size: 2*BlockSize + 1}, {Name: "d/b", Size: 10},
		{Name: "d/l", Link: "a"}, {Name: "d/c", Size: BlockSize}}
	for _, bad := range [][]int{{-1}, {5}, {1, 1}, {2, 1}, {0}, {3}} {
		p, _ := NewPlan(files)
		if err := p.Skip(bad); err == nil {
			t.Errorf("Skip(%v) accepted", bad)
		}
		if p.NumBlocks() != 5 || p.Skipped(1) || p.TotalBytes() != 3*BlockSize+11 {
			t.Errorf("Skip(%v) refused, but the plan changed: %d blocks", bad, p.NumBlocks())
		}
	}
	p, _ := NewPlan(files)
	if err := p.Skip([]int{1}); err != nil {
		t.Fatal(err)
	}
	if n, b := p.SkippedFiles(); n != 1 || b != 2*BlockSize+1 || p.NumBlocks() != 2 || p.TotalBytes() != BlockSize+10 {
		t.Fatalf("skipped %d files, %d bytes; %d blocks, %d bytes left", n, b, p.NumBlocks(), p.TotalBytes())
	}
	if f, off, n := p.Locate(0); f != 2 || off != 0 || n != 10 {
		t.Errorf("block 0 is file %d at %d, %d bytes", f, off, n)
	}
	if f, _, n := p.Locate(1); f != 4 || n != BlockSize {
		t.Errorf("block 1 is file %d, %d bytes", f, n)
	}
}

// TestWriterKeepsSkipped: a file the plan skips is neither read nor written nor reported: its
// bytes and inode stay, it gets the source's mode, and with preserve its time; the others arrive.
func TestWriterKeepsSkipped(t *testing.T) {
	dir := t.TempDir()
	p1, _ := writeFile(t, dir, "src/kept", 3000)
	p2, d2 := writeFile(t, dir, "src/sent", BlockSize+7)
	src, err := Collect([]string{p1, p2}, CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	old := bytes.Repeat([]byte("old "), 750)
	os.WriteFile(filepath.Join(out, "kept"), old, 0o600)
	before, _ := os.Stat(filepath.Join(out, "kept"))
	plan, _ := NewPlan(src.Files)
	if err := plan.Skip([]int{0}); err != nil {
		t.Fatal(err)
	}
	target, err := ResolveTarget(out, src.Files)
	if err != nil {
		t.Fatal(err)
	}
	blocks := make(chan *Block, 10)
	sums := map[int][32]byte{}
	opened := map[int]bool{}
	open := src.Open()
	err = Read(context.Background(), plan, func(i int) (io.ReaderAt, io.Closer, error) {
		opened[i] = true
		return open(i)
	}, NewPool(8), blocks, func(i int, s [32]byte) { sums[i] = s })
	if err != nil {
		t.Fatal(err)
	}
	close(blocks)
	if opened[0] || len(sums) != 1 {
		t.Fatalf("the skipped file was read: opened %v, digests %v", opened, sums)
	}
	mt := time.Unix(1_600_000_000, 5).UnixNano()
	plan.Files[0].MTime, plan.Files[0].Mode = mt, 0o640
	w := NewWriter(plan, target, WriterOptions{Preserve: true, Digest: func(_ context.Context, i int) ([32]byte, error) { return sums[i], nil }})
	for b := range blocks {
		if err := w.WriteBlock(context.Background(), b.ID, b.Data, b.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	sent := sums[1]
	if r := w.Results(); len(r) != 1 || r[0].Name != "sent" || r[0].Sum != hex.EncodeToString(sent[:]) {
		t.Fatalf("results %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "sent")); !bytes.Equal(b, d2) {
		t.Fatal("sent differs")
	}
	st, _ := os.Stat(filepath.Join(out, "kept"))
	if b, _ := os.ReadFile(filepath.Join(out, "kept")); !bytes.Equal(b, old) || !os.SameFile(st, before) {
		t.Fatal("the skipped file was rewritten")
	}
	if st.Mode().Perm() != 0o640&^umask || st.ModTime().UnixNano() != mt {
		t.Errorf("the skipped file is mode %v, mtime %d; want %v, %d", st.Mode().Perm(), st.ModTime().UnixNano(), 0o640&^umask, mt)
	}
}

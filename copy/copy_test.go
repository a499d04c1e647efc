package copy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/zeebo/blake3"
)

func writeFile(t *testing.T, dir, name string, size int) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestReadBlocks hashes files whose sizes are not multiples of the block size, and empty files,
// and checks every block, its digest and the whole-file digests.
func TestReadBlocks(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 12345, 0}
	var paths []string
	var datas [][]byte
	for i, sz := range sizes {
		p, b := writeFile(t, dir, "f"+string(rune('a'+i)), sz)
		paths = append(paths, p)
		datas = append(datas, b)
	}
	src, err := Collect(paths, CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(src.Files)
	if err != nil {
		t.Fatal(err)
	}
	wantBlocks := uint32(0 + 1 + 1 + 1 + 2 + 4 + 0)
	if plan.NumBlocks() != wantBlocks {
		t.Fatalf("blocks %d, want %d", plan.NumBlocks(), wantBlocks)
	}
	out := make(chan *Block, 100)
	sums := map[int][32]byte{}
	pool := NewPool(16)
	if err := Read(context.Background(), plan, src.Open(), pool, out, func(i int, s [32]byte) { sums[i] = s }); err != nil {
		t.Fatal(err)
	}
	close(out)
	var n uint32
	for b := range out {
		if b.ID != n {
			t.Fatalf("block %d out of order (want %d)", b.ID, n)
		}
		f, off, ln := plan.Locate(b.ID)
		if !bytes.Equal(b.Data, datas[f][off:off+int64(ln)]) {
			t.Fatalf("block %d: wrong bytes", b.ID)
		}
		if s := plan.Sum(b.ID, b.Data); b.Hash != s.Digest() {
			t.Fatalf("block %d: wrong hash", b.ID)
		}
		n++
		pool.Put(b.Data)
	}
	if n != wantBlocks {
		t.Fatalf("read %d blocks", n)
	}
	for i, d := range datas {
		if sums[i] != blake3.Sum256(d) {
			t.Fatalf("file %d: whole-file digest differs", i)
		}
	}
}

func TestPlanLocate(t *testing.T) {
	files := []File{{Name: "a", Size: 0}, {Name: "b", Size: 2*BlockSize + 5}, {Name: "c", Size: 0}, {Name: "d", Size: 10}, {Name: "e", Size: 0}}
	p, err := NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		file int
		off  int64
		n    int
	}{{1, 0, BlockSize}, {1, BlockSize, BlockSize}, {1, 2 * BlockSize, 5}, {3, 0, 10}}
	for b, w := range want {
		f, off, n := p.Locate(uint32(b))
		if f != w.file || off != w.off || n != w.n {
			t.Fatalf("block %d: got %d/%d/%d want %+v", b, f, off, n, w)
		}
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../b", "a//b", ""} {
		if _, err := NewPlan([]File{{Name: bad}}); err == nil {
			t.Fatalf("unsafe name %q accepted", bad)
		}
	}
}

// receive runs the writer over a plan built from real files and returns the target's results.
func receive(t *testing.T, src *Sources, dst string, corrupt bool) ([]FileResult, error) {
	t.Helper()
	return receiveWith(t, src, dst, func(plan *Plan, b *Block) []byte {
		if corrupt && b.ID == plan.NumBlocks()-1 {
			b.Data[len(b.Data)-1] ^= 1
		}
		return b.Data
	})
}

// receiveWith is receive with each block's bytes chosen by data (which may alter them or move
// them to another buffer).
func receiveWith(t *testing.T, src *Sources, dst string, data func(*Plan, *Block) []byte) ([]FileResult, error) {
	t.Helper()
	w, err := receiveOpts(t, src, dst, WriterOptions{}, data)
	if err != nil {
		return nil, err
	}
	return w.Results(), nil
}

// receiveOpts copies the sources into dst through a writer with options o (its Digest set
// here), each block's bytes chosen by data, and returns the writer, closed.
func receiveOpts(t *testing.T, src *Sources, dst string, o WriterOptions, data func(*Plan, *Block) []byte) (*Writer, error) {
	t.Helper()
	plan, err := NewPlan(src.Files)
	if err != nil {
		t.Fatal(err)
	}
	target, err := ResolveTarget(dst, src.Files)
	if err != nil {
		return nil, err
	}
	out := make(chan *Block, 1000)
	sums := map[int][32]byte{}
	if err := Read(context.Background(), plan, src.Open(), NewPool(64), out, func(i int, s [32]byte) { sums[i] = s }); err != nil {
		t.Fatal(err)
	}
	close(out)
	o.Digest = func(_ context.Context, i int) ([32]byte, error) { return sums[i], nil }
	w := NewWriter(plan, target, o)
	for b := range out {
		if err := w.WriteBlock(context.Background(), b.ID, data(plan, b), b.Hash); err != nil {
			w.Abort()
			return nil, err
		}
	}
	if err := w.Finish(context.Background()); err != nil {
		w.Abort()
		return nil, err
	}
	w.Close()
	return w, nil
}

func TestWriterTargets(t *testing.T) {
	dir := t.TempDir()
	p1, d1 := writeFile(t, dir, "src/one", 3*BlockSize/2)
	p2, d2 := writeFile(t, dir, "src/two", 100)
	writeFile(t, dir, "src/sub/three", 5)
	os.MkdirAll(filepath.Join(dir, "src/empty"), 0o755)

	// Existing directory: files go inside under their names.
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	src, _ := Collect([]string{p1, p2}, CollectOptions{})
	if _, err := receive(t, src, out, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "one")); !bytes.Equal(b, d1) {
		t.Fatal("one differs")
	}
	if b, _ := os.ReadFile(filepath.Join(out, "two")); !bytes.Equal(b, d2) {
		t.Fatal("two differs")
	}
	// Single source to a new name.
	src1, _ := Collect([]string{p2}, CollectOptions{})
	if _, err := receive(t, src1, filepath.Join(out, "renamed"), false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "renamed")); !bytes.Equal(b, d2) {
		t.Fatal("renamed differs")
	}
	// Trailing slash on a missing directory, several sources to a file: clear errors.
	if _, err := receive(t, src1, filepath.Join(dir, "nodir")+"/", false); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing dir/: %v", err)
	}
	if _, err := receive(t, src, filepath.Join(out, "renamed"), false); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("several to a file: %v", err)
	}
	// A directory without -r.
	if _, err := Collect([]string{filepath.Join(dir, "src")}, CollectOptions{}); !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "-r") {
		t.Fatalf("dir without -r: %v", err)
	}
	// Recursive into a new name, including the empty directory.
	srcR, err := Collect([]string{filepath.Join(dir, "src")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receive(t, srcR, filepath.Join(dir, "copyR"), false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two", "sub/three"} {
		a, _ := os.ReadFile(filepath.Join(dir, "src", p))
		b, err := os.ReadFile(filepath.Join(dir, "copyR", p))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s differs: %v", p, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "copyR", "empty")); err != nil || !st.IsDir() {
		t.Fatalf("empty dir not created: %v", err)
	}
}

// TestWriterCorruptBlock checks that a block that fails verification leaves no file that looks
// complete and no temporary file behind.
func TestWriterCorruptBlock(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "in", 2*BlockSize+7)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	src, _ := Collect([]string{p}, CollectOptions{})
	_, err := receive(t, src, out, true)
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("corruption not detected: %v", err)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents[0].Name())
	}
}

func TestWriterDigestMismatch(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "in", 1000)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	src, _ := Collect([]string{p}, CollectOptions{})
	plan, _ := NewPlan(src.Files)
	target, _ := ResolveTarget(out, src.Files)
	ch := make(chan *Block, 4)
	Read(context.Background(), plan, src.Open(), NewPool(2), ch, func(int, [32]byte) {})
	close(ch)
	w := NewWriter(plan, target, WriterOptions{Digest: func(context.Context, int) ([32]byte, error) { return [32]byte{1}, nil }})
	b := <-ch
	if err := w.WriteBlock(context.Background(), b.ID, b.Data, b.Hash); !errors.Is(err, ErrVerify) {
		t.Fatalf("whole-file mismatch not detected: %v", err)
	}
	w.Abort()
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents[0].Name())
	}
}

func TestUnwritableDest(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can write anywhere; the lab end-to-end test covers this as an unprivileged user")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	if _, err := ResolveTarget(dir, []File{{Name: "x"}}); !errors.Is(err, ErrDest) {
		t.Fatalf("unwritable dir accepted: %v", err)
	}
}

// TestWriterDirectIO writes files through direct I/O where the filesystem allows it: whole
// aligned blocks go direct, a file's unaligned end and blocks in unaligned buffers go through the
// page cache, and every byte lands where it belongs.
func TestWriterDirectIO(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	ok := setDirect(probe, true)
	probe.Close()
	if !ok {
		t.Skip("the test directory's filesystem has no O_DIRECT; the writer stays buffered there")
	}
	sizes := map[string]int{"odd": 2*BlockSize + 4096 + 123, "exact": BlockSize, "small": 5000}
	var paths []string
	want := map[string][]byte{}
	for name, n := range sizes {
		p, d := writeFile(t, dir, "src/"+name, n)
		paths = append(paths, p)
		want[name] = d
	}
	src, err := Collect(paths, CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	// A data sync behind every block, for the test.
	w, err := receiveOpts(t, src, out, WriterOptions{DataSyncEvery: BlockSize}, func(_ *Plan, b *Block) []byte { return b.Data })
	if err != nil {
		t.Fatal(err)
	}
	if got, min := w.Stats().DirectBytes, int64(3*BlockSize); got < min {
		t.Errorf("%d bytes written with direct I/O, want at least %d (the whole blocks)", got, min)
	}
	if w.Stats().DataSyncs == 0 {
		t.Errorf("no background data sync started behind %d direct blocks", 3)
	}
	for name, d := range want {
		if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || !bytes.Equal(b, d) {
			t.Fatalf("%s differs (%v)", name, err)
		}
	}

	// Blocks in unaligned buffers: the writer falls back to buffered writes.
	os.Mkdir(filepath.Join(dir, "out2"), 0o755)
	unaligned := func(_ *Plan, b *Block) []byte {
		odd := make([]byte, len(b.Data)+1)[1:]
		copy(odd, b.Data)
		return odd
	}
	if _, err := receiveWith(t, src, filepath.Join(dir, "out2")+"/", unaligned); err != nil {
		t.Fatal(err)
	}
	for name, d := range want {
		if b, err := os.ReadFile(filepath.Join(dir, "out2", name)); err != nil || !bytes.Equal(b, d) {
			t.Fatalf("unaligned buffers: %s differs (%v)", name, err)
		}
	}
}

// TestPoolReuse checks that the pool hands out the most recently returned buffer first, allocates
// only when none is free, and lets no more than n buffers out at once.
func TestPoolReuse(t *testing.T) {
	ctx := context.Background()
	p := NewPool(3)
	a, _ := p.Get(ctx)
	b, _ := p.Get(ctx)
	if len(a) != BlockSize || len(b) != BlockSize || &a[0] == &b[0] {
		t.Fatal("two Gets returned the same or short buffers")
	}
	p.Put(a)
	p.Put(b)
	if c, _ := p.Get(ctx); &c[0] != &b[0] {
		t.Fatal("Get did not return the most recently returned buffer")
	} else if d, _ := p.Get(ctx); &d[0] != &a[0] {
		t.Fatal("Get allocated while a returned buffer was free")
	} else {
		e, _ := p.Get(ctx) // the third buffer: allocated now
		if &e[0] == &c[0] || &e[0] == &d[0] {
			t.Fatal("third buffer aliases another")
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := p.Get(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("a fourth Get with all three out returned %v, want context.Canceled", err)
		}
		p.Put(e[:10])
		if f, _ := p.Get(ctx); len(f) != BlockSize || &f[0] != &e[0] {
			t.Fatal("a buffer returned short did not come back whole")
		}
	}
}

// TestNewBlockBuffer checks that block buffers are full-size, zeroed, aligned for direct I/O and
// distinct, from the huge-page arena and from the heap.
func TestNewBlockBuffer(t *testing.T) {
	defer SetHugePages(true)
	for _, huge := range []bool{true, false} {
		SetHugePages(huge)
		seen := map[*byte]bool{}
		for range 20 {
			b := NewBlockBuffer()
			if len(b) != BlockSize || cap(b) != BlockSize {
				t.Fatalf("huge pages %v: len %d cap %d", huge, len(b), cap(b))
			}
			if runtime.GOOS == "linux" && !directOK(b, 0) {
				t.Fatalf("huge pages %v: buffer not aligned for direct I/O", huge)
			}
			if seen[&b[0]] {
				t.Fatal("the same buffer twice")
			}
			seen[&b[0]] = true
			for i := 0; i < BlockSize; i += 4096 {
				if b[i] != 0 {
					t.Fatal("buffer not zeroed")
				}
			}
			b[0], b[BlockSize-1] = 1, 1
		}
	}
}

// planTarget is the plan of src and its target at dst, which must resolve.
func planTarget(t *testing.T, src *Sources, dst string) (*Plan, *Target) {
	t.Helper()
	plan, err := NewPlan(src.Files)
	if err != nil {
		t.Fatal(err)
	}
	target, err := ResolveTarget(dst, src.Files)
	if err != nil {
		t.Fatal(err)
	}
	return plan, target
}

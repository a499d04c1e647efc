package copy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRecordParse(t *testing.T) {
	good := record{V: recordVersion, Name: "big", Size: 5*BlockSize + 7, MTime: 1, Dev: 2, Ino: 3, BlockSize: BlockSize, Blocks: 4, PartIno: 9}
	b, _ := json.Marshal(good)
	if r, err := parseRecord(b); err != nil || r != good {
		t.Fatalf("a good record: %+v, %v", r, err)
	}
	bad := map[string][]byte{
		"corrupt":   []byte("\x00\xffnot json at all"),
		"truncated": b[:len(b)/2],
		"empty":     nil,
		"too long":  bytes.Repeat([]byte(" "), maxRecord+1),
	}
	for name, mod := range map[string]func(*record){
		"unknown version": func(r *record) { r.V = 2 },
		"no version":      func(r *record) { r.V = 0 },
		"block size":      func(r *record) { r.BlockSize = 4096 },
		"too many blocks": func(r *record) { r.Blocks = 7 },
		"negative size":   func(r *record) { r.Size = -1 },
		"name with slash": func(r *record) { r.Name = "../x" },
		"no name":         func(r *record) { r.Name = "" },
	} {
		r := good
		mod(&r)
		bad[name], _ = json.Marshal(r)
	}
	for name, b := range bad {
		if _, err := parseRecord(b); err == nil {
			t.Errorf("%s record accepted", name)
		}
	}
	f := File{Name: "big", Size: good.Size, MTime: 1, Dev: 2, Ino: 3}
	if !good.matches("big", f) {
		t.Fatal("record does not match its source")
	}
	for name, mod := range map[string]func(*File){
		"size": func(f *File) { f.Size++ }, "mtime": func(f *File) { f.MTime++ },
		"dev": func(f *File) { f.Dev++ }, "inode": func(f *File) { f.Ino++ },
	} {
		g := f
		mod(&g)
		if good.matches("big", g) {
			t.Errorf("a source with another %s matches the record", name)
		}
	}
	withSum := good
	withSum.Sum = strings.Repeat("ab", 32)
	g := f
	g.Sum = strings.Repeat("cd", 32)
	if withSum.matches("big", g) {
		t.Error("a source with another whole-file digest matches the record")
	}
	if good.matches("other", f) {
		t.Error("a record matches another name")
	}
}

// testCheckpoints is how often the resume tests' writers checkpoint: every two blocks.
const testCheckpoints = 2 * BlockSize

// crash leaves w as a killed process would: its files closed where they are, nothing removed.
func (w *Writer) crash() {
	for wf := range w.temps {
		wf.stop()
		wf.f.Close()
		if wf.dirFD >= 0 {
			unix.Close(wf.dirFD)
		}
	}
	if w.reg != nil {
		w.reg.f.Close()
	}
	w.dirs.close()
}

// interrupted copies the first n blocks of src into dst, then ends the writer by kill (crash)
// or as an interrupted copy does (Interrupt).
func interrupted(t *testing.T, src *Sources, dst string, n uint32, kill bool) {
	t.Helper()
	interruptedWith(t, src, dst, n, kill, WriterCalls{})
}

// interruptedWith is interrupted with a writer that makes calls; it returns the writer.
func interruptedWith(t *testing.T, src *Sources, dst string, n uint32, kill bool, calls WriterCalls) *Writer {
	t.Helper()
	plan, target := planTarget(t, src, dst)
	out := make(chan *Block, 1000)
	if err := Read(context.Background(), plan, src.Open(), NewPool(64), out, func(int, [32]byte) {}); err != nil {
		t.Fatal(err)
	}
	close(out)
	w := NewWriter(plan, target, WriterOptions{Records: true, CheckpointEvery: testCheckpoints, Calls: calls, Digest: func(ctx context.Context, i int) ([32]byte, error) {
		<-ctx.Done()
		return [32]byte{}, ctx.Err()
	}})
	for b := range out {
		if b.ID >= n {
			break
		}
		if err := w.WriteBlock(context.Background(), b.ID, b.Data, b.Hash); err != nil {
			t.Fatal(err)
		}
		for w.cur != nil && w.cur.ckBusy.Load() { // each checkpoint done before the next block
			time.Sleep(time.Millisecond)
		}
	}
	if kill {
		w.crash()
	} else {
		w.Interrupt()
	}
	return w
}

// resumed is the next copy of src into dst: both ends' exchange (FindPartials, Offers, Hash,
// HashPrefixes, Verify, Apply), then the blocks left. It returns the offers, the blocks sent and
// the results.
func resumed(t *testing.T, src *Sources, dst string, change func(*Plan, *Prefixes)) ([]Offer, uint32, []FileResult) {
	t.Helper()
	send, _ := NewPlan(src.Files)
	recv, _ := NewPlan(src.Files)
	target, err := ResolveTarget(dst, src.Files)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parts := target.FindPartials(src.Files, nil, false)
	defer parts.Close(target)
	offers := parts.Offers()
	if err := CheckOffers(send, offers, false); err != nil {
		t.Fatal(err)
	}
	parts.Hash(recv)
	pre, err := HashPrefixes(ctx, send, src.Open(), offers)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(send, pre)
	}
	for k, o := range offers {
		if err := parts.Verify(ctx, o.File, pre.Digests(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pre.Apply(send, parts.Kept()); err != nil {
		t.Fatal(err)
	}
	if err := parts.Apply(recv); err != nil {
		t.Fatal(err)
	}
	out := make(chan *Block, 1000)
	sums := map[int][32]byte{}
	if err := Read(ctx, send, src.Open(), NewPool(64), out, func(i int, s [32]byte) { sums[i] = s }); err != nil {
		t.Fatal(err)
	}
	close(out)
	w := NewWriter(recv, target, WriterOptions{Records: true, Resume: parts, CheckpointEvery: testCheckpoints, Digest: func(_ context.Context, i int) ([32]byte, error) { return sums[i], nil }})
	var sent uint32
	for b := range out {
		sent++
		if err := w.WriteBlock(ctx, b.ID, b.Data, b.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return offers, sent, w.Results()
}

// temps lists the temporary names (partial files, records) in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), partMarker) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestResumeAfterKill: a copy killed (or interrupted) after 7 of 10 blocks leaves its partial
// file and a record of the blocks synced (6: checkpoints every 2); the next copy keeps exactly
// those, sends the rest, and the file is the source's; nothing temporary is left.
func TestResumeAfterKill(t *testing.T) {
	for _, kill := range []bool{true, false} {
		dir := t.TempDir()
		p, data := writeFile(t, dir, "src/big", 10*BlockSize-5)
		_, small := writeFile(t, dir, "src/small", 100)
		out := filepath.Join(dir, "out")
		os.Mkdir(out, 0o755)
		src, err := Collect([]string{p, filepath.Join(dir, "src/small")}, CollectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		interrupted(t, src, out, 7, kill)
		if n := len(temps(t, out)); n != 2 {
			t.Fatalf("kill=%v: %d temporary names left, want the partial and its record: %v", kill, n, temps(t, out))
		}
		SweepPartials() // the housekeeping keeps them
		if n := len(temps(t, out)); n != 2 {
			t.Fatalf("kill=%v: the sweep left %d temporary names, want 2", kill, n)
		}
		// The partial found is named by its path (the resuming writer's registry entry and its
		// messages name it so).
		target, _ := ResolveTarget(out, src.Files)
		ps := target.FindPartials(src.Files, nil, false)
		if len(ps.parts) != 1 || ps.parts[0].f.Name() != onlyTemp(t, out, partSuffix) {
			t.Fatalf("kill=%v: found %d partials, named %q", kill, len(ps.parts), ps.parts[0].f.Name())
		}
		ps.Close(target)
		offers, sent, res := resumed(t, src, out, nil)
		if len(offers) != 1 || offers[0] != (Offer{File: 0, Blocks: 6}) {
			t.Fatalf("kill=%v: offers %+v, want file 0, 6 blocks", kill, offers)
		}
		if sent != 4+1 {
			t.Fatalf("kill=%v: %d blocks sent, want 5 (4 of big, 1 of small)", kill, sent)
		}
		if len(res) != 2 {
			t.Fatalf("results %+v", res)
		}
		for name, want := range map[string][]byte{"big": data, "small": small} {
			if got, _ := os.ReadFile(filepath.Join(out, name)); !bytes.Equal(got, want) {
				t.Fatalf("kill=%v: %s differs from the source after the resume", kill, name)
			}
		}
		if left := temps(t, out); len(left) != 0 {
			t.Fatalf("kill=%v: left behind: %v", kill, left)
		}
	}
}

// TestResumeStartsOver: what must not be resumed is not: a source changed (mtime), a source
// changed behind the same identity, a partial whose kept bytes changed, a record that cannot be
// read or is of another version; each copy sends everything, the file is the source's, and the
// old partial is gone.
func TestResumeStartsOver(t *testing.T) {
	cases := map[string]struct {
		prepare    func(t *testing.T, srcPath, out string)
		wantOffers int
	}{
		"source mtime changed": {func(t *testing.T, srcPath, out string) {
			os.Chtimes(srcPath, time.Now(), time.Now().Add(-time.Hour))
		}, 0},
		"source bytes changed, same identity": {func(t *testing.T, srcPath, out string) {
			st, _ := os.Stat(srcPath)
			f, _ := os.OpenFile(srcPath, os.O_WRONLY, 0)
			f.WriteAt([]byte("changed"), BlockSize+10)
			f.Close()
			os.Chtimes(srcPath, st.ModTime(), st.ModTime())
		}, 1},
		"partial's kept bytes changed": {func(t *testing.T, srcPath, out string) {
			part := onlyTemp(t, out, partSuffix)
			f, _ := os.OpenFile(part, os.O_WRONLY, 0)
			f.WriteAt([]byte("x"), 3)
			f.Close()
		}, 1},
		"record corrupt": {func(t *testing.T, srcPath, out string) {
			os.WriteFile(onlyTemp(t, out, recSuffix), []byte("{\"farwing_resume\":1,\"name\":"), 0o600)
		}, 0},
		"record of another version": {func(t *testing.T, srcPath, out string) {
			rec := onlyTemp(t, out, recSuffix)
			b, _ := os.ReadFile(rec)
			os.WriteFile(rec, bytes.Replace(b, []byte(`"farwing_resume":1`), []byte(`"farwing_resume":7`), 1), 0o600)
		}, 0},
		"partial replaced by a hard link": {func(t *testing.T, srcPath, out string) {
			part := onlyTemp(t, out, partSuffix)
			os.Link(part, filepath.Join(out, "elsewhere"))
		}, 0},
	}
	for name, c := range cases {
		dir := t.TempDir()
		p, _ := writeFile(t, dir, "src/big", 8*BlockSize)
		out := filepath.Join(dir, "out")
		os.Mkdir(out, 0o755)
		src, _ := Collect([]string{p}, CollectOptions{})
		interrupted(t, src, out, 5, true)
		c.prepare(t, p, out)
		src, _ = Collect([]string{p}, CollectOptions{})
		want, _ := os.ReadFile(p)
		offers, sent, _ := resumed(t, src, out, nil)
		if len(offers) != c.wantOffers || sent != 8 {
			t.Errorf("%s: offers %+v, %d blocks sent; want %d offers and all 8 blocks", name, offers, sent, c.wantOffers)
		}
		if got, _ := os.ReadFile(filepath.Join(out, "big")); !bytes.Equal(got, want) {
			t.Errorf("%s: the copy differs from the source", name)
		}
		if left := temps(t, out); len(left) != 0 {
			t.Errorf("%s: left behind: %v", name, left)
		}
	}
}

func onlyTemp(t *testing.T, dir, suffix string) string {
	t.Helper()
	for _, n := range temps(t, dir) {
		if strings.HasSuffix(n, suffix) {
			return filepath.Join(dir, n)
		}
	}
	t.Fatalf("no %s in %s", suffix, dir)
	return ""
}

// TestResumeHousekeeping: --no-resume removes a kept partial and its record; the sweep removes
// one whose record is more than a week old, and a record without its partial.
func TestResumeHousekeeping(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "src/big", 6*BlockSize)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	src, _ := Collect([]string{p}, CollectOptions{})
	target, _ := ResolveTarget(out, src.Files)

	interrupted(t, src, out, 4, true)
	target.RemovePartials(src.Files)
	if left := temps(t, out); len(left) != 0 {
		t.Fatalf("--no-resume left %v", left)
	}

	interrupted(t, src, out, 4, true)
	old := time.Now().Add(-resumeKeep - time.Hour)
	os.Chtimes(onlyTemp(t, out, recSuffix), old, old)
	SweepPartials()
	if left := temps(t, out); len(left) != 0 {
		t.Fatalf("the sweep left a week-old partial: %v", left)
	}

	interrupted(t, src, out, 4, true)
	os.Remove(onlyTemp(t, out, partSuffix))
	fd, _ := unix.Open(out, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	sweepDir(fd)
	unix.Close(fd)
	if left := temps(t, out); len(left) != 0 {
		t.Fatalf("the sweep left a record without its partial: %v", left)
	}
}

// TestResumeHostile: a peer's word about a resume is checked. The sender refuses offers that
// are not regular, unskipped files of the list, ascending, within their blocks; the receiver
// refuses digests for a file it did not offer or of another length, and keeps nothing whose
// digests do not match; the sender refuses a verdict that keeps what was not offered. A record
// and a partial planted as links are never used or followed.
func TestResumeHostile(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "src/big", 6*BlockSize)
	os.Mkdir(filepath.Join(dir, "src/d"), 0o755)
	files := []File{{Name: "big", Size: 6 * BlockSize}, {Name: "d", Dir: true}, {Name: "e", Size: 0}, {Name: "f", Size: 100}}
	plan, _ := NewPlan(files)
	plan.Skip([]int{3})
	for _, o := range [][]Offer{
		{{File: 1, Blocks: 1}}, {{File: 4, Blocks: 1}}, {{File: -1, Blocks: 1}}, {{File: 0, Blocks: 7}},
		{{File: 0, Blocks: 0}}, {{File: 3, Blocks: 1}}, {{File: 0, Blocks: 1}, {File: 0, Blocks: 2}},
	} {
		if CheckOffers(plan, o, false) == nil {
			t.Errorf("offers %+v accepted", o)
		}
	}
	if CheckOffers(plan, []Offer{{File: 0, Blocks: 6}}, true) == nil {
		t.Error("an offer accepted with resuming turned off")
	}

	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	src, _ := Collect([]string{p}, CollectOptions{})
	interrupted(t, src, out, 4, true)
	target, _ := ResolveTarget(out, src.Files)
	recv, _ := NewPlan(src.Files)
	parts := target.FindPartials(src.Files, nil, false)
	parts.Hash(recv)
	ctx := context.Background()
	if parts.Verify(ctx, 1, make([]byte, 32*4)) == nil {
		t.Error("digests for a file not offered accepted")
	}
	if parts.Verify(ctx, 0, make([]byte, 32*3)) == nil {
		t.Error("digests of the wrong length accepted")
	}
	if err := parts.Verify(ctx, 0, make([]byte, 32*4)); err != nil {
		t.Fatal(err)
	}
	if k := parts.Kept(); len(k) != 1 || k[0].Blocks != 0 {
		t.Fatalf("blocks kept on digests that do not match: %+v", k)
	}
	parts.Close(target)

	send, _ := NewPlan(src.Files)
	pre, _ := HashPrefixes(ctx, send, src.Open(), []Offer{{File: 0, Blocks: 2}})
	for _, k := range [][]Offer{nil, {{File: 0, Blocks: 3}}, {{File: 0, Blocks: 1}}, {{File: 1, Blocks: 2}}} {
		if pre.Apply(send, k) == nil {
			t.Errorf("verdict %+v accepted for an offer of 2 blocks", k)
		}
	}

	// Planted: a record for "big" beside a partial name that is a symbolic link to a file
	// outside, and one beside a directory.
	outside := filepath.Join(dir, "outside")
	os.WriteFile(outside, make([]byte, 6*BlockSize), 0o600)
	st, _ := os.Stat(outside)
	rec := newRecord("big", src.Files[0])
	rec.Blocks = 4
	rec.PartIno = st.Sys().(*syscall.Stat_t).Ino
	for _, hex := range []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"} {
		b, _ := json.Marshal(rec)
		os.WriteFile(filepath.Join(out, ".big"+partMarker+hex+recSuffix), b, 0o600)
	}
	os.Symlink(outside, filepath.Join(out, ".big"+partMarker+"aaaaaaaaaaaa"+partSuffix))
	os.Mkdir(filepath.Join(out, ".big"+partMarker+"bbbbbbbbbbbb"+partSuffix), 0o700)
	if o := target.FindPartials(src.Files, nil, false).Offers(); len(o) != 0 {
		t.Fatalf("planted partials offered: %+v", o)
	}
	if b, _ := os.ReadFile(outside); !bytes.Equal(b, make([]byte, 6*BlockSize)) {
		t.Fatal("the file outside changed")
	}
}

// TestResumeRecordAfterSync: a record is written only after the data it counts was synced: with
// every sync failing, an interrupted copy leaves no record, and so no partial file.
func TestResumeRecordAfterSync(t *testing.T) {
	dir := t.TempDir()
	p, _ := writeFile(t, dir, "src/big", 8*BlockSize)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	src, _ := Collect([]string{p}, CollectOptions{})
	w := interruptedWith(t, src, out, 7, false, WriterCalls{SyncData: func(int) error { return unix.EIO }})
	if w.Stats().Checkpoints == 0 {
		t.Fatal("no checkpoint was tried")
	}
	if left := temps(t, out); len(left) != 0 {
		t.Fatalf("with the data never synced, the interrupted copy left %v", left)
	}
}

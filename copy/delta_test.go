package copy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lukechampine.com/blake3/guts"
)

// TestPlanDeltas: a compared file sends the blocks its answer names and every block past the
// offer, and only those are numbered; offsets, lengths, bytes and the window follow them.
func TestPlanDeltas(t *testing.T) {
	files := []File{{Name: "a", Size: 5*BlockSize + 10}, {Name: "d", Dir: true}, {Name: "d/b", Size: 3 * BlockSize}}
	p, err := NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	// Offered 5 of a's 6 blocks; blocks 1 and 3 differ: 1, 3 and 5 (the tail) are sent.
	if err := p.ApplyDeltas([]*Delta{{File: 0, Blocks: 5, Send: []byte{0b01010}}}); err != nil {
		t.Fatal(err)
	}
	if p.NumBlocks() != 6 {
		t.Fatalf("%d blocks numbered, want 6", p.NumBlocks())
	}
	for b, want := range []struct {
		file int
		off  int64
		n    int
	}{{0, BlockSize, BlockSize}, {0, 3 * BlockSize, BlockSize}, {0, 5 * BlockSize, 10}, {2, 0, BlockSize}} {
		if f, off, n := p.Locate(uint32(b)); f != want.file || off != want.off || n != want.n {
			t.Errorf("block %d: file %d offset %d, %d bytes; want %+v", b, f, off, n, want)
		}
	}
	if got := p.SentBytes(0); got != 2*BlockSize+10 {
		t.Errorf("a sends %d bytes", got)
	}
	if p.TotalBytes() != 5*BlockSize+10 {
		t.Errorf("the plan sends %d bytes", p.TotalBytes())
	}
	if s := p.DeltaStats(); s != (DeltaStats{Files: 1, KeptBlocks: 3, SentBlocks: 3, KeptBytes: 3 * BlockSize}) {
		t.Errorf("stats %+v", s)
	}
	// a's last block (10 bytes) is charged its length: a window of two blocks from block 1 holds
	// it and one whole block, not two.
	if e := p.WindowEnd(0, 2); e != 2 {
		t.Errorf("window of 2 from 0 ends at %d, want 2", e)
	}
	if e := p.WindowEnd(1, 2); e != 3 {
		t.Errorf("window of 2 from 1 ends at %d, want 3", e)
	}
	if e := p.WindowEnd(2, 2); e != 4 {
		t.Errorf("window of 2 from 2 ends at %d, want 4", e)
	}
}

// TestPlanDeltasRefused: an outcome the plan cannot take leaves it as it was.
func TestPlanDeltasRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		d    []*Delta
		want string
	}{
		{"a directory", []*Delta{{File: 1, Blocks: 1, Send: []byte{0}}}, "not a regular file"},
		{"beyond the list", []*Delta{{File: 9, Blocks: 1, Send: []byte{0}}}, "not a regular file"},
		{"a skipped file", []*Delta{{File: 2, Blocks: 1, Send: []byte{0}}}, "already there"},
		{"more blocks than the file", []*Delta{{File: 0, Blocks: 7, Send: []byte{0}}}, "blocks compared"},
		{"no block", []*Delta{{File: 0, Blocks: 0, Send: nil}}, "blocks compared"},
		{"a bitmap too long", []*Delta{{File: 0, Blocks: 5, Send: []byte{0, 0}}}, "bytes of blocks to send"},
		{"a bit past the offer", []*Delta{{File: 0, Blocks: 5, Send: []byte{0x20}}}, "beyond the 5 offered"},
		{"twice", []*Delta{{File: 0, Blocks: 1, Send: []byte{0}}, {File: 0, Blocks: 1, Send: []byte{0}}}, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPlan([]File{{Name: "a", Size: 5*BlockSize + 10}, {Name: "d", Dir: true}, {Name: "d/b", Size: 3 * BlockSize}})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Skip([]int{2}); err != nil {
				t.Fatal(err)
			}
			before := p.NumBlocks()
			if err := p.ApplyDeltas(c.d); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
			if p.NumBlocks() != before || p.DeltaStats().Files != 0 {
				t.Errorf("the plan changed: %d blocks, %+v", p.NumBlocks(), p.DeltaStats())
			}
		})
	}
}

// TestPlanDeltasAfterResume: a file resumed and compared sends, past the blocks the resume kept,
// only those its answer sends; the answer's bits for the resumed blocks count for nothing.
func TestPlanDeltasAfterResume(t *testing.T) {
	p, err := NewPlan([]File{{Name: "a", Size: 5*BlockSize + 10}})
	if err != nil {
		t.Fatal(err)
	}
	var tree fileTree
	var s BlockSum
	tree.add(&s)
	tree.add(&s)
	if err := p.resume([]keptPrefix{{0, 2, &tree}}); err != nil {
		t.Fatal(err)
	}
	// Offered 5 blocks; the answer sends 0 (resumed: nothing), 1 (resumed), 3; 5 is past the offer.
	if err := p.ApplyDeltas([]*Delta{{File: 0, Blocks: 5, Send: []byte{0b01011}}}); err != nil {
		t.Fatal(err)
	}
	if p.NumBlocks() != 2 {
		t.Fatalf("%d blocks numbered, want 2", p.NumBlocks())
	}
	if _, off, _ := p.Locate(0); off != 3*BlockSize {
		t.Errorf("block 0 at offset %d, want block 3's", off)
	}
	if _, off, n := p.Locate(1); off != 5*BlockSize || n != 10 {
		t.Errorf("block 1 at offset %d, %d bytes, want block 5's 10", off, n)
	}
	if n, b := p.ResumedFiles(); n != 1 || b != 2*BlockSize {
		t.Errorf("resumed %d files, %d bytes", n, b)
	}
	if d := p.DeltaStats(); d != (DeltaStats{Files: 1, KeptBlocks: 2, SentBlocks: 2, KeptBytes: 2 * BlockSize}) {
		t.Errorf("stats %+v", d)
	}
	if p.TotalBytes() != BlockSize+10 {
		t.Errorf("the plan sends %d bytes", p.TotalBytes())
	}
}

// TestTreeByChainingValues: a file's digest built from its blocks' chaining values alone (as the
// sender keeps its kept blocks' sums) is the one built from their nodes, for files of two blocks
// on, whichever blocks are given either way.
func TestTreeByChainingValues(t *testing.T) {
	for _, size := range []int64{2 * BlockSize, 2*BlockSize + 1, 5*BlockSize - 3, 8 * BlockSize} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>13)
		}
		want, _ := HashFile(bytes.NewReader(data), size)
		for mask := 0; mask < 1<<blocksOf(size); mask++ {
			var tree fileTree
			err := eachBlock(bytes.NewReader(data), size, 0, uint32(blocksOf(size)), func(b uint32, s *BlockSum) {
				if mask&(1<<b) != 0 {
					tree.addCV(guts.ChainingValue(s.node))
				} else {
					tree.add(s)
				}
			})
			if err != nil || tree.sum() != want {
				t.Fatalf("%d bytes, blocks %b by chaining value: digest %x (%v), want %x", size, mask, tree.sum(), err, want)
			}
		}
	}
}

// TestFindDeltasExposes: a destination file is offered for comparison only where its replacement
// shows its bytes to no one its own mode and owner do not: not with -p's wider mode (0644 over
// 0600; without -p the new file keeps 0600), not a file of another user's, not one whose group
// may read it under another group than the new file's. Sizes and times alone would offer all.
func TestFindDeltasExposes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test gives files another owner and group")
	}
	old := umask
	umask = 0o022
	defer func() { umask = old }()
	dst := t.TempDir()
	type file struct {
		name     string
		mode     os.FileMode // the old file's
		uid, gid int         // -1: this process's
		src      os.FileMode // the source's
		preserve bool
		offered  bool
	}
	cases := []file{
		{"same mode", 0o644, -1, -1, 0o644, true, true},
		{"narrower", 0o644, -1, -1, 0o600, true, true},
		{"wider with -p", 0o600, -1, -1, 0o644, true, false},
		{"wider without -p", 0o600, -1, -1, 0o644, false, true},
		{"another owner", 0o600, 4242, -1, 0o600, false, false},
		{"another group, group may read", 0o640, -1, 4242, 0o640, false, false},
		{"another group, group may not read", 0o600, -1, 4242, 0o600, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dst, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(p, make([]byte, 2*BlockSize), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, c.uid, c.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, c.mode); err != nil {
				t.Fatal(err)
			}
			files := []File{{Name: filepath.Base(p), Size: 3 * BlockSize, Mode: c.src, MTime: 1}}
			target, have, err := ResolveTargetHave(p, files, QuickCheck)
			if err != nil || len(have) != 0 {
				t.Fatalf("target: %v, have %v", err, have)
			}
			offers := target.FindDeltas(files, have, false, c.preserve).Offers()
			if got := len(offers) == 1; got != c.offered {
				t.Errorf("old file %v (uid %d, gid %d), source %v, -p %v: offered %v, want %v", c.mode, c.uid, c.gid, c.src, c.preserve, got, c.offered)
			}
		})
	}
}

// TestFindDeltasHardLinked: a file that other entries of the list link to (-H) is not compared:
// a hostile sender could have its old bytes all kept and given other names by those links, in
// directories that do not guard them as the old file's does (a file of 0644 in a directory of
// 0700, linked from one of 0755). A file no entry links to is offered.
func TestFindDeltasHardLinked(t *testing.T) {
	dst := t.TempDir()
	os.Mkdir(filepath.Join(dst, "d"), 0o755)
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dst, "d", n), make([]byte, 2*BlockSize), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := []File{{Name: "d", Dir: true, Mode: 0o755}, {Name: "d/a", Size: 3 * BlockSize, Mode: 0o644, MTime: 1},
		{Name: "d/b", Size: 3 * BlockSize, Mode: 0o644, MTime: 1}, {Name: "d/c", Hard: "d/a"}}
	target, have, err := ResolveTargetHave(dst, files, QuickCheck)
	if err != nil || len(have) != 0 {
		t.Fatalf("target: %v, have %v", err, have)
	}
	offers := target.FindDeltas(files, have, false, false).Offers()
	if len(offers) != 1 || offers[0].File != 2 {
		t.Errorf("offers %+v, want only d/b's (file 2)", offers)
	}
}

// TestDeltaAnswerKeepsUnread: an answer that keeps a block of an old file this end could not
// read to compare (its digests were zeros, which match no block: an honest sender sends all of
// it) is the sender's lie, refused as such, not taken for a destination changed during the copy;
// blocks a resume kept count for nothing.
func TestDeltaAnswerKeepsUnread(t *testing.T) {
	p, err := NewPlan([]File{{Name: "a", Size: 3*BlockSize + 1}})
	if err != nil {
		t.Fatal(err)
	}
	hashed := make(chan struct{})
	close(hashed)
	ds := &Deltas{plan: p, olds: []*oldFile{{idx: 0, blocks: 3, bad: true, hashed: hashed}}}
	if _, err := ds.Answer(0, 0, []byte{0b101}); err == nil || !strings.Contains(err.Error(), "block 1 kept") {
		t.Errorf("an answer keeping block 1 of an unread file: %v", err)
	}
	if _, err := ds.Answer(0, 0, []byte{0b111}); err != nil {
		t.Errorf("an answer sending every block: %v", err)
	}
	p.kept[0] = 1 // resumed: block 0's bit is clear
	if _, err := ds.Answer(0, 0, []byte{0b110}); err != nil {
		t.Errorf("an answer sending every block past the resume: %v", err)
	}
}

package copy

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzPlan: a file list from the other side (JSON, as on the control channel) is checked without
// panicking; a plan built from it names only valid names, in a tree, and locates every block
// inside its file; a pull's check accepts only top-level names the request can produce.
func FuzzPlan(f *testing.F) {
	f.Add([]byte(`[{"name":"t","dir":true},{"name":"t/a","size":3000000},{"name":"t/b"}]`), "t", true)
	f.Add([]byte(`[{"name":"../x","size":1},{"name":"a\u001b","size":1}]`), "x", false)
	f.Add([]byte(`[{"name":"a","size":-1},{"name":"a/b","size":9}]`), ".", true)
	f.Add([]byte(`[{"name":"a.bin","size":1},{"name":".b.bin","size":1},{"name":"c.txt","size":1}]`), "d/*.bin", false)
	f.Add([]byte(`[{"name":"t","dir":true},{"name":"t/l","link":"/etc"},{"name":"t/l/passwd","size":9},{"name":"t/h","hard":"t/l"}]`), "t", true)
	f.Fuzz(func(t *testing.T, list []byte, req string, recursive bool) {
		var files []File
		if json.Unmarshal(list, &files) != nil || len(files) > 200 {
			return
		}
		plan, err := NewPlan(files)
		if err != nil {
			return
		}
		for _, fl := range files {
			if ValidName(fl.Name) != nil || strings.Contains("/"+fl.Name+"/", "/../") || !utf8.ValidString(fl.Name) {
				t.Fatalf("plan took name %q", fl.Name)
			}
		}
		if plan.NumBlocks() < 1<<12 {
			for b := range plan.NumBlocks() {
				i, off, n := plan.Locate(b)
				if n <= 0 || n > BlockSize || off < 0 || off+int64(n) > files[i].Size || files[i].Dir {
					t.Fatalf("block %d: file %d offset %d length %d (size %d)", b, i, off, n, files[i].Size)
				}
			}
		}
		for _, fl := range files {
			if fl.Link != "" && ValidLink(fl.Link) != nil || !fl.Regular() && fl.Size != 0 {
				t.Fatalf("plan took %+v", fl)
			}
		}
		if _, err := MatchRequest([]string{req}, CollectOptions{Recursive: recursive}, files); err != nil {
			return
		}
		base, known := requestBase(req)
		tops := map[string]bool{}
		for _, fl := range files {
			top, _, below := strings.Cut(fl.Name, "/")
			tops[top] = true
			if (below || fl.Dir) && !recursive {
				t.Fatalf("%q (dir %v) accepted without -r", fl.Name, fl.Dir)
			}
			if fl.Link != "" && !below || fl.Hard != "" {
				t.Fatalf("%+v accepted: a top-level link, or a hard link without -H", fl)
			}
			if !known && fl.Name == top && !fl.Dir {
				t.Fatalf("asked for %q (a directory whose name only the remote knows), accepted %+v", req, fl)
			}
			if known && top != base && !(IsPattern(base) && GlobMatch(base, top)) {
				t.Fatalf("asked for %q (%q), accepted %q", req, base, fl.Name)
			}
		}
		if len(tops) > 1 && !IsPattern(base) {
			t.Fatalf("one request brought %d top-level names", len(tops))
		}
	})
}

// FuzzResume: a resume record read from disk (which a hostile copy may have planted) is parsed
// without panicking and accepted only whole and bounded; a receiver's offers against a plan are
// checked without panicking, and a plan that keeps what CheckOffers accepted locates every block
// it still sends inside its file, after the kept ones.
func FuzzResume(f *testing.F) {
	rec, _ := json.Marshal(record{V: recordVersion, Name: "a", Size: 3 << 20, BlockSize: BlockSize, Blocks: 2})
	f.Add(rec, []byte(`[{"name":"a","size":3000000},{"name":"b","size":5}]`), []byte(`[{"file":0,"blocks":2}]`))
	f.Add([]byte(`{"farwing_resume":1,"name":"../x","size":-1}`), []byte(`[{"name":"d","dir":true}]`), []byte(`[{"file":0,"blocks":1}]`))
	f.Add([]byte(`{"farwing_resume":2}`), []byte(`[{"name":"a","size":1}]`), []byte(`[{"file":0,"blocks":4294967295},{"file":0,"blocks":1}]`))
	f.Fuzz(func(t *testing.T, recb, list, offersb []byte) {
		if r, err := parseRecord(recb); err == nil {
			if r.V != recordVersion || uint64(r.Blocks) > blocksOf(r.Size) || r.Size < 0 || ValidName(r.Name) != nil || strings.Contains(r.Name, "/") {
				t.Fatalf("record accepted: %+v", r)
			}
		}
		var files []File
		var offers []Offer
		if json.Unmarshal(list, &files) != nil || json.Unmarshal(offersb, &offers) != nil || len(files) > 50 || len(offers) > 50 {
			return
		}
		plan, err := NewPlan(files)
		if err != nil || CheckOffers(plan, offers, false) != nil {
			return
		}
		var ks []keptPrefix
		for _, o := range offers {
			if o.Blocks > 1<<14 {
				return
			}
			tr := &fileTree{}
			var s BlockSum
			for range o.Blocks {
				tr.add(&s)
			}
			ks = append(ks, keptPrefix{o.File, o.Blocks, tr})
		}
		if err := plan.resume(ks); err != nil {
			t.Fatalf("offers accepted, then refused: %v", err)
		}
		if plan.NumBlocks() < 1<<12 {
			for b := range plan.NumBlocks() {
				i, off, n := plan.Locate(b)
				if n <= 0 || off < int64(plan.Kept(i))*BlockSize || off+int64(n) > files[i].Size {
					t.Fatalf("block %d: file %d offset %d length %d (size %d, %d kept)", b, i, off, n, files[i].Size, plan.Kept(i))
				}
			}
		}
	})
}

// FuzzDelta: a receiver's offers to compare files and a sender's answers (bitmaps), from the
// other side, are checked against a plan without panicking; a plan that takes what CheckDeltas
// and ApplyDeltas accepted numbers exactly the blocks the answers send, each once and in order
// inside its file, and its bytes add up.
func FuzzDelta(f *testing.F) {
	f.Add([]byte(`[{"name":"a","size":5242890},{"name":"b","size":5}]`), []byte(`[{"file":0,"blocks":5},{"file":1,"blocks":1}]`), []byte{0x0a, 0x01})
	f.Add([]byte(`[{"name":"d","dir":true},{"name":"d/a","size":3}]`), []byte(`[{"file":0,"blocks":1}]`), []byte{0xff})
	f.Add([]byte(`[{"name":"a","size":9000000}]`), []byte(`[{"file":0,"blocks":9},{"file":0,"blocks":1}]`), []byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, list, offersb, bits []byte) {
		var files []File
		var offers []Offer
		if json.Unmarshal(list, &files) != nil || json.Unmarshal(offersb, &offers) != nil || len(files) > 50 || len(offers) > 50 {
			return
		}
		plan, err := NewPlan(files)
		if err != nil || CheckDeltas(plan, offers, false, false) != nil {
			return
		}
		var ds []*Delta
		for _, o := range offers {
			n := int(o.Blocks+7) / 8
			if len(bits) < n {
				return
			}
			ds = append(ds, &Delta{File: o.File, Blocks: o.Blocks, Send: bits[:n]})
			bits = bits[n:]
		}
		if err := plan.ApplyDeltas(ds); err != nil {
			for _, d := range ds {
				if checkBitmap(d.Send, d.Blocks) == nil {
					continue
				}
				return // a bitmap with bits past its offer: refused
			}
			t.Fatalf("offers accepted, answers of their lengths refused: %v", err)
		}
		var total int64
		for i := range files {
			total += plan.SentBytes(i)
		}
		for _, d := range ds {
			want := blocksOf(files[d.File].Size) - uint64(d.Blocks)
			for k := range d.Blocks {
				if sendBit(d.Send, k) {
					want++
				}
			}
			if _, n := plan.FileBlocks(d.File); uint64(n) != want {
				t.Fatalf("file %d sends %d blocks, its answer %d", d.File, n, want)
			}
		}
		if total != plan.TotalBytes() {
			t.Fatalf("files send %d bytes, the plan %d", total, plan.TotalBytes())
		}
		if plan.NumBlocks() < 1<<12 {
			prevFile, prevOff := -1, int64(-1)
			for b := range plan.NumBlocks() {
				i, off, n := plan.Locate(b)
				if n <= 0 || off+int64(n) > files[i].Size || i < prevFile || i == prevFile && off <= prevOff {
					t.Fatalf("block %d: file %d offset %d length %d (size %d)", b, i, off, n, files[i].Size)
				}
				if k := indexOf(ds, i); k >= 0 && uint32(off/BlockSize) < ds[k].Blocks && !sendBit(ds[k].Send, uint32(off/BlockSize)) {
					t.Fatalf("block %d: file %d offset %d sent, its answer keeps it", b, i, off)
				}
				prevFile, prevOff = i, off
			}
		}
	})
}

// indexOf is the index of file i's outcome in ds.
func indexOf(ds []*Delta, i int) int {
	for k, d := range ds {
		if d.File == i {
			return k
		}
	}
	return -1
}

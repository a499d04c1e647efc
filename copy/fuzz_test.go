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
		if MatchRequest([]string{req}, CollectOptions{Recursive: recursive}, files) != nil {
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

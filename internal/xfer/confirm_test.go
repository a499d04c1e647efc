package xfer

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/pipetest"
	"github.com/farwing/farwing/internal/treetest"
)

// TestConfirmations: the receiver's confirmations are checked chunk by chunk as they come: in
// the plan's order, over directories, links and the files the receiver had; each with the name,
// size and digest this end read, of a file it has read; none twice, none beyond the files sent;
// the whole chunk before any of it is told; at the end, every file sent. What is refused is a
// failed verification (exit 7), and nothing of its chunk, or after it, is told.
func TestConfirmations(t *testing.T) {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "d", Dir: true, Mode: 0o755}, {Name: "d/a", Size: 3, Mode: 0o644},
		{Name: "d/b", Size: 7, Mode: 0o644}, {Name: "d/l", Link: "a"}, {Name: "d/c", Size: 5, Mode: 0o644}, {Name: "d/e", Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Skip([]int{2}); err != nil { // d/b: the receiver had it
		t.Fatal(err)
	}
	sum := map[string][32]byte{"d/a": {1}, "d/b": {2}, "d/c": {0xcd, 3}, "d/e": {4}}
	r := func(name string, size int64) fcopy.FileResult {
		s := sum[name]
		return fcopy.FileResult{Name: name, Path: "/dst/" + name, Size: size, Sum: hex.EncodeToString(s[:])}
	}
	a, c, e := r("d/a", 3), r("d/c", 5), r("d/e", 0)
	other := c
	other.Sum = strings.Repeat("0", 64)
	upper := c
	upper.Sum = strings.ToUpper(c.Sum)
	for _, tc := range []struct {
		name   string
		unread string // a file this end has not read yet
		chunks [][]fcopy.FileResult
		told   int    // how many are told, in order a, c, e
		want   string // the error's text ("": none, and finish passes)
	}{
		{"in order", "", [][]fcopy.FileResult{{a}, {c, e}}, 3, ""},
		{"one chunk", "", [][]fcopy.FileResult{{a, c, e}}, 3, ""},
		{"another digest", "", [][]fcopy.FileResult{{a, other}}, 0, "confirmed \"d/c\" with BLAKE3 \"000"},
		{"the digest in capitals", "", [][]fcopy.FileResult{{a}, {upper}}, 1, "with BLAKE3"},
		{"twice in a chunk", "", [][]fcopy.FileResult{{a, a}}, 0, "confirmed \"d/a\" twice"},
		{"twice across chunks", "", [][]fcopy.FileResult{{a, c}, {c, e}}, 2, "confirmed \"d/c\" twice"},
		{"not in the plan", "", [][]fcopy.FileResult{{a}, {r("d/x", 5)}}, 1, "confirmed \"d/x\" (5 bytes) where \"d/c\" (5 bytes) was next"},
		{"a file the receiver had", "", [][]fcopy.FileResult{{a, r("d/b", 7)}}, 0, "where \"d/c\""},
		{"a directory", "", [][]fcopy.FileResult{{r("d", 0)}}, 0, "where \"d/a\""},
		{"out of order", "", [][]fcopy.FileResult{{c, a}}, 0, "where \"d/a\""},
		{"another size", "", [][]fcopy.FileResult{{r("d/a", 4)}}, 0, "(4 bytes) where \"d/a\" (3 bytes)"},
		{"before it was read", "d/e", [][]fcopy.FileResult{{a}, {c, e}}, 1, "confirmed \"d/e\" before this end had read it"},
		{"more than sent", "", [][]fcopy.FileResult{{a, c, e}, {r("d/z", 1)}}, 3, "one file more than the 3 sent"},
		{"escaped name", "", [][]fcopy.FileResult{{r("d/\x1b[2Ja", 3)}}, 0, `confirmed "d/\x1b[2Ja"`},
		{"one short", "", [][]fcopy.FileResult{{a, c}}, 2, "confirmed 2 files of the 3 sent"},
		{"none", "", nil, 0, "confirmed 0 files of the 3 sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := newSourceSums(len(plan.Files))
			for i, f := range plan.Files {
				if s, ok := sum[f.Name]; ok && f.Name != tc.unread {
					ss.set(i, s)
				}
			}
			var told []fcopy.FileResult
			conf := newConfirmations(plan, ss, func(f fcopy.FileResult) { told = append(told, f) })
			err := error(nil)
			for _, ch := range tc.chunks {
				if err = conf.take(append([]fcopy.FileResult(nil), ch...)); err != nil {
					break
				}
			}
			if err == nil {
				err = conf.finish()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, fcopy.ErrVerify) || CodeOf(err) != CodeVerify || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v (exit %d), want a failed verification saying %q", err, CodeOf(err), tc.want)
			}
			if err != nil {
				treetest.NoControl(t, err.Error())
			}
			if len(told) != tc.told {
				t.Fatalf("told of %d files, want %d: %v", len(told), tc.told, told)
			}
			for k, f := range told {
				if want := []fcopy.FileResult{a, c, e}[k]; f != want {
					t.Errorf("told of %+v, want %+v", f, want)
				}
			}
		})
	}
}

// TestConfirmationPath: the path a receiver reports for a verified file is its word: kept valid
// UTF-8, at most maxResultPath bytes and escaped before it is told (and reaches --json).
func TestConfirmationPath(t *testing.T) {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "a", Size: 3, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	ss := newSourceSums(1)
	ss.set(0, [32]byte{1, 2, 3})
	s, _ := ss.get(0)
	var told []fcopy.FileResult
	conf := newConfirmations(plan, ss, func(f fcopy.FileResult) { told = append(told, f) })
	part := []fcopy.FileResult{{Name: "a", Size: 3, Sum: hex.EncodeToString(s[:]), Path: "/home/u/\x1b]0;owned\x07a" + strings.Repeat("é", 5000) + "\xff"}}
	if err := conf.take(part); err != nil {
		t.Fatal(err)
	}
	if err := conf.finish(); err != nil {
		t.Fatal(err)
	}
	if len(told) != 1 || told[0] != part[0] {
		t.Fatalf("told %v; the verdict keeps %v", told, part)
	}
	p := told[0].Path
	if strings.ContainsAny(p, "\x1b\x07") || !utf8.ValidString(p) || len(p) > 4*maxResultPath {
		t.Errorf("reported path kept as %q… (%d bytes)", p[:min(len(p), 40)], len(p))
	}
	if !strings.HasPrefix(p, "/home/u/") {
		t.Errorf("the path's plain part changed: %q…", p[:min(len(p), 40)])
	}
}

// TestConfirmerSends: a receiver's confirmations leave while it goes on placing files, without
// done: the first chunk comes while the confirmer is still open; then the rest and done, with
// the number of all of them; no chunk holds more than chunkEntries.
func TestConfirmerSends(t *testing.T) {
	smallChunks(t, 40)
	pipe := pipetest.New()
	conf := newConfirmer(NewControl(nil, pipe, nil))
	r := NewControl(pipe, nil, nil)
	r.Start(nil)
	res := func(i int) fcopy.FileResult {
		return fcopy.FileResult{Name: "f" + strings.Repeat("x", i), Size: int64(i), Sum: strings.Repeat("ab", 32)}
	}
	for i := range 10 {
		conf.add(res(i))
	}
	m, err := r.Next(context.Background(), 5*time.Second)
	if err != nil || m.T != KindResults {
		t.Fatalf("first message %q (%v), want results while the confirmer is open", m.T, err)
	}
	var d inflater
	var got []fcopy.FileResult
	if err := d.decode(m.Z, &got); err != nil || len(got) != 10 || got[9] != res(9) {
		t.Fatalf("first chunk: %d results (%v)", len(got), err)
	}
	for i := 10; i < 100; i++ {
		conf.add(res(i))
	}
	if err := conf.done(&PeerStats{}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := r.Next(context.Background(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.T == KindDone {
			if m.Entries != 100 || len(got) != 100 {
				t.Fatalf("done counts %d, %d came", m.Entries, len(got))
			}
			break
		}
		var part []fcopy.FileResult
		if err := d.decode(m.Z, &part); err != nil || len(part) > 40 || len(part) == 0 {
			t.Fatalf("chunk of %d results (%v), want 1 to 40", len(part), err)
		}
		got = append(got, part...)
	}
	for i, f := range got {
		if f != res(i) {
			t.Fatalf("result %d is %+v", i, f)
		}
	}
}

package xfer

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/pipetest"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane/lanetest"
)

// smallChunks makes senders cut chunks of n entries for the test.
func smallChunks(t *testing.T, n int) {
	old := chunkEntries
	chunkEntries = n
	t.Cleanup(func() { chunkEntries = old })
}

// deflated is a list chunk's payload: v as JSON, compressed.
func deflated(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return deflateRaw(b)
}

func deflateRaw(b []byte) []byte {
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	w.Write(b)
	w.Close()
	return z.Bytes()
}

// listOf is a valid list: directory t and n files below it.
func listOf(n int) []fcopy.File {
	files := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}}
	for i := range n {
		files = append(files, fcopy.File{Name: fmt.Sprintf("t/f%05d", i), Size: 1, Mode: 0o644})
	}
	return files
}

// TestInProcessManyEntries: a tree of 1,200 entries (files of 0-300 bytes in 20 directories, and
// empty ones) pushed and pulled back with chunks of 100 entries: every file arrives with its
// digest, the results count every file, nothing else is left.
func TestInProcessManyEntries(t *testing.T) {
	smallChunks(t, 100)
	e := newEnv(t, lanetest.Link{Loss: 0.01, Delay: 2 * time.Millisecond}, 1)
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]int{}
	for d := range 20 {
		for f := range 59 {
			files[fmt.Sprintf("t/d%02d/f%03d", d, f)] = (d*59 + f) % 301
		}
	}
	files["t/empty"] = -1
	sums := tree(t, src, files)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	o := e.options()
	o.Recursive = true
	res, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if len(res.Files) != len(sums) || res.Dirs != 22 {
		t.Fatalf("push result: %d files, %d dirs", len(res.Files), res.Dirs)
	}
	sameTree(t, filepath.Join(remote, "t"), stripTop(sums), "empty")
	res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if len(res.Files) != len(sums) {
		t.Fatalf("pull result: %d files", len(res.Files))
	}
	sameTree(t, filepath.Join(back, "t"), stripTop(sums), "empty")
	for _, f := range res.Files {
		if want := sums["t/"+f.Name[len("t/"):]]; f.Sum != fmt.Sprintf("%x", want) {
			t.Fatalf("result %s: digest %s, want %x", f.Name, f.Sum, want)
		}
	}
}

// hostileLists are file lists no honest sender sends, in chunks: the announcement, then each
// chunk's payload; want is what the refusal says.
func hostileLists(t *testing.T) []struct {
	name    string
	entries int
	chunks  [][]byte
	want    string
} {
	big := make([]byte, 5<<19) // 2.5 MiB: a chunk beyond the bound on the wire
	rand.Read(big)
	var late [][]byte
	for c := range 4 {
		var part []fcopy.File
		if c == 0 {
			part = append(part, fcopy.File{Name: "t", Dir: true, Mode: 0o755})
		}
		for i := range 10 {
			name := fmt.Sprintf("t/f%d-%d", c, i)
			if c == 3 && i == 5 {
				name = "t/../escaped"
			}
			part = append(part, fcopy.File{Name: name, Size: 1, Mode: 0o644})
		}
		late = append(late, deflated(t, part))
	}
	var endless [][]byte
	for i := range 50 {
		endless = append(endless, deflated(t, []fcopy.File{{Name: fmt.Sprintf("t/e%da", i), Size: 1}, {Name: fmt.Sprintf("t/e%db", i), Size: 1}}))
	}
	endless[0] = deflated(t, []fcopy.File{{Name: "t", Dir: true}, {Name: "t/e0", Size: 1}})
	// 8 chunks of 8 valid entries each and 2 MiB less a little of spaces: 16 MiB of text.
	var padded [][]byte
	for c := range 8 {
		var part []fcopy.File
		for i := range 8 {
			part = append(part, fcopy.File{Name: fmt.Sprintf("t/p%d-%d", c, i), Size: 1, Mode: 0o644})
		}
		if c == 0 {
			part[0] = fcopy.File{Name: "t", Dir: true, Mode: 0o755}
		}
		b, _ := json.Marshal(part)
		text := append(b[:len(b)-1:len(b)-1], bytes.Repeat([]byte{' '}, maxChunkRaw-len(b)-64)...)
		padded = append(padded, deflateRaw(append(text, ']')))
	}
	return []struct {
		name    string
		entries int
		chunks  [][]byte
		want    string
	}{
		{"oversized on the wire", 3, [][]byte{big}, "a file list chunk of"},
		{"oversized text", 3, [][]byte{deflateRaw([]byte("[" + strings.Repeat(" ", 3<<20) + "]"))}, "more than 2048 KiB of text"},
		{"more than announced", 3, [][]byte{deflated(t, listOf(4))}, "5 entries, more than the 3 announced"},
		{"duplicate across chunks", 4, [][]byte{deflated(t, listOf(1)), deflated(t, []fcopy.File{{Name: "t/f00001", Size: 1}, {Name: "t/f00000", Size: 1}})}, "listed twice"},
		{"bad name in a late chunk", 41, late, "empty, . or .. element"},
		{"announced beyond the limit", maxListEntries + 1, nil, "4000001 entries announced"},
		{"announced below zero", -1, nil, "-1 entries announced"},
		{"endless", 5, endless, "more than the 5 announced"},
		{"not DEFLATE", 3, [][]byte{[]byte("[{\"name\":\"t\"}]")}, "not DEFLATE data"},
		{"empty chunk", 3, [][]byte{deflateRaw([]byte("[]"))}, "no entries"},
		{"too many in one chunk", maxChunkEntries + 1, [][]byte{deflated(t, listOf(maxChunkEntries))}, "more than 4096 entries"},
		// A few KB on the wire that inflate to 16 MiB of text for 64 entries (DEFLATE inflates up
		// to a thousandfold: the same 512 times over was 1 GiB, which the list's bound allowed).
		{"inflated beyond its entries", 64, padded, "the list's text is over 3145728 bytes, the most a list of 64 entries may take"},
		{"a blake3 that is not a digest", 3, [][]byte{deflated(t, []fcopy.File{{Name: "t", Dir: true}, {Name: "t/a", Size: 1, Sum: strings.Repeat("ab", 1000)}})}, `"t/a": a blake3 that is not 64 hex digits`},
	}
}

// TestPullRefusesHostileList: a remote that sends any of hostileLists to a pull is refused with
// the protocol code and the reason, before anything is written.
func TestPullRefusesHostileList(t *testing.T) {
	for _, c := range hostileLists(t) {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileServer(func(ctl *Control, _ Msg) error {
				ctl.Send(Msg{T: KindFiles, Entries: c.entries})
				for _, z := range c.chunks {
					if err := ctl.Send(Msg{T: KindList, Z: z}); err != nil {
						return nil
					}
				}
				return nil
			}, nil)
			dst := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			o := e.options()
			o.Recursive = true
			_, err := Pull(ctx, o, "host", []string{"t"}, dst)
			if CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("pull of a hostile list: %v (exit %d), want %q", err, CodeOf(err), c.want)
			}
			treetest.NoControl(t, err.Error())
			treetest.Empty(t, dst)
		})
	}
}

// TestPushRefusesHostileList: a client that pushes any of hostileLists to the real server is
// refused by it with the protocol code and the reason, and nothing is written there.
func TestPushRefusesHostileList(t *testing.T) {
	for _, c := range hostileLists(t) {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			dst := t.TempDir()
			o := e.options()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, _, err := start(ctx, &o, "host", Msg{Role: RoleRecv, Dest: dst, Entries: c.entries, Window: 16}, &Result{})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.close(0)
			for _, z := range c.chunks {
				conn.ctl.Send(Msg{T: KindList, Z: z})
			}
			_, err = conn.ctl.Next(conn.ctx, 10*time.Second)
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != CodeProtocol || !strings.Contains(re.Msg, c.want) {
				t.Fatalf("server's answer: %v, want exit %d and %q", err, CodeProtocol, c.want)
			}
			treetest.Empty(t, dst)
		})
	}
}

// TestListSilent: a sender that announces a list and stops half way is given up on once it has
// been silent for the wait (PeerIdle; shortened here), as a silent peer: exit 6.
func TestListSilent(t *testing.T) {
	old := listWait
	listWait = time.Second
	t.Cleanup(func() { listWait = old })
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileServer(func(ctl *Control, _ Msg) error {
		ctl.Send(Msg{T: KindFiles, Entries: 10})
		return ctl.Send(Msg{T: KindList, Z: deflated(t, listOf(2))})
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := e.options()
	o.Recursive = true
	_, err := Pull(ctx, o, "host", []string{"t"}, t.TempDir())
	if !errors.Is(err, session.ErrSilent) || CodeOf(err) != CodeUDP {
		t.Fatalf("a list that stops: %v (exit %d)", err, CodeOf(err))
	}
}

// TestListMemory: a list of 50,000 entries sent and received in chunks costs the receiver its
// entries and their names, and no more: the heap it keeps is at most 256 bytes per entry
// (a File is 112 bytes, a name of 26 bytes takes 32) and what it allocates on the way at most
// 512 bytes per entry (no copy of the whole list per chunk, no text of the whole list or of a
// chunk at once: each chunk is decoded entry by entry as it inflates; 723 bytes when each chunk's
// text was inflated whole first).
func TestListMemory(t *testing.T) {
	files := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}}
	for d := range 50 {
		dir := fmt.Sprintf("t/dir%03d", d)
		files = append(files, fcopy.File{Name: dir, Dir: true, Mode: 0o755})
		for range 999 {
			i := len(files)
			files = append(files, fcopy.File{Name: fmt.Sprintf("%s/entry-%06d", dir, i), Size: int64(i % 2049), Mode: 0o644,
				MTime: 1700000000123456789 + int64(i), Dev: 2049, Ino: uint64(1000000 + i)})
		}
	}
	n := len(files)
	pipe := pipetest.New()
	send := NewControl(nil, pipe, nil)
	if err := sendFiles(send, Msg{T: KindFiles}, files); err != nil {
		t.Fatal(err)
	}
	pipe.Close()
	wire := pipe.Len()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	recv := NewControl(pipe, nil, nil)
	recv.Start(nil)
	head, err := recv.Expect(context.Background(), KindFiles, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := recvList(context.Background(), recv, head.Entries)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	kept := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
	alloc := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)
	t.Logf("%d entries: %d bytes on the wire (%.1f per entry); receiver keeps %.0f B/entry, allocated %.0f B/entry", n, wire, float64(wire)/float64(n), kept, alloc)
	if len(got) != n || got[n-1] != files[n-1] || got[1234] != files[1234] {
		t.Fatalf("received %d entries, the last %+v", len(got), got[len(got)-1])
	}
	if kept > 256 || alloc > 512 {
		t.Fatalf("the receiver keeps %.0f and allocates %.0f bytes per entry, want at most 256 and 512", kept, alloc)
	}
	if _, err := fcopy.NewPlan(got); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(got)
}

// TestListChunkStreams: a chunk is decoded as it inflates, entry by entry: a chunk of one entry
// and 2 MiB of spaces (a few KB on the wire) costs the receiver no buffer of its text, and one
// whose text goes beyond the bound is stopped there, not inflated whole first.
func TestListChunkStreams(t *testing.T) {
	entry := `[{"name":"t","dir":true,"mode":493}`
	padded := deflateRaw([]byte(entry + strings.Repeat(" ", maxChunkRaw-len(entry)-1) + "]"))
	var d inflater
	var warm []fcopy.File
	if err := d.decode(deflated(t, listOf(1)), &warm); err != nil { // the DEFLATE reader, made once
		t.Fatal(err)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var got []fcopy.File
	err := d.decode(padded, &got)
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("a chunk of %d bytes on the wire, %d of text: %d bytes allocated to decode it", len(padded), maxChunkRaw, alloc)
	if err != nil || len(got) != 1 || got[0].Name != "t" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if alloc > 64<<10 {
		t.Fatalf("decoding a chunk of %d bytes of text allocated %d bytes: its text was held", maxChunkRaw, alloc)
	}
	// One byte more is refused as the text goes past the bound: the decoder never reads further.
	over := deflateRaw([]byte(entry + strings.Repeat(" ", maxChunkRaw-len(entry)) + "]"))
	d = inflater{}
	if err := d.decode(over, &got); err == nil || !strings.Contains(err.Error(), "more than 2048 KiB of text") || d.total > maxChunkRaw+64<<10 {
		t.Fatalf("a chunk of %d bytes of text: %v, %d bytes inflated", maxChunkRaw+1, err, d.total)
	}
}

// TestListBudget: a sender refuses (exit 3, before anything is sent) a list whose text is beyond
// what its entries may take, as the receiver would (listBudget): 300 links whose targets are the
// longest, of a character JSON escapes ("<" is "\u003c"), are 7.4 MB of text; a list of short names
// and one long name passes.
func TestListBudget(t *testing.T) {
	long := func(i int) string {
		return fmt.Sprintf("t/%03d", i) + strings.Repeat("<", 250) + "/" + strings.Repeat("<", 4096-257)
	}
	// Links whose targets are 4095 bytes of "<", which JSON writes as "\u003c": 24 KiB of text
	// an entry, more than maxEntryText on average.
	files := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}}
	for i := range 300 {
		files = append(files, fcopy.File{Name: fmt.Sprintf("t/l%03d", i), Link: strings.Repeat("<", 4095)})
	}
	chunks, errc := encodeList(files)
	err := sendList(nil, chunks, errc)
	if !errors.Is(err, ErrListLimit) || CodeOf(err) != CodeSource || !strings.Contains(err.Error(), "the most a list of 301 entries may take") {
		t.Fatalf("a list of %d entries of 24 KiB of text each: %v (exit %d)", len(files), err, CodeOf(err))
	}
	short := listOf(200)
	short[1].Name = long(0)[:255+2]
	short = append(short[:2], append([]fcopy.File{{Name: long(0), Size: 1}}, short[2:]...)...)
	short[1].Dir = true
	chunks, errc = encodeList(short)
	if err := sendList(nil, chunks, errc); err != nil {
		t.Fatalf("a list of short names and one long one: %v", err)
	}
}

// TestListLimit: a sender refuses a list beyond what one copy carries before it starts, exit 3.
func TestListLimit(t *testing.T) {
	err := checkListSize(make([]fcopy.File, maxListEntries+1))
	if !errors.Is(err, ErrListLimit) || CodeOf(err) != CodeSource {
		t.Fatalf("a list of %d entries: %v (exit %d)", maxListEntries+1, err, CodeOf(err))
	}
}

// sendDone sends results as a receiver's confirmer does, all at once, then done.
func sendDone(c *Control, results []fcopy.FileResult, st *PeerStats) error {
	conf := newConfirmer(c)
	for _, r := range results {
		conf.add(r)
	}
	return conf.done(st)
}

// TestVerdictChunks: the receiver's verdict on 5,000 files travels in results chunks and reads
// back whole; a verdict with more results than files sent, a done whose count differs from the
// results that came, a chunk beyond the bounds or another message is refused as a protocol
// violation (exit 10).
func TestVerdictChunks(t *testing.T) {
	smallChunks(t, 300)
	results := make([]fcopy.FileResult, 5000)
	for i := range results {
		results[i] = fcopy.FileResult{Name: fmt.Sprintf("t/f%05d", i), Path: fmt.Sprintf("/dst/t/f%05d", i), Size: int64(i), Sum: strings.Repeat("ab", 32)}
	}
	verdict := func(send func(*Control)) *Control {
		pipe := pipetest.New()
		c := NewControl(nil, pipe, nil)
		send(c)
		pipe.Close()
		r := NewControl(pipe, nil, nil)
		r.Start(nil)
		return r
	}
	r := verdict(func(c *Control) { sendDone(c, results, &PeerStats{Datagrams: 7}) })
	m, err := recvDone(context.Background(), r, len(results), nil)
	if err != nil || len(m.Results) != len(results) || m.Results[4999] != results[4999] || m.Stats == nil || m.Stats.Datagrams != 7 {
		t.Fatalf("verdict: %v, %d results", err, len(m.Results))
	}
	for _, c := range []struct {
		name string
		send func(*Control)
		want string
	}{
		{"more than sent", func(c *Control) { sendDone(c, append(results, results[0]), &PeerStats{}) }, "more than the files sent"},
		{"count differs", func(c *Control) {
			c.Send(Msg{T: KindResults, Z: deflated(t, results[:3])})
			c.Send(Msg{T: KindDone, Entries: 4})
		}, "done announces 4 results, 3 came"},
		{"oversized text", func(c *Control) {
			c.Send(Msg{T: KindResults, Z: deflateRaw([]byte("[" + strings.Repeat(" ", 3<<20) + "]"))})
		}, "more than 2048 KiB of text"},
		{"another message", func(c *Control) { c.Send(Msg{T: KindHave}) }, `got "have", expected "results" or "done"`},
	} {
		r := verdict(c.send)
		_, err := recvDone(context.Background(), r, len(results), nil)
		if CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// verdictPlan is a plan of n files of one byte, read, with the confirmations of a receiver that
// placed each under /dst.
func verdictPlan(t *testing.T, n int) (*confirmations, []fcopy.FileResult) {
	files := make([]fcopy.File, n)
	results := make([]fcopy.FileResult, n)
	for i := range files {
		files[i] = fcopy.File{Name: fmt.Sprintf("f%05d", i), Size: 1, Mode: 0o644}
	}
	plan, err := fcopy.NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	ss := newSourceSums(n)
	for i := range files {
		ss.set(i, [32]byte{byte(i), byte(i >> 8)})
		s, _ := ss.get(i)
		results[i] = fcopy.FileResult{Name: files[i].Name, Path: "/dst/" + files[i].Name, Size: 1, Sum: fmt.Sprintf("%x", s)}
	}
	return newConfirmations(plan, ss, nil), results
}

// sendVerdict makes the control channel a sender reads a verdict from: a results chunk of each
// text (a JSON array), then done.
func sendVerdict(texts [][]byte, n int) *Control {
	pipe := pipetest.New()
	c := NewControl(nil, pipe, nil)
	for _, text := range texts {
		c.Send(Msg{T: KindResults, Z: deflateRaw(text)})
	}
	c.Send(Msg{T: KindDone, Entries: n})
	pipe.Close()
	r := NewControl(pipe, nil, nil)
	r.Start(nil)
	return r
}

// TestVerdictLongPaths (issue 37, second read): a receiver that confirms every file correctly but
// reports a path of 2 MiB for each (a chunk per file, a few KB on the wire) is refused at the first
// one, as a protocol violation: a path longer than any receiver writes to was clipped and kept, and
// each clipped path kept its whole 2 MiB alive (400 files: 800 MiB in the sender).
func TestVerdictLongPaths(t *testing.T) {
	const n = 400
	conf, results := verdictPlan(t, n)
	var texts [][]byte
	for i := range results {
		r := results[i]
		r.Path = "/dst/" + strings.Repeat("a", maxChunkRaw-300)
		b, _ := json.Marshal([]fcopy.FileResult{r})
		texts = append(texts, b)
	}
	ctl := sendVerdict(texts, n)
	texts = nil // 800 MiB of text, compressed on the channel to a few KB a chunk
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := recvDone(context.Background(), ctl, conf.sent, conf.take)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 64<<20 {
		t.Errorf("the verdict left %d MiB in use", held>>20)
	}
	if CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), fmt.Sprintf("more than %d", maxResultPath)) {
		t.Fatalf("paths of 2 MiB: %v (%d results taken)", err, len(m.Results))
	}
	// The longest path a receiver writes to is taken.
	conf, results = verdictPlan(t, 2)
	results[1].Path = "/" + strings.Repeat("d", 4094) + "/" + strings.Repeat("n", 4096)
	b, _ := json.Marshal(results)
	if m, err := recvDone(context.Background(), sendVerdict([][]byte{b}, 2), conf.sent, conf.take); err != nil || m.Results[1].Path != results[1].Path {
		t.Fatalf("a path of %d bytes: %v", len(results[1].Path), err)
	}
}

// TestVerdictBudget (issue 37, second read): a verdict's text is bounded by the files sent, as a
// list's is by its entries: results padded with text the decoder skips (a chunk of 2 MiB each, a
// few KB on the wire) are refused as they inflate, after some 2 MiB and maxResultText a file, not
// after 1 GiB; an honest verdict of the longest names and paths, escaped at worst, is taken.
func TestVerdictBudget(t *testing.T) {
	const n = 400
	conf, results := verdictPlan(t, n)
	var texts [][]byte
	for i := range results {
		b, _ := json.Marshal(results[i])
		texts = append(texts, fmt.Appendf(nil, `[{"pad":"%s",%s]`, strings.Repeat("x", maxChunkRaw-300), b[1:]))
	}
	m, err := recvDone(context.Background(), sendVerdict(texts, n), conf.sent, conf.take)
	if CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), "the most the results of 400 files may take") {
		t.Fatalf("a verdict of %d MiB of text for %d files: %v (%d results taken)", n*maxChunkRaw>>20, n, err, len(m.Results))
	}
	// Every byte of the longest name and path escaped (json.Marshal writes "<" as \u003c).
	conf, results = verdictPlan(t, n)
	for i := range results {
		results[i].Name = fmt.Sprintf("%05d", i) + strings.Repeat("<", 4096-5)
		results[i].Path = strings.Repeat("<", maxResultPath)
		conf.plan.Files[i].Name = results[i].Name
	}
	texts = nil
	for i := range results {
		b, _ := json.Marshal(results[i : i+1])
		texts = append(texts, b)
	}
	if m, err := recvDone(context.Background(), sendVerdict(texts, n), conf.sent, conf.take); err != nil || len(m.Results) != n {
		t.Fatalf("an honest verdict of the longest names and paths: %v", err)
	}
}

package xfer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/lane/lanetest"
)

// A control line is bounded by its message's type before it is decoded (issue 37, second read):
// a line of a few MiB used to decode to tens of times its length whatever its type ("ready" of
// 63 MiB of {} in its verdicts: 2.2 GiB), before any version check.

// repeated is a line: head, n copies of elem joined by commas, tail and a newline.
func repeated(head, elem string, n int, tail string) []byte {
	var b bytes.Buffer
	b.Grow(len(head) + n*(len(elem)+1) + len(tail) + 1)
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(tail)
	b.WriteByte('\n')
	return b.Bytes()
}

// readOne reads the first message of lines through a Control, as a peer's would be.
func readOne(lines []byte) (Msg, error) {
	c := NewControl(bytes.NewReader(lines), &bytes.Buffer{}, nil)
	c.Start(nil)
	return c.Next(context.Background(), 0)
}

// allocated is the memory f allocates (runtime.MemStats.TotalAlloc), whatever the collector
// frees meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestControlLineByType: lines beyond what their type may take are refused before they are
// decoded, whichever member holds the type, in whatever case or escape, however a member is
// repeated; a line that gives its type twice is refused.
func TestControlLineByType(t *testing.T) {
	const mib = 1 << 20
	verdicts := func(head, tail string) []byte {
		return repeated(head+`"stats":{"cc":{"verdicts":[`, "{}", 2*mib, `]}}`+tail)
	}
	for _, c := range []struct {
		name string
		line []byte
		want string
	}{
		{"ready of verdicts", verdicts(`{"t":"ready",`, `}`), `a "ready" message of`},
		{"ready of lanes", repeated(`{"t":"ready","stats":{"lanes":[`, "{}", 2*mib, `]}}`), `a "ready" message of`},
		{"type last", verdicts(`{`, `,"t":"ready"}`), `a "ready" message of`},
		{"type in capitals", verdicts(`{"T":"ready",`, `}`), `a "ready" message of`},
		{"type escaped", verdicts(`{"\u0074":"r\u0065ady",`, `}`), `a "ready" message of`},
		{"unknown type", verdicts(`{"t":"noise",`, `}`), `a "noise" message of`},
		{"no type", verdicts(`{`, `}`), `a "" message of`},
		{"have with verdicts", verdicts(`{"t":"have","have":[1],`, `}`), `whose fields other than have, resume, delta and deleting take`},
		{"have with its bulk under another name", repeated(`{"t":"have","paths":[`, `""`, 2*mib, `]}`), `whose fields other than have, resume, delta and deleting take`},
		{"have of too many indexes", repeated(`{"t":"have","have":[`, "0", maxListEntries+1, `]}`), `4000001 entries, more than the 4000000`},
		{"accept of too many entries", repeated(`{"t":"accept","resume":[{}],"have":[`, "0", maxListEntries, `]}`), `4000001 entries`},
		{"have of too many deletions", repeated(`{"t":"have","have":[1],"deleting":[`, `"x"`, maxListEntries, `]}`), `4000001 entries`},
		{"have given twice", repeated(`{"t":"have","have":[0],"HAVE":[`, "0", maxListEntries, `]}`), `4000001 entries`},
		{"resumed of too many offers", repeated(`{"t":"resumed","resume":[`, "{}", maxListEntries+1, `]}`), `4000001 entries`},
		{"hello of too many paths", repeated(`{"t":"hello","paths":[`, `""`, maxHelloPaths+1, `]}`), `1048577 paths, more than 1048576`},
		{"hello with lanes", repeated(`{"t":"hello","paths":["a"],"stats":{"lanes":[`, "{}", 2*mib, `]}}`), `whose fields other than paths, filter and files_from take`},
		{"hello of too many rules", repeated(`{"t":"hello","filter":[`, "{}", fcopy.MaxRules+1, `]}`), `10001 filter rules, more than 10000`},
		{"hello of too many listed paths", repeated(`{"t":"hello","files_from":[`, `""`, fcopy.MaxFilesFrom+1, `]}`), `1048577 --files-from paths, more than 1048576`},
		{"hello too long", repeated(`{"t":"hello","paths":[`, `"`+strings.Repeat("a", 1000)+`"`, 41*1024, `]}`), `a "hello" message of`},
		{"sums too long", []byte(`{"t":"sums","digests":"` + strings.Repeat("A", maxSumsLine) + `"}` + "\n"), `a "sums" message of`},
		{"error too long", []byte(`{"t":"error","err":"` + strings.Repeat("x", maxErrorLine) + `"}` + "\n"), `a "error" message of`},
		{"list chunk too long", []byte(`{"t":"list","z":"` + strings.Repeat("A", maxChunkWire) + `"}` + "\n"), `a file list chunk of`},
		{"results chunk padded", repeated(`{"t":"results","z":"AAAA","stats":{"lanes":[`, "{}", 300000, `]}}`), `whose fields other than z take`},
		{"type twice", []byte(`{"t":"have","have":[1],"t":"ready"}` + "\n"), `its type is given more than once`},
		{"null type first", []byte(`{"t":null,"t":"ready","ports":[1,2,3,4]}` + "\n"), ``},
		{"long type", []byte(`{"t":"` + strings.Repeat("x", 100) + `"}` + "\n"), `a type of more than 64 bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, err = readOne(c.line) })
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrProtocol) || CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("a line of %d bytes: %v, want a protocol violation saying %q", len(c.line), err, c.want)
			}
			// Reading the line costs a few times its length (its bytes, their growing buffer);
			// decoding it would have cost tens of times more.
			if limit := 4*uint64(len(c.line)) + 16<<20; alloc > limit {
				t.Errorf("a line of %d bytes refused after %d MiB allocated (bound %d MiB)", len(c.line), alloc>>20, limit>>20)
			}
		})
	}
}

// TestControlLineDecoded: the longest lines each type takes hold what their bulk fields can take
// and no more; their other members are skipped or short (at most smallLine of text).
func TestControlLineDecoded(t *testing.T) {
	const bound = 96 << 20 // what the longest line of any type may hold decoded, with the slices' headroom
	filler := strings.Repeat("{},", (smallLine-200)/3)
	filler = filler[:len(filler)-1]
	for _, c := range []struct {
		name string
		line []byte
	}{
		{"have of 0s", repeated(`{"t":"have","stats":{"cc":{"verdicts":[`+filler+`]}},"have":[`, "0", maxListEntries, `]}`)},
		{"accept of offers", repeated(`{"t":"accept","resume":[`, "{}", maxListEntries, `]}`)},
		{"resumed of offers", repeated(`{"t":"resumed","resume":[`, "{}", maxListEntries, `]}`)},
		{"hello of empty paths", repeated(`{"t":"hello","paths":[`, `""`, maxHelloPaths, `]}`)},
		{"hello of empty paths, rules and listed paths", repeated(`{"t":"hello","filter":[`+strings.Repeat(`{"pattern":""},`, fcopy.MaxRules-1)+`{}],"files_from":[`+
			strings.Repeat(`"",`, fcopy.MaxFilesFrom-1)+`""],"paths":[`, `""`, maxHelloPaths, `]}`)},
		{"hello of long paths", repeated(`{"t":"hello","paths":[`, `"`+strings.Repeat("a", 4095)+`"`, (maxHelloLine-smallLine)/4098, `]}`)},
		{"sums", []byte(`{"t":"sums","digests":"` + strings.Repeat("A", maxSumsLine-smallLine) + `"}` + "\n")},
		{"error", []byte(`{"t":"error","err":"` + strings.Repeat("x", maxErrorLine-smallLine) + `"}` + "\n")},
		{"done of lanes", repeated(`{"t":"done","stats":{"lanes":[`, "{}", (smallLine-40)/3, `]}}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m Msg
			var err error
			alloc := allocated(func() { m, _, err = parse(c.line) })
			if err != nil {
				t.Fatalf("a line of %d bytes: %v", len(c.line), err)
			}
			held := heldBytes(reflect.ValueOf(&m).Elem())
			t.Logf("a line of %d KiB holds %d KiB decoded (%d KiB allocated)", len(c.line)>>10, held>>10, alloc>>10)
			if held > bound {
				t.Errorf("a line of %d bytes holds %d MiB decoded, more than %d", len(c.line), held>>20, bound>>20)
			}
			if c.name == "have of 0s" && m.Stats != nil && m.Stats.CC != nil && len(m.Stats.CC.Verdicts) > 4 {
				t.Logf("(its %d verdicts are within smallLine)", len(m.Stats.CC.Verdicts))
			}
		})
	}
}

// TestControlHonestLines: the longest message an honest peer sends of each type is taken: a have
// of every index of the longest list, the digests of the most blocks one offer may keep, a pull of
// paths that fill a command line, escaped at worst, an error that names a destination of the
// longest argument, files with both its example paths of the longest name, escaped at worst.
func TestControlHonestLines(t *testing.T) {
	worst := func(n int) string { return strings.Repeat("<", n) } // json.Marshal writes \u003c: 6 bytes a byte
	digests := make([]byte, fcopy.MaxOfferBlocks*32)
	rand.Read(digests)
	have := make([]int, maxListEntries)
	for i := range have {
		have[i] = i
	}
	var paths []string
	for left := 6 << 20; left > 0; left -= 4096 + 8 {
		paths = append(paths, worst(4096-2)) // "h:" and the path, and its pointer, of 6 MiB of arguments
	}
	many := make([]string, 571950) // the most arguments 6 MiB hold: "h:", its NUL and a pointer each
	for _, m := range []Msg{
		{T: KindHave, Have: have},
		{T: KindAccept, Have: have[:maxListEntries/2], Resume: make([]fcopy.Offer, maxListEntries/8), Window: 1 << 20, AutoWindow: true},
		{T: KindSums, File: maxListEntries - 1, Digests: digests},
		{T: KindHello, Role: RoleSend, Paths: paths, Recursive: true, Follow: true, Compare: "checksum", Profile: worst(4096), Policy: "fair", FEC: "auto"},
		{T: KindHello, Role: RoleSend, Paths: many},
		{T: KindHello, Role: RoleRecv, Dest: worst(4096), Entries: maxListEntries},
		{T: KindError, Err: "destination: " + worst(128<<10) + "/" + worst(4096) + ": rename " + worst(128<<10) + "/" + worst(4096) + ": permission denied", Code: CodeDest},
		{T: KindFiles, Entries: maxListEntries, Skipped: &fcopy.Skipped{Special: 1, SpecialExample: worst(4096), Loops: 1, LoopExample: worst(4096)}},
		{T: KindDone, Entries: maxListEntries, Stats: &PeerStats{Lanes: make([]LaneReport, 4), CC: &RateStats{Verdicts: make([]Verdict, 4)}, Drops: &Drops{}}},
	} {
		line, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		line = append(line, '\n')
		got, err := readOne(line)
		var re *RemoteError
		if m.T == KindError && errors.As(err, &re) {
			err = nil
		}
		if err != nil {
			t.Errorf("an honest %q of %d bytes: %v", m.T, len(line), err)
			continue
		}
		if got.T != m.T || len(got.Have) != len(m.Have) || len(got.Paths) != len(m.Paths) || !bytes.Equal(got.Digests, m.Digests) || got.Err != m.Err {
			t.Errorf("an honest %q of %d bytes read otherwise", m.T, len(line))
		}
	}
}

// TestControlQueueCountsDecoded: messages read but not yet taken count what they hold decoded,
// not only their lines: short lines of many {} each (within smallLine) end the channel once they
// hold more than maxQueued, rather than 1,000 of them holding 600 MiB.
func TestControlQueueCountsDecoded(t *testing.T) {
	line := repeated(`{"t":"done","stats":{"lanes":[`, "{}", (smallLine-40)/3, `]}}`)
	if len(line) > smallLine {
		t.Fatalf("a line of %d bytes", len(line))
	}
	var in bytes.Buffer
	for range 1000 { // fewer than Control.in takes: without the count, all are read and EOF ends it
		in.Write(line)
	}
	c := NewControl(&in, &bytes.Buffer{}, nil)
	ended := make(chan error, 1)
	c.Start(func(err error) { ended <- err })
	err := <-ended
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "messages sent unasked") {
		t.Fatalf("1000 messages of %d bytes not taken: %v, want a protocol violation", len(line), err)
	}
	var held int64
	for m := range c.in {
		held += heldBytes(reflect.ValueOf(&m.m).Elem())
	}
	if held > 2*maxQueued {
		t.Fatalf("%d MiB held by the messages not taken", held>>20)
	}
}

// TestScanLineReference: scanLine reads the type and the bulk fields' elements as encoding/json's
// own tokenizer does (see also FuzzControl).
func TestScanLineReference(t *testing.T) {
	for _, line := range []string{
		`{}`, ` { "t" : "have" , "have" : [ 1 , 2 ,3 ] } `, `{"have":[],"t":"have"}`, `{"T":"x","t":"y"}`,
		`{"t":"a\"b\\","paths":["a,b","c]","d\"],"]}`, `{"x":{"t":"no"},"t":"yes"}`, `{"pAtHs":[[1,2],[3]],"RESUME":[{"a":[1,2]}]}`,
		`{"path\u0073":["x"],"t":null,"t":"hello"}`, `{"z":"` + strings.Repeat(`\\`, 5) + `\"","t":"list"}`,
	} {
		var sh lineShape
		if !scanLine([]byte(line), &sh) {
			t.Errorf("%s: not read", line)
			continue
		}
		if ref := referenceShape(t, []byte(line)); ref.t != sh.t || ref.hasT != sh.hasT || ref.elems != sh.elems {
			t.Errorf("%s: read %+v, the reference %+v", line, sh, ref)
		}
	}
	for _, line := range []string{``, `[]`, `{`, `{"t"}`, `{"t":"x",}`, `{"t":"x"} {}`, `{"a":[}`, `{"a":"\"}`} {
		var sh lineShape
		if scanLine([]byte(line), &sh) && !json.Valid([]byte(line)) {
			t.Errorf("%s: read, though not JSON", line)
		}
	}
}

// referenceShape is scanLine's reading with encoding/json's tokenizer: the first "t" member whose
// value is a string, and the elements of each bulk field's arrays, over all its members.
func referenceShape(t testing.TB, line []byte) lineShape {
	var sh lineShape
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object (%v)", line, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if strings.EqualFold(key, "t") && !sh.hasT && raw[0] == '"' {
			sh.hasT = true
			if len(raw) > maxTypeText {
				sh.longT = true
			} else {
				json.Unmarshal(raw, &sh.t)
			}
		}
		for b, name := range bulkNames {
			var elems []json.RawMessage
			if strings.EqualFold(key, name) && raw[0] == '[' && json.Unmarshal(raw, &elems) == nil {
				sh.elems[b] += len(elems)
			}
		}
	}
	return sh
}

// TestHeldBytes: what a decoded message holds: its strings' bytes and its slices' arrays.
func TestHeldBytes(t *testing.T) {
	m := Msg{T: KindHave, Have: make([]int, 10), Paths: []string{"abc"}, Stats: &PeerStats{Lanes: make([]LaneReport, 2)}}
	want := int64(4 + 10*8 + 16 + 3 + reflect.TypeFor[PeerStats]().Size() + 2*reflect.TypeFor[LaneReport]().Size())
	if got := heldBytes(reflect.ValueOf(&m).Elem()); got != want {
		t.Fatalf("held %d bytes, want %d", got, want)
	}
}

// TestServeProfileOwnOnly (issue 37, second read): the server writes a CPU profile only where its
// own environment asks for one (Tuning.Profile), at its own prefix, and only once the client's
// hello has passed the version check: the prefix in a hello is a path of the client's choosing
// (the profile was created, following links and truncating, before the version was checked).
func TestServeProfileOwnOnly(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	priv, err := newKex()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	serve := func(hello Msg, own string) {
		line, _ := json.Marshal(hello)
		Serve(context.Background(), bytes.NewReader(append(line, '\n')), io.Discard, encodePub(priv.PublicKey()),
			ServeOptions{Lanes: e.lanes(serverHost), Tuning: tuning.Settings{Profile: own}})
	}
	profiles := func() (names []string) {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}
	serve(Msg{T: KindHello, Proto: Proto, Role: "none", Profile: filepath.Join(dir, "client")}, "")
	serve(Msg{T: KindHello, Proto: Proto - 1, Role: "none", Profile: filepath.Join(dir, "client")}, filepath.Join(dir, "own"))
	if got := profiles(); len(got) > 0 {
		t.Fatalf("profiles written: %q", got)
	}
	serve(Msg{T: KindHello, Proto: Proto, Role: "none", Profile: filepath.Join(dir, "client")}, filepath.Join(dir, "own"))
	if got, want := profiles(), fmt.Sprintf("own.serve.%d.pprof", os.Getpid()); len(got) != 1 || got[0] != want {
		t.Fatalf("profiles written: %q, want %s", got, want)
	}
}

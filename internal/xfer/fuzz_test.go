package xfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	fcopy "github.com/farwing/farwing/copy"
)

// FuzzControl: any bytes on the control channel are read without panicking, one message per
// line; what is read re-encodes to a message that reads back the same, and what is refused is a
// protocol violation or the end of the channel.
func FuzzControl(f *testing.F) {
	f.Add([]byte(`{"t":"ready","proto":7,"ports":[1,2,3,4],"pub":"x"}` + "\n" + `{"t":"files","entries":1}` + "\n" + `{"t":"list","z":"i65WykvMTVWyUkpU0lEqzqwCMo1rYwE="}` + "\n"))
	f.Add([]byte(`{"t":"error","err":"\u001b[2Jboom","code":77}` + "\n{\n"))
	f.Add([]byte(`{"t":"digest","file":-1,"sum":"zz"}` + "\n"))
	f.Add([]byte(`{"have":[1,[2,3],{"a":[4]}],"T":"have","\u0074":"have","resume":[{"file":1}]}` + "\n" + `{"t":null,"t":"ready"}` + "\n"))
	f.Add([]byte(`{"t":"hello","pathſ":["a\"],\\",""],"z":"\\\""}` + "\n" + ` { "t" : "x" , "t" : "y" } ` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := NewControl(bytes.NewReader(in), &bytes.Buffer{}, nil)
		for range 64 {
			line, err := c.read()
			var m Msg
			var n int64
			if err == nil {
				// The scan that bounds a line by its type reads what encoding/json reads.
				var sh lineShape
				ok := scanLine(line, &sh)
				if json.Valid(line) && bytes.HasPrefix(bytes.TrimLeft(line, " \t\r\n"), []byte("{")) {
					if ref := referenceShape(t, line); !ok || ref.t != sh.t || ref.hasT != sh.hasT || ref.longT != sh.longT || ref.elems != sh.elems {
						t.Fatalf("%q: scanned %v %+v, encoding/json reads %+v", line, ok, sh, ref)
					}
				}
				m, n, err = parse(line)
				if err == nil {
					var full Msg
					if jerr := json.Unmarshal(line, &full); jerr != nil || full.T != m.T {
						t.Fatalf("%q: taken as %q, encoding/json reads %q (%v)", line, m.T, full.T, jerr)
					}
					if rule, ok := lineRuleOf(m.T); (ok && len(line) > rule.limit) || (!ok && len(line) > smallLine) {
						t.Fatalf("%q: a %q of %d bytes taken", line, m.T, len(line))
					}
				}
			}
			if err == nil && (n <= 0 || n > maxMessage) {
				t.Fatalf("a message of %d bytes read", n)
			}
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrPeerGone) {
					t.Fatalf("read: %v", err)
				}
				return
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("re-encode %+v: %v", m, err)
			}
			var again Msg
			if err := json.Unmarshal(b, &again); err != nil || again.T != m.T || len(again.Files) != len(m.Files) || again.Err != m.Err {
				t.Fatalf("round trip: %+v → %s → %+v (%v)", m, b, again, err)
			}
			if m.T == KindError {
				re := remoteError(m)
				for _, r := range re.Msg {
					if r < 0x20 || r == 0x7f {
						t.Fatalf("remote error %q keeps a control character", re.Msg)
					}
				}
			}
		}
	})
}

// FuzzListChunk: any bytes as a file list chunk are decoded within the bounds or refused as a
// protocol violation, never a panic; what is taken passes the naming rule and what was announced.
func FuzzListChunk(f *testing.F) {
	f.Add(deflateRaw([]byte(`[{"name":"t","dir":true},{"name":"t/a","size":3}]`)), 2)
	f.Add(deflateRaw([]byte(`[{"name":"../x","size":1}]`)), 1)
	f.Add([]byte("not deflate"), 3)
	f.Fuzz(func(t *testing.T, z []byte, n int) {
		n = n % 8
		var in bytes.Buffer
		json.NewEncoder(&in).Encode(Msg{T: KindList, Z: z})
		json.NewEncoder(&in).Encode(Msg{T: KindList, Z: z})
		c := NewControl(&in, &bytes.Buffer{}, nil)
		c.Start(nil)
		files, err := recvList(context.Background(), c, n)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, fcopy.ErrName) && !errors.Is(err, ErrPeerGone) {
				t.Fatalf("refused as %v", err)
			}
			return
		}
		if len(files) != n {
			t.Fatalf("%d entries taken of %d announced", len(files), n)
		}
		for _, f := range files {
			if fcopy.ValidName(f.Name) != nil {
				t.Fatalf("took %q", f.Name)
			}
		}
	})
}

// FuzzListChunkText: a chunk's text is decoded entry by entry as it inflates, with runs of space
// between tokens made one (list.go, textCounter); within the chunk's bounds it takes exactly what
// json.Unmarshal takes of the whole text, and refuses what it refuses.
func FuzzListChunkText(f *testing.F) {
	f.Add([]byte(`[{"name":"t","dir":true} , {"name":"t/a","size":3}]`))
	f.Add([]byte(` [ { "name" : "a  b\\" , "size" : 1 2 } ] `))
	f.Add([]byte(`[{"name":"a\"  ","link":"x"}]` + "\n\t "))
	f.Add([]byte(`[{"name":"t"}] x`))
	f.Add([]byte(`[{"name":"t", "mode": 4 2 0}]`))
	f.Add([]byte(`[tr ue]`))
	f.Fuzz(func(t *testing.T, text []byte) {
		var d inflater
		var got []fcopy.File
		err := d.decode(deflateRaw(text), &got)
		var want []fcopy.File
		werr := json.Unmarshal(text, &want)
		if werr == nil && (len(want) > maxChunkEntries || len(text) > maxChunkRaw) {
			return // beyond the chunk's bounds: refused by decode, see TestListChunkStreams
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decode %v, json.Unmarshal %v", text, err, werr)
		}
		if err != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d entries, json.Unmarshal %d", text, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: entry %d %+v, json.Unmarshal %+v", text, i, got[i], want[i])
			}
		}
	})
}

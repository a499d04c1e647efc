package escape

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want, lines string }{
		{"plain text, ünïcödé 日本 \\x1b", "plain text, ünïcödé 日本 \\x1b", ""},
		{"red \x1b[31mALERT\x1b[0m", `red \x1b[31mALERT\x1b[0m`, ""},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\\tc\\rd"},
		{"bell\a del\x7f", `bell\x07 del\x7f`, ""},
		{"c1 \u009b2J", `c1 \u009b2J`, ""},
		{"rtl \u202eevil", `rtl \u202eevil`, ""},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`, ""},
		{"nul \x00", `nul \x00`, ""},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		want := c.lines
		if want == "" {
			want = c.want
		}
		if got := Lines(c.in); got != want {
			t.Errorf("Lines(%q) = %q, want %q", c.in, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("a\x1bb"); got != `"a\x1bb"` {
		t.Errorf("Quote = %s", got)
	}
	long := Quote(strings.Repeat("x", 1000))
	if len(long) != 200+2+len("…") || !strings.HasSuffix(long, `…"`) {
		t.Errorf("Quote of 1000 bytes: %d bytes %q", len(long), long[len(long)-8:])
	}
}

// TestWriter: escape sequences split across writes are escaped, and a multi-byte rune split across
// writes passes whole.
func TestWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	for _, p := range []string{"ok \x1b", "[2J line\n", "日"[:2], "日"[2:] + "\n"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if got, want := out.String(), "ok \\x1b[2J line\n日\n"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
}

func FuzzText(f *testing.F) {
	f.Add("red \x1b[31m\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		for _, r := range out {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
				t.Fatalf("Text(%q) = %q keeps control character %U", s, out, r)
			}
		}
		if Text(out) != out {
			t.Fatalf("Text is not idempotent on %q", s)
		}
		// JSON of s's encoding decodes to what the encoding does, and holds only printable
		// runes (a name from the peer in an event line).
		j, _ := json.Marshal(map[string]string{s: s})
		safe := JSON(j)
		var a, b map[string]string
		if err := json.Unmarshal(safe, &b); err != nil || json.Unmarshal(j, &a) != nil || len(a) != 1 || !reflect.DeepEqual(a, b) {
			t.Fatalf("JSON(%s) = %s: decodes to %q, want %q (%v)", j, safe, b, a, err)
		}
		for _, r := range string(safe) {
			if !printable(r, 1, false) {
				t.Fatalf("JSON(%s) = %s keeps %U", j, safe, r)
			}
		}
	})
}

// TestJSON: a JSON text with every kind of character a terminal acts on inside its strings comes
// out with none of them raw, as valid JSON that decodes to the same values; the layout outside
// strings (an indented object's newlines) is kept, and printable text passes unchanged.
func TestJSON(t *testing.T) {
	bad := []string{"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
		"\x1b", "\x00", "\x7f", "\u0085", "\u009b", "\u2028", "\U000e0001"}
	name := "ok ünïcödé 日本 \\ \" /" + strings.Join(bad, "x")
	in := map[string]any{"name": name, "list": []string{"\u202eevil.exe", "plain"}, "n": 3, name: true}
	for _, indent := range []string{"", "  "} {
		j, err := json.MarshalIndent(in, "", indent)
		if err != nil {
			t.Fatal(err)
		}
		got := JSON(j)
		for _, b := range bad {
			if bytes.Contains(got, []byte(b)) {
				t.Errorf("indent %q: %q raw in %s", indent, b, got)
			}
		}
		for _, c := range got {
			if c < 0x20 && c != '\n' || c == 0x7f {
				t.Errorf("indent %q: byte %#x raw in %s", indent, c, got)
			}
		}
		if indent != "" && bytes.Count(got, []byte("\n")) != bytes.Count(j, []byte("\n")) {
			t.Errorf("the layout changed: %s", got)
		}
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("indent %q: %v: %s", indent, err, got)
		}
		if back["name"] != name || back[name] != true || back["list"].([]any)[0] != "\u202eevil.exe" {
			t.Errorf("indent %q: decodes to %q", indent, back)
		}
		if !bytes.Contains(got, []byte(`ok ünïcödé 日本`)) || !bytes.Contains(got, []byte(`\u202eevil.exe`)) || !bytes.Contains(got, []byte(`\udb40\udc01`)) {
			t.Errorf("indent %q: %s", indent, got)
		}
	}
	if got := JSON([]byte("{\"a\":\"\xff\"}")); string(got) != `{"a":"\ufffd"}` {
		t.Errorf("invalid UTF-8: %s", got)
	}
	if plain := []byte(`{"a":"b"}`); &JSON(plain)[0] != &plain[0] {
		t.Error("plain ASCII JSON was copied")
	}
}

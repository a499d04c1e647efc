package escape

import (
	"bytes"
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
	})
}

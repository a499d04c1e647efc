// Package escape makes text that came from the other side safe to print on a terminal: a remote
// error message, a file name, what the remote shell wrote to ssh's standard error. Control
// characters (C0, DEL, C1), other non-printing runes (bidirectional overrides, format characters)
// and bytes that are not UTF-8 are written as Go escapes (\x1b, \u202e), so that no byte from the
// peer can move the cursor, retitle the window or hide text (the lesson of OpenSSH's
// CVE-2019-6109). Printable text, backslashes included, passes unchanged.
package escape

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Text escapes every non-printing character of s, newlines and tabs included.
func Text(s string) string { return text(s, false) }

// quoteMax is how much of a string Quote shows.
const quoteMax = 200

// Quote is Text of at most the first 200 bytes of s, in double quotes, with "…" when it was cut:
// for remote strings of any length (a control message may be 64 MiB) inside one-line errors.
func Quote(s string) string {
	cut := ""
	if len(s) > quoteMax {
		s, cut = s[:quoteMax], "…"
	}
	return `"` + Text(s) + cut + `"`
}

// Lines is Text that keeps newlines (for multi-line output such as ssh's diagnostics).
func Lines(s string) string { return text(s, true) }

func text(s string, keepNL bool) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !printable(r, n, keepNL) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case printable(r, n, keepNL):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

func printable(r rune, n int, keepNL bool) bool {
	if r == utf8.RuneError && n <= 1 {
		return false
	}
	if r == '\n' {
		return keepNL
	}
	return r >= 0x20 && r < 0x7f || r >= 0xa0 && unicode.IsPrint(r)
}

// Writer escapes everything written to it (keeping newlines) before passing it on to w. It holds
// back an incomplete UTF-8 sequence at the end of a write until the next one. Safe for concurrent
// use.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	part []byte
}

// NewWriter returns a Writer onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (e *Writer) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	buf := append(e.part, p...)
	// Keep an incomplete rune at the end for the next write (at most 3 bytes).
	cut := len(buf)
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				cut = len(buf) - k
			}
			break
		}
	}
	e.part = append(e.part[:0:0], buf[cut:]...)
	if _, err := io.WriteString(e.w, Lines(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// JSON rewrites the JSON text j so that no string in it holds a character a terminal or an
// editor would act on: every rune Text would escape (C0 and C1 controls, DEL, bidirectional
// marks, overrides and isolates such as U+200E, U+202E and U+2066, other format characters) is
// written as a \u escape (a surrogate pair above U+FFFF), and a byte that is not UTF-8 as
// \ufffd. The JSON means the same; what is outside strings passes unchanged. encoding/json
// leaves C1 controls, DEL and the bidirectional characters raw, and the peer chooses file names.
func JSON(j []byte) []byte {
	clean := true
	for _, c := range j {
		if c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return j
	}
	out := make([]byte, 0, len(j)+16)
	inString, backslash := false, false
	for i := 0; i < len(j); {
		c := j[i]
		if c < 0x80 {
			switch {
			case !inString:
				inString = c == '"'
			case backslash:
				backslash = false
			case c == '\\':
				backslash = true
			case c == '"':
				inString = false
			case c < 0x20 || c == 0x7f:
				out = fmt.Appendf(out, `\u%04x`, c)
				i++
				continue
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(j[i:])
		switch {
		case !inString:
			out = append(out, j[i:i+n]...)
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		case printable(r, n, false):
			out = append(out, j[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	return out
}

package bootstrap

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzStatus: the remote shell's status line is parsed without panicking; what is accepted has a
// known state, and for ok/need/nodir/nohash/unsafe an OS, an architecture and an absolute path
// (need: the formats too; unsafe: why, one of three words), and re-forms the line it came from.
func FuzzStatus(f *testing.F) {
	for _, s := range []string{
		"FARWING-PEER ok Linux x86_64 /home/u/.cache/farwing/farwing-0123456789abcdef\n",
		"FARWING-PEER need Linux aarch64 gzip,raw /home/my user/.cache/farwing\n",
		"FARWING-PEER nohash Linux x86_64 /home/u/.cache/farwing\n", "FARWING-PEER badupload\n",
		"FARWING-PEER nodir Darwin arm64 /Users/u/Library/Caches/farwing",
		"FARWING-PEER badhash\n", "FARWING-PEER norename", "FARWING-PEER ok Linux",
		"FARWING-PEER unsafe Linux x86_64 mode /home/u/.cache/farwing\n", "FARWING-PEER unsafe Linux x86_64 /home/u/.cache/farwing\n",
		"FARWING-PEER unsafe Linux x86_64 other /p\n",
		"Welcome to the machine\n", "FARWING-PEER ok \x1b[2J x /p",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		st, err := parseStatus(line)
		if err != nil {
			return
		}
		switch st.State {
		case "ok", "need", "nodir", "nohash", "unsafe":
			if st.OS == "" || st.Arch == "" || !strings.HasPrefix(st.Path, "/") || strings.Contains(st.OS+st.Arch+st.Formats, " ") ||
				(st.State == "need") != (st.Formats != "") || (st.State == "unsafe") != (st.Why == "link" || st.Why == "owner" || st.Why == "mode") {
				t.Fatalf("%q parsed as %+v", line, st)
			}
			re := "FARWING-PEER " + st.State + " " + st.OS + " " + st.Arch + " " + st.Path
			switch st.State {
			case "need":
				re = "FARWING-PEER need " + st.OS + " " + st.Arch + " " + st.Formats + " " + st.Path
			case "unsafe":
				re = "FARWING-PEER unsafe " + st.OS + " " + st.Arch + " " + st.Why + " " + st.Path
			}
			if re != strings.TrimRight(line, "\r\n") {
				t.Fatalf("%q re-forms as %q", line, re)
			}
		case "badhash", "norename", "badupload":
			if strings.TrimRight(line, "\r\n") != "FARWING-PEER "+st.State {
				t.Fatalf("%q parsed as %+v", line, st)
			}
		default:
			t.Fatalf("%q: state %q accepted", line, st.State)
		}
	})
}

// FuzzUploadLine: the remote script's lines during the upload are parsed without panicking; an
// acknowledgement or a list of missing parts holds only parts of plain decimal numbers (no sign,
// no leading zero, at most 10 digits) with a length above 0, and re-forms the line it came from;
// anything else must be a status line.
func FuzzUploadLine(f *testing.F) {
	for _, s := range []string{
		"FARWING-GOT 0 65536\n", "FARWING-GOT 65536 1\n", "FARWING-MISSING 0-5 5-7\n", "FARWING-MISSING 131072-4000000\n",
		"FARWING-GOT 01 5\n", "FARWING-GOT 0 0\n", "FARWING-MISSING \n", "FARWING-GOT -1 5", "FARWING-GOT 1-2 3\n",
		"FARWING-GOT 99999999999 1\n", "FARWING-GOT 0 5 6\n", "FARWING-MISSING 0-5  5-7\n", "FARWING-PEER badhash\n",
		"FARWING-PEER ok Linux x86_64 /p\n", "FARWING-GOT +1 5\n", "FARWING-GOT 1 \u0665\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		l, err := parseUploadLine(line)
		if err != nil {
			return
		}
		var re string
		ok := func(c part) bool {
			s := c.String()
			return c.off >= 0 && c.n > 0 && c.off <= 9_999_999_999 && c.n <= 9_999_999_999 && !strings.ContainsAny(s, "+ ")
		}
		switch {
		case l.st != nil:
			if _, err := parseStatus(line); err != nil || l.missing != nil || l.got != (part{}) {
				t.Fatalf("%q parsed as %+v", line, l)
			}
			return
		case l.missing != nil:
			var s []string
			for _, c := range l.missing {
				if !ok(c) {
					t.Fatalf("%q: part %+v accepted", line, c)
				}
				s = append(s, c.String())
			}
			re = "FARWING-MISSING " + strings.Join(s, " ")
		default:
			if !ok(l.got) {
				t.Fatalf("%q: part %+v accepted", line, l.got)
			}
			re = fmt.Sprintf("FARWING-GOT %d %d", l.got.off, l.got.n)
		}
		if re != strings.TrimRight(line, "\r\n") {
			t.Fatalf("%q re-forms as %q", line, re)
		}
	})
}

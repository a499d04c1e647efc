package bootstrap

import (
	"strings"
	"testing"
)

// FuzzStatus: the remote shell's status line is parsed without panicking; what is accepted has a
// known state, and for ok/need/nodir/nohash an OS, an architecture and an absolute path (need: the
// formats too), and re-forms the line it came from.
func FuzzStatus(f *testing.F) {
	for _, s := range []string{
		"FARWING-PEER ok Linux x86_64 /home/u/.cache/farwing/farwing-0123456789abcdef\n",
		"FARWING-PEER need Linux aarch64 gzip,raw /home/my user/.cache/farwing\n",
		"FARWING-PEER nohash Linux x86_64 /home/u/.cache/farwing\n", "FARWING-PEER badupload\n",
		"FARWING-PEER nodir Darwin arm64 /Users/u/Library/Caches/farwing",
		"FARWING-PEER badhash\n", "FARWING-PEER norename", "FARWING-PEER ok Linux",
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
		case "ok", "need", "nodir", "nohash":
			if st.OS == "" || st.Arch == "" || !strings.HasPrefix(st.Path, "/") || strings.Contains(st.OS+st.Arch+st.Formats, " ") ||
				(st.State == "need") != (st.Formats != "") {
				t.Fatalf("%q parsed as %+v", line, st)
			}
			re := "FARWING-PEER " + st.State + " " + st.OS + " " + st.Arch + " " + st.Path
			if st.State == "need" {
				re = "FARWING-PEER need " + st.OS + " " + st.Arch + " " + st.Formats + " " + st.Path
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

package bootstrap

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOKLine: the status line a cached peer prints (AnnounceFlag) is the one the shell printed,
// with uname's words, and parses as ok with the path.
func TestOKLine(t *testing.T) {
	out, err := exec.Command("uname", "-s", "-m").Output()
	if err != nil {
		t.Skipf("no uname here: %v", err)
	}
	path := "/home/a b/.cache/farwing/farwing-0123456789abcdef"
	line := OKLine(path)
	if want := "FARWING-PEER ok " + strings.TrimSpace(string(out)) + " " + path + "\n"; line != want {
		t.Fatalf("OKLine = %q, want %q", line, want)
	}
	st, err := parseStatus(line)
	if err != nil || st.State != "ok" || st.Path != path {
		t.Fatalf("parseStatus(%q) = %+v, %v", line, st, err)
	}
}

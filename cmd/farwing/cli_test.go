package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/session"
)

func TestSplitRemote(t *testing.T) {
	for _, c := range []struct {
		arg, host, path string
		remote          bool
	}{
		{"host:/data/", "host", "/data/", true},
		{"user@host:file", "user@host", "file", true},
		{"host:", "host", "", true},
		{"[::1]:x", "::1", "x", true},
		{"u@[2001:db8::1]:/p", "u@2001:db8::1", "/p", true},
		{"./a:b", "", "./a:b", false},
		{"/abs/a:b", "", "/abs/a:b", false},
		{"plain", "", "plain", false},
		{":nohost", "", ":nohost", false},
		{"dir/x@y:z", "", "dir/x@y:z", false},
	} {
		h, p, r := splitRemote(c.arg)
		if h != c.host || p != c.path || r != c.remote {
			t.Errorf("%q: got (%q, %q, %v), want (%q, %q, %v)", c.arg, h, p, r, c.host, c.path, c.remote)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"copy"},
		{"copy", "onlyone"},
		{"copy", "a", "b"},
		{"copy", "h1:a", "h2:b"},
		{"copy", "--rate", "fast", "a", "h:b"},
		{"copy", "--policy", "greedy", "a", "h:b"},
		{"copy", "--policy", "fixed", "a", "h:b"},
		{"copy", "--min-rate", "500M", "--rate", "100M", "a", "h:b"},
		{"copy", "--checksum", "--ignore-times", "a", "h:b"},
		{"nosuchcommand"},
		{"copy", "-l", "a", "h:b"},
		{"copy", "--bwlimit", "10", "a", "h:b"},
		{"copy", "-P", "notanum", "a", "h:b"},
		{"bench", "--runs", "0", "h"},
		{"bench", "--size", "huge", "h"},
		{"bench", "--rows", "ftp", "h"},
		{"bench", "--frobnicate", "h"},
		{"bench"},
	} {
		var errs bytes.Buffer
		stderr = &errs
		code := run(args)
		stderr = os.Stderr
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		// One line naming the problem, never silence.
		if msg := strings.TrimSpace(errs.String()); msg == "" || strings.Count(msg, "\n") > 0 && args[0] != "nosuchcommand" {
			t.Errorf("%v: stderr %q, want one line", args, errs.String())
		}
	}
}

// TestProgressFinal: the final progress line reports everything acknowledged at the average rate,
// not the rate of its last few milliseconds.
func TestProgressFinal(t *testing.T) {
	var buf bytes.Buffer
	old := stderr
	stderr = &buf
	defer func() { stderr = old }()
	fn := progressLine(true)
	fn(session.Progress{Bytes: 500 << 20}, 1<<30, time.Second, false)
	fn(session.Progress{Bytes: 1 << 30}, 1<<30, 1010*time.Millisecond, true)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	// 1 GiB in 1.01 s is 8.50 Gbit/s on average; the last 10 ms alone would say 419 Gbit/s.
	if last := lines[1]; !strings.HasPrefix(strings.TrimSpace(last), "100%") || !strings.Contains(last, "8.50 Gbit/s") {
		t.Fatalf("final line %q: want 100%% at the average rate, 8.50 Gbit/s", last)
	}
}

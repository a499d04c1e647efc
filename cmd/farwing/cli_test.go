package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/xfer"
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
		{"copy", "-l", "-5", "a", "h:b"},
		{"copy", "-l", "8000", "--rate", "8M", "a", "h:b"},
		{"copy", "--bwlimit", "10", "a", "h:b"},
		{"copy", "-P", "notanum", "a", "h:b"},
		{"copy", "--port", "40000", "a", "h:b"},
		{"copy", "--port", "40000-40002", "a", "h:b"},
		{"copy", "--port", "0-100", "a", "h:b"},
		{"copy", "--exclude", "a[", "a", "h:b"},
		{"copy", "--exclude-from", "/no/such/file", "a", "h:b"},
		{"copy", "--files-from", "/no/such/file", "a", "h:b"},
		{"copy", "--files-from", "/dev/null", "a", "h:b"},
		{"copy", "--files-from", "-", "--exclude-from", "-", "a", "h:b"},
		{"copy", "--files-from", "-", "-", "h:b"},
		{"copy", "--delete", "a", "h:b"},
		{"copy", "-r", "--delete", "h:'d/*'", "b"},
		{"copy", "-n", "h:a", "-"},
		{"copy", "-r", "--delete", "--sink", "a", "h:b"},
		{"bench", "--runs", "0", "h"},
		{"bench", "--size", "huge", "h"},
		{"bench", "--rows", "ftp", "h"},
		{"bench", "--frobnicate", "h"},
		{"bench", "--rows", "fairness", "h"},
		{"bench", "--rows", "farwing,halving", "h"},
		{"bench", "--copy-flag=-F=cfg", "h"},
		{"bench", "--copy-flag=--fec=sometimes", "h"},
		{"bench"},
		{"doctor"},
		{"doctor", "h1", "h2"},
		{"doctor", "--port", "1-2", "h"},
		{"doctor", "--frobnicate", "h"},
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
	fn := progressLine(&buf, termWidth, true, false)
	fn(xfer.Progress{Progress: session.Progress{Bytes: 500 << 20}, Total: 1 << 30, Elapsed: time.Second})
	fn(xfer.Progress{Progress: session.Progress{Bytes: 1 << 30}, Total: 1 << 30, Elapsed: 1010 * time.Millisecond, Final: true})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	// 1 GiB in 1.01 s is 8.50 Gbit/s on average; the last 10 ms alone would say 419 Gbit/s.
	if last := lines[1]; !strings.HasPrefix(strings.TrimSpace(last), "100%") || !strings.Contains(last, "8.50 Gbit/s") {
		t.Fatalf("final line %q: want 100%% at the average rate, 8.50 Gbit/s", last)
	}
}

// TestProgressFits: the terminal's progress line never wraps: at every width it fits, a long
// name is shortened around "…" before fields go, remote text in the name is escaped, and the
// rate is averaged over the last seconds rather than the last burst.
func TestProgressFits(t *testing.T) {
	var buf bytes.Buffer
	name := "data/" + strings.Repeat("very-long-directory-name/", 6) + "file\x1b[31m.bin"
	for _, width := range []int{20, 40, 80, 132, 300} {
		buf.Reset()
		fn := progressLine(&buf, func() int { return width }, false, true)
		// Feedback bursts: 40 MiB in one half-second, nothing in the next, for 4 s: 40 MiB/s
		// (335.5 Mbit/s) on average, where a burst's half-second alone reads 671.1 Mbit/s.
		for i := 1; i <= 8; i++ {
			b := int64((i+1)/2) * 40 << 20
			fn(xfer.Progress{Progress: session.Progress{Bytes: b, RateBps: 7e8, SRTT: 140 * time.Millisecond, RandomLoss: 0.01},
				Total: 1 << 30, Elapsed: time.Duration(i) * 500 * time.Millisecond, File: name, FileIndex: 2, Files: 5})
		}
		draws := strings.Split(buf.String(), "\r\x1b[K")
		line := draws[len(draws)-1]
		t.Logf("width %3d: %s", width, line)
		if n := utf8.RuneCountInString(line); n > width-1 {
			t.Errorf("width %d: line of %d columns: %q", width, n, line)
		}
		if strings.Contains(line, "\x1b") {
			t.Errorf("width %d: raw escape in %q", width, line)
		}
		if !strings.Contains(line, "%") {
			t.Errorf("width %d: no percentage in %q", width, line)
		}
		if width >= 80 {
			want := []string{"[3/5]", "ETA 0:22", "335.5 Mbit/s"} // the last 3 s: 40 → 160 MiB
			if width < 200 {
				want = append(want, "…")
			}
			for _, w := range want {
				if !strings.Contains(line, w) {
					t.Errorf("width %d: %q lacks %q", width, line, w)
				}
			}
		}
		if width >= 300 && (!strings.Contains(line, "rtt 140 ms") || !strings.Contains(line, "file\\x1b[31m.bin")) {
			t.Errorf("width %d: %q lacks the verbose fields or the whole (escaped) name", width, line)
		}
	}
}

// TestProgressPerFile: both layouts of the human line name the file in progress with its own
// percentage and give an ETA at the rate of the last seconds.
func TestProgressPerFile(t *testing.T) {
	var buf bytes.Buffer
	width := func() int { return 120 }
	// 3 files of 40 MiB; 60 MiB done in 2 s (240 Mbit/s): b.bin half done, 60 MiB left, 2 s.
	p := xfer.Progress{Progress: session.Progress{Bytes: 60 << 20}, Total: 120 << 20, Elapsed: 2 * time.Second,
		File: "dir/b.bin", FileIndex: 1, Files: 3, FileBytes: 20 << 20, FileSize: 40 << 20}
	for _, lines := range []bool{true, false} {
		buf.Reset()
		fn := progressLine(&buf, width, lines, false)
		fn(xfer.Progress{Total: p.Total, Elapsed: 0, File: "dir/a.bin", Files: 3, FileSize: 40 << 20})
		fn(p)
		out := buf.String()
		for _, w := range []string{"[2/3] dir/b.bin 50%", "ETA 0:02", " 50%"} {
			if !strings.Contains(out, w) {
				t.Errorf("lines %v: %q lacks %q", lines, out, w)
			}
		}
	}
	// One file: its percentage is the copy's, said once.
	buf.Reset()
	progressLine(&buf, width, true, false)(xfer.Progress{Progress: session.Progress{Bytes: 1 << 20}, Total: 4 << 20, Elapsed: time.Second,
		File: "one.bin", Files: 1, FileBytes: 1 << 20, FileSize: 4 << 20})
	if out := buf.String(); strings.Count(out, "%") != 1 || !strings.Contains(out, "ETA 0:03") {
		t.Errorf("one file: %q", out)
	}
}

// TestLimitKbit: -l takes scp's unit, Kbit/s, and sets the same ceiling as --rate.
func TestLimitKbit(t *testing.T) {
	for _, c := range []struct {
		args []string
		want float64
	}{{[]string{"-l", "8000"}, 8e6}, {[]string{"--rate", "8M"}, 8e6}, {nil, 0}} {
		var co copyOptions
		fs := pflag.NewFlagSet("copy", pflag.ContinueOnError)
		co.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		o, err := co.options()
		if err != nil || o.Rate != c.want {
			t.Errorf("%v: rate %v, %v; want %v", c.args, o.Rate, err, c.want)
		}
	}
}

// TestServeRelayRefuses: `farwing serve --relay` given a socket that is no copy's relay socket
// says so in one line and exits 10, connecting nowhere.
func TestServeRelayRefuses(t *testing.T) {
	var errs bytes.Buffer
	stderr = &errs
	code := run([]string{"serve", "--relay", "/var/run/docker.sock"})
	stderr = os.Stderr
	msg := strings.TrimSpace(errs.String())
	if code != exitProtocol || strings.Count(msg, "\n") > 0 || !strings.Contains(msg, `"/var/run/docker.sock" is not a copy's relay socket`) {
		t.Errorf("exit %d, stderr %q; want exit %d, one line", code, errs.String(), exitProtocol)
	}
}

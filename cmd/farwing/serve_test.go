package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/farwing/farwing/internal/benchpeer"
	"github.com/farwing/farwing/internal/doctorpeer"
	"github.com/farwing/farwing/internal/xfer"
)

// TestSkipReader: --skip L:A passes the first L bytes, drops the next A and passes the rest,
// whatever sizes the reads come in; a stream that ends inside the dropped bytes ends the channel;
// malformed or oversized values are refused.
func TestSkipReader(t *testing.T) {
	in := []byte("PREFACE\nFARWING-UPLOAD gzip 9 0123456789abcdef\nxxxxxxxxxCONTROL\n")
	keep, drop := int64(len("PREFACE\n")), int64(len("FARWING-UPLOAD gzip 9 0123456789abcdef\nxxxxxxxxx"))
	for _, one := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(in)
		if one {
			r = iotest.OneByteReader(r)
		}
		got, err := io.ReadAll(&skipReader{r: r, keep: keep, drop: drop})
		if err != nil || string(got) != "PREFACE\nCONTROL\n" {
			t.Fatalf("one byte at a time %v: %q, %v", one, got, err)
		}
	}
	got, err := io.ReadAll(&skipReader{r: bytes.NewReader(in[:keep+5]), keep: keep, drop: drop})
	if string(got) != "PREFACE\n" || err != nil {
		t.Fatalf("cut inside the dropped bytes: %q, %v", got, err)
	}
	for v, ok := range map[string]bool{"17:65600": true, "0:0": true, "1048576:1048576": true, "": false, "17": false,
		"17:": false, ":5": false, "-1:5": false, "5:-1": false, "1048577:1": false, "1:1048577": false, "a:b": false, "1:2:3": false} {
		if _, _, err := parseSkip(v); (err == nil) != ok {
			t.Errorf("--skip %q: %v", v, err)
		}
	}
}

type writes struct{ got [][]byte }

func (w *writes) Write(b []byte) (int, error) {
	w.got = append(w.got, append([]byte(nil), b...))
	return len(b), nil
}

// TestPrefixWriter: --announce's status line goes out in the same write as the first control
// message, and only with it.
func TestPrefixWriter(t *testing.T) {
	var w writes
	p := &prefixWriter{w: &w, prefix: []byte("FARWING-PEER ok Linux x86_64 /c/p\n")}
	for _, m := range []string{`{"t":"ready"}` + "\n", `{"t":"have"}` + "\n"} {
		if n, err := p.Write([]byte(m)); n != len(m) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", m, n, err)
		}
	}
	want := []string{"FARWING-PEER ok Linux x86_64 /c/p\n" + `{"t":"ready"}` + "\n", `{"t":"have"}` + "\n"}
	if len(w.got) != len(want) || string(w.got[0]) != want[0] || string(w.got[1]) != want[1] {
		t.Fatalf("writes %q, want %q", w.got, want)
	}
}

// TestServeChdir: --chdir DIR (first contact's: the directory the ssh session started in, the
// peer being started inside its cache directory) is where serve works; one it cannot enter
// leaves it in /, never in the cache directory; without the flag it stays where it was started.
func TestServeChdir(t *testing.T) {
	start := t.TempDir()
	t.Chdir(t.TempDir()) // restored when the test ends
	cwd := func() string { d, _ := os.Getwd(); return d }
	here := cwd()
	if enter(""); cwd() != here {
		t.Fatalf("no --chdir: working in %s, want %s", cwd(), here)
	}
	if enter(start); cwd() != start {
		t.Fatalf("--chdir %s: working in %s", start, cwd())
	}
	if enter(filepath.Join(start, "gone")); cwd() != "/" {
		t.Fatalf("--chdir to a directory that is gone: working in %s, want /", cwd())
	}
}

// TestPeerRoles: the peer that farwing serve runs answers a bench's hello and a doctor's with
// their packages' Serve, and no other role besides a copy's: the in-process tests of those
// packages register the roles themselves, so only this test sees serve's own table.
func TestPeerRoles(t *testing.T) {
	want := map[string]xfer.Role{xfer.RoleBench: benchpeer.Serve, xfer.RoleDoctor: doctorpeer.Serve}
	if len(peerRoles) != len(want) {
		t.Fatalf("serve registers %d roles, want %d (bench, doctor)", len(peerRoles), len(want))
	}
	for role, fn := range want {
		got, ok := peerRoles[role]
		if !ok || got == nil || reflect.ValueOf(got).Pointer() != reflect.ValueOf(fn).Pointer() {
			t.Errorf("role %q: serve registers %v, want its package's Serve", role, got)
		}
	}
	for _, copyRole := range []string{xfer.RoleRecv, xfer.RoleSend} {
		if _, ok := peerRoles[copyRole]; ok {
			t.Errorf("role %q is a copy's, served by xfer.Serve itself, yet registered", copyRole)
		}
	}
}

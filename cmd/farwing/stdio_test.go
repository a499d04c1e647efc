//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabStdio: `-` as the source sends standard input (3 MiB and a few bytes, more than one
// block) to the remote file named; `-` as the destination writes the remote file to standard
// output, byte for byte, and nothing else there; a pull of a tree to `-`, or `-` with --json, fails
// with nothing on standard output and no temporary file left.
func TestLabStdio(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	tmp := t.TempDir()
	run := func(in []byte, args ...string) (int, []byte, string) {
		t.Helper()
		cmd := e.l.Command(e.l.NSA, e.bin, append([]string{"copy", "-F", e.srv.ConfigFile}, args...)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		var so, se bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &so, &se
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, so.Bytes(), se.String()
	}
	noTemps := func(what string) {
		t.Helper()
		if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
			t.Errorf("%s: %s left in TMPDIR", what, ents[0].Name())
		}
	}

	if code, out, errs := run(data, "-", e.srv.Host+":in.bin"); code != 0 || len(out) != 0 {
		t.Fatalf("push of stdin: exit %d, %d bytes on stdout: %s", code, len(out), errs)
	}
	if b, err := os.ReadFile(filepath.Join(e.srv.Home, "in.bin")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("push of stdin: the remote file has %d bytes (%v), want the %d of stdin", len(b), err, len(data))
	}
	noTemps("push of stdin")

	code, out, errs := run(nil, e.srv.Host+":in.bin", "-")
	if code != 0 || !bytes.Equal(out, data) {
		t.Fatalf("pull to stdout: exit %d, %d bytes on stdout, want %d: %s", code, len(out), len(data), errs)
	}
	noTemps("pull to stdout")

	os.MkdirAll(filepath.Join(e.srv.Home, "tree", "sub"), 0o755)
	os.WriteFile(filepath.Join(e.srv.Home, "tree", "sub", "f"), []byte("x"), 0o644)
	for _, c := range []struct {
		what string
		in   []byte
		args []string
		code int
		msg  string
	}{
		{"a tree to stdout", nil, []string{"-r", e.srv.Host + ":tree", "-"}, 4, "takes one file"},
		{"--json to stdout", nil, []string{"--json", e.srv.Host + ":in.bin", "-"}, 2, "--json"},
		{"stdin among other sources", data, []string{"-", filepath.Join(tmp, "x"), e.srv.Host + ":"}, 2, "only source"},
	} {
		code, out, errs := run(c.in, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%s: exit %d, want %d with %q: %s", c.what, code, c.code, c.msg, errs)
		}
		if len(out) != 0 && !strings.HasPrefix(string(out), `{"schema":1`) {
			t.Errorf("%s: %d bytes on stdout", c.what, len(out))
		}
		noTemps(c.what)
	}
}

// TestSpoolStdin: what `-` as the source reads (the reader run passes down) is spooled byte for
// byte into a file named stdinName, which the returned function removes with its directory.
func TestSpoolStdin(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	data := make([]byte, 1<<20+3)
	rand.Read(data)
	p, done, err := spoolStdin(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, data) || filepath.Base(p) != stdinName {
		t.Fatalf("spooled %s: %d bytes (%v), want the %d read", p, len(b), err, len(data))
	}
	done()
	if _, err := os.Stat(filepath.Dir(p)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spool's directory is left after done: %v", err)
	}
}

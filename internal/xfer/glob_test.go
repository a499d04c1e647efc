package xfer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestInProcessPullGlob: a pull of "dir/*.bin" brings the remote's matching files, expanded by
// the remote (no shell), and nothing else: not the .bin file whose name starts with ".", not the
// .txt; a pattern that matches nothing fails with the source's exit code.
func TestInProcessPullGlob(t *testing.T) {
	e := newEnv(t, lanetest.Link{Delay: time.Millisecond}, 5)
	remote, back := t.TempDir(), t.TempDir()
	sums := tree(t, remote, map[string]int{"d/a.bin": 70000, "d/b.bin": 1 << 20, "d/.c.bin": 10, "d/x.txt": 5})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Pull(ctx, e.options(), "host", []string{filepath.Join(remote, "d", "*.bin")}, back)
	if err != nil {
		t.Fatalf("pull of a pattern: %v", err)
	}
	if len(res.Files) != 2 {
		t.Errorf("pull of a pattern: %d files: %+v", len(res.Files), res.Files)
	}
	sameTree(t, back, map[string][32]byte{"a.bin": sums["d/a.bin"], "b.bin": sums["d/b.bin"]})
	_, err = Pull(ctx, e.options(), "host", []string{filepath.Join(remote, "d", "*.none")}, t.TempDir())
	if CodeOf(err) != CodeSource {
		t.Errorf("pull of a pattern that matches nothing: %v (exit %d)", err, CodeOf(err))
	}
}

// TestPullRefusesWhatThePatternCannotBring: asked for "dir/*.bin", a remote that answers with a
// name the pattern does not match, or a dot name it would not bring, is refused before a byte is
// written (pullRefused).
func TestPullRefusesWhatThePatternCannotBring(t *testing.T) {
	f := func(name string) fcopy.File { return fcopy.File{Name: name, Size: 1, Mode: 0o644} }
	for _, c := range []struct {
		what  string
		files []fcopy.File
	}{
		{"another name", []fcopy.File{f("a.bin"), f("authorized_keys")}},
		{"a dot name", []fcopy.File{f(".bashrc.bin")}},
		{"a tree without -r", []fcopy.File{{Name: "t.bin", Dir: true, Mode: 0o755}, f("t.bin/x")}},
	} {
		t.Run(c.what, func(t *testing.T) {
			pullRefused(t, c.files, "dir/*.bin", func(*Options) {})
		})
	}
}

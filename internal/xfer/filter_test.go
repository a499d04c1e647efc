package xfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane/lanetest"
)

// rsyncFilters are filter options as rsync takes them (--exclude, --include pairs), and as
// fcopy.Rules for a copy.
func rsyncFilters(t *testing.T, args ...string) *fcopy.Filter {
	t.Helper()
	var rules []fcopy.Rule
	for i := 0; i+1 < len(args); i += 2 {
		rules = append(rules, fcopy.ParseRule(args[i+1], args[i] == "--include"))
	}
	f, err := fcopy.NewFilter(rules)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestInProcessFilters: pushes and pulls with filter rules (and --files-from lists, with and
// without -r) leave the destination `rsync -rl` leaves with the same options on the same tree:
// names, kinds, bytes, modes and link targets; the filters apply at the sending side of each.
func TestInProcessFilters(t *testing.T) {
	e := newEnv(t, lanetest.Link{Delay: time.Millisecond}, 3)
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	list := filepath.Join(root, "list")
	os.WriteFile(list, []byte("a.txt\nsrc/sub dir/file one.txt\ndeep/a\n.git\nlink.txt\n"), 0o644)
	listed, err := fcopy.ReadFilesFrom(bytes.NewReader(must(os.ReadFile(list))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for _, c := range []struct {
		filter    []string
		filesFrom bool
		recursive bool
	}{
		{filter: []string{"--exclude", "*.tmp", "--exclude", ".git/"}, recursive: true},
		{filter: []string{"--include", "*/", "--include", "*.txt", "--exclude", "*"}, recursive: true},
		{filter: []string{"--include", "keep.tmp", "--exclude", "/t/src", "--exclude", "*.tmp", "--exclude", "sub dir"}, recursive: true},
		{filter: []string{"--exclude", "t"}, recursive: true}, // nothing to send
		{filesFrom: true},
		{filesFrom: true, recursive: true, filter: []string{"--exclude", "objects/"}},
	} {
		args := append([]string{"-l"}, c.filter...)
		if c.recursive {
			args[0] = "-rl"
		}
		o := e.options()
		o.Recursive, o.Filter = c.recursive, rsyncFilters(t, c.filter...)
		src, want := top, t.TempDir()
		if c.filesFrom {
			args = append(args, "--files-from", list)
			o.FilesFrom = listed
		}
		treetest.Rsync(t, append(args, src, want+"/")...)
		what := strings.Join(args, " ")
		pushed := t.TempDir()
		if _, err := Push(ctx, o, []string{src}, "host", pushed); err != nil {
			t.Fatalf("push %s: %v", what, err)
		}
		treetest.Compare(t, "push "+what, treetest.Snapshot(t, want), treetest.Snapshot(t, pushed), treetest.Options{})
		pulled := t.TempDir()
		if _, err := Pull(ctx, o, "host", []string{src}, pulled); err != nil {
			t.Fatalf("pull %s: %v", what, err)
		}
		treetest.Compare(t, "pull "+what, treetest.Snapshot(t, want), treetest.Snapshot(t, pulled), treetest.Options{})
	}
}

// TestPullRefusesFilteredNames: a remote that sends a name the pull's rules exclude, or one its
// --files-from list does not name (or a file where the list has a directory above a path, or
// what is below a listed directory without -r), is refused before a byte is written.
func TestPullRefusesFilteredNames(t *testing.T) {
	f := func(name string) fcopy.File { return fcopy.File{Name: name, Size: 1, Mode: 0o644} }
	d := func(name string) fcopy.File { return fcopy.File{Name: name, Dir: true, Mode: 0o755} }
	filter := rsyncFilters(t, "--exclude", "*.tmp", "--exclude", ".ssh/")
	for _, c := range []struct {
		what  string
		files []fcopy.File
		set   func(*Options)
	}{
		{"an excluded file", []fcopy.File{d("t"), f("t/x.tmp")}, func(o *Options) { o.Recursive, o.Filter = true, filter }},
		{"an excluded directory", []fcopy.File{d("t"), d("t/.ssh"), f("t/.ssh/authorized_keys")}, func(o *Options) { o.Recursive, o.Filter = true, filter }},
		{"an unlisted name", []fcopy.File{f("a"), f(".bashrc")}, func(o *Options) { o.FilesFrom = []string{"a"} }},
		{"a file above a listed path", []fcopy.File{f("d")}, func(o *Options) { o.FilesFrom = []string{"d/x"} }},
		{"below a listed directory without -r", []fcopy.File{d("d"), f("d/x")}, func(o *Options) { o.FilesFrom = []string{"d"} }},
		{"an excluded listed file", []fcopy.File{f("a.tmp")}, func(o *Options) { o.FilesFrom, o.Filter = []string{"a.tmp"}, filter }},
	} {
		t.Run(c.what, func(t *testing.T) {
			pullRefused(t, c.files, "t", c.set)
		})
	}
}

// TestServeRefusesBadFilters: a pull whose hello carries a rule that cannot be compiled, or a
// --files-from path that leads out of the source, is refused by the remote before it looks at a
// file (a protocol error), whatever the client's own checks.
func TestServeRefusesBadFilters(t *testing.T) {
	for _, c := range []struct {
		filter    []fcopy.Rule
		filesFrom []string
	}{
		{filter: []fcopy.Rule{{Pattern: "a["}}},
		{filter: []fcopy.Rule{{Pattern: ""}}},
		{filter: []fcopy.Rule{{Pattern: "a\x1b[2J"}}},
		{filter: slices.Repeat([]fcopy.Rule{{Pattern: strings.Repeat("*a", 2047) + "b"}}, fcopy.MaxRules)}, // 40 MiB of patterns
		{filesFrom: []string{"../../etc/passwd"}},
		{filesFrom: []string{"/etc/passwd"}},
		{filesFrom: []string{"a", "a"}},
	} {
		e := newEnv(t, lanetest.Link{}, 1)
		src := t.TempDir()
		os.WriteFile(filepath.Join(src, "a"), []byte("x"), 0o644)
		o := e.options()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		conn, _, err := start(ctx, &o, "host", Msg{Role: RoleSend, Paths: []string{src}, Recursive: true, Filter: c.filter, FilesFrom: c.filesFrom, Window: 16}, &Result{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.ctl.Next(conn.ctx, 10*time.Second)
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != CodeProtocol || !strings.Contains(fmt.Sprint(err), "filter") {
			t.Errorf("%.200s: the server answered %v", fmt.Sprintf("%+v", c), err)
		}
		conn.close(0)
		cancel()
	}
}

// TestPullFilesFromStaysBelow: a --files-from path through a symbolic link of the remote's
// source directory (to a directory outside it) is refused by the remote (exit 3), never followed;
// nothing is written.
func TestPullFilesFromStaysBelow(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	src, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600)
	os.Symlink(outside, filepath.Join(src, "out"))
	o := e.options()
	o.FilesFrom = []string{"out/secret"}
	dst := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Pull(ctx, o, "host", []string{src}, dst)
	if CodeOf(err) != CodeSource || !strings.Contains(fmt.Sprint(err), "never followed") {
		t.Errorf("%v (exit %d)", err, CodeOf(err))
	}
	treetest.Empty(t, dst)
}

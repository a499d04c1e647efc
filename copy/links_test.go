package copy

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/treetest"
)

// byName indexes a source list.
func byName(s *Sources) map[string]File {
	m := map[string]File{}
	for _, f := range s.Files {
		m[f.Name] = f
	}
	return m
}

// specials adds a FIFO and a listening unix socket to dir and returns the FIFO's path (the
// first of the two in name order).
func specials(t *testing.T, dir string) string {
	t.Helper()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return fifo
}

// TestCollectLinks: a tree's symbolic links are listed as links with their target text, whether
// they point inside the tree, outside it, nowhere or at themselves, and nothing below a link to
// a directory is listed; devices, sockets and FIFOs are left out and counted, with an example;
// with -H the second name of a file is a hard link to the first.
func TestCollectLinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	top := treetest.Build(t, root, outside, 3)
	fifo := specials(t, top)

	src, err := Collect([]string{top}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	files := byName(src)
	for name, target := range map[string]string{
		"t/link-file": "deep/a/b/c/leaf", "t/link-dir": "sub", "t/deep/link-up": "../big.bin",
		"t/link-out": filepath.Join(outside, "victim"), "t/link-out-dir": outside,
		"t/link-rel-out": "../../../../etc/passwd", "t/sub/dangling": "no/such/file", "t/private/selfe": "selfe",
	} {
		f, ok := files[name]
		if !ok || f.Link != target || f.Dir || f.Size != 0 || f.Hard != "" {
			t.Errorf("%s: listed as %+v (present %v), want a link to %q", name, f, ok, target)
		}
	}
	for _, f := range src.Files {
		if strings.HasPrefix(f.Name, "t/link-dir/") || strings.HasPrefix(f.Name, "t/link-out-dir/") {
			t.Errorf("%s listed: below a link", f.Name)
		}
	}
	if _, ok := files["t/fifo"]; ok {
		t.Error("the FIFO is listed")
	}
	if _, ok := files["t/sock"]; ok {
		t.Error("the socket is listed")
	}
	if src.Skipped.Special != 2 || src.Skipped.SpecialExample != fifo || src.Skipped.Loops != 0 {
		t.Errorf("skipped %+v, want 2 special files, e.g. %s", src.Skipped, fifo)
	}
	if w := src.Skipped.Warning(); !strings.Contains(w, "skipped 2 special file(s)") || !strings.Contains(w, fifo) {
		t.Errorf("warning %q", w)
	}
	if a, b := files["t/hard-x"], files["t/sub/x"]; a.Size != 10 || b.Size != 10 || a.Hard != "" || b.Hard != "" {
		t.Errorf("without -H: %+v %+v, want two files of 10 bytes", a, b)
	}
	if f := files["t/zero"]; f.Size != 0 || !f.Regular() || f.Mode != 0o600 {
		t.Errorf("t/zero: %+v", f)
	}
	if _, err := NewPlan(src.Files); err != nil {
		t.Fatalf("the list Collect made does not pass the receiver's check: %v", err)
	}

	// -H: the second name of an inode is a hard link to the first, with no bytes of its own.
	src, err = Collect([]string{top}, CollectOptions{Recursive: true, HardLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	files = byName(src)
	if a, b := files["t/hard-x"], files["t/sub/x"]; a.Size != 10 || a.Hard != "" || b.Hard != "t/hard-x" || b.Size != 0 {
		t.Errorf("with -H: %+v %+v, want t/sub/x a hard link to t/hard-x", a, b)
	}
	if _, err := NewPlan(src.Files); err != nil {
		t.Fatal(err)
	}

	// A symbolic link given as an argument is followed, under its own name (scp, rsync "link").
	os.Symlink(filepath.Join(top, "sub"), filepath.Join(root, "arg-dir"))
	os.Symlink(filepath.Join(top, "big.bin"), filepath.Join(root, "arg-file"))
	src, err = Collect([]string{filepath.Join(root, "arg-dir"), filepath.Join(root, "arg-file")}, CollectOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	files = byName(src)
	if !files["arg-dir"].Dir || files["arg-dir/x"].Size != 10 || files["arg-dir/dangling"].Link != "no/such/file" || files["arg-file"].Size != 1<<20+4321 {
		t.Errorf("symbolic links as arguments: %+v", src.Files)
	}
}

// TestCollectFollow: with -L a link is sent as what it points to (a file, a directory, inside
// or outside the tree), a link that leads back to a directory it is in is skipped and counted,
// a dangling one stops the copy naming it, and with -L -H a file of several names is sent once.
func TestCollectFollow(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	top := treetest.Build(t, root, outside, 3)
	os.Remove(filepath.Join(top, "link-rel-out")) // where it leads depends on the test's directory
	_, err := Collect([]string{top}, CollectOptions{Recursive: true, Follow: true})
	// The first dangling link of the walk: t/sub/dangling, met first through t/link-dir.
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), filepath.Join(top, "link-dir", "dangling")+` is a symbolic link to "no/such/file"`) || !strings.Contains(err.Error(), "without -L") {
		t.Fatalf("-L over a dangling link: %v", err)
	}
	os.Remove(filepath.Join(top, "sub", "dangling"))
	_, err = Collect([]string{top}, CollectOptions{Recursive: true, Follow: true})
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), filepath.Join(top, "private", "selfe")) {
		t.Fatalf("-L over a link to itself: %v", err)
	}
	os.Remove(filepath.Join(top, "private", "selfe"))
	os.Symlink("..", filepath.Join(top, "deep", "a", "loop")) // t/deep/a/loop → t/deep
	os.Symlink(".", filepath.Join(top, "sub", "self"))        // t/sub/self → t/sub, met twice: t/link-dir is t/sub
	src, err := Collect([]string{top}, CollectOptions{Recursive: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	files := byName(src)
	for _, f := range src.Files {
		if f.Link != "" || f.Hard != "" {
			t.Errorf("-L listed %+v", f)
		}
	}
	if f := files["t/link-file"]; !f.Regular() || f.Size != 5000 {
		t.Errorf("t/link-file: %+v, want the 5000-byte file it points to", f)
	}
	if !files["t/link-dir"].Dir || files["t/link-dir/x"].Size != 10 {
		t.Errorf("t/link-dir: %+v %+v, want the directory it points to", files["t/link-dir"], files["t/link-dir/x"])
	}
	if !files["t/link-out-dir"].Dir || files["t/link-out-dir/victim"].Size != 7 || files["t/link-out"].Size != 7 {
		t.Errorf("links outside the tree: %+v %+v", files["t/link-out-dir"], files["t/link-out"])
	}
	if _, ok := files["t/deep/a/loop"]; ok {
		t.Error("a loop was listed")
	}
	if _, ok := files["t/sub/self"]; ok {
		t.Error("a link to its own directory was listed")
	}
	if src.Skipped.Loops != 3 || src.Skipped.LoopExample != filepath.Join(top, "deep", "a", "loop") || src.Skipped.Special != 0 {
		t.Errorf("skipped %+v, want 3 loops", src.Skipped)
	}
	if w := src.Skipped.Warning(); !strings.Contains(w, "3 symbolic link(s)") {
		t.Errorf("warning %q", w)
	}
	if _, err := NewPlan(src.Files); err != nil {
		t.Fatal(err)
	}

	src, err = Collect([]string{top}, CollectOptions{Recursive: true, Follow: true, HardLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	// A file of several names is sent once, whichever way it is reached; one of a single name
	// is sent at each link to it, as rsync -L -H does (it looks only at files with several links).
	files = byName(src)
	if a, b, c := files["t/hard-x"], files["t/link-dir/x"], files["t/sub/x"]; a.Size != 10 || b.Hard != "t/hard-x" || c.Hard != "t/hard-x" {
		t.Errorf("-L -H: %+v %+v %+v, want t/link-dir/x and t/sub/x hard links to t/hard-x", a, b, c)
	}
	if f := files["t/link-file"]; !f.Regular() || f.Size != 5000 {
		t.Errorf("-L -H: t/link-file %+v, want the file it points to", f)
	}
}

// TestCheckTreeKinds: the receiver's check of a list's entries: links with a target of their
// own and no size, hard links only to an earlier regular file, nothing below a link.
func TestCheckTreeKinds(t *testing.T) {
	d := func(n string) File { return File{Name: n, Dir: true, Mode: 0o755} }
	f := func(n string) File { return File{Name: n, Size: 3, Mode: 0o644} }
	l := func(n, to string) File { return File{Name: n, Link: to, Mode: 0o777} }
	h := func(n, to string) File { return File{Name: n, Hard: to, Mode: 0o644} }
	for _, c := range []struct {
		what  string
		files []File
		ok    bool
	}{
		{"links anywhere", []File{d("t"), l("t/a", "/etc"), l("t/b", "../../x"), l("t/c", "t\x1b[2J")}, true},
		{"a hard link", []File{d("t"), f("t/a"), h("t/b", "t/a"), h("t/c", "t/a")}, true},
		{"a file below a link", []File{d("t"), l("t/a", "/etc"), f("t/a/passwd")}, false},
		{"a directory below a link", []File{d("t"), l("t/a", "/etc"), d("t/a/x")}, false},
		{"a link and a directory of one name", []File{d("t"), l("t/a", "/etc"), d("t/a")}, false},
		{"a link with a size", []File{d("t"), {Name: "t/a", Link: "x", Size: 5}}, false},
		{"a link target with NUL", []File{d("t"), l("t/a", "x\x00y")}, false},
		{"a link target not UTF-8", []File{d("t"), l("t/a", "x\xffy")}, false},
		{"a link target too long", []File{d("t"), l("t/a", strings.Repeat("a/", 2048))}, false},
		{"a directory that is a link", []File{{Name: "t", Dir: true, Link: "/etc"}}, false},
		{"a link that is a hard link", []File{d("t"), f("t/a"), {Name: "t/b", Link: "x", Hard: "t/a"}}, false},
		{"a hard link to a later file", []File{d("t"), h("t/b", "t/a"), f("t/a")}, false},
		{"a hard link to itself", []File{d("t"), h("t/b", "t/b")}, false},
		{"a hard link to a directory", []File{d("t"), d("t/a"), h("t/b", "t/a")}, false},
		{"a hard link to a link", []File{d("t"), l("t/a", "/etc/passwd"), h("t/b", "t/a")}, false},
		{"a hard link to a hard link", []File{d("t"), f("t/a"), h("t/b", "t/a"), h("t/c", "t/b")}, false},
		{"a hard link outside the list", []File{d("t"), h("t/b", "../etc/passwd")}, false},
		{"a hard link with a size", []File{d("t"), f("t/a"), {Name: "t/b", Hard: "t/a", Size: 3}}, false},
	} {
		_, err := NewPlan(c.files)
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.what, err)
		}
		if !c.ok && !errors.Is(err, ErrName) {
			t.Errorf("%s: %v, want ErrName", c.what, err)
		}
	}
}

// receiveTree copies the sources into dst through the writer (as receive does) with options o.
func receiveTree(t *testing.T, src *Sources, dst string, o WriterOptions) error {
	t.Helper()
	_, err := receiveOpts(t, src, dst, o, func(_ *Plan, b *Block) []byte { return b.Data })
	return err
}

// TestWriterTree: a tree written by the writer is the source as rsync -a -H leaves it: bytes,
// modes of files and directories, link targets, hard links, and with preserve the modification
// times of files, directories and links; a second copy onto it replaces what it wrote (links
// over links, files over files) and leaves it the same; nothing outside changes.
func TestWriterTree(t *testing.T) {
	root, outside, dst := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	top := treetest.Build(t, root, outside, 40)
	specials(t, top)
	before := treetest.Snapshot(t, outside)
	want := treetest.Snapshot(t, top)
	src, err := Collect([]string{top}, CollectOptions{Recursive: true, HardLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := treetest.Options{MTimes: true, HardLinks: true, Skip: map[string]bool{"fifo": true, "sock": true}}
	for run := range 2 {
		if err := receiveTree(t, src, dst, WriterOptions{Preserve: true}); err != nil {
			t.Fatalf("copy %d: %v", run+1, err)
		}
		treetest.Compare(t, "copy", want, treetest.Snapshot(t, filepath.Join(dst, "t")), opts)
	}
	treetest.Compare(t, "outside", before, treetest.Snapshot(t, outside), treetest.Options{MTimes: true})

	// Without preserve: the same but for times.
	dst2 := t.TempDir()
	if err := receiveTree(t, src, dst2, WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	opts.MTimes = false
	treetest.Compare(t, "copy without -p", want, treetest.Snapshot(t, filepath.Join(dst2, "t")), opts)

	// A directory where a link goes is not replaced.
	os.Remove(filepath.Join(dst2, "t", "link-file"))
	os.Mkdir(filepath.Join(dst2, "t", "link-file"), 0o755)
	if err := receiveTree(t, src, dst2, WriterOptions{}); !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "with a symbolic link") {
		t.Fatalf("a directory where a link goes: %v", err)
	}
}

// TestWriterHardLinkFallback: where the destination cannot make a hard link, the second name
// gets a copy of the first's bytes, checked against its digest.
func TestWriterHardLinkFallback(t *testing.T) {
	root, outside, dst := t.TempDir(), t.TempDir(), t.TempDir()
	top := treetest.Build(t, root, outside, 2)
	want := treetest.Snapshot(t, top)
	src, err := Collect([]string{top}, CollectOptions{Recursive: true, HardLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	o := WriterOptions{Preserve: true, Calls: WriterCalls{Linkat: failLinkat(unix.EXDEV)}}
	if err := receiveTree(t, src, dst, o); err != nil {
		t.Fatal(err)
	}
	treetest.Compare(t, "copy", want, treetest.Snapshot(t, filepath.Join(dst, "t")), treetest.Options{MTimes: true})
	a, _ := os.Stat(filepath.Join(dst, "t", "hard-x"))
	b, _ := os.Stat(filepath.Join(dst, "t", "sub", "x"))
	if os.SameFile(a, b) {
		t.Fatal("linked although linkat failed")
	}
}

// failLinkat is a linkat that fails with err, as on a destination that cannot link.
func failLinkat(err error) func(int, string, int, string, int) error {
	return func(int, string, int, string, int) error { return err }
}

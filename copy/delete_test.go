package copy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/farwing/farwing/internal/treetest"
)

// TestDelete: in the list's directories, what the list does not have is deleted, deepest first
// (dry: only reported); what the filter excludes stays, with the directory holding it; a symbolic
// link to a directory is deleted as a link, its target untouched; a copy's temporary files and
// what stands beside the list's top-level directory stay; an empty list deletes nothing.
func TestDelete(t *testing.T) {
	dst, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("x"), 0o644)
	for _, p := range []string{"t/keep", "t/sub/keep", "t/sub/old", "t/gone/a/b", "t/prot/x.tmp", "t/prot/y", "t/z.tmp", "beside",
		"t/.keep.farwing-0123456789ab.part"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755)
		os.WriteFile(filepath.Join(dst, p), nil, 0o644)
	}
	os.Symlink(outside, filepath.Join(dst, "t", "link"))
	files := []File{{Name: "t", Dir: true}, {Name: "t/keep"}, {Name: "t/sub", Dir: true}, {Name: "t/sub/keep"}}
	target, err := ResolveTarget(dst, files)
	if err != nil {
		t.Fatal(err)
	}
	filter := excludes(t, ex("*.tmp"))
	if n, err := target.Delete(nil, filter, false, nil); n != 0 || err != nil {
		t.Fatalf("an empty list: %d, %v", n, err)
	}
	before := treetest.Snapshot(t, dst)
	var dry []string
	n, err := target.Delete(files, filter, true, func(d Deletion) { dry = append(dry, d.Name) })
	want := []string{"t/gone/a/b", "t/gone/a", "t/gone", "t/link", "t/prot/y", "t/sub/old"}
	if err != nil || n != len(want) {
		t.Fatalf("dry: %d, %v: %q", n, err, dry)
	}
	treetest.Compare(t, "dry", before, treetest.Snapshot(t, dst), treetest.Options{MTimes: true})
	var got []string
	if n, err = target.Delete(files, filter, false, func(d Deletion) { got = append(got, d.Name) }); err != nil || n != len(want) {
		t.Fatalf("%d, %v: %q", n, err, got)
	}
	if strings.Join(got, "|") != strings.Join(dry, "|") {
		t.Errorf("deleted %q, dry run said %q", got, dry)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("deleted %q, want %q", got, want)
	}
	left := treetest.Snapshot(t, dst)
	for _, p := range []string{"t/keep", "t/sub/keep", "t/prot", "t/prot/x.tmp", "t/z.tmp", "beside", "t/.keep.farwing-0123456789ab.part"} {
		if _, ok := left[p]; !ok {
			t.Errorf("%s was deleted", p)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "victim")); err != nil {
		t.Errorf("through the link: %v", err)
	}
}

// TestDeleteNotThere: a directory of the list that the destination does not have (a dry run
// before the copy makes it) has nothing to delete.
func TestDeleteNotThere(t *testing.T) {
	dst := t.TempDir()
	files := []File{{Name: "t", Dir: true}, {Name: "t/sub", Dir: true}}
	target, err := ResolveTarget(dst, files)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := target.Delete(files, nil, true, nil); n != 0 || err != nil {
		t.Errorf("%d, %v", n, err)
	}
}

// TestDeleteRaces: another user who swaps what Delete is about to look at for a symbolic link to
// a directory outside (told of each deletion, the test swaps the next one) never has it delete
// outside: an entry to delete that became a link is deleted as a link; a directory being emptied
// whose subdirectory became a link loses the link only; a directory of the list that became a
// link stops Delete (ErrDest). What the link points to is untouched each time.
func TestDeleteRaces(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(outside, "dir"), 0o755)
	os.WriteFile(filepath.Join(outside, "dir", "victim"), []byte("x"), 0o644)
	swap := func(p string) {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what  string
		after string // the deletion after which the test swaps
		swap  string // what it swaps for a link
		fails bool
	}{
		{"an entry to delete", "t/a", "t/b", false},
		{"a directory being emptied", "t/b/1", "t/b/2", false},
		{"a directory of the list", "t/a", "t/sub", true},
	} {
		dst := t.TempDir()
		for _, p := range []string{"t/a", "t/b/1", "t/b/2/dir/victim", "t/sub/old/x"} {
			os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755)
			os.WriteFile(filepath.Join(dst, p), nil, 0o644)
		}
		files := []File{{Name: "t", Dir: true}, {Name: "t/sub", Dir: true}}
		target, err := ResolveTarget(dst, files)
		if err != nil {
			t.Fatal(err)
		}
		_, err = target.Delete(files, nil, false, func(d Deletion) {
			if d.Name == c.after {
				swap(filepath.Join(dst, c.swap))
			}
		})
		if c.fails != errors.Is(err, ErrDest) {
			t.Errorf("%s: %v", c.what, err)
		}
		if _, err := os.Lstat(filepath.Join(dst, c.swap)); !c.fails && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the link is still there: %v", c.what, err)
		}
		for _, v := range []string{"victim", "dir/victim"} {
			if _, err := os.Stat(filepath.Join(outside, v)); err != nil {
				t.Errorf("%s: deleted outside: %v", c.what, err)
			}
		}
	}
}

// TestDeleteTooDeep: an entry to delete whose name would be longer than a path (a chain of
// directories another user made below the destination, whose names Delete would otherwise build
// and keep, level by level, at a cost of the depth squared) stops Delete with ErrDest, naming
// it, before it descends there; what is beside the chain and shallower is deleted.
func TestDeleteTooDeep(t *testing.T) {
	dst := t.TempDir()
	os.MkdirAll(filepath.Join(dst, "t", "a-old"), 0o755)
	treetest.DeepChain(t, filepath.Join(dst, "t"), maxName/2)
	files := []File{{Name: "t", Dir: true}}
	target, err := ResolveTarget(dst, files)
	if err != nil {
		t.Fatal(err)
	}
	n, err := target.Delete(files, nil, false, nil)
	if !errors.Is(err, ErrDest) || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("%d deleted, %v", n, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "t", "d")); err != nil {
		t.Errorf("the chain: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "t", "a-old")); !errors.Is(err, os.ErrNotExist) || n != 1 {
		t.Errorf("%d deleted; beside the chain: %v", n, err)
	}
}

// TestDeleteRsyncRandom: 30 destinations with stale entries made at random (seeded: files and
// directories at any depth, some the rules exclude), and a random rule or none: after the files
// are in place, Delete leaves what rsync -rl --delete leaves with the same rules.
func TestDeleteRsyncRandom(t *testing.T) {
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	rng := rand.New(rand.NewPCG(41, 3))
	dirs := []string{"t", "t/src", "t/src/sub dir", "t/deep/a", "t/deep/a/b/c", "t/empty", "t/.git", "t/docs/b.tmp"}
	for range 30 {
		var args []string
		if rng.IntN(3) > 0 {
			args = []string{"--exclude", []string{"*.tmp", "*.txt", "old*/", "/t/deep/", "stale*"}[rng.IntN(5)]}
		}
		want, got := t.TempDir(), t.TempDir()
		for _, dst := range []string{want, got} {
			treetest.Rsync(t, "-rl", top, dst+"/")
		}
		r := rand.New(rand.NewPCG(rng.Uint64(), 0))
		for range 1 + rng.IntN(6) {
			p := dirs[r.IntN(len(dirs))]
			for r.IntN(2) == 0 {
				p += "/" + []string{"old", "olddir", "x.tmp", "stale.txt"}[r.IntN(4)]
			}
			p += "/" + []string{"f.tmp", "g.txt", "stale", "h"}[r.IntN(4)]
			for _, dst := range []string{want, got} {
				os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755)
				os.WriteFile(filepath.Join(dst, p), []byte(p), 0o644)
			}
		}
		treetest.Rsync(t, append(append([]string{"-rl", "--delete"}, args...), top, want+"/")...)
		filter := excludes(t, ruleArgs(args)...)
		s, err := Collect([]string{top}, CollectOptions{Recursive: true, Filter: filter})
		if err != nil {
			t.Fatal(err)
		}
		target, err := ResolveTarget(got, s.Files)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := target.Delete(s.Files, filter, false, nil); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		treetest.Compare(t, fmt.Sprintf("--delete %q", args), treetest.Snapshot(t, want), treetest.Snapshot(t, got), treetest.Options{})
	}
}

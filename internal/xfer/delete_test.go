package xfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane/lanetest"
)

// staleDest makes at dst what an older copy of top left, and more: top's tree (by rsync -t), with
// files and a tree the source no longer has, a *.tmp file and a directory holding one (which the
// tests' rules protect), a symbolic link to a directory outside (to be removed as a link, never
// followed), and a sibling of the copy's directory (not the copy's: never touched).
func staleDest(t *testing.T, top, dst, outside string) {
	t.Helper()
	treetest.Rsync(t, "-rlt", top, dst+"/")
	d := filepath.Join(dst, filepath.Base(top))
	for _, p := range []string{"old/tree/x", "keepdir/y.txt", "keepdir/x.tmp", "src/stale.tmp", "src/sub dir/gone.txt", ".old-hidden", "deep/a/b/c/gone"} {
		os.MkdirAll(filepath.Dir(filepath.Join(d, p)), 0o755)
		os.WriteFile(filepath.Join(d, p), []byte(p), 0o644)
	}
	if err := os.Symlink(outside, filepath.Join(d, "evil")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dst, "sibling"), []byte("not the copy's"), 0o644)
}

// rsyncDeletes runs rsync -rl --delete with args from top into dst and returns how many entries
// it deleted.
func rsyncDeletes(t *testing.T, top, dst string, args ...string) int {
	t.Helper()
	treetest.NeedRsync(t)
	cmd := exec.Command("rsync", append(append([]string{"-rli", "--delete"}, args...), top, dst+"/")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsync: %v: %s", err, out)
	}
	return strings.Count(string(out), "*deleting ")
}

// TestInProcessDelete: a push and a pull with --delete (and filter rules) leave the destination
// rsync -rl --delete with the same rules leaves, and delete as many entries: what the source no
// longer has goes, deepest first; what the rules exclude stays (and the directory holding it); a
// symbolic link to a directory outside is removed as a link, and nothing outside changes; the
// destination's entries beside the copy's directory stay.
func TestInProcessDelete(t *testing.T) {
	e := newEnv(t, lanetest.Link{Delay: time.Millisecond}, 5)
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	before := treetest.Snapshot(t, outside)
	top := treetest.FilterTree(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for _, filter := range [][]string{nil, {"--exclude", "*.tmp"}, {"--exclude", "*.tmp", "--exclude", "/t/deep/"}} {
		want := t.TempDir()
		staleDest(t, top, want, outside)
		n := rsyncDeletes(t, top, want, filter...)
		what := strings.Join(filter, " ")
		o := e.options()
		o.Recursive, o.Delete, o.Filter = true, true, rsyncFilters(t, filter...)
		var deleted []fcopy.Deletion
		o.Deleted = func(d fcopy.Deletion) { deleted = append(deleted, d) }

		pushed := t.TempDir()
		staleDest(t, top, pushed, outside)
		res, err := Push(ctx, o, []string{top}, "host", pushed)
		if err != nil {
			t.Fatalf("push --delete %s: %v", what, err)
		}
		treetest.Compare(t, "push --delete "+what, treetest.Snapshot(t, want), treetest.Snapshot(t, pushed), treetest.Options{})
		if res.Deleted != n || n == 0 {
			t.Errorf("push --delete %s: %d deleted, rsync %d", what, res.Deleted, n)
		}

		pulled := t.TempDir()
		staleDest(t, top, pulled, outside)
		if res, err = Pull(ctx, o, "host", []string{top}, pulled); err != nil {
			t.Fatalf("pull --delete %s: %v", what, err)
		}
		treetest.Compare(t, "pull --delete "+what, treetest.Snapshot(t, want), treetest.Snapshot(t, pulled), treetest.Options{})
		if res.Deleted != n || len(deleted) != n {
			t.Errorf("pull --delete %s: %d deleted, %d reported, rsync %d", what, res.Deleted, len(deleted), n)
		}
		for _, d := range deleted {
			if !strings.HasPrefix(d.Path, filepath.Join(pulled, "t")+"/") {
				t.Errorf("pull --delete %s: deleted %s (%s)", what, d.Path, d.Name)
			}
		}
		treetest.Compare(t, "outside", before, treetest.Snapshot(t, outside), treetest.Options{MTimes: true})
	}
}

// TestDeleteNeedsACompleteCopy: --delete deletes nothing when the list is empty (everything
// excluded), when the copy fails (a hostile remote that lists a directory and sends no data, or
// names outside the destination), or through a directory of the destination that is a symbolic
// link (the copy refuses to write below it); and it is refused without -r or with --files-from.
func TestDeleteNeedsACompleteCopy(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o644)
	top := treetest.FilterTree(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unchanged := func(what, dst string, prep func(), do func(o *Options) error) {
		t.Helper()
		staleDest(t, top, dst, outside)
		prep()
		want, wantOut := treetest.Snapshot(t, dst), treetest.Snapshot(t, outside)
		o := newEnv(t, lanetest.Link{}, 1).options()
		o.Recursive, o.Delete = true, true
		err := do(&o)
		if what != "nothing listed" && err == nil {
			t.Errorf("%s: the copy succeeded", what)
		}
		treetest.Compare(t, what, want, treetest.Snapshot(t, dst), treetest.Options{})
		treetest.Compare(t, what+": outside", wantOut, treetest.Snapshot(t, outside), treetest.Options{MTimes: true})
	}
	none := func() {}
	empty := t.TempDir()
	unchanged("nothing listed", empty, none, func(o *Options) error {
		o.Filter = rsyncFilters(t, "--exclude", "t")
		res, err := Pull(ctx, *o, "host", []string{top}, empty)
		if err == nil && res.Deleted != 0 {
			t.Errorf("nothing listed: %d deleted", res.Deleted)
		}
		return err
	})
	for _, hostile := range [][]fcopy.File{
		{{Name: "t", Dir: true, Mode: 0o755}},                                         // then no data
		{{Name: "t", Dir: true, Mode: 0o755}, {Name: "t/../x", Size: 1, Mode: 0o644}}, // outside
		{},
	} {
		dst := t.TempDir()
		unchanged("a hostile remote", dst, none, func(o *Options) error {
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileServer(func(ctl *Control, hello Msg) error {
				return sendFiles(ctl, Msg{T: KindFiles}, hostile)
			}, nil)
			o.Start, o.Lanes = e.start, e.lanes(clientHost)
			_, err := Pull(ctx, *o, "host", []string{"t"}, dst)
			return err
		})
	}
	linked := t.TempDir()
	unchanged("a linked directory", linked, func() {
		d := filepath.Join(linked, "t", "src")
		os.RemoveAll(d)
		os.Symlink(outside, d)
	}, func(o *Options) error {
		_, err := Pull(ctx, *o, "host", []string{top}, linked)
		return err
	})
	if _, err := Pull(ctx, Options{Delete: true, Recursive: true}, "host", []string{"d/*"}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "--delete") {
		t.Errorf("--delete with a pattern: %v", err)
	}
	for _, o := range []Options{{Delete: true}, {Delete: true, Recursive: true, FilesFrom: []string{"a"}}} {
		if _, err := Push(ctx, o, []string{top}, "host", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--delete") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// rsyncDry runs rsync -rlin --delete with args from top into dst: the files it would send and
// the entries it would delete.
func rsyncDry(t *testing.T, top, dst string, args ...string) (send, del []string) {
	t.Helper()
	treetest.NeedRsync(t)
	out, err := exec.Command("rsync", append(append([]string{"-rlin", "--delete"}, args...), top, dst+"/")...).CombinedOutput()
	if err != nil {
		t.Fatalf("rsync: %v: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "*deleting "):
			del = append(del, strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(l, "*deleting ")), "/"))
		case strings.HasPrefix(l, ">f"):
			send = append(send, l[12:])
		}
	}
	sort.Strings(send)
	sort.Strings(del)
	return send, del
}

// TestInProcessDryRun: a push and a pull with --dry-run --delete (and a rule) report the files
// rsync -n would send and the entries it would delete, and change nothing at the destination.
func TestInProcessDryRun(t *testing.T) {
	e := newEnv(t, lanetest.Link{Delay: time.Millisecond}, 5)
	root, outside := t.TempDir(), t.TempDir()
	top := treetest.FilterTree(t, root)
	dst := t.TempDir()
	staleDest(t, top, dst, outside)
	os.WriteFile(filepath.Join(top, "new.txt"), []byte("new"), 0o644)
	os.WriteFile(filepath.Join(top, "src", "main.go"), []byte("changed"), 0o644)
	wantSend, wantDel := rsyncDry(t, top, dst, "--exclude", "*.tmp")
	if strings.Join(wantSend, "|") != "t/new.txt|t/src/main.go" || len(wantDel) == 0 {
		t.Fatalf("rsync -n would send %q and delete %q", wantSend, wantDel)
	}
	before := treetest.Snapshot(t, dst)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, pull := range []bool{false, true} {
		o := e.options()
		o.Recursive, o.Delete, o.DryRun, o.Filter = true, true, true, rsyncFilters(t, "--exclude", "*.tmp")
		var send, del []string
		o.WouldSend = func(name string, _ int64) { send = append(send, name) }
		o.Deleted = func(d fcopy.Deletion) { del = append(del, d.Name) }
		var res *Result
		var err error
		if pull {
			res, err = Pull(ctx, o, "host", []string{top}, dst)
		} else {
			res, err = Push(ctx, o, []string{top}, "host", dst)
		}
		if err != nil {
			t.Fatalf("dry run (pull %v): %v", pull, err)
		}
		sort.Strings(send)
		sort.Strings(del)
		if strings.Join(send, "|") != strings.Join(wantSend, "|") || strings.Join(del, "|") != strings.Join(wantDel, "|") {
			t.Errorf("dry run (pull %v): would send %q, delete %q; rsync -n: %q, %q", pull, send, del, wantSend, wantDel)
		}
		if !res.DryRun || res.WouldSendFiles != len(send) || res.Deleted != len(del) || len(res.Files) != 0 {
			t.Errorf("dry run (pull %v): result %+v", pull, res)
		}
		treetest.Compare(t, "dry run", before, treetest.Snapshot(t, dst), treetest.Options{})
	}
}

// TestDryPushRefusesWhatWasNotAsked: a remote that answers a dry run without --delete with
// entries to delete, or with offers to resume, or with a name longer than a path, is refused; so
// is one whose entries to delete are not below a directory of the list (another tree, "..", an
// absolute name) or are entries of the list: the user would read that the copy deletes what it
// cannot.
func TestDryPushRefusesWhatWasNotAsked(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	top := filepath.Base(src)
	for _, c := range []struct {
		have   Msg
		delete bool
	}{
		{Msg{T: KindHave, Deleting: []string{"t/x"}}, false},
		{Msg{T: KindHave, Resume: []fcopy.Offer{{File: 0, Blocks: 1}}}, false},
		{Msg{T: KindHave, Deleting: []string{strings.Repeat("x", maxResultPath+1)}}, true},
		{Msg{T: KindHave, Deleting: []string{"elsewhere/x"}}, true},
		{Msg{T: KindHave, Deleting: []string{top}}, true},
		{Msg{T: KindHave, Deleting: []string{top + "/../../etc/passwd"}}, true},
		{Msg{T: KindHave, Deleting: []string{"/" + top + "/x"}}, true},
		{Msg{T: KindHave, Deleting: []string{top + "//x"}}, true},
		{Msg{T: KindHave, Deleting: []string{top + "/f"}}, true},
	} {
		e := newEnv(t, lanetest.Link{}, 1)
		e.serve = hostileServer(func(ctl *Control, hello Msg) error { return ctl.Send(c.have) }, nil)
		o := e.options()
		o.Recursive, o.DryRun, o.Delete = true, true, c.delete
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := Push(ctx, o, []string{src}, "host", "dst")
		cancel()
		if CodeOf(err) != CodeProtocol {
			t.Errorf("deleting %.60q, resume %v, --delete %v: %v (exit %d)", c.have.Deleting, c.have.Resume, c.delete, err, CodeOf(err))
		}
	}
}

// TestDeleteTakesItsTime: a --delete that takes longer than the sender waits for a silent
// receiver (PeerIdle; shortened here: a pull's deletions here are told one by one, and the first
// is held 2.5 times that) does not end the copy at the sender: the receiver tells the sender it
// is there while it deletes. The pull succeeds, the stale entries are gone, and the remote (the
// sender, which on a push is this end: there it failed the copy, exit 6, after 20 s of
// deleting) ends without an error. runRecv deletes on either side.
func TestDeleteTakesItsTime(t *testing.T) {
	old := doneIdle
	doneIdle = 2 * time.Second
	t.Cleanup(func() { doneIdle = old })
	e := newEnv(t, lanetest.Link{}, 1)
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	dst := t.TempDir()
	staleDest(t, top, dst, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := e.options()
	o.Recursive, o.Delete = true, true
	var deleted int
	o.Deleted = func(fcopy.Deletion) {
		if deleted++; deleted == 1 {
			time.Sleep(doneIdle * 5 / 2)
		}
	}
	res, err := Pull(ctx, o, "host", []string{top}, dst)
	if err != nil {
		t.Fatalf("a slow --delete: %v", err)
	}
	if res.Deleted == 0 || res.Deleted != deleted {
		t.Errorf("%d deleted, %d reported", res.Deleted, deleted)
	}
	if _, err := os.Lstat(filepath.Join(dst, "t", "old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("t/old: %v", err)
	}
	e.wait()
	if err := e.serves[0].err; err != nil {
		t.Errorf("the remote sender: %v", err)
	}
}

// TestDryAnswerFits: a dry run's answer with more to delete than the client takes in one have
// line (64 MiB, 4,000,000 entries) is refused by the server with its own one-line error, saying
// what to do, where the client would read an oversized line as a protocol violation (exit 10);
// one that fits is sent.
func TestDryAnswerFits(t *testing.T) {
	long := strings.Repeat("d/", 2000) + "x"
	for _, c := range []struct {
		m    Msg
		fits bool
	}{
		{Msg{T: KindHave, Have: []int{0}, Deleting: []string{"t/x", long}}, true},
		{Msg{T: KindHave, Deleting: slices.Repeat([]string{long}, maxMessage/len(long)+1)}, false},
		{Msg{T: KindHave, Deleting: slices.Repeat([]string{"t/x"}, maxListEntries+1)}, false},
	} {
		err := fitDryAnswer(c.m)
		if c.fits != (err == nil) || err != nil && (!strings.Contains(err.Error(), "--dry-run") || CodeOf(err) == CodeProtocol) {
			t.Errorf("%d entries to delete: %v", len(c.m.Deleting), err)
		}
	}
}

// TestDeleteFailsAfterTheCopy: a --delete that stops after every file is in place (here below a
// chain of directories deeper than a path) fails the copy with the deletion's error (exit 4),
// on a push (the remote's) and a pull, and says the files are in place: the copy itself is whole,
// and the destination has them.
func TestDeleteFailsAfterTheCopy(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	top := treetest.FilterTree(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, pull := range []bool{false, true} {
		dst := t.TempDir()
		treetest.DeepChain(t, filepath.Join(dst, "t"), 2100)
		o := e.options()
		o.Recursive, o.Delete = true, true
		var err error
		if pull {
			_, err = Pull(ctx, o, "host", []string{top}, dst)
		} else {
			_, err = Push(ctx, o, []string{top}, "host", dst)
		}
		if CodeOf(err) != CodeDest || !strings.Contains(fmt.Sprint(err), "every file is in place") {
			t.Errorf("pull %v: %v (exit %d)", pull, err, CodeOf(err))
		}
		if _, serr := os.Stat(filepath.Join(dst, "t", "src", "main.go")); serr != nil {
			t.Errorf("pull %v: %v", pull, serr)
		}
	}
}

// TestDeleteDestinationThatIsNot: a destination that does not exist but that its text, cleaned,
// names an existing directory ("missing/..", "missing/../backups": the system finds no
// "missing", so there is no such directory) is refused, on a push (the remote's) and a pull: a copy
// there made the existing directory itself the copy's top-level directory, and --delete emptied
// it of everything the source does not have.
func TestDeleteDestinationThatIsNot(t *testing.T) {
	e := newEnv(t, lanetest.Link{}, 1)
	top := treetest.FilterTree(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, pull := range []bool{false, true} {
		for _, dst := range []string{"missing/..", "missing/../backups"} {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "backups", "old"), 0o755)
			os.WriteFile(filepath.Join(root, "backups", "old", "keep"), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(root, "keep"), []byte("x"), 0o644)
			before := treetest.Snapshot(t, root)
			o := e.options()
			o.Recursive, o.Delete = true, true
			var err error
			if pull {
				_, err = Pull(ctx, o, "host", []string{top}, root+"/"+dst)
			} else {
				_, err = Push(ctx, o, []string{top}, "host", root+"/"+dst)
			}
			if CodeOf(err) != CodeDest {
				t.Errorf("pull %v to %s: %v (exit %d)", pull, dst, err, CodeOf(err))
			}
			treetest.Compare(t, dst, before, treetest.Snapshot(t, root), treetest.Options{})
		}
	}
}

package privdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "a", "b")
	if err := Make(good); err != nil {
		t.Fatalf("Make: %v", err)
	}
	if fi, _ := os.Stat(good); fi.Mode().Perm() != 0o700 {
		t.Errorf("made with mode %04o, want 0700", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	grp := filepath.Join(base, "grp")
	os.Mkdir(grp, 0o700)
	os.Chmod(grp, 0o770)
	link := filepath.Join(base, "link")
	os.Symlink(good, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	for _, c := range []struct{ dir, want string }{
		{open, "can be written by other users"},
		{grp, "chmod go-w"},
		{link, "symbolic link"},
		{file, "not a directory"},
	} {
		err := Check(c.dir)
		if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.dir) {
			t.Errorf("Check(%s) = %v, want ErrNotPrivate naming it and %q", c.dir, err, c.want)
		}
		if err := Make(c.dir); !errors.Is(err, ErrNotPrivate) {
			t.Errorf("Make(%s) = %v, want ErrNotPrivate", c.dir, err)
		}
	}
	fi, err := os.Lstat(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(good, fi, os.Getuid()+1); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "belongs to user id") {
		t.Errorf("a directory of another user: %v", err)
	}
}

// TestAncestors: a private directory below one that others can write (0777 without the sticky
// bit, or group-writable by a group that is not the user's own) or that another user owns is
// refused, naming that directory: whoever can write it can rename the private one away and put
// theirs in its place. Below a sticky directory (/tmp) or a group-writable one of the user's own
// group it is taken.
func TestAncestors(t *testing.T) {
	base := t.TempDir()
	mid := filepath.Join(base, "mid")
	dir := filepath.Join(mid, "farwing")
	if err := Make(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode    os.FileMode
		private bool
		ok      bool
	}{
		{0o700, false, true},
		{0o755, false, true},
		{0o777, false, false},
		{0o777 | os.ModeSticky, false, true},
		{0o770, false, false},
		{0o770, true, true},
		{0o775 | os.ModeSticky, false, true},
	} {
		if err := os.Chmod(mid, c.mode); err != nil {
			t.Fatal(err)
		}
		err := ancestors(dir, os.Getuid(), func(uint32) bool { return c.private })
		switch {
		case c.ok && err != nil:
			t.Errorf("below a directory of mode %v (own group %v): %v", c.mode, c.private, err)
		case !c.ok && (!errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), mid+" (mode")):
			t.Errorf("below a directory of mode %v (own group %v): %v, want it refused naming %s", c.mode, c.private, err, mid)
		}
	}
	os.Chmod(mid, 0o777)
	if err := Check(dir); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "chmod go-w "+mid) {
		t.Errorf("Check below a 0777 directory: %v", err)
	}
	os.Chmod(mid, 0o755)
	// Through a link: the real path's directories are the ones checked.
	link := filepath.Join(base, "link")
	os.Symlink(mid, link)
	os.Chmod(mid, 0o777)
	if err := Check(filepath.Join(link, "farwing")); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), mid) {
		t.Errorf("Check through a link to a 0777 directory: %v", err)
	}
	os.Chmod(mid, 0o755)
	if os.Getuid() != 0 {
		t.Log("not root: the case of an ancestor of another user's is not run")
		return
	}
	if err := os.Chown(mid, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "belongs to user id 65534") {
		t.Errorf("below another user's directory: %v", err)
	}
}

// TestMakeIn: a directory made inside a checked one is made with mode 0700 and refused as Make
// refuses it, with the same error (open to others, a link, a file at its name); the directories
// above it are not walked again: below a parent that passed Check, one above that was opened to
// others since is Make's to find, not MakeIn's.
func TestMakeIn(t *testing.T) {
	base := t.TempDir()
	parent := filepath.Join(base, "mid", "farwing")
	if err := Make(parent); err != nil {
		t.Fatal(err)
	}
	dir, err := MakeIn(parent, "ssh")
	if err != nil || dir != filepath.Join(parent, "ssh") {
		t.Fatalf("MakeIn = %q, %v", dir, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("made with mode %04o, want 0700", fi.Mode().Perm())
	}
	if again, err := MakeIn(parent, "ssh"); err != nil || again != dir {
		t.Errorf("MakeIn of a private directory that is there = %q, %v", again, err)
	}
	open := filepath.Join(parent, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	os.Symlink(dir, filepath.Join(parent, "link"))
	os.WriteFile(filepath.Join(parent, "file"), nil, 0o600)
	os.Symlink(filepath.Join(base, "nowhere"), filepath.Join(parent, "dangling"))
	for _, c := range []struct{ name, want string }{
		{"open", "can be written by other users"},
		{"link", "symbolic link"},
		{"file", "not a directory"},
		{"dangling", "symbolic link"},
	} {
		p := filepath.Join(parent, c.name)
		dir, err := MakeIn(parent, c.name)
		if dir != "" || !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("MakeIn(%s) = %q, %v; want ErrNotPrivate naming it and %q", c.name, dir, err, c.want)
		}
		if merr := Make(p); merr == nil || err == nil || merr.Error() != err.Error() {
			t.Errorf("MakeIn(%s): %v, where Make says %v", c.name, err, merr)
		}
	}
	mid := filepath.Join(base, "mid")
	os.Chmod(mid, 0o777)
	defer os.Chmod(mid, 0o755)
	if _, err := MakeIn(parent, "ssh"); err != nil {
		t.Errorf("MakeIn walked the directories above its parent: %v", err)
	}
	if err := Make(dir); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("Make below a directory open to others: %v", err)
	}
}

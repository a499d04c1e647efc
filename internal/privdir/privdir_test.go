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

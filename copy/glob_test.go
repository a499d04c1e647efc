package copy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestGlob: a source whose base name is a pattern expands to its matches in order, without
// names starting with "." unless the pattern does; one that matches nothing is the literal name
// if it exists, a source error otherwise; a bad pattern is a source error; a plain path passes
// as it is, existing or not.
func TestGlob(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.bin", "b.bin", ".hidden.bin", "c.txt", "lit[1].txt"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub.bin"), 0o755)
	j := func(ns ...string) []string {
		var out []string
		for _, n := range ns {
			out = append(out, filepath.Join(dir, n))
		}
		return out
	}
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"*.bin", j("a.bin", "b.bin", "sub.bin")},
		{".*.bin", j(".hidden.bin")},
		{"?.txt", j("c.txt")},
		{"[ab].bin", j("a.bin", "b.bin")},
		{"lit[1].txt", j("lit[1].txt")}, // matches nothing, exists as named
		{"plain-missing", j("plain-missing")},
		{"c.txt", j("c.txt")},
	} {
		got, err := Glob(filepath.Join(dir, c.pattern))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Glob(%s) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
	for _, p := range []string{"*.none", "[.bin"} {
		if got, err := Glob(filepath.Join(dir, p)); !errors.Is(err, ErrSource) {
			t.Errorf("Glob(%s) = %q, %v; want a source error", p, got, err)
		}
	}
}

// TestMatchRequestPattern: a pattern request takes any number of top-level names that match it
// (the literal name too), and refuses a name that does not match, a dot name for a pattern
// without a leading dot, a name below a match without -r, and a bad pattern.
func TestMatchRequestPattern(t *testing.T) {
	f := func(name string) File { return File{Name: name, Size: 1, Mode: 0o644} }
	d := func(name string) File { return File{Name: name, Dir: true, Mode: 0o755} }
	for _, c := range []struct {
		req   []string
		r     bool
		files []File
		ok    bool
	}{
		{[]string{"dir/*.bin"}, false, []File{f("a.bin"), f("b.bin")}, true},
		{[]string{"dir/*.bin"}, false, nil, true},
		{[]string{"dir/*.bin"}, false, []File{f("*.bin")}, true},
		{[]string{"dir/.*"}, false, []File{f(".profile")}, true},
		{[]string{"dir/*.bin", "x.txt"}, false, []File{f("a.bin"), f("x.txt")}, true},
		{[]string{"dir/*"}, true, []File{d("sub"), f("sub/x")}, true},
		{[]string{"dir/*.bin"}, false, []File{f("a.bin"), f("a.txt")}, false},
		{[]string{"dir/*"}, false, []File{f(".bashrc")}, false},
		{[]string{"dir/*"}, true, []File{d(".ssh"), f(".ssh/authorized_keys")}, false},
		{[]string{"dir/*"}, false, []File{d("sub"), f("sub/x")}, false},
		{[]string{"dir/[.bin"}, false, []File{f("a.bin")}, false},
		{[]string{"dir/?.bin"}, false, []File{f("ab.bin")}, false},
	} {
		_, err := MatchRequest(c.req, CollectOptions{Recursive: c.r}, c.files)
		if (err == nil) != c.ok {
			t.Errorf("%q (-r %v) with %v: %v, want ok %v", c.req, c.r, c.files, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrName) {
			t.Errorf("%q: %v is not a name error", c.req, err)
		}
	}
}

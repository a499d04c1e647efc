package copy

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// ErrName marks a file name that no transfer may carry, or one that a pull did not ask for.
var ErrName = errors.New("unsafe file name")

// Limits of a name (docs/PROTOCOL.md, "Names"): those of Linux's PATH_MAX and NAME_MAX.
const (
	maxName    = 4096
	maxElement = 255
)

// ValidName checks a name against the one rule both ends apply to every name of a transfer
// (docs/PROTOCOL.md, "Names"): valid UTF-8, relative and slash-separated, at most 4096 bytes, of
// elements that are neither empty, "." nor "..", at most 255 bytes each, with no control
// character (U+0000-U+001F, U+007F-U+009F). A sender refuses to send such a file; a receiver
// refuses a list that holds one, before it writes anything.
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: an empty name", ErrName)
	case len(name) > maxName:
		return fmt.Errorf("%w: %.40q… is longer than %d bytes", ErrName, name, maxName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not UTF-8", ErrName, name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("%w: %q is absolute", ErrName, name)
	}
	for _, r := range name {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			return fmt.Errorf("%w: %q holds a control character", ErrName, name)
		}
	}
	for _, e := range strings.Split(name, "/") {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("%w: %q has an empty, . or .. element", ErrName, name)
		}
		if len(e) > maxElement {
			return fmt.Errorf("%w: %q has an element longer than %d bytes", ErrName, name, maxElement)
		}
	}
	return nil
}

// checkTree checks a file list's names and shape: every name valid and listed once, and every
// name below a top-level one preceded by its parent, listed as a directory (the order Collect
// produces). A list that names "a" as a file and then "a/b", or "a/b" without "a", is malformed.
func checkTree(files []File) error {
	kind := make(map[string]bool, len(files)) // name → is a directory
	for _, f := range files {
		if err := ValidName(f.Name); err != nil {
			return err
		}
		if _, dup := kind[f.Name]; dup {
			return fmt.Errorf("%w: %q is listed twice", ErrName, f.Name)
		}
		if dir, _, ok := cutLast(f.Name); ok {
			if isDir, listed := kind[dir]; !listed || !isDir {
				return fmt.Errorf("%w: %q comes without its directory %q", ErrName, f.Name, dir)
			}
		}
		kind[f.Name] = f.Dir
	}
	return nil
}

// cutLast splits name at its last slash.
func cutLast(name string) (dir, base string, ok bool) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", name, false
	}
	return name[:i], name[i+1:], true
}

// MatchRequest checks the file list a remote sent for a pull against the paths the client asked
// for: each top-level name must be the base name of one requested path (scp's rule after
// CVE-2019-6111), names below it are allowed only with recursive and under a directory, and a
// request for "", ".", "~" or a path ending in ".." (whose base name only the remote knows) may
// bring one top-level name of its own. The list must also pass checkTree (NewPlan).
func MatchRequest(paths []string, recursive bool, files []File) error {
	want := map[string]bool{} // base names asked for
	free := 0                 // requests whose base name only the remote knows
	for _, p := range paths {
		if b, ok := requestBase(p); ok {
			want[b] = true
		} else {
			free++
		}
	}
	got := map[string]bool{}
	for _, f := range files {
		top, _, below := strings.Cut(f.Name, "/")
		if below || f.Dir {
			if !recursive {
				return fmt.Errorf("%w: the remote sent %q, but the copy is not recursive (-r)", ErrName, f.Name)
			}
		}
		if below || got[top] {
			continue // checkTree has its directory before it
		}
		switch {
		case want[top]:
		case free > 0:
			free--
		default:
			return fmt.Errorf("%w: the remote sent %q, which was not asked for", ErrName, f.Name)
		}
		got[top] = true
	}
	return nil
}

// requestBase is the base name under which the remote's Collect sends path p (as the remote
// resolves it: "~/" and relative paths from its home directory), or false when only the remote
// can know it ("", "~", ".", "/", "x/..").
func requestBase(p string) (string, bool) {
	if p == "" || p == "~" || p == "~/" {
		return "", false
	}
	b := path.Base(path.Clean(p))
	if b == "." || b == ".." || b == "/" {
		return "", false
	}
	return b, true
}

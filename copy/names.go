package copy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/farwing/farwing/internal/escape"
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

// maxLink bounds a symbolic link's target text: Linux's PATH_MAX less the final NUL.
const maxLink = 4095

// ValidLink checks a symbolic link's target text: 1 to 4095 bytes of UTF-8 (JSON would change
// other bytes on the way) without a NUL. The text may point anywhere, "/etc" or "../..": the
// receiver creates the link with it (symlinkat, below its destination) and never follows it, so
// only its creation has to be safe.
func ValidLink(target string) error {
	switch {
	case target == "":
		return fmt.Errorf("%w: a symbolic link with an empty target", ErrName)
	case len(target) > maxLink:
		return fmt.Errorf("%w: a symbolic link target %.40q… is longer than %d bytes", ErrName, target, maxLink)
	case !utf8.ValidString(target):
		return fmt.Errorf("%w: the symbolic link target %q is not UTF-8", ErrName, target)
	case strings.IndexByte(target, 0) >= 0:
		return fmt.Errorf("%w: the symbolic link target %q holds a NUL byte", ErrName, target)
	}
	return nil
}

// kind is what a name of a file list is.
type kind uint8

const (
	kindFile kind = iota + 1
	kindDir
	kindLink
	kindHard
)

// checkTree checks a file list's names and shape: every name valid and listed once, every name
// below a top-level one preceded by its parent, listed as a directory (the order Collect
// produces), and every entry one thing: a directory, a symbolic link (ValidLink target) and a
// hard link have no size, and a hard link names an earlier regular file of the list. A list
// that names "a" as a file or a link and then "a/b", or "a/b" without "a", is malformed: nothing
// is ever written below a link, whether the list made it or the destination had it.
func checkTree(files []File) error {
	return NewTreeCheck(len(files)).Add(files)
}

// TreeCheck applies checkTree's rule to a file list that arrives in pieces (a peer's list
// travels in chunks): each piece is checked as it comes, against every entry before it, so a
// name listed twice in two chunks, or a bad name in the last one, is refused as it arrives.
type TreeCheck struct {
	kinds map[string]kind
}

// NewTreeCheck starts the check of a list of about n entries (a hint: a peer's announcement is
// taken only up to 65,536 before the entries arrive).
func NewTreeCheck(n int) *TreeCheck {
	return &TreeCheck{kinds: make(map[string]kind, min(max(n, 0), 1<<16))}
}

// Add checks the next entries of the list.
func (c *TreeCheck) Add(files []File) error {
	kinds := c.kinds
	for _, f := range files {
		if err := ValidName(f.Name); err != nil {
			return err
		}
		if _, dup := kinds[f.Name]; dup {
			return fmt.Errorf("%w: %q is listed twice", ErrName, f.Name)
		}
		if dir, _, ok := cutLast(f.Name); ok {
			if kinds[dir] != kindDir {
				return fmt.Errorf("%w: %q comes without its directory %q", ErrName, f.Name, dir)
			}
		}
		k := kindFile
		switch {
		case f.Dir && (f.Link != "" || f.Hard != ""), f.Link != "" && f.Hard != "":
			return fmt.Errorf("%w: %q is listed as two kinds of entry at once", ErrName, f.Name)
		case f.Dir:
			k = kindDir
		case f.Link != "":
			if err := ValidLink(f.Link); err != nil {
				return fmt.Errorf("%s: %w", escape.Quote(f.Name), err)
			}
			k = kindLink
		case f.Hard != "":
			if kinds[f.Hard] != kindFile {
				return fmt.Errorf("%w: %q is a hard link to %s, which is not a regular file listed before it", ErrName, f.Name, escape.Quote(f.Hard))
			}
			k = kindHard
		}
		if err := checkSize(f.Name, f.Size); err != nil {
			return err
		}
		if k != kindFile && f.Size != 0 {
			return fmt.Errorf("%w: %q is %s of size %d", ErrName, f.Name, f.what(), f.Size)
		}
		kinds[f.Name] = k
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

// MatchRequest checks the file list a remote sent for a pull against what the client asked
// for: the paths, and the remote's Collect options o. Each top-level name must be the base name of
// one requested path (scp's rule after CVE-2019-6111), names below it are allowed only with
// o.Recursive and under a directory, and a request for "", ".", "~" or a path ending in ".."
// (whose base name only the remote knows) may bring one top-level directory of its own name (it
// names a directory: never a file, a link or a hard link, which would land under a name of the
// remote's choosing, ".bashrc", say; and never one whose name starts with ".", ".ssh" say). A symbolic
// link comes only below a top-level directory (Collect follows a link given as an argument) and
// never with o.Follow (-L: the remote follows them); a hard link only with o.HardLinks. The list
// must also pass checkTree (NewPlan).
//
// A request whose base name is a pattern (Glob: "dir/*.bin") may bring any number of top-level
// names that match it, as the remote's Glob expands it; a name starting with "." only for a
// pattern that does. The client cannot see which directory the remote read them from: what it
// checks is that every name is one the pattern could have produced.
//
// It returns the top-level names that only the remote chose (those of requests for "", "~", "."
// or "x/.."): the destination must not have them already (Target.Fresh), or a remote could fill
// ~/bin or ~/Documents by naming its home directory so.
//
// With o.FilesFrom, the names must be the listed paths, the directories above them, and with
// o.Recursive what is below a listed directory (matchFilesFrom). With o.Filter, no name may be
// one its rules exclude (but the directories above listed paths, which the rules do not leave
// out): the remote applies them, and one that sends what they exclude is refused.
func MatchRequest(paths []string, o CollectOptions, files []File) (fresh []string, err error) {
	var above map[string]bool
	if o.FilesFrom != nil {
		above, err = matchFilesFrom(o, files)
	} else {
		fresh, err = matchPaths(paths, o, files)
	}
	if err != nil || o.Filter == nil {
		return fresh, err
	}
	for _, f := range files {
		if !above[f.Name] && o.Filter.Excluded(f.Name, f.Dir) {
			return nil, fmt.Errorf("%w: the remote sent %q, which the filter rules leave out", ErrName, f.Name)
		}
	}
	return fresh, nil
}

// matchFilesFrom is MatchRequest's check of a --files-from pull: each name is a listed path, a
// directory above one, or (with o.Recursive) below a listed directory; a symbolic link comes only
// without o.Follow, a hard link only with o.HardLinks. It returns the directories above listed
// paths.
func matchFilesFrom(o CollectOptions, files []File) (map[string]bool, error) {
	listed := make(map[string]bool, len(o.FilesFrom))
	above := map[string]bool{}
	for _, p := range o.FilesFrom {
		listed[p] = true
		for d, _, ok := cutLast(p); ok; d, _, ok = cutLast(d) {
			above[d] = true
		}
	}
	for _, f := range files {
		switch {
		case f.Link != "" && o.Follow:
			return nil, fmt.Errorf("%w: the remote sent %q as a symbolic link, but -L follows them", ErrName, f.Name)
		case f.Hard != "" && !o.HardLinks:
			return nil, fmt.Errorf("%w: the remote sent %q as a hard link, but -H was not given", ErrName, f.Name)
		case listed[f.Name]:
		case above[f.Name]:
			if !f.Dir {
				return nil, fmt.Errorf("%w: the remote sent %q as %s, but listed paths are below it", ErrName, f.Name, f.what())
			}
		case o.Recursive && belowListed(listed, f.Name):
		default:
			return nil, fmt.Errorf("%w: the remote sent %q, which the --files-from list does not name", ErrName, f.Name)
		}
	}
	return above, nil
}

// belowListed reports whether one of the directories above name is listed.
func belowListed(listed map[string]bool, name string) bool {
	for d, _, ok := cutLast(name); ok; d, _, ok = cutLast(d) {
		if listed[d] {
			return true
		}
	}
	return false
}

// matchPaths is MatchRequest's check of the names against the requested paths.
func matchPaths(paths []string, o CollectOptions, files []File) (fresh []string, err error) {
	want := map[string]bool{} // base names asked for
	var patterns []string     // base names that are patterns
	free := 0                 // requests whose base name only the remote knows
	for _, p := range paths {
		b, ok := requestBase(p)
		switch {
		case ok && IsPattern(b):
			if _, err := path.Match(b, ""); err != nil {
				return nil, fmt.Errorf("%w: %q is not a valid pattern", ErrName, p)
			}
			patterns = append(patterns, b)
			want[b] = true // a name that holds the pattern's characters itself (Glob)
		case ok:
			want[b] = true
		default:
			free++
		}
	}
	got := map[string]bool{}
	for _, f := range files {
		top, _, below := strings.Cut(f.Name, "/")
		if below || f.Dir {
			if !o.Recursive {
				return nil, fmt.Errorf("%w: the remote sent %q, but the copy is not recursive (-r)", ErrName, f.Name)
			}
		}
		switch {
		case f.Link != "" && (!below || o.Follow):
			return nil, fmt.Errorf("%w: the remote sent %q as a symbolic link, which this request cannot bring (a link given as a source, or any with -L, is followed)", ErrName, f.Name)
		case f.Hard != "" && !o.HardLinks:
			return nil, fmt.Errorf("%w: the remote sent %q as a hard link, but -H was not given", ErrName, f.Name)
		}
		if below || got[top] {
			continue // checkTree has its directory before it
		}
		switch {
		case want[top]:
		case matchesAny(patterns, top):
		case free > 0 && f.Dir && strings.HasPrefix(top, "."):
			// No home directory (or other directory such a request names) is called ".ssh" or
			// ".config", but a pull of "host:" into one's home would then overwrite its dot
			// directories: CVE-2019-6111's shape in the one place the name cannot be predicted.
			return nil, fmt.Errorf("%w: the remote sent %q for a request of its home directory (or another whose name only it knows); such a directory's name never starts with \".\" (name the remote directory, or copy into a new destination)", ErrName, f.Name)
		case free > 0 && f.Dir:
			free-- // what such a request names is a directory (the remote's home, "/", "x/..")
			fresh = append(fresh, top)
		case free > 0:
			return nil, fmt.Errorf("%w: the remote sent %q as %s for a request of its home directory (or another whose name only it knows), which brings a directory", ErrName, f.Name, f.what())
		default:
			return nil, fmt.Errorf("%w: the remote sent %q, which was not asked for", ErrName, f.Name)
		}
		got[top] = true
	}
	return fresh, nil
}

// IsPattern says whether p holds one of Glob's special characters (*, ? or [; a backslash
// escapes one of them in a pattern, and alone is part of a name).
func IsPattern(p string) bool { return strings.ContainsAny(p, "*?[") }

// GlobMatch says whether the base name name is one the pattern base could bring: it matches
// (path.Match), and starts with "." only if the pattern does, as a shell's glob.
func GlobMatch(base, name string) bool {
	ok, err := path.Match(base, name)
	return err == nil && ok && (!strings.HasPrefix(name, ".") || strings.HasPrefix(base, "."))
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if GlobMatch(p, name) {
			return true
		}
	}
	return false
}

// Glob expands the source path p where its base name is a pattern (IsPattern), as the sending
// side of a pull does with a request such as "dir/*.bin": the matches in order, never through a
// shell, without names starting with "." unless the pattern does (GlobMatch). Patterns in the
// directories of p are expanded too. A p that is not a pattern is returned as it is, and so is
// one that matches nothing but exists under its own name ("report[1].txt"), as a shell leaves a
// pattern that matches nothing.
func Glob(p string) ([]string, error) {
	if !IsPattern(filepath.Base(p)) && !IsPattern(filepath.Dir(p)) {
		return []string{p}, nil
	}
	ms, err := filepath.Glob(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a valid pattern", ErrSource, p)
	}
	base := filepath.Base(p)
	var out []string
	for _, m := range ms {
		if !IsPattern(base) || GlobMatch(base, filepath.Base(m)) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		if _, err := os.Lstat(p); err == nil {
			return []string{p}, nil
		}
		return nil, fmt.Errorf("%w: %s: no such file or directory (no name matches the pattern)", ErrSource, p)
	}
	return out, nil
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

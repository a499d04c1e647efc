package copy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/farwing/farwing/internal/treetest"
)

// excludes is a Filter of rules, for the tests.
func excludes(t testing.TB, rules ...Rule) *Filter {
	t.Helper()
	f, err := NewFilter(rules)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func ex(p string) Rule { return Rule{Pattern: p} }
func in(p string) Rule { return Rule{Include: true, Pattern: p} }

// TestFilterRules: each rule of the subset, name by name: a pattern without "/" matches the last
// element at any depth, one with "/" the name's last elements, a leading "/" anchors at the root,
// a trailing "/" matches directories only; "*" stops at "/", "**" does not, "?" is one character,
// classes ("[ab]", "[!a]", "[a-c]", a "]" first), backslash escapes; "dir/***" is dir and all below;
// the first matching rule wins, so an include protects from a later exclude.
func TestFilterRules(t *testing.T) {
	for _, c := range []struct {
		rules []Rule
		name  string
		dir   bool
		want  bool // excluded
	}{
		{[]Rule{ex("*.tmp")}, "t/a.tmp", false, true},
		{[]Rule{ex("*.tmp")}, "t/deep/er/a.tmp", false, true},
		{[]Rule{ex("*.tmp")}, "t/a.tmpx", false, false},
		{[]Rule{ex("*.tmp")}, "t/x.tmp/y", false, false}, // the last element only
		{[]Rule{ex("a.txt")}, "a.txt", false, true},
		{[]Rule{ex("a.txt")}, "t/ba.txt", false, false},
		{[]Rule{ex("sub/*.go")}, "t/sub/m.go", false, true},
		{[]Rule{ex("sub/*.go")}, "t/x/sub/m.go", false, true},
		{[]Rule{ex("sub/*.go")}, "t/sub/d/m.go", false, false}, // "*" stops at "/"
		{[]Rule{ex("sub/*.go")}, "t/xsub/m.go", false, false},  // whole elements
		{[]Rule{ex("/t/a")}, "t/a", false, true},
		{[]Rule{ex("/t/a")}, "u/t/a", false, false},
		{[]Rule{ex("/a")}, "t/a", false, false},
		{[]Rule{ex(".git/")}, "t/.git", true, true},
		{[]Rule{ex(".git/")}, "t/.git", false, false}, // a file (or link) called .git
		{[]Rule{ex("src/**")}, "t/src/a/b/c", false, true},
		{[]Rule{ex("src/**")}, "t/src", true, false},
		{[]Rule{ex("src/***")}, "t/src", true, true},
		{[]Rule{ex("src/***")}, "t/src/a/b", false, true},
		{[]Rule{ex("src/***")}, "t/src", false, false}, // the directory itself, as "src/" would: not a file so named (rsync)
		{[]Rule{ex("/t/**.c")}, "t/a/b/x.c", false, true},
		{[]Rule{ex("a/**/b")}, "t/a/b", false, false}, // "/**/" is at least one "/", as in rsync
		{[]Rule{ex("**/t")}, "t", true, true},         // a leading "**/" matches nothing too, unanchored
		{[]Rule{ex("/**/t")}, "t", true, false},
		{[]Rule{ex("/**/a")}, "t/a", false, true},
		{[]Rule{ex("a/**/b")}, "t/a/x/y/b", false, true},
		{[]Rule{ex("?.txt")}, "t/a.txt", false, true},
		{[]Rule{ex("?.txt")}, "t/ab.txt", false, false},
		{[]Rule{ex("a?b")}, "t/a/b", false, false}, // "?" is never "/"
		{[]Rule{ex("[ab].txt")}, "t/b.txt", false, true},
		{[]Rule{ex("[ab].txt")}, "t/c.txt", false, false},
		{[]Rule{ex("[!ab].txt")}, "t/c.txt", false, true},
		{[]Rule{ex("[^ab].txt")}, "t/a.txt", false, false},
		{[]Rule{ex("f[0-9][0-9]")}, "t/f42", false, true},
		{[]Rule{ex("f[0-9][0-9]")}, "t/f4x", false, false},
		{[]Rule{ex("[]x]")}, "t/]", false, true},
		{[]Rule{ex(`\*.txt`)}, "t/*.txt", false, true},
		{[]Rule{ex(`\*.txt`)}, "t/a.txt", false, false},
		{[]Rule{ex(`a\b`)}, `t/a\b`, false, true}, // no wildcard: the backslash is itself
		{[]Rule{ex("sub dir")}, "t/src/sub dir", true, true},
		{[]Rule{ex("é*")}, "t/été", false, true},
		{[]Rule{in("keep.tmp"), ex("*.tmp")}, "t/keep.tmp", false, false},
		{[]Rule{in("keep.tmp"), ex("*.tmp")}, "t/other.tmp", false, true},
		{[]Rule{ex("*.tmp"), in("keep.tmp")}, "t/keep.tmp", false, true}, // the first match wins
		{[]Rule{in("*/"), ex("*")}, "t/d", true, false},
		{[]Rule{in("*/"), ex("*")}, "t/d/f", false, true},
		{[]Rule{ParseRule("+ *.c", false), ex("*")}, "t/x.c", false, false},
		{[]Rule{ParseRule("- *.c", true)}, "t/x.c", false, true},
	} {
		f := excludes(t, c.rules...)
		if got := f.Excluded(c.name, c.dir); got != c.want {
			t.Errorf("rules %+v, %q (dir %v): excluded %v, want %v", c.rules, c.name, c.dir, got, c.want)
		}
		if ref := refExcluded(c.rules, c.name, c.dir); ref != c.want {
			t.Errorf("the reference: rules %+v, %q (dir %v): excluded %v, want %v", c.rules, c.name, c.dir, ref, c.want)
		}
	}
	var nilFilter *Filter
	if nilFilter.Excluded("t", true) || nilFilter.Rules() != nil {
		t.Error("the nil Filter excludes")
	}
}

// TestFilterRefuses: patterns that cannot be used are refused, naming them.
func TestFilterRefuses(t *testing.T) {
	for _, p := range []string{"", "/", "//", "a[b", "[[:alpha:]]", "a\x1b[31m", "\xff", strings.Repeat("a", maxName+1)} {
		if _, err := NewFilter([]Rule{ex(p)}); !errors.Is(err, ErrFilter) {
			t.Errorf("pattern %q: %v", p, err)
		}
	}
	if _, err := NewFilter(make([]Rule, MaxRules+1)); !errors.Is(err, ErrFilter) {
		t.Errorf("%d rules: %v", MaxRules+1, err)
	}
}

// TestFilterBounded: the rules' patterns together are at most MaxRuleBytes (a peer's rules cost
// the matcher their length for every character of every name, and their compiled form memory):
// 10,000 patterns of 4096 bytes, each within the rules for one, are refused together; as many
// bytes as the bound allows are taken.
func TestFilterBounded(t *testing.T) {
	long := make([]Rule, MaxRules)
	for i := range long {
		long[i] = ex(strings.Repeat("*a", maxName/2-1) + "bc")
	}
	if _, err := NewFilter(long); !errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("%d patterns of %d bytes: %v", len(long), len(long[0].Pattern), err)
	}
	fit := make([]Rule, MaxRuleBytes/maxName)
	for i := range fit {
		fit[i] = ex(strings.Repeat("x", maxName))
	}
	f, err := NewFilter(fit)
	if err != nil || !f.Excluded("d/"+fit[0].Pattern, false) {
		t.Errorf("%d patterns of %d bytes: %v", len(fit), maxName, err)
	}
}

// TestFilterLinear: patterns of many stars against long names that almost match them (the
// shapes that make a backtracking matcher take exponential time) are decided at once, rightly.
func TestFilterLinear(t *testing.T) {
	name := strings.Repeat("a/", 1000) + strings.Repeat("a", 3000)
	for _, p := range []string{strings.Repeat("*a", 50) + "b", strings.Repeat("**a", 50) + "b", "/" + strings.Repeat("**/", 60) + "b", strings.Repeat("?*", 80) + "b"} {
		if excludes(t, ex(p)).Excluded(name, false) {
			t.Errorf("%.20q… matched", p)
		}
	}
	if !excludes(t, ex(strings.Repeat("**a", 50))).Excluded(name, false) {
		t.Error("a pattern of 50 **a did not match")
	}
}

// TestReadRules: one pattern a line, comments and blank lines left out, "+ " and "- " honoured,
// "\r\n" ends a line too.
func TestReadRules(t *testing.T) {
	rules, err := ReadRules(strings.NewReader("# comment\n; also\n\n*.tmp\r\n+ keep.tmp\n- .git/\n"), false)
	want := []Rule{ex("*.tmp"), in("keep.tmp"), ex(".git/")}
	if err != nil || len(rules) != len(want) {
		t.Fatalf("%+v, %v", rules, err)
	}
	for i := range want {
		if rules[i] != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, rules[i], want[i])
		}
	}
}

// TestReadFilesFrom: paths are cleaned as rsync does (leading "/" and "./", trailing "/"),
// listed once; "..", the source directory itself, names no copy may carry and an empty list are
// refused.
func TestReadFilesFrom(t *testing.T) {
	got, err := ReadFilesFrom(strings.NewReader("a.txt\n/b/c/\n./d\n# x\n\na.txt\nsub dir/e f\n"))
	want := []string{"a.txt", "b/c", "d", "sub dir/e f"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%q, %v", got, err)
	}
	for _, bad := range []string{"../x\n", "a/../../x\n", ".\n", "a\x1bb\n", "# nothing\n"} {
		if _, err := ReadFilesFrom(strings.NewReader(bad)); !errors.Is(err, ErrFilter) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, bad := range [][]string{{"/etc"}, {"../x"}, {"a/../b"}, {"a", "a"}, {""}} {
		if err := CheckFilesFrom(bad); !errors.Is(err, ErrFilter) {
			t.Errorf("peer's list %q: %v", bad, err)
		}
	}
}

// refExcluded is Filter.Excluded as a regular expression per rule (Go's regexp, which does not
// backtrack): the reference the fuzz target holds the automaton to.
func refExcluded(rules []Rule, name string, dir bool) bool {
	for _, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			return false
		}
		if c.dirOnly && !dir {
			continue
		}
		prefix := `(?:^|/)`
		if c.anchored {
			prefix = `^`
		}
		also := c.also
		if !dir {
			also = nil // "dir/***" names the directory itself only as "dir/" would
		}
		for _, toks := range [][]token{c.toks, also} {
			subject := name
			if !c.anchored && len(toks) > 0 && toks[0].kind == tokStars {
				subject = "/" + name
			}
			if toks != nil && regexp.MustCompile(prefix+refRegexp(toks)+`$`).MatchString(subject) {
				return !r.Include
			}
		}
	}
	return false
}

func refRegexp(toks []token) string {
	var b strings.Builder
	b.WriteString("(?s)")
	for _, t := range toks {
		switch t.kind {
		case tokAny:
			b.WriteString(`[^/]`)
		case tokStar:
			b.WriteString(`[^/]*`)
		case tokStars:
			b.WriteString(`.*`)
		case tokClass:
			var alts []string
			for _, rg := range t.class.ranges {
				if rg[0] <= rg[1] {
					alts = append(alts, regexp.QuoteMeta(string(rg[0]))+"-"+regexp.QuoteMeta(string(rg[1])))
				}
			}
			if t.class.negate {
				b.WriteString(`[^/` + strings.Join(alts, "") + `]`)
			} else if len(alts) == 0 {
				b.WriteString(`[^\x00-\x{10FFFF}]`)
			} else {
				b.WriteString(`(?:[` + strings.Join(alts, "") + `])`)
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(t.r)))
		}
	}
	return b.String()
}

// FuzzFilter: any pattern either is refused or compiles, and matches a name exactly when the
// regular-expression reference does.
func FuzzFilter(f *testing.F) {
	f.Add("*.tmp", "t/a.tmp", false, false)
	f.Add("/t/**/x", "t/a/b/x", true, true)
	f.Add("[!a-c]?*/", "t/d/ef", true, false)
	f.Add(`a\*b/***`, "t/a*b/c", false, false)
	f.Fuzz(func(t *testing.T, pattern, name string, dir, include bool) {
		if len(name) > 512 || len(pattern) > 128 || !utf8.ValidString(name) {
			return
		}
		r := Rule{Include: include, Pattern: pattern}
		fl, err := NewFilter([]Rule{r})
		if err != nil {
			return
		}
		if got, want := fl.Excluded(name, dir), refExcluded([]Rule{r}, name, dir); got != want {
			t.Fatalf("pattern %q, name %q, dir %v: excluded %v, the reference %v", pattern, name, dir, got, want)
		}
	})
}

// names is what Collect listed: each name with its kind, as treetest names them.
func names(s *Sources) map[string]string {
	out := map[string]string{}
	for _, f := range s.Files {
		k := "file"
		switch {
		case f.Dir:
			k = "dir"
		case f.Link != "":
			k = "link"
		}
		out[f.Name] = k
	}
	return out
}

// rsyncNames is what rsync left at dst: each name with its kind.
func rsyncNames(t *testing.T, dst string) map[string]string {
	out := map[string]string{}
	for n, e := range treetest.Snapshot(t, dst) {
		if n != "." {
			out[n] = e.Kind
		}
	}
	return out
}

func sameNames(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var diff []string
	for n, k := range want {
		if got[n] != k {
			diff = append(diff, "missing "+k+" "+n)
		}
	}
	for n, k := range got {
		if want[n] != k {
			diff = append(diff, "extra "+k+" "+n)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%s: Collect differs from rsync: %q", what, diff)
	}
}

// filterCases are filter options as rsync takes them, for the oracle tests.
var filterCases = [][]string{
	{"--exclude", "*.tmp"},
	{"--exclude", ".git/"},
	{"--exclude", ".*"},
	{"--exclude", "/t/src"},
	{"--exclude", "src/*.go"},
	{"--exclude", "*.tmp/"},
	{"--exclude", "sub dir"},
	{"--exclude", "[ab].*"},
	{"--exclude", "?.txt"},
	{"--exclude", "deep/**/*.txt"},
	{"--exclude", "/t/**/b*"},
	{"--exclude", "src/***"},
	{"--exclude", "a.txt/***"}, // a file so named is sent
	{"--exclude", "link*"},
	{"--include", "keep.tmp", "--exclude", "*.tmp"},
	{"--include", "*/", "--include", "*.txt", "--exclude", "*"},
	{"--exclude", "+ keep.tmp", "--exclude", "*.tmp"},
	{"--exclude", "build/", "--include", "build/", "--exclude", "c d.txt"},
}

// ruleArgs is the Rules of rsync's filter options args (--exclude, --include).
func ruleArgs(args []string) []Rule {
	var rules []Rule
	for i := 0; i+1 < len(args); i += 2 {
		rules = append(rules, ParseRule(args[i+1], args[i] == "--include"))
	}
	return rules
}

// TestCollectFilterRsync: Collect with each filter lists what `rsync -rl` with the same options
// leaves at its destination; also with an --exclude-from file of comments and several rules.
func TestCollectFilterRsync(t *testing.T) {
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	from := filepath.Join(root, "rules")
	os.WriteFile(from, []byte("# build products\n+ keep.tmp\n*.tmp\n; and\n\n.git/\n"), 0o644)
	cases := append(filterCases, []string{"--exclude-from", from})
	for _, args := range cases {
		dst := t.TempDir()
		treetest.Rsync(t, append(append([]string{"-rl"}, args...), top, dst+"/")...)
		rules := ruleArgs(args)
		if args[0] == "--exclude-from" {
			var err error
			if rules, err = ReadRules(must(os.Open(from)), false); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Collect([]string{top}, CollectOptions{Recursive: true, Filter: excludes(t, rules...)})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		sameNames(t, strings.Join(args, " "), names(s), rsyncNames(t, dst))
	}
}

// TestCollectFilesFromRsync: Collect with a --files-from list (files, a directory, paths with
// spaces, dot names, a link, paths below one listed before them), with and without -r and with a
// filter, lists what rsync leaves; every file it lists opens as listed.
func TestCollectFilesFromRsync(t *testing.T) {
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	list := filepath.Join(root, "list")
	os.WriteFile(list, []byte("a.txt\nsrc/sub dir/file one.txt\ndeep/a\n./.git/config\nlink.txt\ndeep/a/b/c/d.txt\n/docs\n"), 0o644)
	paths, err := ReadFilesFrom(must(os.Open(list)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		recursive bool
		filter    []string
	}{{false, nil}, {true, nil}, {true, []string{"--exclude", "*.txt"}}} {
		args := []string{"-l", "--files-from", list}
		if c.recursive {
			args[0] = "-rl"
		}
		args = append(args, c.filter...)
		dst := t.TempDir()
		treetest.Rsync(t, append(args, top, dst+"/")...)
		s, err := Collect([]string{top}, CollectOptions{Recursive: c.recursive, FilesFrom: paths, Filter: excludes(t, ruleArgs(c.filter)...)})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		sameNames(t, strings.Join(args, " "), names(s), rsyncNames(t, dst))
		open := s.Open()
		for i, f := range s.Files {
			if f.Regular() && f.Hard == "" {
				_, cl, err := open(i)
				if err != nil {
					t.Fatalf("%q: open %s: %v", args, f.Name, err)
				}
				cl.Close()
			}
		}
	}
}

// TestCollectFilesFromStaysBelow: a --files-from path whose directory is a symbolic link (to
// outside the source, or inside it) is refused, never followed, and so is one that does not exist;
// a list for more than one source, or a source that is a file, is refused.
func TestCollectFilesFromStaysBelow(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "f"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("d", filepath.Join(root, "in"))
	for _, p := range []string{"out/secret", "in/f", "nothing/here"} {
		if _, err := Collect([]string{root}, CollectOptions{FilesFrom: []string{p}}); !errors.Is(err, ErrSource) {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"../x", "/etc/passwd"} {
		if _, err := Collect([]string{root}, CollectOptions{FilesFrom: []string{p}}); !errors.Is(err, ErrFilter) {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := Collect([]string{root, root}, CollectOptions{FilesFrom: []string{"d/f"}}); !errors.Is(err, ErrSource) {
		t.Errorf("two sources: %v", err)
	}
	if _, err := Collect([]string{filepath.Join(root, "d", "f")}, CollectOptions{FilesFrom: []string{"f"}}); !errors.Is(err, ErrSource) {
		t.Errorf("a file as the source: %v", err)
	}
	// The link itself, listed, is sent as a link.
	s, err := Collect([]string{root}, CollectOptions{FilesFrom: []string{"out"}})
	if err != nil || len(s.Files) != 1 || s.Files[0].Link != outside {
		t.Errorf("a listed link: %+v, %v", s, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCollectFilterRsyncRandom: 60 lists of one to three rules, made at random (seeded) from
// pieces of the tree's names and every wildcard, anchored or not, for directories or not, list
// with Collect what rsync -rl leaves with the same rules.
func TestCollectFilterRsyncRandom(t *testing.T) {
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	rng := rand.New(rand.NewPCG(41, 1))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	element := func() string {
		return pick("a.txt", "*.tmp", "*.txt", "src", "s*", "?.t*", "[a-c]*", "[!.]*", ".*", "*", "**", "sub dir", "deep", "b.tmp", "[ab].*", "*i*", "c", "x.tmp", "d*.txt")
	}
	for range 60 {
		var args []string
		for range 1 + rng.IntN(3) {
			p := element()
			for rng.IntN(3) == 0 {
				p = element() + "/" + p
			}
			if rng.IntN(4) == 0 {
				p = "/t/" + p
			}
			if rng.IntN(4) == 0 {
				p += "/"
			}
			args = append(args, pick("--exclude", "--exclude", "--include"), p)
		}
		dst := t.TempDir()
		treetest.Rsync(t, append(append([]string{"-rl"}, args...), top, dst+"/")...)
		s, err := Collect([]string{top}, CollectOptions{Recursive: true, Filter: excludes(t, ruleArgs(args)...)})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		sameNames(t, strings.Join(args, " "), names(s), rsyncNames(t, dst))
	}
}

// TestCollectFilesFromRsyncRandom: 40 --files-from lists of the tree's paths made at random
// (seeded), with and without -r, some with a rule, list with Collect what rsync leaves.
func TestCollectFilesFromRsyncRandom(t *testing.T) {
	root := t.TempDir()
	top := treetest.FilterTree(t, root)
	var all []string
	for n := range treetest.Snapshot(t, top) {
		if n != "." {
			all = append(all, n)
		}
	}
	sort.Strings(all)
	rng := rand.New(rand.NewPCG(41, 2))
	list := filepath.Join(root, "list")
	for range 40 {
		var lines []string
		for range 1 + rng.IntN(5) {
			lines = append(lines, all[rng.IntN(len(all))])
		}
		os.WriteFile(list, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		args := []string{"-l", "--files-from", list}
		recursive := rng.IntN(2) == 0
		if recursive {
			args[0] = "-rl"
		}
		var filter []string
		if rng.IntN(2) == 0 {
			filter = []string{"--exclude", []string{"*.tmp", "*.txt", "sub dir/", "/deep/a", "c"}[rng.IntN(5)]}
		}
		args = append(args, filter...)
		dst := t.TempDir()
		treetest.Rsync(t, append(args, top, dst+"/")...)
		paths, err := ReadFilesFrom(must(os.Open(list)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := Collect([]string{top}, CollectOptions{Recursive: recursive, FilesFrom: paths, Filter: excludes(t, ruleArgs(filter)...)})
		if err != nil {
			t.Fatalf("%q %q: %v", lines, args, err)
		}
		sameNames(t, fmt.Sprintf("%q %s", lines, strings.Join(args[3:], " ")), names(s), rsyncNames(t, dst))
	}
}

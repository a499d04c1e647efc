package copy

// Filters: rsync's --exclude and --include rules, a subset (docs/USAGE.md, "Filters"), applied
// by the sending side's Collect; and --files-from's list of paths.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"
)

// ErrFilter marks a filter rule or a --files-from list that cannot be used.
var ErrFilter = errors.New("filter")

// Bounds of what a pull's request may carry to the remote (checked there before use): the rules
// and --files-from's paths, each at most a name's length. The rules' patterns together are at most
// MaxRuleBytes: every name is matched against each pattern in turn, at a cost of the name's length
// times the pattern's, so 10,000 patterns of 4096 bytes would cost seconds a name and their
// compiled tokens a GiB of memory (a hostile client's pull could ask that of the server).
const (
	MaxRules     = 10000
	MaxRuleBytes = 1 << 20
	MaxFilesFrom = 1 << 20
)

// Rule is one filter rule as the user gave it: an --include (Include) or --exclude pattern. A
// pull carries its rules to the remote, which applies them (docs/PROTOCOL.md, "Hello").
type Rule struct {
	Include bool   `json:"include,omitempty"`
	Pattern string `json:"pattern"`
}

// Filter is a list of rules, compiled: the first rule whose pattern matches a name decides
// whether it is sent; a name no rule matches is sent. The nil Filter excludes nothing.
//
// Matching is an automaton over the pattern's tokens, run once over the name: its time is the
// name's length times the pattern's, whatever the pattern (a remote applies a client's rules, so
// no pattern of "*" and "**" may make it backtrack exponentially). A pattern is only ever matched
// against names, never opened as a path.
type Filter struct {
	rules []rule
	given []Rule
}

// rule is one compiled Rule.
type rule struct {
	include  bool
	dirOnly  bool    // a trailing "/": directories only
	anchored bool    // a leading "/": at the transfer's root only
	toks     []token // the pattern
	also     []token // "dir/***": dir itself as well, if a directory, as "dir/" (nil: none)
}

// token is one element of a pattern.
type token struct {
	kind  tokenKind
	r     rune       // tokLit
	class *charClass // tokClass
}

type tokenKind uint8

const (
	tokLit   tokenKind = iota // one character, itself
	tokAny                    // "?": one character but "/"
	tokStar                   // "*": any characters but "/"
	tokStars                  // "**": any characters
	tokClass                  // "[...]": one character of the class (never "/")
)

// charClass is a "[...]" of a pattern: ranges of characters, or those not in them.
type charClass struct {
	negate bool
	ranges [][2]rune
}

func (c *charClass) matches(r rune) bool {
	if r == '/' {
		return false
	}
	for _, rg := range c.ranges {
		if rg[0] <= r && r <= rg[1] {
			return !c.negate
		}
	}
	return c.negate
}

// NewFilter compiles rules (in the order given: the first match wins). A pattern that is empty,
// longer than a name, not UTF-8, holds a control character, or has an unterminated "[" is
// refused (ErrFilter), naming it; so are more than MaxRules rules, and patterns of more than
// MaxRuleBytes together.
func NewFilter(rules []Rule) (*Filter, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%w: %d rules, more than the %d one copy takes", ErrFilter, len(rules), MaxRules)
	}
	size := 0
	for _, r := range rules {
		size += len(r.Pattern)
	}
	if size > MaxRuleBytes {
		return nil, fmt.Errorf("%w: the rules' patterns take %d bytes together, more than the %d one copy takes", ErrFilter, size, MaxRuleBytes)
	}
	f := &Filter{given: rules}
	for _, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			return nil, err
		}
		f.rules = append(f.rules, c)
	}
	return f, nil
}

// Rules are the rules f was compiled from (nil for the nil Filter).
func (f *Filter) Rules() []Rule {
	if f == nil {
		return nil
	}
	return f.given
}

// Excluded reports whether the entry name (a name of the file list: slash-separated, relative
// to the transfer's root, the source argument's base name first) is left out: dir says whether it
// is a directory (a symbolic link is not, unless -L follows it to one).
func (f *Filter) Excluded(name string, dir bool) bool {
	if f == nil {
		return false
	}
	for i := range f.rules {
		r := &f.rules[i]
		if r.dirOnly && !dir {
			continue
		}
		if match(r.toks, name, r.anchored) || r.also != nil && dir && match(r.also, name, r.anchored) {
			return !r.include
		}
	}
	return false
}

// compileRule parses a rule's pattern: a leading "/" anchors it, a trailing "/" makes it match
// directories only, a trailing "/***" matches the directory (a directory only, as rsync's "dir/"
// would) and everything below it.
func compileRule(r Rule) (rule, error) {
	p := r.Pattern
	bad := func(why string) (rule, error) {
		return rule{}, fmt.Errorf("%w: the pattern %q %s", ErrFilter, p, why)
	}
	switch {
	case len(p) > maxName:
		return rule{}, fmt.Errorf("%w: a pattern %.40q… is longer than %d bytes", ErrFilter, p, maxName)
	case !utf8.ValidString(p):
		return bad("is not UTF-8")
	}
	for _, c := range p {
		if c < 0x20 || c >= 0x7f && c <= 0x9f {
			return bad("holds a control character")
		}
	}
	c := rule{include: r.Include}
	body := p
	if strings.HasSuffix(body, "/") {
		c.dirOnly = true
		body = strings.TrimRight(body, "/")
	}
	if strings.HasPrefix(body, "/") {
		c.anchored = true
		body = strings.TrimLeft(body, "/")
	}
	if body == "" {
		return bad("matches no name")
	}
	if dir, ok := strings.CutSuffix(body, "/***"); ok && dir != "" {
		also, err := tokens(dir)
		if err != nil {
			return bad(err.Error())
		}
		c.also = also
		body = dir + "/**"
	}
	toks, err := tokens(body)
	if err != nil {
		return bad(err.Error())
	}
	c.toks = toks
	return c, nil
}

// tokens splits a pattern into its tokens. As in rsync, a backslash escapes the character after
// it only in a pattern that holds a wildcard ("*", "?" or "["); elsewhere it is itself.
func tokens(p string) ([]token, error) {
	wild := strings.ContainsAny(p, "*?[")
	var out []token
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case !wild:
			out = append(out, token{kind: tokLit, r: r})
		case r == '\\' && i+1 < len(rs):
			i++
			out = append(out, token{kind: tokLit, r: rs[i]})
		case r == '?':
			out = append(out, token{kind: tokAny})
		case r == '*':
			k := tokStar
			for i+1 < len(rs) && rs[i+1] == '*' {
				i, k = i+1, tokStars
			}
			if n := len(out); n > 0 && (out[n-1].kind == tokStar || out[n-1].kind == tokStars) {
				out[n-1].kind = max(out[n-1].kind, k) // "*" after "**" adds nothing
				continue
			}
			out = append(out, token{kind: k})
		case r == '[':
			cl, n, err := parseClass(rs[i+1:])
			if err != nil {
				return nil, err
			}
			i += n
			out = append(out, token{kind: tokClass, class: cl})
		default:
			out = append(out, token{kind: tokLit, r: r})
		}
	}
	return out, nil
}

// parseClass parses a character class after its "[": "!" or "^" first negates it, a "]" first
// is itself, "a-z" is a range, a backslash escapes. It returns the class and how many runes it
// took, its closing "]" included.
func parseClass(rs []rune) (*charClass, int, error) {
	c := &charClass{}
	i := 0
	if i < len(rs) && (rs[i] == '!' || rs[i] == '^') {
		c.negate = true
		i++
	}
	for first := true; i < len(rs); first = false {
		r := rs[i]
		switch {
		case r == ']' && !first:
			return c, i + 1, nil
		case r == '[' && i+1 < len(rs) && rs[i+1] == ':':
			return nil, 0, errors.New("has a named class ([:alpha:] and the like), which Farwing's filters do not support")
		case r == '\\' && i+1 < len(rs):
			i++
			r = rs[i]
		}
		i++
		hi := r
		if i+1 < len(rs) && rs[i] == '-' && rs[i+1] != ']' {
			hi = rs[i+1]
			if hi == '\\' && i+2 < len(rs) {
				hi = rs[i+2]
				i++
			}
			i += 2
		}
		c.ranges = append(c.ranges, [2]rune{r, hi})
	}
	return nil, 0, errors.New("has a \"[\" without its \"]\"")
}

// match reports whether toks match name: the whole name when anchored, otherwise any part of it
// that starts at its beginning or after a "/" and runs to its end (rsync's rule: a pattern
// without a "/" then matches the last element, one with a "/" the name's last elements). As in
// rsync, an unanchored pattern that starts with "**" is matched against the name with a "/" in
// front, so that "**/x" matches a top-level "x" too.
//
// It runs the pattern's automaton: state i is "toks[:i] matched so far", a set of states is
// advanced over each character, and a star token keeps its state. Each step costs at most the
// number of tokens, so a match costs len(name) × len(toks), never more.
func match(toks []token, name string, anchored bool) bool {
	n := len(toks)
	buf := make([]bool, 2*(n+1))
	cur, next := buf[:n+1], buf[n+1:]
	// add puts state i in set, with the states after it that stars let it reach without a
	// character; a state already in set has its followers there too.
	add := func(set []bool, i int) {
		for ; i <= n && !set[i]; i++ {
			set[i] = true
			if i == n || toks[i].kind != tokStar && toks[i].kind != tokStars {
				return
			}
		}
	}
	add(cur, 0)
	step := func(r rune) {
		clear(next)
		for i := range n {
			if !cur[i] {
				continue
			}
			switch t := toks[i]; t.kind {
			case tokStar:
				if r != '/' {
					add(next, i)
				}
			case tokStars:
				add(next, i)
			case tokAny:
				if r != '/' {
					add(next, i+1)
				}
			case tokClass:
				if t.class.matches(r) {
					add(next, i+1)
				}
			default:
				if t.r == r {
					add(next, i+1)
				}
			}
		}
		if r == '/' && !anchored {
			add(next, 0)
		}
		cur, next = next, cur
	}
	if !anchored && n > 0 && toks[0].kind == tokStars {
		step('/')
	}
	for _, r := range name {
		step(r)
	}
	return cur[n]
}

// ReadRules reads a --exclude-from or --include-from file: one pattern a line; blank lines and
// lines starting with "#" or ";" are left out. A line starting with "- " is an exclude rule and
// one starting with "+ " an include rule, whichever option read it (as in rsync).
func ReadRules(r io.Reader, include bool) ([]Rule, error) {
	var out []Rule
	err := readLines(r, func(line string) error {
		if line == "" || line[0] == '#' || line[0] == ';' {
			return nil
		}
		out = append(out, ParseRule(line, include))
		if len(out) > MaxRules {
			return fmt.Errorf("%w: more than %d rules", ErrFilter, MaxRules)
		}
		return nil
	})
	return out, err
}

// ParseRule is the rule of one --exclude (include false) or --include pattern: "- " or "+ " in
// front of it says which, whichever option gave it (as in rsync).
func ParseRule(p string, include bool) Rule {
	switch {
	case strings.HasPrefix(p, "- "):
		return Rule{Pattern: p[2:]}
	case strings.HasPrefix(p, "+ "):
		return Rule{Include: true, Pattern: p[2:]}
	}
	return Rule{Include: include, Pattern: p}
}

// ReadFilesFrom reads a --files-from list: one path a line, relative to the source directory;
// blank lines and lines starting with "#" or ";" are left out. As rsync does, leading "/" and
// "./" and trailing "/" are dropped; a path with a ".." element, or that names the source
// directory itself, is refused (ErrFilter), and so is one that no transfer may carry (ValidName).
// Each path is listed once, in the order given; a list of none is refused.
func ReadFilesFrom(r io.Reader) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	err := readLines(r, func(line string) error {
		if line == "" || line[0] == '#' || line[0] == ';' {
			return nil
		}
		p, err := cleanListed(line)
		if err != nil {
			return err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
		if len(out) > MaxFilesFrom {
			return fmt.Errorf("%w: more than %d paths in the --files-from list; split it", ErrFilter, MaxFilesFrom)
		}
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%w: the --files-from list names no path; nothing to copy", ErrFilter)
	}
	return out, err
}

// cleanListed is a --files-from line as the path it names below the source directory.
func cleanListed(line string) (string, error) {
	p := strings.TrimLeft(line, "/")
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return "", fmt.Errorf("%w: %q in the --files-from list has a \"..\" element; name paths inside the source directory", ErrFilter, line)
		}
	}
	p = path.Clean(p)
	if p == "." {
		return "", fmt.Errorf("%w: %q in the --files-from list names the source directory itself; list what is in it", ErrFilter, line)
	}
	if err := ValidName(p); err != nil {
		return "", fmt.Errorf("%w: in the --files-from list: %v", ErrFilter, err)
	}
	return p, nil
}

// CheckFilesFrom checks a --files-from list a peer sent (a pull's request): at most MaxFilesFrom
// paths, each a valid name (relative, no ".." element), none twice.
func CheckFilesFrom(paths []string) error {
	if len(paths) > MaxFilesFrom {
		return fmt.Errorf("%w: %d --files-from paths, more than %d", ErrFilter, len(paths), MaxFilesFrom)
	}
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		if err := ValidName(p); err != nil {
			return fmt.Errorf("%w: in the --files-from list: %v", ErrFilter, err)
		}
		if seen[p] {
			return fmt.Errorf("%w: %q is twice in the --files-from list", ErrFilter, p)
		}
		seen[p] = true
	}
	return nil
}

// readLines calls line for each line of r, without its end ("\n", or "\r\n").
func readLines(r io.Reader, line func(string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxName+2)
	for sc.Scan() {
		if err := line(strings.TrimSuffix(sc.Text(), "\r")); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrFilter, err)
	}
	return nil
}

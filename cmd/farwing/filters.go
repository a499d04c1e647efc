package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	fcopy "github.com/farwing/farwing/copy"
)

// filterArg is one filter option as given: a pattern of --exclude or --include, or the file of
// --exclude-from or --include-from. They apply in the order given, across the four options.
type filterArg struct {
	include, from bool
	value         string
}

// filterFlag is one of the four filter options: each appends to the one list they share.
type filterFlag struct {
	list          *[]filterArg
	include, from bool
}

func (f *filterFlag) Set(v string) error {
	*f.list = append(*f.list, filterArg{include: f.include, from: f.from, value: v})
	return nil
}

func (f *filterFlag) String() string { return "" }

func (f *filterFlag) Type() string {
	if f.from {
		return "FILE"
	}
	return "PATTERN"
}

// registerFilters adds the filter options and --files-from to fs.
func (c *copyOptions) registerFilters(fs *pflag.FlagSet) {
	fs.Var(&filterFlag{list: &c.filters}, "exclude", "leave out what matches PATTERN (rsync's syntax: *, **, ?, [...], a leading / anchors at the copy's root, a trailing / matches directories; repeatable, the first matching rule wins)")
	fs.Var(&filterFlag{list: &c.filters, include: true}, "include", "send what matches PATTERN even if a later --exclude matches it")
	fs.Var(&filterFlag{list: &c.filters, from: true}, "exclude-from", "read --exclude patterns from FILE, one a line (- for standard input)")
	fs.Var(&filterFlag{list: &c.filters, include: true, from: true}, "include-from", "read --include patterns from FILE, one a line (- for standard input)")
	fs.StringVar(&c.filesFrom, "files-from", "", "send only the paths FILE lists, one a line, relative to the one source directory (- for standard input); they keep their directories at the destination")
}

// filterOptions reads the filter options and --files-from into the copy's options; a file named
// "-" is stdin, which one option at most may read (and not when - is also the source).
func (c *copyOptions) filterOptions(o *fcopy.CollectOptions, stdin io.Reader, stdinSource bool) error {
	readers := 0
	if stdinSource {
		readers++
	}
	open := func(name string) (io.Reader, func(), error) {
		if name == "-" {
			if readers++; readers > 1 {
				return nil, nil, fmt.Errorf("standard input (-) can feed only one of the source, --files-from, --exclude-from and --include-from")
			}
			return stdin, func() {}, nil
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	var rules []fcopy.Rule
	for _, a := range c.filters {
		if !a.from {
			rules = append(rules, fcopy.ParseRule(a.value, a.include))
			continue
		}
		r, done, err := open(a.value)
		if err != nil {
			return err
		}
		more, err := fcopy.ReadRules(r, a.include)
		done()
		if err != nil {
			return fmt.Errorf("%s: %w", a.value, err)
		}
		rules = append(rules, more...)
	}
	var err error
	if o.Filter, err = fcopy.NewFilter(rules); err != nil {
		return err
	}
	if c.filesFrom == "" {
		return nil
	}
	r, done, err := open(c.filesFrom)
	if err != nil {
		return err
	}
	defer done()
	if o.FilesFrom, err = fcopy.ReadFilesFrom(r); err != nil {
		return fmt.Errorf("%s: %w", c.filesFrom, err)
	}
	return nil
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	fcopy "github.com/farwing/farwing/copy"
)

// TestFilterFlagsOrder: --exclude, --include and the rules of --exclude-from and --include-from
// files apply in the order given on the command line, across the four options (the first match
// wins); --files-from reads its list from standard input with "-".
func TestFilterFlagsOrder(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "ex")
	os.WriteFile(from, []byte("# comment\n*.log\n+ keep.tmp\n"), 0o644)
	fs := pflag.NewFlagSet("copy", pflag.ContinueOnError)
	var c copyOptions
	c.register(fs)
	err := fs.Parse([]string{"--include", "a.log", "--exclude-from", from, "--exclude", "*.tmp", "--include-from", from, "--files-from", "-", "src", "h:dst"})
	if err != nil {
		t.Fatal(err)
	}
	var o fcopy.CollectOptions
	if err := c.filterOptions(&o, strings.NewReader("x\n./y/z\n"), false); err != nil {
		t.Fatal(err)
	}
	want := []fcopy.Rule{{Include: true, Pattern: "a.log"}, {Pattern: "*.log"}, {Include: true, Pattern: "keep.tmp"}, {Pattern: "*.tmp"},
		{Include: true, Pattern: "*.log"}, {Include: true, Pattern: "keep.tmp"}}
	got := o.Filter.Rules()
	if len(got) != len(want) {
		t.Fatalf("rules %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if strings.Join(o.FilesFrom, "|") != "x|y/z" {
		t.Errorf("--files-from -: %q", o.FilesFrom)
	}
	for name, excluded := range map[string]bool{"t/a.log": false, "t/b.log": true, "t/keep.tmp": false, "t/c.tmp": true, "t/c.txt": false} {
		if o.Filter.Excluded(name, false) != excluded {
			t.Errorf("%s: excluded %v", name, !excluded)
		}
	}
}

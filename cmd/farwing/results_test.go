package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/farwing/farwing/bench"
)

// reportBlock is a report pasted into docs/RESULTS.md: the ledger (a path from the repository's
// root) and the text between the markers, each a line of its own.
var reportBlock = regexp.MustCompile(`(?ms)^<!-- report: (\S+) -->\n(.*?)^<!-- end report -->$`)

// reportOpen is the start of a report block: a line of its own.
var reportOpen = regexp.MustCompile(`(?m)^<!-- report: `)

// TestResultsMatchLedgers: every report block in docs/RESULTS.md is, byte for byte, what
// `farwing bench --report LEDGER` prints for its ledger, every ledger is complete, and every
// ledger in docs/results has its block: the published tables cannot drift from their evidence.
func TestResultsMatchLedgers(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := reportBlock.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) == 0 {
		t.Fatal("docs/RESULTS.md has no report blocks")
	}
	if n := len(reportOpen.FindAllString(string(doc), -1)); n != len(blocks) {
		t.Fatalf("docs/RESULTS.md opens %d report blocks, %d of them closed by <!-- end report -->", n, len(blocks))
	}
	reported := map[string]bool{}
	for _, b := range blocks {
		name, text := b[1], b[2]
		reported[name] = true
		path := filepath.Join(root, filepath.FromSlash(name))
		code, out, errs := runCaptured("bench", "--report", path)
		if code != 0 {
			t.Errorf("%s: farwing bench --report: exit %d: %s", name, code, errs)
			continue
		}
		if text != out {
			t.Errorf("docs/RESULTS.md's block of %s is not what farwing bench --report %s prints; paste it again:\n%s", name, name, out)
		}
		if l, err := bench.ReadLedger(path); err != nil || !l.Complete {
			t.Errorf("%s: a published ledger must be complete (%v)", name, err)
		}
	}
	ledgers, _ := filepath.Glob(filepath.Join(root, "docs", "results", "*.json"))
	for _, p := range ledgers {
		if name := "docs/results/" + filepath.Base(p); !reported[name] {
			t.Errorf("%s has no <!-- report: %s --> block in docs/RESULTS.md", name, name)
		}
	}
}

//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/treetest"
)

// shardScript is docs/USAGE.md's recipe for moving a tree in shards ("Many machines, one tree"):
// the tree's files, relative to its top, dealt round-robin into N lists, each copied by its own
// farwing with --files-from, N at a time (xargs -P), each copy's --json events kept beside its list.
// Arguments: farwing, its -F config, the tree, the destination, a work directory, N.
const shardScript = `set -eu
fw=$1 cfg=$2 src=$3 dst=$4 w=$5 n=$6
(cd "$src" && find . -type f | sed 's|^\./||') | awk -v n="$n" -v w="$w" '{ print > (w "/shard-" (NR % n)) }'
ls "$w"/shard-? | xargs -P "$n" -I{} sh -c '"$1" copy -F "$2" -r --json --files-from "$3" "$4" "$5" >"$3.json" 2>"$3.err"' sh "$fw" "$cfg" {} "$src" "$dst"
`

// TestLabShards: two shards of one tree, copied at the same time by two farwing processes to the
// same directory of one host (the documented recipe), leave the union of both: the whole tree,
// every file intact, and each copy's summary counts the files of its own list.
func TestLabShards(t *testing.T) {
	e := startLab(t, 200e6, 10*time.Millisecond, 0)
	root := t.TempDir()
	src := filepath.Join(root, "src")
	for d := range 3 {
		dir := filepath.Join(src, fmt.Sprintf("dir %d", d), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			treetest.Random(t, filepath.Join(dir, fmt.Sprintf("f%02d", i)), 1+(d*20+i)*977%20000, 0o644)
		}
	}
	treetest.Random(t, filepath.Join(src, "big.bin"), 3<<20+17, 0o644)
	dst := filepath.Join(e.srv.Home, "shards")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(dst, e.srv.UID, e.srv.GID)
	work := t.TempDir()
	cmd := e.l.Command(e.l.NSA, "sh", "-c", shardScript, "sh", e.bin, e.srv.ConfigFile, src, e.srv.Host+":shards", work, "2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the shards' copies: %v: %s", err, out)
	}
	total := 0
	for _, shard := range []string{"shard-0", "shard-1"} {
		list, err := os.ReadFile(filepath.Join(work, shard))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Count(string(list), "\n")
		out, _ := os.ReadFile(filepath.Join(work, shard+".json"))
		stderr, _ := os.ReadFile(filepath.Join(work, shard+".err"))
		_, res := jsonEvents(t, string(out))
		if res["exit_code"] != float64(0) || res["files"] == nil {
			t.Fatalf("%s: summary %v: %s", shard, res, stderr)
		}
		if got := len(res["files"].([]any)); got != want || want < 25 {
			t.Errorf("%s: the summary lists %d files, its list %d", shard, got, want)
		}
		total += want
	}
	if total != 61 {
		t.Errorf("the shards list %d files, the tree has 61", total)
	}
	treetest.Compare(t, "the union of two shards", treetest.Snapshot(t, src), treetest.Snapshot(t, dst), treetest.Options{})
}

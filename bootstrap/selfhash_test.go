package bootstrap

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// TestSelfHashRecord: the record answers for the file it was made from, and only for it: a
// rewrite of the same size with the old modification time put back (the change time moves),
// a replacement by rename, and a damaged record all give the file's real hash.
func TestSelfHashRecord(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	exe := filepath.Join(dir, "farwing")
	a := []byte(strings.Repeat("build A ", 4096))
	if err := os.WriteFile(exe, a, 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(what string, want []byte) {
		t.Helper()
		h, err := selfHash(exe)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if h != sum(want) {
			t.Fatalf("%s: selfHash = %s, want %s", what, h, sum(want))
		}
	}
	check("first", a)
	rec := selfRecord(localPeerDir("self"), exe)
	b, err := os.ReadFile(rec)
	if err != nil || !strings.Contains(string(b), sum(a)) {
		t.Fatalf("no record of the hash at %s: %q, %v", rec, b, err)
	}
	// The record is what answers now: one that names another hash for this key is believed.
	k, _, _ := strings.Cut(string(b), " ")
	forged := strings.Repeat("ab", 32)
	if err := os.WriteFile(rec, []byte(k+" "+forged+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, _ := selfHash(exe); h != forged {
		t.Fatalf("the record for an unchanged file was not used: %s", h)
	}

	// Same size, old modification time put back: the change time differs.
	fi, _ := os.Stat(exe)
	time.Sleep(10 * time.Millisecond)
	a2 := []byte(strings.Repeat("build B ", 4096))
	if err := os.WriteFile(exe, a2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(exe, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	check("rewritten in place, mtime restored", a2)
	check("again, from its new record", a2)

	// Replaced by rename (a new inode).
	c := []byte(strings.Repeat("build C ", 5000))
	tmp := exe + ".new"
	if err := os.WriteFile(tmp, c, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, exe); err != nil {
		t.Fatal(err)
	}
	check("replaced", c)

	// A damaged record is not believed.
	for _, bad := range []string{"", "garbage", k + " " + strings.Repeat("zz", 32), k + " " + strings.ToUpper(sum(c))} {
		if err := os.WriteFile(rec, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		check("record "+strings.TrimSpace(bad[:min(len(bad), 12)]), c)
	}

	// No cache to write: the hash all the same.
	t.Setenv("XDG_CACHE_HOME", filepath.Join(exe, "not-a-dir"))
	t.Setenv("HOME", filepath.Join(exe, "not-a-dir"))
	check("no cache", c)
}

// TestSelfHashChangedWhileHashed: a file that changed while it was hashed is not recorded, and the
// next look hashes it again.
func TestSelfHashChangedWhileHashed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	exe := filepath.Join(dir, "farwing")
	one, two := []byte("build one"), []byte("build two, longer")
	if err := os.WriteFile(exe, one, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := selfHashIn(localPeerDir("self"), exe, func(p string) (string, error) {
		h, err := hashFile(p)
		time.Sleep(10 * time.Millisecond)
		if werr := os.WriteFile(p, two, 0o755); werr != nil {
			t.Fatal(werr)
		}
		return h, err
	})
	if err != nil || h != sum(one) {
		t.Fatalf("selfHashIn = %s, %v; want %s", h, err, sum(one))
	}
	if _, err := os.Stat(selfRecord(localPeerDir("self"), exe)); err == nil {
		t.Fatal("a file that changed while it was hashed was recorded")
	}
	if h, err := selfHash(exe); err != nil || h != sum(two) {
		t.Fatalf("selfHash after the change = %s, %v; want %s", h, err, sum(two))
	}
}

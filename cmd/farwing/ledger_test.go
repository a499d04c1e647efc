package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/bench"
)

// TestWriteLedgerPlanted: the ledger is written through a temporary file of a name no one can
// guess, made new: what someone put at the old predictable name (LEDGER.tmp: a FIFO, which held
// the write for ever, or a link to another file, which it overwrote) is left alone, and the
// ledger is complete.
func TestWriteLedgerPlanted(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "ledger.json")
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep me"), 0o644)
	for what, plant := range map[string]func(string) error{
		"a FIFO":          func(p string) error { return unix.Mkfifo(p, 0o666) },
		"a symbolic link": func(p string) error { return os.Symlink(victim, p) },
	} {
		t.Run(what, func(t *testing.T) { writeLedgerPlanted(t, name, victim, plant) })
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "ledger.json.*.tmp")); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

// writeLedgerPlanted writes the ledger name with plant's work at its old temporary name.
func writeLedgerPlanted(t *testing.T, name, victim string, plant func(string) error) {
	os.Remove(name + ".tmp")
	if err := plant(name + ".tmp"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- writeLedger(name, &bench.Ledger{}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("writing the ledger is held by a FIFO at LEDGER.tmp")
	}
	b, err := os.ReadFile(name)
	var l bench.Ledger
	if err != nil || json.Unmarshal(b, &l) != nil {
		t.Fatalf("ledger %q: %v", b, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatalf("the file linked at LEDGER.tmp now holds %q", b)
	}
}

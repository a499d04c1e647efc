package tuning

import (
	"net/netip"
	"testing"

	fcopy "github.com/farwing/farwing/copy"
)

// env is an environment of the given variables.
func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestFromEnvEmpty: an empty environment is the zero Settings: every default on.
func TestFromEnvEmpty(t *testing.T) {
	if s := FromEnv(env(nil)); s != (Settings{}) {
		t.Fatalf("empty environment: %+v", s)
	}
}

// TestFromEnv: each switch reads as it did where it was read before (FARWING_DEBUG any value,
// the "=0" switches only at "0", GOMAXPROCS and GOGC when set, the programs' paths as given).
func TestFromEnv(t *testing.T) {
	s := FromEnv(env(map[string]string{"FARWING_DEBUG": "yes", ProfileEnv: "/tmp/p", "FARWING_DIRECT": "0",
		"FARWING_HUGEPAGES": "0", "FARWING_VAES": "0", "FARWING_JUMBO": "0", "FARWING_PATHMEM": "0", "FARWING_GSO": "off", "FARWING_GRO": "false",
		"GOMAXPROCS": "3", "GOGC": "50", "FARWING_SSH": "/x/ssh", "FARWING_SCP": "/x/scp"}))
	want := Settings{Debug: true, Profile: "/tmp/p", NoDirectIO: true, NoHugePages: true, NoVAES: true, NoJumbo: true,
		NoPathMem: true, NoGSO: true, NoGRO: true, UserGOMAXPROCS: true, UserGOGC: true, SSH: "/x/ssh", SCP: "/x/scp"}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	for _, k := range []string{"FARWING_DIRECT", "FARWING_HUGEPAGES", "FARWING_VAES", "FARWING_JUMBO", "FARWING_PATHMEM"} {
		for _, v := range []string{"1", "false", "off", "junk"} {
			if s := FromEnv(env(map[string]string{k: v})); s != (Settings{}) {
				t.Errorf("%s=%s: %+v, want every default (only 0 turns it off)", k, v, s)
			}
		}
	}
}

// TestOff: FARWING_GSO and FARWING_GRO are off at a false value only.
func TestOff(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": true, "false": true, "off": true, "no": true, "1": false, "yes": false, "junk": false} {
		if got := off(v); got != want {
			t.Errorf("off(%q) = %v", v, got)
		}
		s := FromEnv(env(map[string]string{"FARWING_GSO": v, "FARWING_GRO": v}))
		if o := s.Lane(7); o.DisableGSO != want || o.DisableGRO != want || o.Buffer != 7 {
			t.Errorf("FARWING_GSO=FARWING_GRO=%q: lane options %+v", v, o)
		}
	}
}

// TestWriter: NoDirectIO reaches the writer's options, and the rest of them are kept.
func TestWriter(t *testing.T) {
	o := Settings{NoDirectIO: true}.Writer(fcopy.WriterOptions{Sink: true, Records: true})
	if !o.NoDirectIO || !o.Sink || !o.Records {
		t.Fatalf("writer options %+v", o)
	}
	if o := (Settings{}).Writer(fcopy.WriterOptions{}); o.NoDirectIO {
		t.Fatal("direct I/O off by default")
	}
}

// TestWindows: the window rules at their edges.
func TestWindows(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 16}, {16, 16}, {500, 500}, {1024, 1024}, {5000, 1024}, {-3, 16}} {
		if got := ClampWindow(c.in); got != c.want {
			t.Errorf("ClampWindow(%d) = %d, want %d", c.in, got, c.want)
		}
	}
	// No ceiling, unknown round trip: 2.5 Gbit/s × 300 ms × 4 = 357 blocks + 16.
	if got := WindowBlocks(0, 0); got != 373 {
		t.Errorf("WindowBlocks(0, 0) = %d, want 373", got)
	}
	if got := WindowBlocks(1e6, 0); got != 64 {
		t.Errorf("WindowBlocks(1 Mbit/s) = %d, want the floor 64", got)
	}
	if got := WindowBlocks(100e9, 0); got != 1024 {
		t.Errorf("WindowBlocks(100 Gbit/s) = %d, want the ceiling 1024", got)
	}
}

// TestJumboOff: NoJumbo or a path that is not loopback keep standard chunks.
func TestJumboOff(t *testing.T) {
	lo := mustAddr("127.0.0.1")
	if (Settings{NoJumbo: true}).Jumbo(lo) {
		t.Error("NoJumbo: large chunks proposed")
	}
	if (Settings{}).Jumbo(mustAddr("198.18.0.2")) {
		t.Error("not loopback: large chunks proposed")
	}
	if loopbackMTU() >= 9000 && !(Settings{}).Jumbo(lo) {
		t.Errorf("loopback MTU %d: no large chunks", loopbackMTU())
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

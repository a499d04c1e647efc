package xfer

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
)

// TestReceiveWindow: an automatic window shrinks to tuning.LoopbackWindow on loopback only (the
// path's peer: Path.Loopback); a window set with --window is kept everywhere.
func TestReceiveWindow(t *testing.T) {
	auto, loopbackWindow := tuning.WindowBlocks(0, 0), tuning.LoopbackWindow
	if auto <= loopbackWindow {
		t.Fatalf("automatic window %d is not above the loopback one (%d): nothing to test", auto, loopbackWindow)
	}
	for _, c := range []struct {
		peer   string
		window int
		auto   bool
		want   int
	}{
		{"127.0.0.1:9", auto, true, loopbackWindow},
		{"[::1]:9", auto, true, loopbackWindow},
		{"127.0.0.1:9", 500, false, 500},
		{"127.0.0.1:9", 32, true, 32},
		{"198.18.0.2:9", auto, true, auto},
		{"198.18.0.2:9", 500, false, 500},
	} {
		var p session.Path
		p.SetPeer(0, netip.MustParseAddrPort(c.peer))
		if got := tuning.ReceiveWindow(p.Loopback(), c.window, c.auto); got != c.want {
			t.Errorf("peer %s, window %d (auto %v): %d, want %d", c.peer, c.window, c.auto, got, c.want)
		}
	}
}

// TestShareCPUs: a sender on a loopback path takes half of the CPUs, elsewhere all of them, and
// a GOMAXPROCS the user set (in the environment tuning.FromEnv reads) is left alone.
func TestShareCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	half := max(runtime.NumCPU()/2, 1)
	for _, c := range []struct {
		peer, env string
		want      int
	}{
		{"127.0.0.1:9", "", half},
		{"198.18.0.2:9", "", runtime.NumCPU()},
		{"127.0.0.1:9", "3", runtime.NumCPU()},
	} {
		env := map[string]string{"GOMAXPROCS": c.env}
		tun := tuning.FromEnv(func(k string) string { return env[k] })
		runtime.GOMAXPROCS(runtime.NumCPU())
		var p session.Path
		p.SetPeer(0, netip.MustParseAddrPort(c.peer))
		tun.ShareCPUs(p.Loopback())
		if got := runtime.GOMAXPROCS(0); got != c.want {
			t.Errorf("peer %s, GOMAXPROCS=%q: %d procs, want %d", c.peer, c.env, got, c.want)
		}
	}
}

package session

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/lane"
)

// TestParsePortRange: --port takes LO-HI within 1–65535, LO ≤ HI, with room for the four lanes;
// every refusal names what is wrong.
func TestParsePortRange(t *testing.T) {
	good := map[string]PortRange{
		"":            {},
		"40000-40003": {40000, 40003},
		"1-4":         {1, 4},
		"65532-65535": {65532, 65535},
		"2000-3000":   {2000, 3000},
	}
	for s, want := range good {
		got, err := ParsePortRange(s)
		if err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	bad := map[string]string{
		"40000":       "LO-HI",
		"40000-":      "1 to 65535",
		"-40003":      "1 to 65535",
		"0-10":        "1 to 65535",
		"65533-65536": "1 to 65535",
		"1e3-2e3":     "1 to 65535",
		"+1-+9":       "1 to 65535",
		" 1-9":        "1 to 65535",
		"40003-40000": "above its last",
		"40000-40002": "3 port(s), but the peer opens 4 UDP lanes",
		"7-7":         "1 port(s)",
		"1-2-3":       "1 to 65535",
	}
	for s, msg := range bad {
		_, err := ParsePortRange(s)
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.HasPrefix(err.Error(), "--port "+s+":") {
			t.Errorf("ParsePortRange(%q) = %v; want an error naming it and %q", s, err, msg)
		}
	}
	if r := (PortRange{40000, 40003}); !r.Contains(40000) || !r.Contains(40003) || r.Contains(39999) || r.Contains(40004) || r.String() != "40000-40003" {
		t.Errorf("PortRange %v: Contains or String wrong", r)
	}
	if !(PortRange{}).Contains(12345) {
		t.Error("the zero range must contain every port")
	}
}

// freeRange finds n consecutive ports below the ephemeral range that are free on loopback now.
func freeRange(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		lo := 20000 + rand.IntN(10000)
		ok := true
		for p := lo; p < lo+n && ok; p++ {
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p))))
			if err != nil {
				ok = false
				continue
			}
			c.Close()
		}
		if ok {
			return lo
		}
	}
	t.Fatal("no free port range found")
	return 0
}

// TestListenUDPRange: the lanes take the lowest free ports of the range, skipping one in use; a
// range with fewer than four free ports is refused with ErrPortRange, nothing left bound.
func TestListenUDPRange(t *testing.T) {
	lo := freeRange(t, 6)
	busy, err := net.ListenUDP("udp", &net.UDPAddr{Port: lo + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	conns, err := ListenUDPRange("0.0.0.0:0", PortRange{lo, lo + 5}, lane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{lo, lo + 2, lo + 3, lo + 4}
	for i, c := range conns {
		if got := int(c.LocalAddr().Port()); got != want[i] {
			t.Errorf("lane %d on port %d, want %d", i, got, want[i])
		}
		c.Close()
	}
	// lo..lo+4 with lo+1 in use has four free ports; lo..lo+3 has three.
	_, err = ListenUDPRange("0.0.0.0:0", PortRange{lo, lo + 3}, lane.Options{})
	if !errors.Is(err, ErrPortRange) || !strings.Contains(err.Error(), "only 3 of its 4 UDP lanes") || !strings.Contains(err.Error(), "--port") {
		t.Fatalf("a range with 3 free ports: %v", err)
	}
	for _, p := range []int{lo, lo + 2, lo + 3} { // released again
		c, err := net.ListenUDP("udp", &net.UDPAddr{Port: p})
		if err != nil {
			t.Fatalf("port %d still bound after the refusal: %v", p, err)
		}
		c.Close()
	}
}

// TestNoUDPError: the handshake's failure names the server, its silent ports (as a range), this
// end's ports and what to open; it is an ErrNoUDP.
func TestNoUDPError(t *testing.T) {
	e := &NoUDPError{Server: netip.MustParseAddr("198.18.0.2"), Ports: []int{40001, 40002, 40003, 40004},
		Silent: []int{40001, 40002, 40003, 40004}, Local: []int{51000, 51007, 51002, 51003}, Timeout: HandshakeTimeout}
	want := "no UDP reply from 198.18.0.2 port(s) 40001-40004 within 5s (this end's ports 51000,51007,51002,51003): open UDP to port(s) 40001-40004 on the remote host's firewall"
	if !strings.HasPrefix(e.Error(), want) || !strings.HasSuffix(e.Error(), "or choose the remote's ports with --port LO-HI") {
		t.Fatalf("message %q", e.Error())
	}
	e.Silent = []int{40003}
	if !strings.Contains(e.Error(), "port(s) 40003 (of 40001-40004) within") {
		t.Fatalf("one silent port: %q", e.Error())
	}
	if !errors.Is(e, ErrNoUDP) {
		t.Fatal("a NoUDPError is not an ErrNoUDP")
	}
	if HandshakeTimeout != 5*time.Second {
		t.Fatalf("HandshakeTimeout %s; the promise is 5 s", HandshakeTimeout)
	}
}

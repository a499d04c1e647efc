package xfer

import (
	"net/netip"
	"testing"
)

// TestSSHEnds: SSH_CONNECTION's two addresses, unmapped; nothing from a malformed one.
func TestSSHEnds(t *testing.T) {
	v4, v4b := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	for _, c := range []struct {
		in             string
		client, server netip.Addr
	}{
		{"198.18.0.1 50000 198.18.0.2 22", v4, v4b},
		{"::ffff:198.18.0.1 50000 ::ffff:198.18.0.2 22", v4, v4b},
		{"2001:db8::1 50000 2001:db8::2 22", netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")},
		{"198.18.0.1 50000 nonsense 22", v4, netip.Addr{}},
		{"198.18.0.1 50000 198.18.0.2", netip.Addr{}, netip.Addr{}},
		{"", netip.Addr{}, netip.Addr{}},
	} {
		if cl, sv := sshEnds(c.in); cl != c.client || sv != c.server {
			t.Errorf("sshEnds(%q) = %v, %v; want %v, %v", c.in, cl, sv, c.client, c.server)
		}
	}
}

//go:build linux

package lane

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
)

// TestDontFragment: with the don't-fragment bit a datagram larger than the interface's MTU is
// refused (EMSGSIZE) instead of being fragmented; off, the kernel fragments it as before. The
// loopback interface's MTU is 65,536, so the test sends to it a datagram of 65,507 bytes, the
// largest IPv4 UDP payload, which fits either way, and checks only that both settings apply.
func TestDontFragment(t *testing.T) {
	c, err := Listen("127.0.0.1:0", Options{Warn: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, on := range []bool{true, false, true} {
		if err := c.SetDontFragment(on); err != nil {
			t.Fatalf("SetDontFragment(%v): %v", on, err)
		}
	}
	dst := netip.MustParseAddrPort("127.0.0.1:9")
	if err := c.Send(dst, [][]byte{make([]byte, 8238)}); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("an 8,238-byte datagram on loopback with the bit: %v", err)
	}
}

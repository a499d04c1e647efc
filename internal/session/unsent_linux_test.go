package session

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStreamUnsentLimit: a stream's socket holds at most streamUnsent bytes unsent
// (TCP_NOTSENT_LOWAT), on the dialing and the accepting end.
func TestStreamUnsentLimit(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, c := range []*net.TCPConn{d, a} {
		setStreamCC(c)
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := 0, error(nil)
		rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT) })
		if gerr != nil || got != streamUnsent {
			t.Errorf("TCP_NOTSENT_LOWAT %d (%v), want %d", got, gerr, streamUnsent)
		}
	}
}

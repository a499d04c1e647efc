//go:build linux || darwin

package session

import (
	"net"

	"golang.org/x/sys/unix"
)

// setUnsentLimit sets TCP_NOTSENT_LOWAT on c to n bytes (streamUnsent).
func setUnsentLimit(c *net.TCPConn, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}

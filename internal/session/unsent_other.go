//go:build !linux && !darwin

package session

import "net"

// setUnsentLimit: this system has no TCP_NOTSENT_LOWAT that x/sys/unix names; the stream keeps
// the kernel's send buffer.
func setUnsentLimit(*net.TCPConn, int) error { return nil }

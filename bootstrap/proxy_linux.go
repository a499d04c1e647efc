package bootstrap

import "golang.org/x/sys/unix"

// setBBR asks for BBR on a TCP socket.
func setBBR(fd uintptr) error {
	return unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "bbr")
}

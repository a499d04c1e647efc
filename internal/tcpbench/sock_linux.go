package tcpbench

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

type rawConn = syscall.RawConn

func setCC(rc rawConn, cc string) error {
	if cc == "" {
		return nil
	}
	var serr error
	err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) })
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("TCP congestion control %s: %w", cc, err)
	}
	return nil
}

// socketFacts reads back the congestion control a socket uses and its retransmissions.
func socketFacts(c *net.TCPConn) (cc string, retrans uint64, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", 0, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if cc, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION); serr != nil {
			return
		}
		var info *unix.TCPInfo
		if info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); serr == nil {
			retrans = uint64(info.Total_retrans)
		}
	})
	if err == nil {
		err = serr
	}
	return cc, retrans, err
}

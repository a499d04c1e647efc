//go:build !linux

package tcpbench

import (
	"errors"
	"net"
	"syscall"
)

type rawConn = syscall.RawConn

func setCC(_ rawConn, cc string) error {
	if cc == "" {
		return nil
	}
	return errors.New("choosing a TCP congestion control needs Linux")
}

func socketFacts(*net.TCPConn) (string, uint64, error) { return "", 0, nil }

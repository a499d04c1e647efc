package session

import "syscall"

// errConnRefused is what a send returns after an ICMP port-unreachable for an earlier datagram.
var errConnRefused = syscall.ECONNREFUSED

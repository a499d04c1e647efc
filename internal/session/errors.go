package session

import "syscall"

var errConnRefused = syscall.ECONNREFUSED

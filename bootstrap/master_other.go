//go:build !linux

package bootstrap

import (
	"errors"
	"syscall"
)

// findMaster finds no master by its title here: Linux only (/proc).
func findMaster(title string) int { return 0 }

// masterProcess cannot tell here which process pid is: it takes the pid the master gave for
// itself, a moment ago.
func masterProcess(pid int, title string) bool { return true }

// processGone reports whether the process pid has ended and been reaped.
func processGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

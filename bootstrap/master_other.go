//go:build !linux

package bootstrap

import (
	"errors"
	"syscall"
)

// findMasters: masters are not found by their titles here (Linux only: /proc).
const findMasters = false

// titled finds none here.
func titled(match func(title string) bool) []int { return nil }

// masterProcess cannot tell here which process pid is: it takes the pid the master gave for
// itself, a moment ago.
func masterProcess(pid int, title string) bool { return true }

// processGone reports whether the process pid has ended and been reaped.
func processGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

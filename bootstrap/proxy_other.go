//go:build !linux

package bootstrap

import "errors"

// setBBR asks for BBR on a TCP socket: Linux only.
func setBBR(fd uintptr) error { return errors.New("BBR is asked for on Linux only") }

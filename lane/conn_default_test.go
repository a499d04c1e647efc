//go:build !linux

package lane

import "time"

func setCopyMode(*Conn, bool) {}

func cpuTime() time.Duration { return 0 }

//go:build !linux

package lane

import "time"

// socketPaths: off Linux the portable path is the only one.
var socketPaths = []socketPath{{"portable", true}}

func setCopyMode(*Conn, bool) {}

func cpuTime() time.Duration { return 0 }

package xfer

import (
	"bytes"
	"os"
	"strconv"
)

// maxRSS is this process's peak resident memory in bytes: VmHWM, the high-water mark of its own
// address space. (getrusage's ru_maxrss is not: it keeps the peak of the image that exec replaced,
// and a program started with vfork, as os/exec does, inherits its parent's; a farwing started by
// a large test binary reported the test binary's memory.)
func maxRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	i := bytes.Index(b, []byte("VmHWM:"))
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+len("VmHWM:"):])
	if len(f) == 0 {
		return 0
	}
	kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return kb << 10
}

//go:build linux

package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RemoveStale deletes lab namespaces ("fw-<pid>-<n>-a|b") whose creating
// process no longer exists, left behind by a run that was killed before its
// Close. Namespaces of live processes are not touched. Start calls it.
func RemoveStale() {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		if pid, ok := StalePID(e.Name(), "fw-"); ok && !processExists(pid) {
			_ = ipCmd("netns", "del", e.Name())
		}
	}
}

// StalePID extracts the pid from a name "<prefix><pid><sep>..." where sep
// is any non-digit, as used for lab namespaces and users.
func StalePID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(rest[:end])
	return pid, err == nil && pid > 0
}

func processExists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

package bootstrap

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// findMaster is the process of this user's whose title is title (masterTitle), 0 where there is
// none: /proc/PID/cmdline up to its first NUL, as OpenSSH's setproctitle leaves it (it writes the
// title over its arguments and pads them with NULs).
func findMaster(title string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		if masterProcess(pid, title) {
			return pid
		}
	}
	return 0
}

// masterProcess reports whether the process pid is this user's and its title is title (any title
// where title is "": the pid came from the master itself, a moment ago).
func masterProcess(pid int, title string) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || int(st.Uid) != os.Getuid() {
		return false
	}
	if title == "" {
		return true
	}
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return false
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b) == title
}

// processGone reports whether the process pid has ended (a zombie, ended but not yet reaped by
// its parent, has).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "PID (COMM) STATE ...": COMM may hold anything, so the state follows its last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

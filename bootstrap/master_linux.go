package bootstrap

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// findMasters finds masters by their titles here.
const findMasters = true

// titled lists the processes of this user's whose title match accepts: their /proc/PID/cmdline
// up to its first NUL, as OpenSSH's setproctitle leaves it (it writes the title over its
// arguments and pads them with NULs).
func titled(match func(title string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid > 1 && pid != os.Getpid() {
			if t, ok := title(pid); ok && match(t) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// masterProcess reports whether the process pid is this user's and its title is title (any title
// where title is "": the pid came from the master itself, a moment ago).
func masterProcess(pid int, want string) bool {
	t, ok := title(pid)
	return ok && (want == "" || t == want)
}

// title is the title of the process pid, if it is this user's.
func title(pid int) (string, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || int(st.Uid) != os.Getuid() {
		return "", false
	}
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return "", false
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b), true
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

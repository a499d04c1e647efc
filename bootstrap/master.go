package bootstrap

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// A shared connection's master that does not answer (checkMux), or whose sessions carry nothing
// (start's muxAnswer), is replaced: a new master is made at the same socket path. The old one must
// be gone first: OpenSSH's master unlinks its ControlPath by name when it ends (ssh.c, at its
// exit), and by then that name is the new master's socket, which would leave the new master
// running unreachable and every later copy without sharing until it was replaced in turn (seen on
// the lab: the socket vanished after every other copy once masters of a torn-down path were left
// behind). So retireMaster finds the old master's process, asks it to exit where it answers at
// all, kills it (SIGKILL: a process so ended runs none of its own code again, so it cannot unlink
// anything) where it is still there after masterGrace, and waits until it is gone before the
// socket is removed and a new master may be made.
//
// The process is the one `ssh -O check` names ("Master running (pid=N)") where the master answers,
// and otherwise the process of this user's whose title is OpenSSH's for a master at that path:
// control_persist_detach sets it to "PROGRAM: PATH [mux]" (setproctitle), and Farwing's masters
// always persist. On Linux a pid is checked against that title and this user before it is
// signalled, and the title is looked for in /proc (masterProcess); elsewhere only the pid a master
// gave for itself is used, so one that does not answer is not found, and its socket is removed
// as before, with the risk this avoids (said with -v).

// masterGrace is how long a master that was asked to exit (`ssh -O exit`) has to end before it is
// killed, and how long a killed one has to be gone.
const masterGrace = time.Second

var masterRunning = regexp.MustCompile(`Master running \(pid=([0-9]{1,10})\)`)

// masterPID is the pid in `ssh -O check`'s answer, 0 where there is none.
func masterPID(out string) int {
	m := masterRunning.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}

// masterTitle is the process title of a master OpenSSH's program made for the socket path, ""
// where the title would not be path as it is: OpenSSH escapes (strnvis) bytes outside printable
// ASCII, and a backslash.
func masterTitle(program, path string) string {
	for i := 0; i < len(path); i++ {
		if path[i] < 0x20 || path[i] > 0x7e || path[i] == '\\' {
			return ""
		}
	}
	return filepath.Base(program) + ": " + path + " [mux]"
}

// retireMaster ends the master of host's shared connection and removes its socket, so that a new
// master can be made at its path that the old one cannot take with it; answers says whether the
// master answered `ssh -O check` (it is then asked to exit first, and named by its own pid).
func (s SSH) retireMaster(ctx context.Context, host string, answers bool) {
	path := s.socketPath(ctx, host)
	if path == "" {
		s.logf("cannot find the shared ssh connection's socket for %s", escape.Text(host))
		return
	}
	title := masterTitle(s.program(), path)
	pid := 0
	if answers {
		// Asked again: its pid now, and whether it still answers at all (no use asking it to
		// exit, for another muxCheck, where it does not).
		out, hung, err := s.control(ctx, host, "check")
		if answers = !hung && err == nil; answers {
			pid = masterPID(out)
			if _, hung, err := s.control(ctx, host, "exit"); hung || err != nil {
				answers = false // not asked after all: no grace
			}
		}
	}
	if pid != 0 && !masterProcess(pid, title) {
		s.logf("the shared ssh connection's master named pid %d, which is not it", pid)
		pid = 0
	}
	if pid == 0 && title != "" {
		pid = findMaster(title)
	}
	switch {
	case pid == 0:
		s.logf("cannot find the process of the shared ssh connection's master at %s: when it ends it may remove its successor's socket", path)
	case endProcess(pid, answers):
		s.logf("ended the shared ssh connection's old master (pid %d)", pid)
	default:
		s.logf("the shared ssh connection's old master (pid %d) is still there after SIGKILL", pid)
	}
	s.removeSocket(path)
}

// endProcess ends the process pid: where it was asked to exit it is given masterGrace to do so,
// then it is killed (SIGKILL) and given masterGrace to be gone. It reports whether it is gone (a
// zombie counts: it runs nothing more).
func endProcess(pid int, asked bool) bool {
	if asked && waitGone(pid, masterGrace) {
		return true
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return true
	}
	return waitGone(pid, masterGrace)
}

// waitGone waits up to within for the process pid to be gone.
func waitGone(pid int, within time.Duration) bool {
	for end := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if processGone(pid) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

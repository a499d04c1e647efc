package bootstrap

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// A shared connection's master that does not answer (checkMux), or whose sessions carry nothing
// (start's muxAnswer), is replaced: a new master is made at the same socket path. The old one must
// be gone first: OpenSSH's master unlinks its ControlPath by name when it ends (ssh.c, at its
// exit), and by then that name is the new master's socket, which would leave the new master
// running unreachable, and every later copy without sharing until it was replaced in turn. Such a
// master, an orphan, ends in its turn when its ControlPersist runs out, and unlinks the socket of
// the master made after it: seen on the lab, where masters of a torn-down path were left behind,
// as a socket that vanished after every other copy, each following copy paying a full handshake.
//
// So the old master's process is found, asked to exit where it answers at all (retireSilent),
// killed (SIGKILL: a process so ended runs none of its own code again, so it cannot unlink
// anything) where it does not answer (retireHung) or is still there after masterGrace, and
// waited for until it is gone; only then is its socket removed, and a new master may be made.
// Where no master listens at the path at all (clearOrphans), any process that is still a master
// for it is an orphan, and is ended likewise before a new master is made there.
//
// The process is the one `ssh -O check` names ("Master running (pid=N)") where the master
// answers, and, on Linux, a process of this user's whose title is OpenSSH's for a master at that
// path: control_persist_detach sets it to "PROGRAM: PATH [mux]" (setproctitle), and Farwing's
// masters always persist (masterProcess, titled: /proc). Only processes that were there when the
// check began are taken (mastersHere), so a master another copy makes meanwhile is not ended, and
// a pid is checked against that title and this user before it is signalled. Elsewhere only the
// pid a master gave for itself is used, so one that does not answer, and orphans, are not found:
// the socket is removed as before, with the risk this avoids (said with -v).

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

// retireHung ends the master of host's shared connection that did not answer `ssh -O check`
// (stopped or hung), and removes its socket, so that a new master can be made at its path that
// the old one cannot take with it. It ends every process titled as a master for that path that
// was there when the check began (before: mastersHere), orphans included: a master another copy
// made meanwhile is not one of them.
func (s *session) retireHung(ctx context.Context, host string, before []int) {
	path := s.socketPath(ctx, host)
	if path == "" {
		s.logf("cannot find the shared ssh connection's socket for %s", escape.Text(host))
		return
	}
	pids := s.mastersOf(path, before)
	if len(pids) == 0 {
		s.logf("cannot find the process of the shared ssh connection's master at %s: when it ends it may remove its successor's socket", path)
	}
	for _, pid := range pids {
		s.end(pid, false)
	}
	s.removeSocket(path)
}

// retireSilent ends the master of host's shared connection whose sessions carry nothing though
// it answered `ssh -O check` as pid (0: it did not say), one waiting on a dead connection: it is
// asked to exit (`ssh -O exit`), killed where it has not ended after masterGrace, and its socket
// is removed. Where another master answers at the socket by now (another copy replaced it), that
// one is left alone.
func (s *session) retireSilent(ctx context.Context, host string, pid int) {
	asked := false
	if out, hung, err := s.control(ctx, host, "check"); !hung && err == nil {
		if now := masterPID(out); now != 0 && pid != 0 && now != pid {
			s.logf("the shared ssh connection's master is pid %d by now, not %d: kept", now, pid)
			return
		}
		_, hung, err := s.control(ctx, host, "exit")
		asked = !hung && err == nil
	}
	path := s.socketPath(ctx, host)
	switch {
	case path == "": // no title to check the pid against, and no socket to remove
		s.logf("cannot find the shared ssh connection's socket for %s", escape.Text(host))
		return
	case pid == 0:
		s.logf("cannot find the process of the shared ssh connection's master: when it ends it may remove its successor's socket")
	case masterProcess(pid, masterTitle(s.program(), path)):
		s.end(pid, asked)
	default:
		s.logf("the shared ssh connection's old master (pid %d) has ended", pid)
	}
	s.removeSocket(path)
}

// end ends the master process pid (endProcess) and says so (-v).
func (s SSH) end(pid int, asked bool) {
	if endProcess(pid, asked) {
		s.logf("ended the shared ssh connection's old master (pid %d)", pid)
	} else {
		s.logf("the shared ssh connection's old master (pid %d) is still there after SIGKILL", pid)
	}
}

// clearOrphans ends the masters for host's socket path that no socket there reaches (none is
// there, or it refuses connections: a master that died without removing it), before a new master
// is made there: each would remove the new one's socket when it ends. Only those there when the
// check began count (before: mastersHere), and ssh -G is asked for the path only where there
// were any.
func (s *session) clearOrphans(ctx context.Context, host string, before []int) {
	if len(before) == 0 {
		return
	}
	path := s.socketPath(ctx, host)
	if path == "" || !noListener(path) {
		return
	}
	for _, pid := range s.mastersOf(path, before) {
		if endProcess(pid, false) {
			s.logf("ended a master of the shared ssh connection whose socket was gone (pid %d): it would have removed its successor's", pid)
		}
	}
}

// mastersHere lists this user's processes titled as masters for a socket in this user's control
// directory (Linux only, findMasters: none elsewhere).
func (s *session) mastersHere() []int {
	dir := s.ctlDir
	if !findMasters || dir == "" {
		return nil
	}
	pre := filepath.Base(s.program()) + ": " + dir + "/"
	return titled(func(t string) bool { return strings.HasPrefix(t, pre) && strings.HasSuffix(t, " [mux]") })
}

// mastersOf lists the processes of before that are still titled as masters for the socket path.
func (s *session) mastersOf(path string, before []int) []int {
	title := masterTitle(s.program(), path)
	var pids []int
	for _, pid := range before {
		if title != "" && masterProcess(pid, title) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// noListener reports whether nothing listens at the socket path: it is missing, or refuses a
// connection.
func noListener(path string) bool {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return true
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
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

// socketPath is the path of the shared connection's socket for host (from `ssh -G`), "" where
// it is not one in this user's control directory.
func (s *session) socketPath(ctx context.Context, host string) string {
	cfg, err := s.configWith(ctx, host, s.flags(true))
	dir := s.ctlDir
	path := cfg["controlpath"]
	if err != nil || dir == "" || !strings.HasPrefix(path, dir+"/") || strings.Contains(path[len(dir)+1:], "/") {
		return ""
	}
	return path
}

// removeSocket removes the shared connection's socket at path (socketPath), if it is a socket.
func (s SSH) removeSocket(path string) {
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		return
	}
	if err := os.Remove(path); err != nil {
		s.logf("cannot remove the shared ssh connection's socket %s: %v", path, err)
		return
	}
	s.logf("removed the shared ssh connection's socket %s", path)
}

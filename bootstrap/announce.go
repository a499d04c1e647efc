package bootstrap

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// AnnounceFlag is the serve flag with which the start script has the cached peer print its own
// status line ("FARWING-PEER ok OS ARCH PATH", what the shell printed before it): serve writes it
// together with its first control message (ready), so that the two arrive in one segment of
// ssh's TCP connection instead of two, 10-15 ms apart, either of which a loss would hold up for a
// retransmission timeout (0.3 s and more at 140 ms).
const AnnounceFlag = "--announce"

// ChdirFlag is the serve flag with which the start script tells the peer the directory the ssh
// session started in (the login directory): the script works inside the cache directory it
// checked (privFunc) and starts the peer there, by a name relative to it, and the peer goes back
// first, so that it runs where a command of the session would.
const ChdirFlag = "--chdir"

// OKLine is the status line of a peer started from path, with this host's `uname -s` and
// `uname -m` (Go's names of them where uname fails).
func OKLine(path string) string {
	sys, machine := runtime.GOOS, runtime.GOARCH
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		if s := unix.ByteSliceToString(u.Sysname[:]); s != "" {
			sys = s
		}
		if m := unix.ByteSliceToString(u.Machine[:]); m != "" {
			machine = m
		}
	}
	return "FARWING-PEER ok " + sys + " " + machine + " " + path + "\n"
}

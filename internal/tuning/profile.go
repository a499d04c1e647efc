package tuning

import (
	"fmt"
	"os"
	"runtime/pprof"
	"syscall"
)

// StartProfile starts a CPU profile when prefix (Settings.Profile, FARWING_CPUPROFILE) is not
// empty; role names the side ("client", "serve"). The returned function stops it and closes the
// file; it is never nil. Errors are reported on stderr and leave profiling off: a profile is never
// worth a failed copy. Each end profiles only where its own environment asks for it: the remote
// peer does not take a prefix from the client (a path the client chose, on the server's account).
//
// The profile is a new file, PREFIX.ROLE.PID.pprof, mode 0600, created O_EXCL|O_NOFOLLOW|
// O_NONBLOCK: whatever stands at that name (a link to another file, a file, a FIFO) is left alone
// and the profile is not written.
func StartProfile(prefix, role string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	name := fmt.Sprintf("%s.%s.%d.pprof", prefix, role, os.Getpid())
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "farwing: cpu profile: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "farwing: cpu profile: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

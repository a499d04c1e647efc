package session

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// ProfileEnv names the environment variable that turns on CPU profiling of a transfer: its value
// is a path prefix, and each process writes PREFIX.ROLE.PID.pprof.
const ProfileEnv = "FARWING_CPUPROFILE"

// StartProfile starts a CPU profile when prefix (normally os.Getenv(ProfileEnv)) is not empty;
// role names the side ("client", "serve"). The returned function stops it and closes the file; it
// is never nil. Errors are reported on stderr and leave profiling off: a profile is never worth a
// failed copy. The serving side does not see the client's environment, so the client has to pass
// the prefix on (as it does FARWING_DEBUG) for both ends to be profiled.
func StartProfile(prefix, role string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	name := fmt.Sprintf("%s.%s.%d.pprof", prefix, role, os.Getpid())
	f, err := os.Create(name)
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

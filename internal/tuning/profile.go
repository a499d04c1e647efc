package tuning

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartProfile starts a CPU profile when prefix (Settings.Profile, FARWING_CPUPROFILE) is not
// empty; role names the side ("client", "serve"). The returned function stops it and closes the
// file; it is never nil. Errors are reported on stderr and leave profiling off: a profile is never
// worth a failed copy. The serving side does not see the client's environment, so the client
// passes the prefix on in its hello (as it does Debug) for both ends to be profiled.
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

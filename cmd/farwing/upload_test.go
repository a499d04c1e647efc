//go:build linux

package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLabParallelUpload: on a path that loses 3 % (30 ms RTT), with ssh going through the user's
// own ProxyCommand whose TCP socket uses CUBIC (so farwing's bbr proxy is not used), one TCP
// stream moves a few hundred kB/s and the upload of the peer (about 8 MB: the test build keeps its
// symbols) alone would take half a minute: first contact finds the main session slow and opens
// more ssh connections for the rest (-v says so), the peer installs and runs, the copy's digests
// are right, and the next copy finds the peer.
func TestLabParallelUpload(t *testing.T) {
	e := startLab(t, 100e6, 30*time.Millisecond, 0.03)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, sum := randomFile(t, dir, "small.bin", 1<<20)
	log := filepath.Join(dir, "ssh-sessions")
	env := []string{countingSSH(t, dir, log)}
	proxy := "ProxyCommand=env FARWING_TEST_CUBIC_PROXY=1 " + self + " %h %p"
	r := e.copyIn(e.l.NSA, env, "-v", "--ssh-persist", "0", "-o", proxy, src, e.srv.Host+":")
	if r.code != 0 || r.res["blake3"] != sum || r.res["peer_uploaded"] != true {
		t.Fatalf("first contact: exit %d, %v: %s", r.code, r.res, r.stderr)
	}
	if got := fileSum(t, filepath.Join(e.srv.Home, "small.bin")); got != sum {
		t.Fatalf("remote copy differs: %s vs %s", got, sum)
	}
	var said []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "upload") || strings.Contains(l, "no bbr asked for") {
			said = append(said, l)
		}
	}
	n := sessions(t, log)
	t.Logf("first contact: %d ssh sessions, bootstrap %.1f s, copy %.1f s\n%s", n, r.res["bootstrap_seconds"], r.res["seconds"], strings.Join(said, "\n"))
	if all := strings.Join(said, "\n"); n < 2 || !strings.Contains(all, "no bbr asked for") ||
		!strings.Contains(all, "upload slow (") || !strings.Contains(all, fmt.Sprintf("over %d ssh connections", n)) {
		t.Fatalf("%d ssh sessions; -v said %q", n, all)
	}
	if got, _ := r.res["bootstrap_sessions"].(float64); int(got) != n {
		t.Errorf("--json bootstrap_sessions %v, want the %d ssh sessions counted", r.res["bootstrap_sessions"], n)
	}
	// The peer the helpers helped install is the one later copies find.
	again := e.copyIn(e.l.NSA, env, "--ssh-persist", "0", "-o", proxy, src, e.srv.Host+":again.bin")
	if again.code != 0 || again.res["peer_uploaded"] != false || again.res["bootstrap_sessions"] != nil || sessions(t, log) != n+1 {
		t.Fatalf("second copy: exit %d, uploaded %v, %d ssh sessions in all (want %d): %s", again.code, again.res["peer_uploaded"], sessions(t, log), n+1, again.stderr)
	}
}

// cubicProxy is ssh's ProxyCommand for TestLabParallelUpload: a TCP connection to host:port on a
// socket that uses CUBIC, as ssh's own on most hosts, relayed to stdin and stdout.
func cubicProxy(host, port string) int {
	d := net.Dialer{Timeout: 20 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubic proxy: %v\n", err)
		return 1
	}
	tc := c.(*net.TCPConn)
	go func() {
		io.Copy(tc, os.Stdin)
		tc.CloseWrite()
	}()
	io.Copy(os.Stdout, tc)
	tc.Close()
	return 0
}

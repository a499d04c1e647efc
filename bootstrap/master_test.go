package bootstrap

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The mux protocol's messages the fake master answers (OpenSSH's mux.c).
const (
	muxHello      = 0x00000001
	muxAliveCheck = 0x10000004
	muxTerminate  = 0x10000005
	muxOK         = 0x80000001
	muxAlive      = 0x80000005
	muxVersion    = 4
)

// fakeMaster is the test binary run as a shared connection's master (BOOTSTRAP_TEST_MASTER: the
// socket's path): it listens there, says "ready", and after BOOTSTRAP_TEST_MASTER_LINGER, or at
// SIGTERM, removes the path and exits, as OpenSSH's master unlinks its ControlPath when it ends.
// With BOOTSTRAP_TEST_MASTER_ANSWERS it answers `ssh -O check` with its pid and `ssh -O exit`
// with ok, and goes on running (a master stuck on a dead connection); without, it accepts and
// never answers (a stopped or hung master). With BOOTSTRAP_TEST_MASTER_ORPHAN it listens
// elsewhere (an orphan: its socket at the path was removed).
func fakeMaster(path string) {
	linger, err := time.ParseDuration(os.Getenv("BOOTSTRAP_TEST_MASTER_LINGER"))
	if err != nil {
		os.Exit(2)
	}
	answers := os.Getenv("BOOTSTRAP_TEST_MASTER_ANSWERS") != ""
	at := path
	if os.Getenv("BOOTSTRAP_TEST_MASTER_ORPHAN") != "" {
		at = path + ".orphan"
	}
	l, err := net.Listen("unix", at)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if answers {
				go answerMux(c)
			} // else held open, never answered
		}
	}()
	fmt.Println("ready")
	select {
	case <-term:
	case <-time.After(linger):
	}
	os.Remove(path)
	os.Remove(at)
	os.Exit(0)
}

// answerMux answers the hello, an alive check and a terminate request on c.
func answerMux(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	send := func(words ...uint32) {
		b := binary.BigEndian.AppendUint32(nil, uint32(4*len(words)))
		for _, w := range words {
			b = binary.BigEndian.AppendUint32(b, w)
		}
		c.Write(b)
	}
	send(muxHello, muxVersion)
	for {
		var n uint32
		if binary.Read(r, binary.BigEndian, &n) != nil || n < 4 || n > 1<<16 {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		typ, rid := binary.BigEndian.Uint32(body), uint32(0)
		if n >= 8 {
			rid = binary.BigEndian.Uint32(body[4:])
		}
		switch typ {
		case muxAliveCheck:
			send(muxAlive, rid, uint32(os.Getpid()))
		case muxTerminate:
			send(muxOK, rid) // and runs on
		}
	}
}

// startFakeMaster starts fakeMaster for the socket path as OpenSSH's master for it would run: a
// program named ssh titled "ssh: PATH [mux]", this user's; how is "deaf", "answers" or "orphan".
// It returns once the master listens, with a channel that gets its Wait's error when it ends.
func startFakeMaster(t *testing.T, path string, linger time.Duration, how string) (*exec.Cmd, chan error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ssh := filepath.Join(t.TempDir(), "ssh")
	if err := os.Symlink(self, ssh); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ssh)
	cmd.Args = []string{"ssh: " + path + " [mux]"}
	cmd.Env = append(os.Environ(), "BOOTSTRAP_TEST_MASTER="+path, "BOOTSTRAP_TEST_MASTER_LINGER="+linger.String())
	switch how {
	case "answers":
		cmd.Env = append(cmd.Env, "BOOTSTRAP_TEST_MASTER_ANSWERS=1")
	case "orphan":
		cmd.Env = append(cmd.Env, "BOOTSTRAP_TEST_MASTER_ORPHAN=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("fake master: %q", line)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, ended
}

// TestReplacedMasterKeepsNewSocket (issue 37, point 7): a shared connection's master that is
// replaced is ended before a new master may listen at its socket's path, so that it cannot take
// the new socket with it: here each old master would otherwise live on for 8 s and then unlink
// the path, as OpenSSH's does when it ends. Replaced are one that does not answer `ssh -O check`
// (checkMux), one that answers, and answers `ssh -O exit`, but stays (its sessions carry nothing,
// it waits on a dead connection: dropMux), and an orphan: a master still running for the path
// whose socket there is gone (checkMux, finding none). A master for the path made after the
// check began (by another copy) is not ended. -v says which process was ended.
func TestReplacedMasterKeepsNewSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a master that does not answer is found by its title in /proc: Linux only")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client installed")
	}
	const linger = 8 * time.Second
	for _, c := range []struct{ name, how string }{
		{"does not answer", "deaf"}, {"answers but stays", "answers"}, {"orphan", "orphan"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, logged := muxTestSSH(t, "fwm")
			ctx := context.Background()
			path := s.socketPath(ctx, "h")
			if path == "" {
				t.Fatal("no control socket path")
			}
			old, ended := startFakeMaster(t, path, linger, c.how)
			t0 := time.Now()
			type found struct {
				live bool
				pid  int
			}
			checked := make(chan found, 1)
			go func() {
				live, pid := s.checkMux(ctx, "h")()
				checked <- found{live, pid}
			}()
			// A master for the path that another copy makes while this one checks is not
			// this one's to end.
			var late *exec.Cmd
			if c.how == "deaf" {
				time.Sleep(500 * time.Millisecond)
				late, _ = startFakeMaster(t, path, time.Minute, "orphan")
			}
			f := <-checked
			live, pid := f.live, f.pid
			if late != nil && processGone(late.Process.Pid) {
				t.Error("a master made after the check began was ended")
			}
			if live != (c.how == "answers") || c.how == "answers" && pid != old.Process.Pid {
				t.Fatalf("checkMux: live %v, pid %d; log %q", live, pid, *logged)
			}
			if live {
				s.muxPid = pid
				s.dropMux(ctx, "h")
			}
			// The new master's socket at the same path.
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatalf("no new master can listen at %s: %v; log %q", path, err, *logged)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			defer l.Close()
			select {
			case <-ended:
			case <-time.After(linger + 5*time.Second):
				t.Fatal("the old master did not end")
			}
			if took := time.Since(t0); took > linger-time.Second {
				t.Errorf("the old master (pid %d) ran on for %s after it was replaced", old.Process.Pid, took.Round(time.Millisecond))
			}
			if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
				t.Errorf("the old master took the new master's socket with it: %v", err)
			}
			said := fmt.Sprintf("ended the shared ssh connection's old master (pid %d)", old.Process.Pid)
			if c.how == "orphan" {
				said = fmt.Sprintf("ended a master of the shared ssh connection whose socket was gone (pid %d)", old.Process.Pid)
			}
			if all := strings.Join(*logged, "\n"); !strings.Contains(all, said) {
				t.Errorf("-v said %q", all)
			}
		})
	}
}

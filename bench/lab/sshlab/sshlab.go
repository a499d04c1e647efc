//go:build linux

// Package sshlab runs a real OpenSSH server inside a lab's namespace B for
// a throwaway user, so that ssh-bootstrapped transfers (and scp, for
// comparison) can be measured through the emulated link.
//
// Everything lives in one temporary directory: host and client keys, the
// server and client configs, and the user's home. Close kills the server
// and every process of the user, deletes the user and removes the
// directory.
package sshlab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farwing/farwing/bench/lab"
)

// Alias is the ssh host alias the client configs define.
const Alias = "fwlab"

// SSHD is the server binary.
var SSHD = "/usr/sbin/sshd"

// Server is an sshd in a lab's namespace B.
type Server struct {
	Host       string // ssh host alias, defined in ConfigFile
	ConfigFile string // ssh_config for `ssh -F`
	// LoopbackConfig is an ssh_config for the same Host through 127.0.0.1, for clients run in
	// namespace B itself (sshd listens on its loopback too): a loopback copy.
	LoopbackConfig string
	User, Home     string // the throwaway account and its home directory (writable by it)
	UID, GID       int
	Dir            string // temporary directory holding keys, configs and Home
	LogFile        string // sshd's stderr

	lab       *lab.Lab
	cmd       *exec.Cmd
	exited    chan struct{}
	badConfig string
	closeOnce sync.Once
	closeErr  error
}

var userSeq atomic.Uint32

// Check reports why a Server cannot be started here, or nil.
func Check() error {
	if err := lab.Check(); err != nil {
		return err
	}
	for _, bin := range []string{SSHD, "ssh", "ssh-keygen", "useradd", "userdel"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("sshlab: %s not found (apt-get install openssh-server openssh-client): %w", bin, err)
		}
	}
	return nil
}

// Start creates the user and keys and starts sshd on l.AddrB:22. It returns
// once a login from namespace A succeeds.
func Start(l *lab.Lab) (_ *Server, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	removeStaleUsers()
	s := &Server{Host: Alias, lab: l, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Dir, err = os.MkdirTemp("", "fwlab-ssh-"); err != nil {
		return nil, err
	}
	// The user must traverse Dir to reach its home; the keys stay in a
	// root-only subdirectory.
	if err := os.Chmod(s.Dir, 0o755); err != nil {
		return nil, err
	}
	keys := filepath.Join(s.Dir, "keys")
	s.Home = filepath.Join(s.Dir, "home")
	if err := os.Mkdir(keys, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(s.Home, 0o700); err != nil {
		return nil, err
	}

	hostKey := filepath.Join(keys, "ssh_host_ed25519_key")
	clientKey := filepath.Join(keys, "id_ed25519")
	badKey := filepath.Join(keys, "id_unauthorized")
	for _, k := range []string{hostKey, clientKey, badKey} {
		if err := run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fwlab", "-f", k); err != nil {
			return nil, err
		}
	}

	if err := s.addUser(); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(clientKey + ".pub")
	if err != nil {
		return nil, err
	}
	sshDir := filepath.Join(s.Home, ".ssh")
	authKeys := filepath.Join(sshDir, "authorized_keys")
	if err := os.Mkdir(sshDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(authKeys, pub, 0o600); err != nil {
		return nil, err
	}
	for _, p := range []string{s.Home, sshDir, authKeys} {
		if err := os.Chown(p, s.UID, s.GID); err != nil {
			return nil, err
		}
	}

	// sshd refuses to start without its privilege-separation directory,
	// which the package creates only at boot.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	sshdConfig := filepath.Join(keys, "sshd_config")
	// StrictModes is off because the home lives under /tmp; UsePAM is off
	// so the account needs no PAM session (and its password field is '*',
	// which sshd does not treat as locked). sftp is in-process because
	// modern scp speaks sftp.
	conf := fmt.Sprintf(`ListenAddress %s:22
ListenAddress 127.0.0.1:22
HostKey %s
PidFile %s
AuthorizedKeysFile %s
AllowUsers %s
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
StrictModes no
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxStartups 100
MaxSessions 100
Subsystem sftp internal-sftp
AcceptEnv LANG LC_*
`, l.AddrB, hostKey, filepath.Join(keys, "sshd.pid"), authKeys, s.User)
	if err := os.WriteFile(sshdConfig, []byte(conf), 0o600); err != nil {
		return nil, err
	}

	s.ConfigFile = filepath.Join(keys, "ssh_config")
	s.badConfig = filepath.Join(keys, "ssh_config_unauthorized")
	s.LoopbackConfig = filepath.Join(keys, "ssh_config_loopback")
	if err := os.WriteFile(s.LoopbackConfig, []byte(clientConfig("127.0.0.1", s.User, clientKey)), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.ConfigFile, []byte(clientConfig(l.AddrB.String(), s.User, clientKey)), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.badConfig, []byte(clientConfig(l.AddrB.String(), s.User, badKey)), 0o600); err != nil {
		return nil, err
	}

	s.LogFile = filepath.Join(keys, "sshd.log")
	logf, err := os.Create(s.LogFile)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = l.Command(l.NSB, SSHD, "-D", "-e", "-f", sshdConfig)
	s.cmd.Stdout = logf
	s.cmd.Stderr = logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("sshlab: start sshd: %w", err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()

	// sshd is usually up within tens of milliseconds; bound the wait.
	deadline := time.Now().Add(10 * time.Second)
	for {
		probe := l.Command(l.NSA, "ssh", "-F", s.ConfigFile, "-o", "ConnectTimeout=2", s.Host, "true")
		out, perr := probe.CombinedOutput()
		if perr == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("sshlab: sshd exited: %s", s.log())
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("sshlab: no ssh login after 10s: %v: %s; sshd log: %s", perr, bytes.TrimSpace(out), s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clientConfig(hostName, userName, key string) string {
	return fmt.Sprintf(`Host %s
  HostName %s
  Port 22
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  PreferredAuthentications publickey
  UserKnownHostsFile /dev/null
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking no
  BatchMode yes
  LogLevel ERROR
  ConnectTimeout 10
`, Alias, hostName, userName, key)
}

// AuthFailConfig returns an ssh_config for the same host and user whose
// identity is not authorized, for testing authentication failures.
func (s *Server) AuthFailConfig() string { return s.badConfig }

// Command returns an ssh command run from namespace A:
// ssh -F ConfigFile Host args...
func (s *Server) Command(args ...string) *exec.Cmd {
	return s.lab.Command(s.lab.NSA, "ssh", append([]string{"-F", s.ConfigFile, s.Host}, args...)...)
}

func (s *Server) log() string {
	b, _ := os.ReadFile(s.LogFile)
	return string(bytes.TrimSpace(b))
}

// addUser creates a system account with a unique name and Home as home.
func (s *Server) addUser() error {
	for try := 0; ; try++ {
		s.User = fmt.Sprintf("fwlab%d%c%d", os.Getpid(), 'x', userSeq.Add(1))
		if _, err := user.Lookup(s.User); err == nil {
			continue // left over by a crashed run with a recycled pid
		}
		err := run("useradd", "--system", "--no-create-home", "--home-dir", s.Home,
			"--shell", "/bin/sh", "--user-group", "--password", "*", s.User)
		if err == nil {
			break
		}
		if try == 3 {
			s.User = ""
			return err
		}
		// Usually a concurrent useradd holding the passwd lock.
		time.Sleep(time.Duration(50*(try+1)) * time.Millisecond)
	}
	u, err := user.Lookup(s.User)
	if err != nil {
		return err
	}
	if s.UID, err = strconv.Atoi(u.Uid); err != nil {
		return err
	}
	s.GID, err = strconv.Atoi(u.Gid)
	return err
}

// removeStaleUsers deletes lab users ("fwlab<pid>x<n>") whose creating
// process is gone, left behind by a run killed before Close, together with
// their temporary directories.
func removeStaleUsers() {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		pid, ok := lab.StalePID(f[0], "fwlab")
		if !ok {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		if uid, err := strconv.Atoi(f[2]); err == nil && uid > 0 {
			killUID(uid, nil)
		}
		if run("userdel", "--force", f[0]) == nil {
			// The home is <tmp>/fwlab-ssh-*/home; remove the whole directory.
			if dir := filepath.Dir(f[5]); strings.HasPrefix(filepath.Base(dir), "fwlab-ssh-") {
				os.RemoveAll(dir)
			}
		}
	}
}

// Close stops sshd and everything running as the user, deletes the user and
// removes the temporary directory. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.cmd != nil && s.cmd.Process != nil {
			// `ip netns exec` execs sshd, so this is the listener itself.
			s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(3 * time.Second):
				s.cmd.Process.Kill()
				<-s.exited
			}
		}
		if s.User != "" {
			// Session processes (a remote peer started over ssh, the
			// per-connection sshd) outlive the listener; userdel refuses
			// while the user has processes.
			if s.UID > 0 {
				killUID(s.UID, s.lab)
			}
			// userdel also refuses while zombies of the user await
			// reaping by init; give them a moment, then force.
			err := run("userdel", s.User)
			for i := 0; err != nil && i < 20; i++ {
				time.Sleep(100 * time.Millisecond)
				err = run("userdel", s.User)
			}
			if err != nil {
				err = run("userdel", "--force", s.User)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		if s.Dir != "" {
			errs = append(errs, os.RemoveAll(s.Dir))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// killUID kills, by pid, every process owned by uid and the per-connection
// sshd processes left in the lab's namespace B, and waits (bounded) until
// they are gone.
func killUID(uid int, l *lab.Lab) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		pids := uidPids(uid)
		if l != nil {
			pids = append(pids, nsPids(l.NSB)...)
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Peers lists the running processes of the lab user whose command name starts with "farwing":
// the remote peers that copies started.
func (s *Server) Peers() []int {
	var pids []int
	for _, pid := range uidPids(s.UID) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.HasPrefix(string(comm), "farwing") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func uidPids(uid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) == nil && int(st.Uid) == uid && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// nsPids lists sshd processes inside namespace ns. Only sshd: the caller's
// own commands in the namespace are the caller's to stop.
func nsPids(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.HasPrefix(string(comm), "sshd") && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports whether pid has exited and awaits reaping by its parent
// (often pid 1 after its sshd parent died); it cannot be killed, only waited
// out.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	// The state follows the parenthesized command name.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sshlab: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

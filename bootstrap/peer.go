package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// Peer is a running `farwing serve` on the remote host.
type Peer struct {
	cmd      *exec.Cmd
	Stdin    io.WriteCloser
	Stdout   *bufio.Reader
	stderr   *tail
	Uploaded bool   // this call installed the peer (first contact or a new build)
	Path     string // the peer's path on the remote host
	RemoteOS string // uname -s and -m of the remote
	// Took is the first contact's time: from Start to the remote's word that the peer runs
	// (including the ssh handshake and, when Uploaded, the upload and its check).
	Took time.Duration
	// SentBytes is the size of the peer as it crossed (0 unless Uploaded), in Format: "xz",
	// "gzip" or "raw"; parts sent twice (over a slow main session and another connection) are not counted
	// here but in ResentBytes. UploadSessions is how many ssh sessions carried parts of it: 1,
	// more where the main session was slow.
	SentBytes      int64
	Format         string
	UploadSessions int
	ResentBytes    int64
	// Ahead: the upload's start went with the ssh session, before the remote said need (ahead.go).
	Ahead bool
	// HostName is the address ssh connects to for the host (`ssh -G`), so that UDP goes to the
	// same place even when the host is an alias from ssh_config; "" if ssh did not say.
	HostName string
	prefaced chan struct{} // closed when the preface has been written
	// skipped is closed when the remote said ok with an upload's start going ahead: serve drops
	// those bytes whatever they are, so they need not wait for the build to be compressed.
	skipped  chan struct{}
	se       *session // the start's ssh settings, for more sessions (Relay)
	host     string
	serve    []string  // the peer's command line, as the script runs it
	began    time.Time // when ssh was started
	attempts []attempt // first contact's attempts, each with the reason it was made (contact.go)
	waitOnce sync.Once
	waitErr  error
}

// Args is the ssh command line that started the peer (remoteCommand last), followed by the
// command the remote script, which went on ssh's input, ran: `farwing serve` with its arguments
// (the public key among them).
func (p *Peer) Args() []string { return slices.Concat(p.cmd.Args, p.serve) }

// peerStatus is a line of the remote shell: "FARWING-PEER STATE OS ARCH PATH" for the states ok
// (PATH: the running peer), nodir and nohash (PATH: the cache directory); "FARWING-PEER need OS
// ARCH FORMATS PATH" (FORMATS: what it can unpack, comma-separated, e.g. "xz,gzip,raw");
// "FARWING-PEER unsafe OS ARCH WHY PATH" (the cache directory is not private, WHY: link, owner or
// mode; privFunc); or a bare "FARWING-PEER STATE" (badhash, norename, badupload).
type peerStatus struct{ State, OS, Arch, Formats, Why, Path string }

// maxStatus bounds the status line: a remote that never ends its line cannot fill memory.
const maxStatus = 4096

// parseStatus checks a status line: a known state, and for ok, need, nodir, nohash and unsafe an
// OS, an architecture and an absolute path (which may hold spaces), for need the formats too, for
// unsafe why.
func parseStatus(line string) (peerStatus, error) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "FARWING-PEER ")
	if !ok || len(line) > maxStatus {
		return peerStatus{}, errors.New("not a status line")
	}
	state, _, _ := strings.Cut(rest, " ")
	st := peerStatus{State: state}
	switch st.State {
	case "ok", "nodir", "nohash":
		f := strings.SplitN(rest, " ", 4)
		if len(f) != 4 || f[1] == "" || f[2] == "" || !strings.HasPrefix(f[3], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Path = f[1], f[2], f[3]
	case "need":
		f := strings.SplitN(rest, " ", 5)
		if len(f) != 5 || f[1] == "" || f[2] == "" || f[3] == "" || !strings.HasPrefix(f[4], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Formats, st.Path = f[1], f[2], f[3], f[4]
	case "unsafe":
		f := strings.SplitN(rest, " ", 5)
		if len(f) != 5 || f[1] == "" || f[2] == "" || !slices.Contains([]string{"link", "owner", "mode"}, f[3]) || !strings.HasPrefix(f[4], "/") {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
		st.OS, st.Arch, st.Why, st.Path = f[1], f[2], f[3], f[4]
	case "badhash", "norename", "badupload":
		if rest != st.State {
			return peerStatus{}, fmt.Errorf("malformed status %q", rest)
		}
	default:
		return peerStatus{}, fmt.Errorf("unknown status %q", rest)
	}
	return st, nil
}

// run starts script on host (remoteCommand), writes preface to its stdin and returns the peer with
// the first status line. With within above 0 it gives up when the line has not come by then, killing
// ssh, with errMuxSilent.
func (s *session) run(ctx context.Context, host, script string, preface []byte, ahead *ahead, within time.Duration) (*Peer, peerStatus, error) {
	cmd := s.sshCmd(ctx, host, remoteCommand(script), s.mux)
	// The options go before the host (cmd.Args: ssh, the options, "--", host, command).
	cmd.Args = slices.Insert(cmd.Args, 1, withEnvPreface(cmd, preface)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, peerStatus{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, peerStatus{}, err
	}
	// A shared connection's master holds on to ssh's stderr; never let Wait hang on it.
	cmd.WaitDelay = 2 * time.Second
	p := &Peer{cmd: cmd, Stdin: stdin, Stdout: bufio.NewReaderSize(stdout, 64<<10), stderr: &tail{}, prefaced: make(chan struct{}),
		skipped: make(chan struct{})}
	cmd.Stderr = p.stderr
	if s.Verbose {
		// ssh's own messages and the remote's standard error, escaped: the remote's text never
		// reaches the terminal raw.
		cmd.Stderr = io.MultiWriter(escape.NewWriter(os.Stderr), p.stderr)
	}
	p.began = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, peerStatus{}, fmt.Errorf("%w: cannot run ssh: %v", ErrSSH, err)
	}
	go p.writePreface(preface, ahead)
	type read struct {
		st  peerStatus
		err error
	}
	got := make(chan read, 1)
	go func() {
		st, err := p.status(host)
		got <- read{st, err}
	}()
	var limit <-chan time.Time
	if within > 0 {
		t := time.NewTimer(within)
		defer t.Stop()
		limit = t.C
	}
	select {
	case r := <-got:
		if r.err != nil {
			return nil, peerStatus{}, r.err
		}
		return p, r.st, nil
	case <-limit:
		p.cmd.Process.Kill()
		p.Wait()
		<-got
		return nil, peerStatus{}, errMuxSilent
	}
}

// Prefaced is closed once the preface is written to the peer's stdin: what the caller writes
// there after it cannot come before it.
func (p *Peer) Prefaced() <-chan struct{} { return p.prefaced }

// writePreface writes the caller's first control messages at once, before the remote answers,
// and after them the start of an upload where one goes ahead, or as many bytes of filler where the
// remote said ok before it was compressed (a failed write shows up as a missing status line or a
// closed control channel).
func (p *Peer) writePreface(preface []byte, ahead *ahead) {
	if len(preface) > 0 {
		p.Stdin.Write(preface)
	}
	if ahead != nil {
		// Where the remote said ok, serve drops these bytes unread: the upload's start or filler
		// of the same length will do, whichever is ready.
		var wire []byte
		select {
		case <-ahead.wrote:
			wire = ahead.wire
		case <-p.skipped:
			wire = aheadFiller()
		}
		p.Stdin.Write(wire)
	}
	close(p.prefaced)
}

// status reads the remote shell's next status line; on anything else it ends ssh and explains.
func (p *Peer) status(host string) (peerStatus, error) {
	raw, err := p.Stdout.ReadSlice('\n') // at most the reader's 64 KiB
	return p.statusOf(host, raw, err)
}

// uploadLine reads the remote script's next line during the upload: an acknowledgement, a list
// of missing parts or, the last, a status line; on anything else it ends ssh and explains.
func (p *Peer) uploadLine(host string) (uploadLine, error) {
	raw, err := p.Stdout.ReadSlice('\n')
	if line := string(raw); err == nil && (strings.HasPrefix(line, "FARWING-GOT ") || strings.HasPrefix(line, "FARWING-MISSING ")) {
		l, perr := parseUploadLine(line)
		if perr != nil {
			p.Close(time.Second)
			return uploadLine{}, fmt.Errorf("%w: %s answered with a %v during the upload: %s", ErrSSH, host, perr, escape.Quote(strings.TrimSpace(line)))
		}
		return l, nil
	}
	st, err := p.statusOf(host, raw, err)
	if err != nil {
		return uploadLine{}, err
	}
	return uploadLine{st: &st}, nil
}

// statusOf checks raw, a line read with err, as a status line; on anything else it ends ssh and
// explains.
func (p *Peer) statusOf(host string, raw []byte, err error) (peerStatus, error) {
	line := string(raw)
	st, perr := parseStatus(line)
	if err != nil || perr != nil {
		if err == nil && strings.HasPrefix(line, "FARWING-PEER ") {
			p.Close(time.Second)
			return peerStatus{}, fmt.Errorf("%w: %s answered with a %v", ErrSSH, host, perr) // %q inside: escaped
		}
		if err != nil && len(raw) == 0 {
			// The remote ended without a word (a peer that died before its first write prints
			// its own status line): let ssh finish, with its exit status and the remote's
			// standard error, before judging.
			p.exited(2 * time.Second)
		}
		p.cmd.Process.Kill()
		werr := p.Wait()
		return peerStatus{}, sshError(host, p.stderr.String(), werr, line)
	}
	return st, nil
}

// sshError turns ssh's exit and stderr into one line that says what went wrong.
func sshError(host, stderr string, err error, got string) error {
	msg := escape.Text(lastMeaningful(stderr))
	switch {
	case strings.Contains(stderr, "Could not resolve hostname"):
		return fmt.Errorf("%w: cannot resolve host %s (%s)", ErrSSH, host, msg)
	case strings.Contains(stderr, "Permission denied ("):
		// ssh's own refusal, "user@host: Permission denied (publickey,password)."; scp's
		// "scp: PATH: Permission denied" is about a file, and falls through.
		return fmt.Errorf("%w: authentication to %s failed (%s); check your key, ssh-agent or -i", ErrSSH, host, msg)
	case strings.Contains(stderr, "Connection refused"), strings.Contains(stderr, "timed out"),
		strings.Contains(stderr, "No route to host"), strings.Contains(stderr, "Network is unreachable"):
		return fmt.Errorf("%w: cannot connect to %s (%s)", ErrSSH, host, msg)
	case msg != "":
		return fmt.Errorf("%w: %s: %s", ErrSSH, host, msg)
	case got != "":
		return fmt.Errorf("%w: %s answered %s instead of starting the peer (is the login shell printing text?)", ErrSSH, host, escape.Quote(strings.TrimSpace(got)))
	default:
		return fmt.Errorf("%w: ssh to %s ended: %v", ErrSSH, host, err)
	}
}

func lastMeaningful(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "Warning: Permanently added") {
			return strings.TrimPrefix(l, "ssh: ")
		}
	}
	return ""
}

// Stderr is what the remote side (ssh and the peer) wrote to standard error, last 8 KiB.
func (p *Peer) Stderr() string { return p.stderr.String() }

// Ended explains why the control channel to the peer closed (err: what the reader saw), waiting
// up to wait for ssh to exit: the local ssh killed, the connection lost, the peer gone with its
// last words (escaped). While ssh is still running after wait it returns err.
func (p *Peer) Ended(err error, wait time.Duration) error {
	if !p.exited(wait) {
		return err
	}
	last := escape.Text(lastMeaningful(p.stderr.String()))
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		if last != "" {
			return fmt.Errorf("%w: %s", err, last)
		}
		return err
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return fmt.Errorf("%w: the local ssh process (pid %d) was killed by signal %d (%s)", ErrSSH, ee.Pid(), ws.Signal(), ws.Signal())
	case ee.ExitCode() == 255:
		if last == "" {
			last = "no message"
		}
		return fmt.Errorf("%w: the ssh connection ended (ssh exit status 255: %s)", ErrSSH, last)
	case ee.ExitCode() > 128 && ee.ExitCode() < 128+65:
		return fmt.Errorf("%w: it was killed by signal %d (%s)", err, ee.ExitCode()-128, syscall.Signal(ee.ExitCode()-128))
	case last != "":
		return fmt.Errorf("%w: it exited with status %d (%s)", err, ee.ExitCode(), last)
	}
	return fmt.Errorf("%w: it exited with status %d", err, ee.ExitCode())
}

// exited waits up to within for ssh to exit, and reports whether it has (Wait then returns at once).
func (p *Peer) exited(within time.Duration) bool {
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}

// Wait waits for the ssh process to end.
func (p *Peer) Wait() error {
	p.waitOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	return p.waitErr
}

// Close ends the session: it closes the control channel, on which the remote peer exits, and
// gives ssh grace to leave on its own before killing it. The transfer's outcome is already known
// here, so waiting a round trip for ssh's own exit would only add to the copy's time.
func (p *Peer) Close(grace time.Duration) {
	p.Stdin.Close()
	if grace <= 0 {
		go p.Wait() // reap it when it leaves
		return
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-done
	}
}

// tail keeps the last 8 KiB written to it.
type tail struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if t.b.Len() > 8<<10 {
		rest := append([]byte(nil), t.b.Bytes()[t.b.Len()-8<<10:]...)
		t.b.Reset()
		t.b.Write(rest)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

package bootstrap

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// RelayFlag makes `farwing serve` a relay: it connects to the local socket named after it and
// copies between it and its standard input and output (a copy's lane where UDP and TCP are
// blocked, carried by an ssh session).
const RelayFlag = "--relay"

// Relay starts one more ssh connection to the peer's host, its own TCP connection as the
// upload's helpers have (ControlMaster=no, BatchMode: one that would ask for a password fails),
// running the installed peer as `farwing serve --relay SOCKET`, and returns the session's
// standard input and output as one connection. Closing it ends the ssh process.
func (p *Peer) Relay(ctx context.Context, socket string) (net.Conn, error) {
	if p.se == nil {
		return nil, fmt.Errorf("%w: no ssh session to relay over", ErrSSH)
	}
	script := "exec " + shellQuote(p.Path) + " serve " + RelayFlag + " " + shellQuote(socket)
	cmd := p.se.helperCmd(context.WithoutCancel(ctx), p.host, script)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.WaitDelay = 2 * time.Second
	if p.se.Verbose {
		cmd.Stderr = escape.NewWriter(os.Stderr) // the remote's text never reaches the terminal raw
	}
	err = cmd.Start()
	inR.Close() // the child's ends
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("%w: cannot run ssh: %v", ErrSSH, err)
	}
	c := &relayConn{r: outR, w: inW, cmd: cmd}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	c.stop = stop
	return c, nil
}

// relayConn is an ssh process's standard output and input as a net.Conn (pipes take deadlines).
type relayConn struct {
	r, w *os.File
	cmd  *exec.Cmd
	stop func() bool
	once sync.Once
}

func (c *relayConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *relayConn) Write(b []byte) (int, error) { return c.w.Write(b) }

// Close closes both pipes, on which the remote relay and ssh end; ssh is killed where it has not
// a moment later.
func (c *relayConn) Close() error {
	c.once.Do(func() {
		c.stop()
		c.w.Close()
		c.r.Close()
		go func() {
			t := time.AfterFunc(2*time.Second, func() { c.cmd.Process.Kill() })
			c.cmd.Wait()
			t.Stop()
		}()
	})
	return nil
}

func (c *relayConn) LocalAddr() net.Addr  { return relayAddr{} }
func (c *relayConn) RemoteAddr() net.Addr { return relayAddr{} }
func (c *relayConn) SetDeadline(t time.Time) error {
	c.r.SetReadDeadline(t)
	return c.w.SetWriteDeadline(t)
}
func (c *relayConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *relayConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

// relayAddr is a relay's address: an ssh session has none of its own.
type relayAddr struct{}

func (relayAddr) Network() string { return "ssh" }
func (relayAddr) String() string  { return "ssh" }

var _ net.Conn = (*relayConn)(nil)

package xfer

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/tcpbench"
)

// TCPTest is one TCP measurement the bench asks the remote peer to take part in.
type TCPTest struct {
	Streams int    `json:"streams"`
	CC      string `json:"cc,omitempty"` // the sending sockets' congestion control ("": the kernel's default)
	Seconds int    `json:"seconds"`
	// PeerSends: the remote peer sends and the client receives (the bench's --pull).
	PeerSends bool `json:"peer_sends,omitempty"`
}

func (t TCPTest) check() error {
	if t.Streams < 1 || t.Streams > tcpbench.MaxStreams || t.Seconds < 1 || t.Seconds > tcpbench.MaxSeconds {
		return fmt.Errorf("%w: a TCP test of %d streams for %d s (at most %d streams, %d s)", ErrProtocol, t.Streams, t.Seconds, tcpbench.MaxStreams, tcpbench.MaxSeconds)
	}
	return nil
}

// benchIdle is how long a bench peer waits for the client's next request: the client asks for
// fresh facts before each run, and a copy row's run lasts at most its limit.
const benchIdle = 10 * time.Minute

// acceptWithin bounds how long a test's listener waits for its streams.
const acceptWithin = 15 * time.Second

// serveBench is the remote peer of `farwing bench`: it reports its host's facts and takes part
// in TCP tests, one at a time, until the client says bye. Its listener exists only during a
// test, on an ephemeral port, and counts only streams that present the test's token.
func serveBench(ctx context.Context, ctl *Control, sshConn string) error {
	// Listen on the address the client reached this host's sshd at, nowhere else.
	client, bind := netip.Addr{}, "0.0.0.0:0"
	if f := strings.Fields(sshConn); len(f) == 4 {
		if a, err := netip.ParseAddr(f[0]); err == nil {
			client = a.Unmap()
		}
		if a, err := netip.ParseAddr(f[2]); err == nil {
			bind = netip.AddrPortFrom(a.Unmap(), 0).String()
		}
	}
	facts := func() *hostinfo.Facts {
		f := hostinfo.Gather(client, sshdVersion(), Version)
		return &f
	}
	if err := ctl.Send(Msg{T: "facts", Facts: facts()}); err != nil {
		return err
	}
	for {
		m, err := ctl.Next(ctx, benchIdle)
		if err != nil {
			return err
		}
		switch m.T {
		case "bye":
			return nil
		case "facts":
			if err := ctl.Send(Msg{T: "facts", Facts: facts()}); err != nil {
				return err
			}
		case "tcp":
			if m.TCPTest == nil {
				return fmt.Errorf("%w: a tcp request without its test", ErrProtocol)
			}
			r, err := serveTCP(ctx, ctl, bind, *m.TCPTest)
			if err != nil {
				// A test that failed here (no such congestion control, streams that never came) is
				// the client's to report; the peer stays for the next one.
				if err := ctl.Send(Msg{T: "error", Err: err.Error(), Code: ExitCode(err)}); err != nil {
					return err
				}
				continue
			}
			if err := ctl.Send(Msg{T: "tcp-done", TCPResult: &r}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unexpected %s message in a bench", ErrProtocol, escape.Quote(m.T))
		}
	}
}

func serveTCP(ctx context.Context, ctl *Control, bind string, t TCPTest) (tcpbench.Result, error) {
	if err := t.check(); err != nil {
		return tcpbench.Result{}, err
	}
	if t.PeerSends {
		if err := tcpbench.CheckCC(t.CC); err != nil {
			return tcpbench.Result{}, err
		}
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return tcpbench.Result{}, err
	}
	token := tcpbench.NewToken()
	if err := ctl.Send(Msg{T: "listen", Port: ln.Addr().(*net.TCPAddr).Port, Token: hex.EncodeToString(token)}); err != nil {
		ln.Close()
		return tcpbench.Result{}, err
	}
	conns, err := tcpbench.Accept(ctx, ln.(*net.TCPListener), t.Streams, token, acceptWithin)
	if err != nil {
		return tcpbench.Result{}, err
	}
	defer tcpbench.Close(conns)
	d := time.Duration(t.Seconds) * time.Second
	if !t.PeerSends {
		return tcpbench.Receive(ctx, conns, time.Now().Add(d+acceptWithin))
	}
	for _, c := range conns {
		if err := tcpbench.SetCC(c, t.CC); err != nil {
			return tcpbench.Result{}, err
		}
	}
	return tcpbench.Send(ctx, conns, d)
}

// sshdVersion is the command whose first line names this host's OpenSSH server.
func sshdVersion() []string {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			return []string{p, "-V"}
		}
	}
	return []string{"ssh", "-V"}
}

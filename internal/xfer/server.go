package xfer

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
)

func bootstrapLast(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Serve is the remote peer: it speaks the control protocol on r/w (the ssh session) and runs the
// receiving (push) or sending (pull) end.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	ctl := NewControl(r, w)
	hello, err := ctl.Expect("hello")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		ctl.Send(Msg{T: "error", Err: err.Error(), Code: ExitCode(err)})
		return err
	}
	if hello.Debug {
		session.SetDebug(true)
	}
	defer session.StartProfile(hello.Profile, "serve")()
	if hello.Proto != Proto {
		return fail(fmt.Errorf("the remote farwing speaks control protocol %d, the client %d; upgrade one of them", Proto, hello.Proto))
	}
	crypto, err := wire.NewCrypto(hello.Key, hello.ConnID, wire.ServerToClient)
	if err != nil {
		return fail(err)
	}
	// Bind the address family the client reached us with, and report the address it used.
	bind, addr := "0.0.0.0:0", ""
	if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 {
		if a, err := netip.ParseAddr(f[0]); err == nil && !a.Unmap().Is4() {
			bind = "[::]:0"
		}
		addr = f[2]
	}
	path, err := session.Open(bind, crypto, true, 0)
	if err != nil {
		return fail(err)
	}
	defer path.Close()
	ready := Msg{T: "ready", Version: Version, Proto: Proto, Ports: path.Ports(), Addr: addr}

	switch hello.Role {
	case "recv":
		plan, err := fcopy.NewPlan(hello.Files)
		if err != nil {
			return fail(err)
		}
		var target *fcopy.Target
		if !hello.Sink {
			if target, err = fcopy.ResolveTarget(expandHome(hello.Dest), hello.Files); err != nil {
				return fail(err)
			}
		}
		window := min(max(hello.Window, 16), 1024)
		ready.Window = window
		if err := ctl.Send(ready); err != nil {
			return err
		}
		if err := path.WaitPeers(ctx, 15*time.Second); err != nil {
			return fail(err)
		}
		_, err = runRecv(ctx, ctl, path, plan, target, fcopy.WriterOptions{Sink: hello.Sink, Preserve: hello.Preserve}, window, true, nil)
		return err
	case "send":
		var paths []string
		for _, p := range hello.Paths {
			paths = append(paths, expandHome(p))
		}
		sources, err := fcopy.Collect(paths, hello.Recursive)
		if err != nil {
			return fail(err)
		}
		plan, err := fcopy.NewPlan(sources.Files)
		if err != nil {
			return fail(err)
		}
		ready.Files = sources.Files
		path.SendTrainOnHello()
		if err := ctl.Send(ready); err != nil {
			return err
		}
		acc, err := ctl.Expect("accept")
		if err != nil {
			return err
		}
		if err := path.WaitPeers(ctx, 15*time.Second); err != nil {
			return fail(err)
		}
		window := min(max(acc.Window, 16), 1024)
		pol, err := cc.ParsePolicy(hello.Policy)
		if err != nil {
			return fail(err)
		}
		var mode fec.Mode
		if hello.FEC != "" {
			if mode, err = fec.ParseMode(hello.FEC); err != nil {
				return fail(err)
			}
		}
		_, err = runSend(ctx, ctl, path, plan, sources.Open(), session.SenderConfig{Rate: hello.Rate, MinRate: hello.MinRate,
			Policy: pol, Window: window, FEC: mode}, nil)
		return err
	default:
		return fail(fmt.Errorf("unknown role %q", hello.Role))
	}
}

// expandHome resolves a leading "~/" and relative paths against the home directory, as scp does
// for remote paths.
func expandHome(p string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	switch {
	case p == "" || p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return home + p[1:]
	case !strings.HasPrefix(p, "/"):
		return home + "/" + p
	}
	return p
}

package doctorpeer

import (
	"context"
	"errors"
	"io"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/internal/xfer/xfertest"
	"github.com/farwing/farwing/lane/lanetest"
)

// doctorEnv is an in-memory network whose remote end is the real Serve, with the doctor's role.
func doctorEnv(t *testing.T, link lanetest.Link) *xfertest.Env {
	e := xfertest.New(t, link, 1)
	e.Roles = map[string]xfer.Role{xfer.RoleDoctor: Serve}
	return e
}

// hostileServer is a double of Serve: it sends ready (a real key, no lanes), reads the client's
// hello, runs script, then waits for the client to leave.
func hostileServer(script func(ctl *xfer.Control, hello xfer.Msg) error) xfertest.ServeFunc {
	return func(ctx context.Context, r io.Reader, w io.Writer, _ string, _ xfer.ServeOptions) error {
		ctl := xfer.NewControl(r, w, nil)
		ctl.Start(nil)
		ready, err := xfertest.Ready(xfertest.ServerHost.String())
		if err != nil {
			return err
		}
		ctl.Send(ready)
		hello, err := ctl.Expect(ctx, xfer.KindHello, 5*time.Second)
		if err != nil {
			return err
		}
		if err := script(ctl, hello); err != nil {
			return err
		}
		for {
			_, err := ctl.Next(ctx, 10*time.Second)
			var re *xfer.RemoteError
			if errors.As(err, &re) {
				continue
			}
			if err != nil {
				return nil
			}
		}
	}
}

// TestDoctorInProcess: the doctor's measurements against the real Serve (role doctor) over
// lanetest: the handshake's round trip is at least the link's, a train estimate is a rate when
// there is one (no bound above: a train released bunched looks faster than the link), the peer's
// facts arrive, the clock offset (one clock at both ends) is within its uncertainty. With every
// datagram lost, or only the server's, the report says so (and which), and Measure itself does
// not fail.
func TestDoctorInProcess(t *testing.T) {
	e := doctorEnv(t, lanetest.Link{Delay: 15 * time.Millisecond, Rate: 50e6})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Measure(ctx, e.Options(), "host")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if rep.UDPError != "" || rep.RemoteHeard != session.Lanes || rep.RTTSeconds < 0.030 || len(rep.Ports) != session.Lanes || len(rep.LocalPorts) != session.Lanes {
		t.Fatalf("UDP: %q, heard %d, rtt %.4f, ports %v %v", rep.UDPError, rep.RemoteHeard, rep.RTTSeconds, rep.Ports, rep.LocalPorts)
	}
	if rep.UpOK != (rep.UpBps > 0) || rep.DownOK != (rep.DownBps > 0) {
		t.Errorf("trains %v/%v, %v/%v through a 50 Mbit/s link", rep.UpBps, rep.UpOK, rep.DownBps, rep.DownOK)
	}
	for _, c := range []*Capacity{rep.Up, rep.Down} {
		if c == nil {
			t.Fatal("no capacity probe on a working path")
		}
		t.Logf("probe: %+v", *c)
		if c.Trains != probeTrains || c.Sent != c.Trains*c.Len || c.Arrived < 0 || c.Arrived > c.Sent || len(c.Readings) != c.Trains ||
			(c.Bps > 0) != (c.Why == CapAgreed) || (c.AtLeastBps > 0) != (c.Why == CapDisagreed) {
			t.Errorf("probe through a 50 Mbit/s link: %+v", *c)
		}
	}
	if rep.Remote.Hostname == "" || rep.Remote.Cores <= 0 || rep.Local.Cores <= 0 || rep.Remote.Farwing != xfer.Version {
		t.Errorf("facts: remote %+v local %+v", rep.Remote, rep.Local)
	}
	if rep.ClockUncertainty <= 0 || math.Abs(rep.ClockOffset) > rep.ClockUncertainty+0.002 {
		t.Errorf("clock offset %.5f ± %.5f s with one clock", rep.ClockOffset, rep.ClockUncertainty)
	}

	for _, c := range []struct {
		name  string
		drop  func(from, to netip.AddrPort, b []byte) bool
		heard int
	}{
		{"all UDP lost", func(netip.AddrPort, netip.AddrPort, []byte) bool { return true }, 0},
		{"the server's answers lost", func(from, _ netip.AddrPort, _ []byte) bool { return from.Addr() == xfertest.ServerHost }, session.Lanes},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := doctorEnv(t, lanetest.Link{Drop: c.drop})
			rep, err := Measure(ctx, e.Options(), "host")
			if err != nil {
				t.Fatal(err)
			}
			if rep.UDPError == "" || rep.RemoteHeard != c.heard || rep.UpOK || rep.DownOK || rep.Up != nil || rep.Down != nil || rep.Remote.Hostname == "" {
				t.Fatalf("error %q, heard %d, trains %v %v, remote %q", rep.UDPError, rep.RemoteHeard, rep.UpOK, rep.DownOK, rep.Remote.Hostname)
			}
		})
	}
}

// TestDoctorHostilePeer: a doctor peer's report out of bounds (negative buffers, more lanes than
// there are, no lanes at all) is refused with the protocol code.
func TestDoctorHostilePeer(t *testing.T) {
	facts := hostinfo.Facts{Hostname: "h"}
	for name, m := range map[string]xfer.Msg{
		"negative buffer": {T: xfer.KindFacts, Facts: &facts, Doctor: &xfer.DoctorLanes{RecvBuf: -1, SendBuf: 5}},
		"heard 7 lanes":   {T: xfer.KindFacts, Facts: &facts, Doctor: &xfer.DoctorLanes{RecvBuf: 1, SendBuf: 1, Heard: 7}},
		"no lanes":        {T: xfer.KindFacts, Facts: &facts},
	} {
		t.Run(name, func(t *testing.T) {
			e := xfertest.New(t, lanetest.Link{}, 1)
			e.Serve = hostileServer(func(ctl *xfer.Control, _ xfer.Msg) error { return ctl.Send(m) })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := Measure(ctx, e.Options(), "host")
			if xfer.CodeOf(err) != xfer.CodeProtocol {
				t.Fatalf("%v (exit %d)", err, xfer.CodeOf(err))
			}
		})
	}
}

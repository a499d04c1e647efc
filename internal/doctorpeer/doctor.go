// Package doctorpeer is farwing doctor's remote peer, both ends of it: the client's side (Measure:
// ssh's start, the UDP handshake and packet trains both ways, both ends' facts and lane buffers,
// the clock) and the peer's (Serve, which cmd/farwing's serve registers for the hello role
// xfer.RoleDoctor). It speaks xfer's control protocol (xfer.Session, xfer.Served; its messages
// are in internal/xfer/messages.go).
package doctorpeer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
)

// checkLanes bounds a peer's report: sizes of 0 to 2 GiB, at most four lanes heard.
func checkLanes(d xfer.DoctorLanes) error {
	if d.RecvBuf < 0 || d.SendBuf < 0 || d.RecvBuf > 1<<31 || d.SendBuf > 1<<31 || d.Heard < 0 || d.Heard > session.Lanes {
		return fmt.Errorf("%w: the doctor peer reports buffers of %d and %d bytes, %d lanes heard", xfer.ErrProtocol, d.RecvBuf, d.SendBuf, d.Heard)
	}
	return nil
}

// doctorIdle bounds a doctor peer's wait for the client's next request.
const doctorIdle = time.Minute

// clockSamples is how many round trips the clock offset is measured over (the shortest counts).
const clockSamples = 5

// Serve is the remote peer of `farwing doctor` (the xfer.Role of xfer.RoleDoctor): its lanes are
// open and answer the client's UDP handshake and packet train as for a copy (and send a train back
// once a lane is proven), it reports its host's facts and lanes, then answers "clock" (its wall
// clock now) and "lanes" (what its lanes heard) until bye.
func Serve(ctx context.Context, s *xfer.Served) error {
	ctl, path, client := s.Control, s.Path, s.Client
	path.SendTrainOnHello() // once a lane is proven (no SetSSHClient), as the doctor reports
	lanes := func() *xfer.DoctorLanes {
		r, s := path.Buffers()
		return &xfer.DoctorLanes{RecvBuf: r, SendBuf: s, Heard: path.LanesHeard()}
	}
	f := hostinfo.Gather(client, hostinfo.SSHD(), xfer.Version)
	if err := ctl.Send(xfer.Msg{T: xfer.KindFacts, Facts: &f, Doctor: lanes()}); err != nil {
		return err
	}
	for {
		m, err := ctl.Next(ctx, doctorIdle)
		if err != nil {
			return err
		}
		switch m.T {
		case xfer.KindBye:
			return nil
		case xfer.KindClock:
			err = ctl.Send(xfer.Msg{T: xfer.KindClock, At: time.Now().UnixNano()})
		case xfer.KindLanes:
			err = ctl.Send(xfer.Msg{T: xfer.KindLanes, Doctor: lanes()})
		default:
			return fmt.Errorf("%w: a doctor peer has no answer to %s", xfer.ErrProtocol, escape.Quote(string(m.T)))
		}
		if err != nil {
			return err
		}
	}
}

// Report is what `farwing doctor` measured on the path to a host; the verdicts are the
// command's (cmd/farwing/doctor.go).
type Report struct {
	Host       string  `json:"host"`
	SSHSeconds float64 `json:"ssh_seconds"` // from starting ssh to the remote peer's ready, an upload included
	Uploaded   bool    `json:"peer_uploaded"`
	PeerPath   string  `json:"peer_path,omitempty"` // escaped
	RemoteOS   string  `json:"remote_os,omitempty"` // escaped

	Local       hostinfo.Facts   `json:"local"`
	Remote      hostinfo.Facts   `json:"remote"` // as the peer reported them (Clean)
	LocalLanes  xfer.DoctorLanes `json:"local_lanes"`
	RemoteLanes xfer.DoctorLanes `json:"remote_lanes"`

	Addr       string `json:"udp_addr,omitempty"` // where the lanes went
	Ports      []int  `json:"remote_ports,omitempty"`
	LocalPorts []int  `json:"local_ports,omitempty"`
	// UDPError is why the UDP handshake failed ("" when all four lanes answered); RemoteHeard is
	// then how many lanes of the peer heard this end's hellos.
	UDPError    string  `json:"udp_error,omitempty"`
	RemoteHeard int     `json:"remote_lanes_heard"`
	RTTSeconds  float64 `json:"rtt_seconds,omitempty"` // the handshake's round trip
	// The packet trains' estimates in bits/s: Up this end → host (as the peer timed it), Down
	// host → this end (timed here); 0 with UpOK/DownOK false when no estimate came.
	UpBps   float64 `json:"train_up_bps"`
	UpOK    bool    `json:"train_up_ok"`
	DownBps float64 `json:"train_down_bps"`
	DownOK  bool    `json:"train_down_ok"`
	// ClockOffset is the remote's wall clock less this end's at the midpoint of the shortest of
	// clockSamples round trips of the control channel; ClockUncertainty is half that round trip.
	ClockOffset      float64 `json:"clock_offset_seconds"`
	ClockUncertainty float64 `json:"clock_uncertainty_seconds"`
}

// Measure starts the remote peer on host as a copy does (installing it where needed) with role
// doctor and measures the path: ssh's start time, the UDP handshake both ways, the packet trains
// both ways, both ends' facts and lane buffers, the clock offset. It fails only when the peer
// cannot be started (ssh, the platform, the install) or breaks the protocol; a UDP path that
// does not work is a finding (UDPError), not an error.
func Measure(ctx context.Context, o xfer.Options, host string) (*Report, error) {
	rep := &Report{Host: host}
	if o.Lanes == nil {
		o.Lanes = quietLanes(o.Tuning) // the lanes' buffers are a finding here, not a warning
	}
	t0 := time.Now()
	c, err := xfer.StartSession(ctx, o, host, xfer.RoleDoctor)
	rep.SSHSeconds = time.Since(t0).Seconds()
	if err != nil {
		return rep, err
	}
	defer func() {
		c.Control().Send(xfer.Msg{T: xfer.KindBye})
		c.Close(time.Second)
	}()
	info := c.Info()
	rep.Uploaded, rep.PeerPath, rep.RemoteOS = info.Uploaded, escape.Text(info.Path), escape.Text(info.RemoteOS)
	m, err := c.Control().Expect(c.Context(), xfer.KindFacts, xfer.PeerIdle)
	if err != nil {
		return rep, err
	}
	if m.Facts == nil || m.Doctor == nil {
		return rep, fmt.Errorf("%w: the doctor peer's facts message lacks its facts or lanes", xfer.ErrProtocol)
	}
	if err := checkLanes(*m.Doctor); err != nil {
		return rep, err
	}
	rep.Remote, rep.RemoteLanes = *m.Facts, *m.Doctor
	rep.Remote.Clean()
	rep.Ports = c.Ready().Ports

	// UDP: the handshake as a copy makes it, with this end's train; the peer sends its own once a
	// lane is proven.
	herr := c.OpenPath(ctx)
	if addr, aerr := c.ServerAddr(ctx); aerr == nil {
		rep.Addr = addr.String()
		rep.Local = hostinfo.Gather(addr, []string{"ssh", "-V"}, xfer.Version)
	} else {
		rep.Local = hostinfo.Gather(netip.Addr{}, []string{"ssh", "-V"}, xfer.Version)
	}
	if p := c.Path(); p != nil {
		rep.LocalPorts = p.Ports()
		rep.LocalLanes.RecvBuf, rep.LocalLanes.SendBuf = p.Buffers()
	}
	if herr != nil {
		if !errors.Is(herr, session.ErrNoUDP) {
			return rep, herr
		}
		rep.UDPError = herr.Error()
		// Did the peer hear this end at all? Its answer tells a blocked way there from a blocked
		// way back.
		if err := c.Control().Send(xfer.Msg{T: xfer.KindLanes}); err != nil {
			return rep, err
		}
		l, err := c.Control().Expect(c.Context(), xfer.KindLanes, xfer.PeerIdle)
		if err != nil {
			return rep, err
		}
		if l.Doctor == nil {
			return rep, fmt.Errorf("%w: a lanes message without its lanes", xfer.ErrProtocol)
		}
		if err := checkLanes(*l.Doctor); err != nil {
			return rep, err
		}
		rep.RemoteHeard = l.Doctor.Heard
	} else {
		rep.RemoteHeard = session.Lanes
		rep.RTTSeconds = c.RTT().Seconds()
		// Both trains' reports, for at most a second and a half (a report comes 150 ms after the
		// first datagram of a train at the latest, a round trip later at this end).
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			rep.UpBps, rep.UpOK = c.Path().TrainEstimate()
			rep.DownBps, rep.DownOK = c.Path().ReceivedTrain()
			if rep.UpOK && rep.DownOK {
				break
			}
		}
		// A 0 report means the train could not be timed.
		rep.UpOK = rep.UpOK && rep.UpBps > 0
		rep.DownOK = rep.DownOK && rep.DownBps > 0
	}

	// The clock: the peer's wall clock against the midpoint of the request's round trip.
	best := time.Duration(-1)
	for range clockSamples {
		t0 := time.Now()
		if err := c.Control().Send(xfer.Msg{T: xfer.KindClock}); err != nil {
			return rep, err
		}
		m, err := c.Control().Expect(c.Context(), xfer.KindClock, xfer.PeerIdle)
		if err != nil {
			return rep, err
		}
		rtt := time.Since(t0)
		if m.At <= 0 {
			return rep, fmt.Errorf("%w: the doctor peer's clock reads %d", xfer.ErrProtocol, m.At)
		}
		if best < 0 || rtt < best {
			best = rtt
			rep.ClockOffset = time.Unix(0, m.At).Sub(t0.Add(rtt / 2)).Seconds()
			rep.ClockUncertainty = (rtt / 2).Seconds()
		}
	}
	return rep, nil
}

// quietLanes opens UDP lanes as a copy does (session.ListenUDP with t's lane options), without
// the capped-buffer warning.
func quietLanes(t tuning.Settings) xfer.LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) {
		opt := t.Lane(0)
		opt.Warn = func(string) {}
		return session.ListenUDP(bind, opt)
	}
}

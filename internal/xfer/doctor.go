package xfer

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
	"github.com/farwing/farwing/lane"
)

// DoctorLanes is one end's UDP lanes as `farwing doctor` reports them.
type DoctorLanes struct {
	// RecvBuf and SendBuf are the socket buffers the kernel granted each lane, in bytes of data
	// (what it reports, halved), against lane.DefaultBuffer asked for.
	RecvBuf int `json:"recv_buffer"`
	SendBuf int `json:"send_buffer"`
	// Heard (the remote peer's "lanes" answer) is how many of its lanes received the client's
	// hellos.
	Heard int `json:"lanes_heard,omitempty"`
}

// check bounds a peer's report: sizes of 0 to 2 GiB, at most four lanes heard.
func (d DoctorLanes) check() error {
	if d.RecvBuf < 0 || d.SendBuf < 0 || d.RecvBuf > 1<<31 || d.SendBuf > 1<<31 || d.Heard < 0 || d.Heard > session.Lanes {
		return fmt.Errorf("%w: the doctor peer reports buffers of %d and %d bytes, %d lanes heard", ErrProtocol, d.RecvBuf, d.SendBuf, d.Heard)
	}
	return nil
}

// doctorIdle bounds a doctor peer's wait for the client's next request.
const doctorIdle = time.Minute

// clockSamples is how many round trips the clock offset is measured over (the shortest counts).
const clockSamples = 5

// serveDoctor is the remote peer of `farwing doctor`: its lanes are open and answer the client's
// UDP handshake and packet train as for a copy (and send a train back once a lane is proven), it
// reports its host's facts and lanes, then answers "clock" (its wall clock now) and "lanes" (what
// its lanes heard) until bye.
func serveDoctor(ctx context.Context, ctl *Control, path *session.Path, sshConn string) error {
	client, _ := sshEnds(sshConn)
	path.SendTrainOnHello() // once a lane is proven (no SetSSHClient), as the doctor reports
	lanes := func() *DoctorLanes {
		r, s := path.Buffers()
		return &DoctorLanes{RecvBuf: r, SendBuf: s, Heard: path.LanesHeard()}
	}
	f := hostinfo.Gather(client, sshdVersion(), Version)
	if err := ctl.Send(Msg{T: KindFacts, Facts: &f, Doctor: lanes()}); err != nil {
		return err
	}
	for {
		m, err := ctl.Next(ctx, doctorIdle)
		if err != nil {
			return err
		}
		switch m.T {
		case KindBye:
			return nil
		case KindClock:
			err = ctl.Send(Msg{T: KindClock, At: time.Now().UnixNano()})
		case KindLanes:
			err = ctl.Send(Msg{T: KindLanes, Doctor: lanes()})
		default:
			return fmt.Errorf("%w: a doctor peer has no answer to %s", ErrProtocol, escape.Quote(string(m.T)))
		}
		if err != nil {
			return err
		}
	}
}

// DoctorReport is what `farwing doctor` measured on the path to a host; the verdicts are the
// command's (cmd/farwing/doctor.go).
type DoctorReport struct {
	Host       string  `json:"host"`
	SSHSeconds float64 `json:"ssh_seconds"` // from starting ssh to the remote peer's ready, an upload included
	Uploaded   bool    `json:"peer_uploaded"`
	PeerPath   string  `json:"peer_path,omitempty"` // escaped
	RemoteOS   string  `json:"remote_os,omitempty"` // escaped

	Local       hostinfo.Facts `json:"local"`
	Remote      hostinfo.Facts `json:"remote"` // as the peer reported them (Clean)
	LocalLanes  DoctorLanes    `json:"local_lanes"`
	RemoteLanes DoctorLanes    `json:"remote_lanes"`

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

// Doctor starts the remote peer on host as a copy does (installing it where needed) with role
// doctor and measures the path: ssh's start time, the UDP handshake both ways, the packet trains
// both ways, both ends' facts and lane buffers, the clock offset. It fails only when the peer
// cannot be started (ssh, the platform, the install) or breaks the protocol; a UDP path that
// does not work is a finding (UDPError), not an error.
func Doctor(ctx context.Context, o Options, host string) (*DoctorReport, error) {
	rep := &DoctorReport{Host: host}
	if o.Lanes == nil {
		o.Lanes = quietLanes(o.Tuning) // the lanes' buffers are a finding here, not a warning
	}
	t0 := time.Now()
	res := &Result{}
	c, ready, err := start(ctx, &o, host, Msg{Role: RoleDoctor}, res)
	rep.SSHSeconds = time.Since(t0).Seconds()
	if err != nil {
		return rep, err
	}
	defer func() {
		c.ctl.Send(Msg{T: KindBye})
		c.close(time.Second)
	}()
	rep.Uploaded, rep.PeerPath, rep.RemoteOS = res.PeerUploaded, res.PeerPath, escape.Text(c.info.RemoteOS)
	m, err := c.ctl.Expect(c.ctx, KindFacts, PeerIdle)
	if err != nil {
		return rep, err
	}
	if m.Facts == nil || m.Doctor == nil {
		return rep, fmt.Errorf("%w: the doctor peer's facts message lacks its facts or lanes", ErrProtocol)
	}
	if err := m.Doctor.check(); err != nil {
		return rep, err
	}
	rep.Remote, rep.RemoteLanes = *m.Facts, *m.Doctor
	rep.Remote.Clean()
	rep.Ports = ready.Ports

	// UDP: the handshake as a copy makes it, with this end's train; the peer sends its own once a
	// lane is proven.
	herr := c.openPath(ctx, &o, host, ready, c.crypto, true, false)
	if addr, aerr := serverAddr(ctx, host, c.info.HostName, ready.Addr); aerr == nil {
		rep.Addr = addr.String()
		rep.Local = hostinfo.Gather(addr, []string{"ssh", "-V"}, Version)
	} else {
		rep.Local = hostinfo.Gather(netip.Addr{}, []string{"ssh", "-V"}, Version)
	}
	if c.path != nil {
		rep.LocalPorts = c.path.Ports()
		rep.LocalLanes.RecvBuf, rep.LocalLanes.SendBuf = c.path.Buffers()
	}
	if herr != nil {
		if !errors.Is(herr, session.ErrNoUDP) {
			return rep, herr
		}
		rep.UDPError = herr.Error()
		// Did the peer hear this end at all? Its answer tells a blocked way there from a blocked
		// way back.
		if err := c.ctl.Send(Msg{T: KindLanes}); err != nil {
			return rep, err
		}
		l, err := c.ctl.Expect(c.ctx, KindLanes, PeerIdle)
		if err != nil {
			return rep, err
		}
		if l.Doctor == nil {
			return rep, fmt.Errorf("%w: a lanes message without its lanes", ErrProtocol)
		}
		if err := l.Doctor.check(); err != nil {
			return rep, err
		}
		rep.RemoteHeard = l.Doctor.Heard
	} else {
		rep.RemoteHeard = session.Lanes
		rep.RTTSeconds = c.rtt.Seconds()
		// Both trains' reports, for at most a second and a half (a report comes 150 ms after the
		// first datagram of a train at the latest, a round trip later at this end).
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			rep.UpBps, rep.UpOK = c.path.TrainEstimate()
			rep.DownBps, rep.DownOK = c.path.ReceivedTrain()
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
		if err := c.ctl.Send(Msg{T: KindClock}); err != nil {
			return rep, err
		}
		m, err := c.ctl.Expect(c.ctx, KindClock, PeerIdle)
		if err != nil {
			return rep, err
		}
		rtt := time.Since(t0)
		if m.At <= 0 {
			return rep, fmt.Errorf("%w: the doctor peer's clock reads %d", ErrProtocol, m.At)
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
func quietLanes(t tuning.Settings) LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) {
		opt := t.Lane(0)
		opt.Warn = func(string) {}
		return session.ListenUDP(bind, opt)
	}
}

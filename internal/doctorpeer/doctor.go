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
	rx := newProbeRx()
	path.SetHandler(rx) // the client's probe trains (probe.go)
	probed := false
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
		case xfer.KindProbe:
			if probed || m.Probe == nil {
				return fmt.Errorf("%w: a second probe, or one without its trains", xfer.ErrProtocol)
			}
			probed = true
			err = serveProbe(ctx, ctl, path, rx, *m.Probe)
		default:
			return fmt.Errorf("%w: a doctor peer has no answer to %s", xfer.ErrProtocol, escape.Quote(string(m.T)))
		}
		if err != nil {
			return err
		}
	}
}

// serveProbe answers a "probe": it waits for the client's trains (sent before the request) still
// on the way, sends its own, and answers with the arrivals of the client's.
func serveProbe(ctx context.Context, ctl *xfer.Control, path *session.Path, rx *probeRx, req xfer.DoctorProbe) error {
	if err := checkTrains(req.Up); err != nil {
		return err
	}
	if err := checkTrains(req.Down); err != nil {
		return err
	}
	start := time.Now()
	rx.expect(req.Up) // what came beyond the request is dropped
	rx.wait(ctx, req.Up, start, start.Add(probeWait(req.Up)))
	// The client's trains are in: this end's go now, so that the two do not share the CPUs. A
	// lane that is not proven sends nothing, and the client finds no trains came.
	if path.WaitPeers(ctx, time.Second) == nil {
		sendTrains(ctx, path, req.Down)
	}
	return ctl.Send(xfer.Msg{T: xfer.KindProbe, Probe: &xfer.DoctorProbe{Arrivals: toGaps(rx.arrivals(req.Up))}})
}

// probeWait bounds the wait for a direction's trains t: a second, and twice their gaps.
func probeWait(t xfer.DoctorTrains) time.Duration {
	return time.Second + time.Duration(2*t.Trains*t.GapMicros)*time.Microsecond
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
	// Up and Down are the capacity probe's trains each way and the verdict on them (probe.go);
	// nil where it was not made (no UDP path). ProbeSeconds is how long it took.
	Up           *Capacity `json:"capacity_up,omitempty"`
	Down         *Capacity `json:"capacity_down,omitempty"`
	ProbeSeconds float64   `json:"probe_seconds,omitempty"`
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
	o.Lanes = stamped(o.Lanes)
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
		if err := probe(ctx, c, rep); err != nil {
			return rep, err
		}
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

// probe makes the capacity probe (probe.go): it asks the peer for it, sends this end's trains,
// reads the peer's and judges both directions into rep.Up and rep.Down.
func probe(ctx context.Context, c *xfer.Session, rep *Report) error {
	t0 := time.Now()
	defer func() { rep.ProbeSeconds = time.Since(t0).Seconds() }()
	ipSize := probeDatagram + lane.IPv4UDPHeaders
	if a, err := netip.ParseAddr(rep.Addr); err == nil && a.Is6() && !a.Is4In6() {
		ipSize = probeDatagram + lane.IPv6UDPHeaders
	}
	t := trainsFor(sizingRate(rep), pacingRate(rep), ipSize)
	req := xfer.DoctorProbe{Up: t, Down: t}
	rx := newProbeRx()
	rx.stamped = true
	rx.expect(req.Down)
	c.Path().SetHandler(rx)
	// The request goes after the trains: the peer then waits only for those still on the way, not
	// for a sender that a busy machine paused between two trains.
	sendTrains(ctx, c.Path(), req.Up) // one not sent is found lost
	if err := c.Control().Send(xfer.Msg{T: xfer.KindProbe, Probe: &req}); err != nil {
		return err
	}
	m, err := c.Control().Expect(c.Context(), xfer.KindProbe, xfer.PeerIdle)
	if err != nil {
		return err
	}
	answered := time.Now()
	if m.Probe == nil {
		return fmt.Errorf("%w: a probe answer without its arrivals", xfer.ErrProtocol)
	}
	up, err := fromGaps(m.Probe.Arrivals, req.Up)
	if err != nil {
		return err
	}
	rx.wait(ctx, req.Down, answered, answered.Add(probeWait(req.Down)))
	rep.Up, rep.Down = capacity(req.Up, up, ipSize), capacity(req.Down, rx.arrivals(req.Down), ipSize)
	return nil
}

// sizingRate is the rate the probe's trains are sized for (0: unknown): the faster of the
// handshake's trains, for a train too short for the path cannot be timed and one too long only
// takes longer, but not over four times the slower (a train read compressed: on the lab under
// load one in four handshakes read 5-12 Gbit/s one way on a 400 Mbit/s link, and 1024-datagram
// trains took up to 2.5 s). With the floor of minProbeLen a train sized from a stretched reading
// (10.1 Mbit/s) still takes 1.4 ms at 400 Mbit/s.
func sizingRate(rep *Report) float64 {
	switch {
	case rep.UpOK && rep.DownOK:
		return min(max(rep.UpBps, rep.DownBps), 4*min(rep.UpBps, rep.DownBps))
	case rep.UpOK:
		return rep.UpBps
	case rep.DownOK:
		return rep.DownBps
	}
	return 0
}

// pacingRate is the slower of the handshake's trains where both read (0: otherwise): trainsFor
// spaces long trains for it.
func pacingRate(rep *Report) float64 {
	if rep.UpOK && rep.DownOK {
		return min(rep.UpBps, rep.DownBps)
	}
	return 0
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

package doctorpeer

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

const ipSize = probeDatagram + lane.IPv4UDPHeaders

// train is the arrivals of a train of n datagrams through a bps bottleneck, each read on its
// own, with the indexes in lost missing.
func train(n int, bps float64, lost ...int) []time.Duration {
	gap := time.Duration(float64(ipSize*8) / bps * 1e9)
	var at []time.Duration
	for i := range n {
		skip := false
		for _, l := range lost {
			skip = skip || l == i
		}
		if !skip {
			at = append(at, time.Duration(i)*gap)
		}
	}
	for i := len(at) - 1; i >= 0; i-- {
		at[i] -= at[0]
	}
	return at
}

// TestProbeReading: a train's reading is the bottleneck's rate where each datagram is read as
// it comes, with a receiver late at the start (the first batch does not count) and with random
// loss; a receiver late at the end reads lower, never higher (a lower bound); a train with a
// fifth of it lost, or spread over less than a millisecond, is not read.
func TestProbeReading(t *testing.T) {
	const n, bps = 135, 400e6
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if got < want*(1-tol) || got > want*(1+tol) {
			t.Errorf("%s: %.1f Mbit/s, want %.1f ± %.0f %%", name, got/1e6, want/1e6, tol*100)
		}
	}
	near("each read as it came", reading(train(n, bps), n, ipSize), bps, 0.01)

	late := train(n, bps)
	for i := range 30 { // the receiver came back after the 30th: one batch, one time
		late[i] = late[29]
	}
	near("a late first batch", reading(late, n, ipSize), bps, 0.01)

	backlog := train(n, bps) // the first 100 read late, 8 at a time 10 µs apart, the rest as they came
	for i := range 100 {
		backlog[i] = backlog[99] - time.Duration(12-i/8)*10*time.Microsecond
	}
	near("a backlog read out first", reading(backlog, n, ipSize), bps, 0.01)
	for i := range n {
		backlog[i] = time.Duration(i/8) * 10 * time.Microsecond
	}
	if r := reading(backlog, n, ipSize); r != 0 {
		t.Errorf("a train read out of a backlog whole: read %.1f Mbit/s", r/1e6)
	}
	clumps := train(n, bps) // a hop that forwards 5 at a time (the lab's emulator)
	for i := range clumps {
		clumps[i] = clumps[i/5*5+4]
	}
	near("clumps of 5", reading(clumps, n, ipSize), bps, 0.05)

	stalled := train(n, bps)
	for i := 100; i < n; i++ { // the last 35 read in one batch 2 ms late
		stalled[i] = stalled[n-1] + 2*time.Millisecond
	}
	if r := reading(stalled, n, ipSize); r >= bps || r < bps/2 {
		t.Errorf("a late last batch reads %.1f Mbit/s on a 400 Mbit/s path: not below it", r/1e6)
	}
	for i := 100; i < n; i++ { // the last 35 read out of a backlog 2 ms late, 8 at a time
		stalled[i] = stalled[n-1] + 2*time.Millisecond + time.Duration((i-100)/8)*10*time.Microsecond
	}
	near("a backlog read out last", reading(stalled, n, ipSize), bps, 0.01)

	rnd := rand.New(rand.NewPCG(1, 2))
	var lost []int
	for i := 1; i < n; i++ {
		if rnd.Float64() < 0.03 {
			lost = append(lost, i)
		}
	}
	near("3 % lost", reading(train(n, bps, lost...), n, ipSize), bps, 0.06)

	var fifth []int
	for i := 0; i < n; i += 4 {
		fifth = append(fifth, i)
	}
	if r := reading(train(n, bps, fifth...), n, ipSize); r != 0 {
		t.Errorf("a quarter lost: read %.1f Mbit/s", r/1e6)
	}
	if r := reading(train(24, 1e9), 24, ipSize); r != 0 {
		t.Errorf("24 datagrams over 0.27 ms: read %.1f Mbit/s", r/1e6)
	}
	if r := reading(make([]time.Duration, n), n, ipSize); r != 0 {
		t.Errorf("one batch: read %.1f Mbit/s", r/1e6)
	}
}

// TestProbeJudge: each cause of a verdict. Trains that agree name a figure (outliers of a
// compressed or stretched train outvoted); trains that disagree give the lowest reading as a
// lower bound, never a figure (the lab's contradicting readings: 47.6-275.5 Mbit/s and 1.01
// Gbit/s on a 400 Mbit/s link); lossy trains, untimed ones and none at all say so.
func TestProbeJudge(t *testing.T) {
	const sent = 6 * 135
	m := func(r ...float64) []float64 {
		for i := range r {
			r[i] *= 1e6
		}
		return r
	}
	for _, c := range []struct {
		name     string
		readings []float64
		arrived  int
		why      string
		bps      float64 // the figure named, within 1 %
		atLeast  float64
	}{
		{"agreeing", m(398, 401, 395, 404, 399, 402), sent - 2, CapAgreed, 399e6, 0},
		{"four agree, one compressed, one stretched", m(2157, 396, 47.6, 401, 399, 405), sent - 8, CapAgreed, 399e6, 0},
		{"the lab's contradicting trains", m(47.6, 76.2, 191.2, 275.5, 390, 1010), sent - 8, CapDisagreed, 0, 47.6e6},
		{"three agree", m(390, 395, 401, 166.7, 0, 620), sent - 10, CapDisagreed, 0, 166.7e6},
		{"one compressed train read", m(0, 0, 0, 1163.5, 0, 0), sent - 8, CapUntimed, 0, 0},
		{"two read", m(0, 637.3, 0, 1163.5, 0, 0), sent - 8, CapUntimed, 0, 0},
		{"agreeing but lossy", m(390, 395, 401, 398, 399, 402), sent - sent/8, CapLossy, 0, 0},
		{"390 and 166.7 from lossy trains", m(166.7, 390, 0, 0, 170, 388), sent - sent/5, CapLossy, 0, 0},
		{"untimed", m(0, 0, 0, 0, 0, 0), sent, CapUntimed, 0, 0},
		{"none came", m(0, 0, 0, 0, 0, 0), 0, CapNone, 0, 0},
	} {
		got := Judge(Capacity{Trains: 6, Len: 135, Sent: sent, Arrived: c.arrived, Readings: c.readings})
		if got.Why != c.why || (got.Bps > 0) != (c.bps > 0) || c.bps > 0 && (got.Bps < 0.99*c.bps || got.Bps > 1.01*c.bps) || got.AtLeastBps != c.atLeast {
			t.Errorf("%s: %+v, want %s, %.1f, at least %.1f", c.name, got, c.why, c.bps/1e6, c.atLeast/1e6)
		}
		if got.Why == CapAgreed && got.Agreed < Quorum || got.Why != CapAgreed && got.Bps != 0 {
			t.Errorf("%s: a figure of %d agreeing trains: %+v", c.name, got.Agreed, got)
		}
	}
}

// TestProbeBounds: what either end asks or reports is bounded. A request beyond the trains an
// end will send (or expect) is refused; an answer with more trains or arrivals than were sent, a
// negative gap or arrivals spread over more than 10 s is refused; the gaps round-trip.
func TestProbeBounds(t *testing.T) {
	for _, c := range []struct{ up, down, want float64 }{{400e6, 390e6, 400e6}, {10.1e6, 11.8e9, 40.4e6}, {400e6, 10.8e9, 1.6e9}, {0, 390e6, 390e6}, {0, 0, 0}} {
		if got := sizingRate(&Report{UpBps: c.up, UpOK: c.up > 0, DownBps: c.down, DownOK: c.down > 0}); got != c.want {
			t.Errorf("trains sized for %.0f Mbit/s from %.0f and %.0f", got/1e6, c.up/1e6, c.down/1e6)
		}
	}
	ok := trainsFor(400e6, 390e6, ipSize)
	if err := checkTrains(ok); err != nil || ok.Trains != probeTrains || ok.Len < 100 || ok.Len > 200 || ok.GapMicros < 3500 || ok.GapMicros > 4500 {
		t.Fatalf("trains for 400 Mbit/s: %+v, %v", ok, err)
	}
	if long := trainsFor(10.8e9, 400e6, ipSize); long.Len != maxProbeLen || long.GapMicros < 30000 || checkTrains(long) != nil {
		t.Errorf("trains for 10.8 Gbit/s, the other way 400 Mbit/s: %+v, not spaced for 400 Mbit/s", long)
	}
	if slow := trainsFor(400e6, 10e6, ipSize); slow.GapMicros > 4500 {
		t.Errorf("short trains for 400 Mbit/s spaced for the other way's 10 Mbit/s: %+v", slow)
	}
	for _, c := range []xfer.DoctorTrains{{Trains: 9, Len: 100}, {Trains: 0, Len: 100}, {Trains: 6, Len: 1025}, {Trains: 6, Len: 3}, {Trains: 6, Len: 100, GapMicros: -1}, {Trains: 6, Len: 100, GapMicros: 1e6}} {
		if err := checkTrains(c); xfer.CodeOf(err) != xfer.CodeProtocol {
			t.Errorf("%+v: %v", c, err)
		}
	}
	at := [][]time.Duration{train(100, 400e6), train(100, 400e6, 5, 6)}
	back, err := fromGaps(toGaps(at), xfer.DoctorTrains{Trains: 6, Len: 100})
	if err != nil || len(back) != 6 || len(back[1]) != 98 || back[1][97]-at[1][97] > time.Microsecond || at[1][97]-back[1][97] > time.Microsecond {
		t.Fatalf("gaps round trip: %v", err)
	}
	for name, g := range map[string][][]int64{
		"seven trains":   make([][]int64, 7),
		"101 arrivals":   {make([]int64, 101)},
		"a negative gap": {{0, 5, -3}},
		"11 s":           {{0, 6e6, 5e6}},
		"a huge gap":     {{0, 1 << 62}},
	} {
		if _, err := fromGaps(g, xfer.DoctorTrains{Trains: 6, Len: 100}); xfer.CodeOf(err) != xfer.CodeProtocol {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestProbeBeyondRequest: the receiver keeps what the request asked for alone, each (train,
// index) once: datagrams of trains or indexes beyond it, and repeats, neither count as arrivals
// nor end the wait; what came before the request (the peer's end) and lies beyond it is dropped
// when it comes; a direction's arrivals are never more than were sent.
func TestProbeBeyondRequest(t *testing.T) {
	tr := xfer.DoctorTrains{Trains: 6, Len: minProbeLen}
	pkt := func(k, i int) []byte {
		pt := make([]byte, probeHeader)
		copy(pt, probeMagic[:])
		pt[4] = byte(k)
		binary.BigEndian.PutUint16(pt[5:], uint16(i))
		return pt
	}
	h := wire.Header{Type: wire.TypeFeedback}
	now := time.Now()
	early := newProbeRx() // the peer's end: the trains come before the request
	early.Datagram(0, h, pkt(7, 3), now)
	early.Datagram(0, h, pkt(1, 500), now)
	early.Datagram(0, h, pkt(1, 2), now)
	early.expect(tr)
	if early.n != 1 || len(early.at[7]) != 0 || len(early.at[1]) != 1 {
		t.Fatalf("before the request: %d arrivals kept, want 1", early.n)
	}
	rx := newProbeRx()
	rx.expect(tr)
	for k := range maxProbeTrains {
		for i := range maxProbeLen {
			if k < tr.Trains && i < tr.Len {
				continue
			}
			rx.Datagram(0, h, pkt(k, i), now.Add(time.Duration(i)*time.Microsecond))
		}
	}
	if rx.n != 0 || !rx.last.IsZero() {
		t.Fatalf("%d arrivals counted of datagrams beyond the request", rx.n)
	}
	for k := range tr.Trains {
		for i := range tr.Len {
			for range 3 {
				rx.Datagram(0, h, pkt(k, i), now.Add(time.Duration(k*tr.Len+i)*time.Microsecond))
			}
		}
	}
	at := rx.arrivals(tr)
	if rx.n != tr.Trains*tr.Len || len(at) != tr.Trains {
		t.Fatalf("%d arrivals of %d, %d trains", rx.n, tr.Trains*tr.Len, len(at))
	}
	for k := range at {
		if len(at[k]) != tr.Len {
			t.Fatalf("train %d: %d arrivals of %d", k, len(at[k]), tr.Len)
		}
	}
	// A direction's count is clamped to what was sent, however many arrivals it is handed.
	over := make([][]time.Duration, tr.Trains)
	for k := range over {
		over[k] = train(maxProbeLen, 400e6)
	}
	if c := capacity(tr, over, ipSize); c.Arrived != c.Sent || c.Sent != tr.Trains*tr.Len {
		t.Fatalf("%d of %d arrived", c.Arrived, c.Sent)
	}
	if c := Judge(Capacity{Trains: 6, Len: 48, Sent: 288, Arrived: 6144}); c.Arrived != 288 {
		t.Fatalf("judged %d of %d arrived", c.Arrived, c.Sent)
	}
}

// TestDoctorHostileProbe: a peer whose probe answer is out of bounds fails the doctor with the
// protocol code; one whose arrivals are bounded but worthless (all in one batch) gives no figure.
// A peer that sends more trains, longer ones and each datagram twice is counted for the trains
// that were asked for alone: no more arrive than were sent.
func TestDoctorHostileProbe(t *testing.T) {
	// flood answers a probe with trains beyond the request: all eight, each four times as long,
	// each sent twice.
	flood := func(ctx context.Context, p *session.Path, req xfer.DoctorTrains) {
		if p.WaitPeers(ctx, time.Second) != nil {
			return
		}
		big := xfer.DoctorTrains{Trains: maxProbeTrains, Len: min(4*req.Len, maxProbeLen), GapMicros: req.GapMicros}
		sendTrains(ctx, p, big)
		sendTrains(ctx, p, big)
	}
	hostile := func(ans *xfer.DoctorProbe, trains bool) xfer.Role {
		return func(ctx context.Context, s *xfer.Served) error {
			s.Path.SendTrainOnHello()
			f := hostinfo.Facts{Hostname: "h", Cores: 1}
			s.Control.Send(xfer.Msg{T: xfer.KindFacts, Facts: &f, Doctor: &xfer.DoctorLanes{RecvBuf: 1, SendBuf: 1}})
			for {
				m, err := s.Control.Next(ctx, 10*time.Second)
				if err != nil || m.T == xfer.KindBye {
					return nil
				}
				switch m.T {
				case xfer.KindProbe:
					if trains && m.Probe != nil {
						flood(ctx, s.Path, m.Probe.Down)
					}
					s.Control.Send(xfer.Msg{T: xfer.KindProbe, Probe: ans})
				case xfer.KindClock:
					s.Control.Send(xfer.Msg{T: xfer.KindClock, At: time.Now().UnixNano()})
				}
			}
		}
	}
	oneBatch := make([][]int64, probeTrains)
	for k := range oneBatch {
		oneBatch[k] = make([]int64, minProbeLen)
	}
	for _, c := range []struct {
		name   string
		ans    *xfer.DoctorProbe
		trains bool
		code   xfer.ErrorCode
	}{
		{"no arrivals member", nil, false, xfer.CodeProtocol},
		{"nine trains", &xfer.DoctorProbe{Arrivals: make([][]int64, 9)}, false, xfer.CodeProtocol},
		{"a negative gap", &xfer.DoctorProbe{Arrivals: [][]int64{{0, -1}}}, false, xfer.CodeProtocol},
		{"one batch", &xfer.DoctorProbe{Arrivals: oneBatch}, false, 0},
		{"trains beyond the request", &xfer.DoctorProbe{Arrivals: oneBatch}, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := doctorEnv(t, lanetest.Link{Delay: 5 * time.Millisecond, Rate: 50e6})
			e.Roles = map[string]xfer.Role{xfer.RoleDoctor: hostile(c.ans, c.trains)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := Measure(ctx, e.Options(), "host")
			if xfer.CodeOf(err) != c.code {
				t.Fatalf("%v (code %d)", err, xfer.CodeOf(err))
			}
			if c.code == 0 && (rep.Up == nil || rep.Up.Why != CapUntimed || rep.Up.Bps != 0 || rep.Up.AtLeastBps != 0) {
				t.Fatalf("arrivals in one batch: %+v", rep.Up)
			}
			if c.trains {
				d := rep.Down
				if d == nil || d.Trains != probeTrains || d.Sent != d.Trains*d.Len || d.Arrived > d.Sent || d.Arrived == 0 || len(d.Readings) != d.Trains {
					t.Fatalf("trains beyond the request: %+v", d)
				}
				t.Logf("down: %d of %d arrived, %s, %.0f Mbit/s", d.Arrived, d.Sent, d.Why, d.Bps/1e6)
			}
		})
	}
}

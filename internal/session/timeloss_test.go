package session

import (
	"net/netip"
	"testing"
	"time"

	"github.com/farwing/farwing/cc"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// timeLossSender is a sender with one lane's ring filled: datagram q (1…n) sent at q ms.
func timeLossSender(n int, srtt time.Duration) *Sender {
	s := NewSender(&Path{}, nil, nil, SenderConfig{InitialRTT: srtt})
	s.start = time.Unix(1000, 0)
	s.cc = cc.New(cc.Config{MSS: wire.MaxDatagramV6 + lane.IPv4UDPHeaders, Lanes: Lanes, InitialRTT: srtt}, s.start)
	s.loss = s.cc
	l := &s.lanes[0]
	l.lowest, l.next = 1, uint64(n)
	l.sent.Store(uint64(n))
	for q := 1; q <= n; q++ {
		(*l.at(uint64(q))) = sentPkt{at: int64(time.Duration(q) * time.Millisecond), block: 1 << 30, size: 1500, state: stInflight}
	}
	return s
}

// rttSamples hands the sender's rate controller, which keeps the one RTT estimate, n samples of
// rtt from lane (acknowledgements of datagrams it does not track: only the samples count). Twelve
// equal samples leave srtt at rtt and rttvar below 3 % of it.
func rttSamples(s *Sender, lane int, rtt time.Duration, n int) {
	for range n {
		s.cc.OnAck(s.start, lane, 0, 0, rtt)
	}
}

// tailSender is a sender on a 100 ms path (rttvar about 2 ms, from samples on lane 1) whose lane 0
// has datagram 1 acknowledged and 2…5 (sent at 2…5 ms) at its tail, unacknowledged.
func tailSender() (*Sender, *laneTx) {
	s := timeLossSender(5, 100*time.Millisecond)
	rttSamples(s, 1, 100*time.Millisecond, 12)
	l := &s.lanes[0]
	l.ring[1].state = stAcked
	l.largest = 1
	return s, l
}

// inflight lists the datagrams still in flight on the lane (lost and acknowledged ones behind
// the lowest in flight are freed as soon as detectTimeLoss has passed them).
func inflight(s *Sender) (q []uint64) {
	l := &s.lanes[0]
	for i := l.lowest; i <= l.next; i++ {
		if (*l.at(uint64(i))).state == stInflight {
			q = append(q, i)
		}
	}
	return q
}

// While a queue builds, every datagram's round trip is longer than the last: those the receiver
// has not reported yet are not lost while acknowledgements keep coming.
func TestTimeLossRisingRTT(t *testing.T) {
	s := timeLossSender(400, 140*time.Millisecond)
	rttSamples(s, 1, 150*time.Millisecond, 12)
	// The newest report: datagram 100 (sent at 100 ms) acknowledged at 360 ms, a 260 ms round
	// trip that srtt (164 ms after it) has not caught up with; 101… are still in the queue.
	rttSamples(s, 1, 260*time.Millisecond, 1)
	l := &s.lanes[0]
	for q := uint64(1); q <= 100; q++ {
		if q != 60 {
			(*l.at(uint64(q))).state = stAcked
		}
	}
	l.largest = 100
	s.detectTimeLoss(s.start.Add(360 * time.Millisecond))
	if s.stats.LostByTime != 1 || l.ring[60].state == stInflight {
		t.Fatalf("LostByTime %d, datagram 60 %d: want only 60 lost (a gap behind the newest report, 300 ms old)", s.stats.LostByTime, l.ring[60].state)
	}
	if got := inflight(s); len(got) != 300 || got[0] != 101 {
		t.Fatalf("in flight %d datagrams from %v, want 300 from 101", len(got), got[:1])
	}
}

// A gap behind the newest report is lost once 9/8 of a round trip has passed, not before.
func TestTimeLossBehindNewest(t *testing.T) {
	s := timeLossSender(10, 100*time.Millisecond)
	rttSamples(s, 1, 100*time.Millisecond, 12)
	l := &s.lanes[0]
	for q := uint64(3); q <= 10; q++ {
		(*l.at(uint64(q))).state = stAcked
	}
	l.largest = 10
	s.detectTimeLoss(s.start.Add(110 * time.Millisecond)) // datagram 1 is 109 ms old
	if got := inflight(s); s.stats.LostByTime != 0 || len(got) != 2 {
		t.Fatalf("at 1.09 round trips: LostByTime %d, in flight %v; want 0 and [1 2]", s.stats.LostByTime, got)
	}
	s.detectTimeLoss(s.start.Add(120 * time.Millisecond)) // 1: 119 ms, 2: 118 ms > 113.5
	if got := inflight(s); s.stats.LostByTime != 2 || len(got) != 0 {
		t.Fatalf("at 1.18 round trips: LostByTime %d, in flight %v; want 2 and none", s.stats.LostByTime, got)
	}
}

// At the tail of a lane nothing later can report a gap: lost only once reports have kept coming
// for well over a round trip (1.25 round trips + max(4 rttvar, 20 ms) + 20 ms) after it was sent,
// and never while the receiver is silent.
func TestTimeLossTail(t *testing.T) {
	s, _ := tailSender()
	report := func(ms int) { s.noteReport(int64(ms) * 1e6) }
	report(150)
	report(160)
	s.noteReport(160*1e6 + 100e3)              // the same report's second copy, 0.1 ms later
	s.detectTimeLoss(s.start.Add(time.Second)) // a second later, but no report since 160 ms
	if got := inflight(s); s.stats.LostByTime != 0 || len(got) != 4 {
		t.Fatalf("receiver silent: LostByTime %d, in flight %v; want 0 and [2 3 4 5]", s.stats.LostByTime, got)
	}
	report(168)                   // one report after datagram 2's deadline (2 + 165 ms) is not enough
	s.noteReport(168*1e6 + 100e3) // nor its second copy
	s.detectTimeLoss(s.start.Add(168 * time.Millisecond))
	if got := inflight(s); s.stats.LostByTime != 0 || len(got) != 4 {
		t.Fatalf("one report after the deadline: LostByTime %d, in flight %v; want 0 and [2 3 4 5]", s.stats.LostByTime, got)
	}
	report(171) // two: the older one (168 ms) is 166 ms after 2 was sent, 165 after 3
	s.detectTimeLoss(s.start.Add(171 * time.Millisecond))
	if got := inflight(s); s.stats.LostByTime != 1 || len(got) != 3 || got[0] != 3 {
		t.Fatalf("LostByTime %d, in flight %v; want 1 and [3 4 5]", s.stats.LostByTime, got)
	}
	report(174) // older report 171 ms: 3, 4 and 5 (168, 167, 166 ms) are lost
	s.detectTimeLoss(s.start.Add(174 * time.Millisecond))
	if got := inflight(s); s.stats.LostByTime != 4 || len(got) != 0 {
		t.Fatalf("LostByTime %d, in flight %v; want 4 and none", s.stats.LostByTime, got)
	}
}

// Automatic FEC is off on loopback (Path.Loopback, tuning.FEC), and an explicit mode is left alone.
func TestFECForLoopback(t *testing.T) {
	for _, c := range []struct {
		peer string
		on   bool
	}{{"127.0.0.1:9", false}, {"[::1]:9", false}, {"[::ffff:127.0.0.1]:9", false}, {"198.18.0.2:9", true}, {"[2001:db8::1]:9", true}} {
		var p Path
		p.SetPeer(0, netip.MustParseAddrPort(c.peer))
		auto := tuning.FEC(p.Loopback(), fec.Mode{Kind: fec.ModeAuto})
		if off := auto.Kind == fec.ModeOff; off == c.on {
			t.Errorf("peer %s: automatic FEC resolves to %v", c.peer, auto)
		}
		if m := tuning.FEC(p.Loopback(), fec.Mode{Kind: fec.ModeFixed, K: 10, M: 2}); m.Kind != fec.ModeFixed || m.K != 10 || m.M != 2 {
			t.Errorf("peer %s: fixed FEC 10+2 resolves to %v", c.peer, m)
		}
	}
}

// A datagram still waiting for its lane's sealer is not lost, however long ago it was framed.
func TestTimeLossNotYetSent(t *testing.T) {
	s, l := tailSender()
	l.sent.Store(2) // 3, 4 and 5 wait in a batch
	s.reportAt = [2]int64{int64(time.Second), int64(time.Second)}
	s.detectTimeLoss(s.start.Add(time.Second))
	if got := inflight(s); s.stats.LostByTime != 1 || len(got) != 3 || got[0] != 3 {
		t.Fatalf("LostByTime %d, in flight %v; want 1 (datagram 2) and [3 4 5]", s.stats.LostByTime, got)
	}
}

// Stalled: a lane whose goroutine has not come back from a receive call for a while counts as
// stalled only if it has datagrams to handle (here: in the middle of a batch; lane's
// TestPending covers the unread socket).
func TestStalledLane(t *testing.T) {
	key := make([]byte, wire.KeyLen)
	c, _ := wire.NewCrypto(key, 9, wire.ServerToClient)
	p, err := Open("127.0.0.1:0", c, true, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	p.Close() // the lanes' goroutines stop: the test sets their marks
	now := time.Now()
	rx := &p.rx[0]
	rx.ran.Store(now.UnixNano())
	rx.inBatch.Store(true)
	if p.Stalled(now, 10*time.Millisecond) {
		t.Fatal("a lane that has just run counts as stalled")
	}
	rx.ran.Store(now.Add(-50 * time.Millisecond).UnixNano())
	if !p.Stalled(now, 10*time.Millisecond) {
		t.Fatal("a lane 50 ms into a batch does not count as stalled")
	}
	if p.Stalled(now, 100*time.Millisecond) {
		t.Fatal("stalled before the threshold")
	}
	rx.inBatch.Store(false)
	if p.Stalled(now, 10*time.Millisecond) {
		t.Fatal("an idle lane (nothing to read) counts as stalled")
	}
}

// A lane whose own newest round trip is longer (its receiving goroutine falls behind) gets the
// longer threshold. Both senders get the same samples, 200 ms and then 100 ms (srtt 111 ms,
// rttvar 23 ms after them); they differ only in whether the 200 ms one was lane 0's.
func TestTimeLossLaneRTT(t *testing.T) {
	s, _ := tailSender()
	rttSamples(s, 0, 200*time.Millisecond, 1) // tail: 250 + 92 + 20 ms
	rttSamples(s, 1, 100*time.Millisecond, 1)
	s.noteReport(int64(280 * time.Millisecond))
	s.noteReport(int64(290 * time.Millisecond))
	s.detectTimeLoss(s.start.Add(290 * time.Millisecond)) // datagram 2: 278 ms, not over 362
	if s.stats.LostByTime != 0 {
		t.Fatalf("LostByTime %d at 278 ms with the lane's 200 ms round trip; want 0", s.stats.LostByTime)
	}
	s, _ = tailSender()
	rttSamples(s, 2, 200*time.Millisecond, 1) // another lane's: with only the path's 111 ms, over 251 ms
	rttSamples(s, 1, 100*time.Millisecond, 1)
	s.noteReport(int64(280 * time.Millisecond))
	s.noteReport(int64(290 * time.Millisecond))
	s.detectTimeLoss(s.start.Add(290 * time.Millisecond))
	if s.stats.LostByTime == 0 {
		t.Fatal("nothing lost 278 ms after sending on a 100 ms path")
	}
}

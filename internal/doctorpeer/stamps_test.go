package doctorpeer

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
)

// stampedPkt is a datagram a scriptLane hands over, with the kernel receive time it reports.
type stampedPkt struct {
	b  []byte
	at time.Time
}

// scriptLane is a lane that hands over the batches sent into it, each datagram with its own
// receive time, as a lane with the kernel's timestamps on does.
type scriptLane struct {
	batches chan []stampedPkt
	done    chan struct{}
	stamp   time.Time
}

func newScriptLane() *scriptLane {
	return &scriptLane{batches: make(chan []stampedPkt, 4), done: make(chan struct{})}
}

func (l *scriptLane) Send(netip.AddrPort, [][]byte) error { return nil }
func (l *scriptLane) LocalAddr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 1)
}
func (l *scriptLane) SetRxTimestamps(bool) error { return nil }
func (l *scriptLane) RxTime() time.Time          { return l.stamp }
func (l *scriptLane) Pending() bool              { return false }
func (l *scriptLane) Stats() lane.Stats          { return lane.Stats{} }
func (l *scriptLane) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *scriptLane) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	select {
	case <-l.done:
		return 0, net.ErrClosed
	case <-tm.C:
		return 0, lane.ErrTimeout
	case batch := <-l.batches:
		from := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 9)
		for _, p := range batch {
			l.stamp = p.at
			fn(p.b, from)
		}
		l.stamp = time.Time{}
		return len(batch), nil
	}
}

// TestProbeStampsForged: a probe datagram is timed by its own kernel receive time, handed over
// with it once it is authenticated. Forged feedback on lane 0 (the connection id and the real
// datagrams' sequence numbers known, the key not) read before the real datagrams, a whole train
// of it in the batch before and one right before each real datagram in theirs, with times of the
// forger's choosing, leaves the real datagrams their own times, and is not counted.
func TestProbeStampsForged(t *testing.T) {
	key, other := make([]byte, wire.KeyLen), make([]byte, wire.KeyLen)
	other[0] = 1
	const id = 0x5eed
	client, err := wire.NewCrypto(key, id, wire.ClientToServer)
	if err != nil {
		t.Fatal(err)
	}
	server, _ := wire.NewCrypto(key, id, wire.ServerToClient)
	forger, _ := wire.NewCrypto(other, id, wire.ServerToClient)
	var conns [session.Lanes]lane.PacketConn
	lanes := make([]*scriptLane, session.Lanes)
	for i := range conns {
		lanes[i] = newScriptLane()
		conns[i] = lanes[i]
	}
	p := session.NewPath(conns, client, false)
	defer p.Close()
	tr := xfer.DoctorTrains{Trains: 1, Len: minProbeLen}
	rx := newProbeRx()
	rx.stamped = true
	rx.expect(tr)
	p.SetHandler(rx)

	seal := func(c *wire.Crypto, i int) []byte {
		pt := make([]byte, 64)
		copy(pt, probeMagic[:])
		binary.BigEndian.PutUint16(pt[5:], uint16(i))
		return c.Seal(make([]byte, 0, len(pt)+wire.Overhead), wire.Header{Type: wire.TypeFeedback, Lane: 0, Seq: uint64(i + 1)}, pt)
	}
	base := time.Now().Add(-time.Minute)
	var early, mixed []stampedPkt
	for i := range tr.Len {
		early = append(early, stampedPkt{seal(forger, i), base.Add(-time.Hour + time.Duration(i)*time.Second)})
		mixed = append(mixed,
			stampedPkt{seal(forger, i), base.Add(time.Hour - time.Duration(i)*time.Second)},
			stampedPkt{seal(server, i), base.Add(time.Duration(i) * 50 * time.Microsecond)})
	}
	lanes[0].batches <- early
	lanes[0].batches <- mixed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rx.wait(ctx, tr, time.Now(), time.Now().Add(5*time.Second))
	at := rx.arrivals(tr)
	if len(at) != 1 || len(at[0]) != tr.Len {
		t.Fatalf("%d trains, arrivals %v: want one of %d", len(at), at, tr.Len)
	}
	for i, a := range at[0] {
		if want := time.Duration(i) * 50 * time.Microsecond; a != want {
			t.Fatalf("datagram %d arrived at %v, want %v (its own time)", i, a, want)
		}
	}
	if rx.at[0][0].at != base {
		t.Fatalf("the train's first arrival at %v, want %v", rx.at[0][0].at, base)
	}
	if f := p.AuthFailures.Load(); f != uint64(2*tr.Len) {
		t.Errorf("%d datagrams failed authentication, want the %d forged", f, 2*tr.Len)
	}
}

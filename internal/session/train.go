package session

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
)

// The packet-train probe measures the bottleneck's capacity before data flows: the side that will
// send data sends trainLen full-size datagrams back to back, the bottleneck spaces them out, and
// the other side reports the rate at which they arrived. The estimate seeds the rate controller's
// STARTUP (cc.Controller.SeedBandwidth), which otherwise needs several round trips to ramp up from
// its initial window; at 140 ms that is most of a second.
const (
	trainLen  = 48
	trainFlag = 0x1 // header flag on TypeHello (a train datagram) and TypeHelloAck (its report)
	trainWait = 150 * time.Millisecond
)

type trainRx struct {
	mu          sync.Mutex
	first, last time.Time
	n, bytes    int
	firstBytes  int
	spaced      int // arrivals later than the one before (not read in the same batch)
	reported    bool
}

// sendTrain sends the probe on lane i to dst.
func (p *Path) sendTrain(i int, dst netip.AddrPort) {
	pt := make([]byte, wire.MaxDatagramV6-wire.Overhead)
	pkts := make([][]byte, trainLen)
	for k := range pkts {
		binary.BigEndian.PutUint16(pt[0:], uint16(k))
		binary.BigEndian.PutUint16(pt[2:], trainLen)
		buf := make([]byte, 0, wire.MaxDatagramV6)
		pkts[k] = p.crypto.Seal(buf, wire.Header{Type: wire.TypeHello, Flags: trainFlag, Lane: uint8(i), Seq: p.NextSeq(i)}, pt)
	}
	p.sendTo(i, dst, pkts)
	go fec.Warm()
}

// onTrain records a train datagram; the report goes back when the last one arrives, or trainWait
// after the first if the last is lost.
func (p *Path) onTrain(i int, pt []byte, size int, now time.Time, from netip.AddrPort) {
	if len(pt) < 4 {
		return
	}
	idx, n := binary.BigEndian.Uint16(pt), binary.BigEndian.Uint16(pt[2:])
	t := &p.train
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reported {
		return
	}
	size += ipUDPOverhead
	if t.n == 0 {
		t.first, t.firstBytes = now, size
		time.AfterFunc(trainWait, func() { p.reportTrain(i, from) })
	}
	if t.n > 0 && now.After(t.last) {
		t.spaced++
	}
	t.n++
	t.bytes += size
	t.last = now
	if idx+1 == n {
		go p.reportTrain(i, from)
	}
}

// reportTrain answers the probe with the measured rate in bits/s (0 when it cannot tell: too few
// datagrams, or arrival times that cannot be trusted).
func (p *Path) reportTrain(i int, to netip.AddrPort) {
	t := &p.train
	t.mu.Lock()
	if t.reported {
		t.mu.Unlock()
		return
	}
	t.reported = true
	var bps uint64
	// Arrival times are taken when the receive loop reads the datagrams; when it fell behind, a
	// batch read stamps many at once and the train looks faster than the path. Trust the timing
	// only when nearly every datagram was read on its own.
	if d := t.last.Sub(t.first); t.n >= trainLen/2 && t.spaced*10 >= (t.n-1)*9 && d >= 200*time.Microsecond {
		bps = uint64(float64(t.bytes-t.firstBytes) * 8 / d.Seconds())
	}
	t.mu.Unlock()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], bps)
	// Twice: a lost report would leave the sender's STARTUP unseeded (about a second slower to
	// reach the path's rate at 140 ms), and at 3 % loss one report in 30 is lost.
	pkts := make([][]byte, 2)
	for k := range pkts {
		buf := make([]byte, 0, wire.HeaderLen+8+wire.TagLen)
		pkts[k] = p.crypto.Seal(buf, wire.Header{Type: wire.TypeHelloAck, Flags: trainFlag, Lane: uint8(i), Seq: p.NextSeq(i)}, b[:])
	}
	p.sendTo(i, to, pkts)
	go fec.Warm()
}

// TrainEstimate is the capacity the peer measured from this side's probe, in bits/s, once its
// report has arrived.
func (p *Path) TrainEstimate() (float64, bool) {
	v := p.trainBps.Load()
	if v == 0 {
		return 0, false
	}
	return float64(v - 1), true
}

// SendTrainOnHello makes a server send the probe to the client as soon as the first client hello
// arrives (the server sends the data in a pull), or now if one already has.
func (p *Path) SendTrainOnHello() {
	p.trainOnHello.Store(true)
	for i := range p.conns {
		if dst, ok := p.Peer(i); ok && p.trainSent.CompareAndSwap(false, true) {
			go p.sendTrain(i, dst)
			return
		}
	}
}

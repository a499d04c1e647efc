package session

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

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

// maxTrainBps bounds the capacity a peer may report for the train (1 Tbit/s): a report above it
// is ignored, and the rate controller starts from its own initial window.
const maxTrainBps = 1e12

type trainRx struct {
	mu       sync.Mutex
	first    time.Time
	n        int
	at       [trainLen]time.Duration // arrival offsets from the first (kernel receive times)
	size     [trainLen]int           // IP bytes of each arrival
	reported bool
}

// Arrival clumps: a hop that forwards in bursts (a software link's timer, interrupt coalescing,
// a receiver that fell behind) delivers the train in clumps, back to back within one. A gap
// longer than clumpGap starts a new clump.
const (
	clumpGap     = 50 * time.Microsecond
	minTrainSpan = 200 * time.Microsecond // shorter spans cannot be timed reliably
)

// trainRate estimates the bottleneck rate in bits/s from the arrival offsets and sizes of a
// train, or returns 0 when it cannot tell. Where the train came in three clumps or more, it times
// from the start of the second clump to the start of the last: the first clump's start is the
// least trustworthy mark (a late first clump, one stall at the start, made the train look up to
// four times faster than the path), and the clumps in between are released at the path's rate.
// With fewer clumps it times first to last arrival.
func trainRate(at []time.Duration, size []int) float64 {
	n := len(at)
	if n < trainLen/2 {
		return 0
	}
	from, to := 0, n-1
	second, last, clumps := 0, 0, 1 // where the second and the last clump start
	for i := 1; i < n; i++ {
		if at[i]-at[i-1] > clumpGap {
			if clumps++; clumps == 2 {
				second = i
			}
			last = i
		}
	}
	if clumps >= 3 {
		from, to = second, last
	}
	span := at[to] - at[from]
	if span < minTrainSpan {
		return 0
	}
	bytes := 0 // to-from datagrams arrived in the span
	for _, b := range size[from+1 : to+1] {
		bytes += b
	}
	return float64(bytes) * 8 / span.Seconds()
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
	p.stopStamps()
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
	if t.n == 0 {
		t.first = now
		time.AfterFunc(trainWait, func() { p.reportTrain(i, from) })
	}
	if t.n < trainLen {
		t.at[t.n], t.size[t.n] = now.Sub(t.first), size+ipUDPOverhead
		t.n++
	}
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
	bps := uint64(trainRate(t.at[:t.n], t.size[:t.n]))
	p.trainGot.Store(bps + 1)
	if debug {
		fmt.Fprintf(os.Stderr, "train: %d datagrams, %.0f Mbit/s; arrivals (µs):", t.n, float64(bps)/1e6)
		for _, d := range t.at[:t.n] {
			fmt.Fprintf(os.Stderr, " %d", d.Microseconds())
		}
		fmt.Fprintln(os.Stderr)
	}
	t.mu.Unlock()
	p.stopStamps()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], bps)
	// Twice: a lost report would leave the sender's STARTUP unseeded (about a second slower to
	// reach the path's rate at 140 ms), and at 3 % loss one report in 30 is lost.
	pkts := make([][]byte, 2)
	for k := range pkts {
		buf := make([]byte, 0, wire.HeaderLen+8+wire.TagLen)
		pkts[k] = p.crypto.Seal(buf, wire.Header{Type: wire.TypeHelloAck, Flags: trainFlag, Lane: uint8(i), Seq: p.NextSeq(i)}, b[:])
	}
	if err := p.sendTo(i, to, pkts); err != nil && debug {
		fmt.Fprintf(os.Stderr, "train: report to %s not sent: %v\n", to, err)
	}
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

// ReceivedTrain is the capacity this end measured from the peer's probe, in bits/s (0 when the
// arrivals could not be timed), once it has come.
func (p *Path) ReceivedTrain() (float64, bool) {
	v := p.trainGot.Load()
	if v == 0 {
		return 0, false
	}
	return float64(v - 1), true
}

// SendTrainOnHello makes a server send the probe to the client as soon as a lane's client address
// is proven (the server sends the data in a pull), or now if one already is.
func (p *Path) SendTrainOnHello() {
	p.trainOnHello.Store(true)
	for i := range p.conns {
		if dst, ok := p.Peer(i); ok && p.proven[i].Load() && p.trainSent.CompareAndSwap(false, true) {
			go p.sendTrain(i, dst)
			return
		}
	}
}

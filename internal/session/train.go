package session

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// The packet-train probe measures the bottleneck's capacity before data flows: the side that will
// send data sends two trains of full-size datagrams (trainLens), each back to back and trainGap
// apart, the bottleneck spaces them out, and the other side reports the rate at which they arrived
// (trainRx.rate: the median of their windows). The estimate seeds the rate controller's STARTUP (cc.Controller.SeedBandwidth),
// which otherwise needs several round trips to ramp up from its initial window; at 140 ms that is
// most of a second.
//
// Two trains, because one can come in compressed: a hop that stalled while the whole train
// crossed it (a software link, a receiver's interrupt) and then released it at once. On the lab
// (400 Mbit/s, two busy cores) one train in a few dozen read 2,157 Mbit/s, all 46 arrivals within
// 246 µs; STARTUP then paced at 1.9 Gbit/s for a round, lost 9,244 datagrams at the full queue and
// cut deep, and the 1 GiB copy took a second longer. An overestimate costs that; an underestimate
// only a round or two of STARTUP's ramp; a window stretched by a stall inside it errs the other
// way, so the estimate is the median of the trains' windows, five at most paths' rates.
//
// The second train is eight times as long, so that a fast path can be timed at all: 48 datagrams
// cross 10 Gbit/s in 57 µs, under minTrainSpan, and the 10 Gbit/s cell of TestVirtualScale then
// started unseeded and took 2.2 s to ramp from the initial window. 192 took 227 µs there, but
// 193 µs at the published path's 11.8 Gbit/s, and a 1 GiB push there took 2.5 s from an unseeded
// start where it takes 1.3 s seeded (internal/xfer's TestPublishedColumn); 384 take 385 µs, and
// time paths up to 22 Gbit/s. (At 100 Mbit/s they queue 45 ms once.)
var trainLens = [...]int{trainLen, trainLong}

const (
	trainLen  = 48 // the first train's length, and the fewest arrivals a train is timed from is half of it
	trains    = len(trainLens)
	trainLong = 8 * trainLen         // the second train's length
	trainMax  = trainLen + trainLong // datagrams in all
	trainGap  = 3 * time.Millisecond
	trainFlag = 0x1 // header flag on TypeHello (a train datagram) and TypeHelloAck (its report)
	trainWait = 150 * time.Millisecond
)

// maxTrainBps bounds the capacity a peer may report for the train (1 Tbit/s): a report above it
// is ignored, and the rate controller starts from its own initial window.
const maxTrainBps = 1e12

type trainRx struct {
	mu       sync.Mutex
	first    time.Time
	n        [trains]int
	at       [trains][]time.Duration // arrival offsets from the first (kernel receive times), per train
	size     [trains][]int           // IP bytes of each arrival
	reported bool
}

// add records an arrival of the datagram with index idx (of the trains' 0…trainMax-1): an index
// beyond them, or more arrivals for a train than it holds, is ignored.
func (t *trainRx) add(idx int, at time.Duration, size int) {
	for k, l := range trainLens {
		if idx < l {
			if t.at[k] == nil {
				t.at[k], t.size[k] = make([]time.Duration, l), make([]int, l)
			}
			if t.n[k] < l {
				t.at[k][t.n[k]], t.size[k][t.n[k]] = at, size
				t.n[k]++
			}
			return
		}
		idx -= l
	}
}

// rate is the estimate from the trains that arrived (0: none can be timed): the median of the
// rates of their windows of trainLen arrivals (a last window of at least half that counts), the
// lower middle one of an even count. A window can come in compressed (a hop that stalled while it
// crossed, then released it at once: too fast) or stretched (a stall inside it: too slow); the
// median of five stands with two bad ones. On the lab one train in a few dozen read 2,157 Mbit/s
// on a 400 Mbit/s link, and, once the second train was long, the lower of the two trains read
// 8.6–158 Mbit/s in 4 of 16 bench runs. Where no window spans enough time to be timed (a fast
// path: 48 datagrams cross 10 Gbit/s in 57 µs), the lower of the whole trains' rates is taken.
func (t *trainRx) rate() float64 {
	var est []float64
	whole := 0.0
	for k := range t.n {
		at, size := t.at[k][:t.n[k]], t.size[k][:t.n[k]]
		for w := 0; w+trainLen/2 <= len(at); w += trainLen {
			e := min(w+trainLen, len(at))
			if r := trainRate(at[w:e], size[w:e]); r > 0 {
				est = append(est, r)
			}
		}
		if r := trainRate(at, size); r > 0 && (whole == 0 || r < whole) {
			whole = r
		}
	}
	if len(est) == 0 {
		return whole
	}
	slices.Sort(est)
	return est[(len(est)-1)/2]
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

// sendTrain sends the probe on lane i to dst: its datagrams are numbered 0…trainMax-1 (index,
// count), the first train's first.
func (p *Path) sendTrain(i int, dst netip.AddrPort) {
	pt := make([]byte, wire.MaxDatagramV6-wire.Overhead)
	pkts := make([][]byte, trainMax)
	for k := range pkts {
		binary.BigEndian.PutUint16(pt[0:], uint16(k))
		binary.BigEndian.PutUint16(pt[2:], trainMax)
		buf := make([]byte, 0, wire.MaxDatagramV6)
		pkts[k] = p.crypto.Seal(buf, wire.Header{Type: wire.TypeHello, Flags: trainFlag, Lane: uint8(i), Seq: p.NextSeq(i)}, pt)
	}
	for k, l := range trainLens {
		if k > 0 {
			time.Sleep(trainGap)
		}
		p.sendTo(i, dst, pkts[:l])
		pkts = pkts[l:]
	}
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
	if t.first.IsZero() {
		t.first = now
		time.AfterFunc(trainWait, func() { p.reportTrain(i, from) })
	}
	t.add(int(idx), now.Sub(t.first), size+lane.IPv4UDPHeaders) // by its own index: the peer's count is not trusted
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
	bps := uint64(t.rate())
	p.trainGot.Store(bps + 1)
	if p.debugging() {
		for k := range t.n {
			line := fmt.Appendf(nil, "train %d: %d datagrams, %.0f Mbit/s; arrivals (µs):", k, t.n[k], trainRate(t.at[k][:t.n[k]], t.size[k][:t.n[k]])/1e6)
			for _, d := range t.at[k][:t.n[k]] {
				line = fmt.Appendf(line, " %d", d.Microseconds())
			}
			p.debugf("%s", line)
		}
		p.debugf("train: reported %.0f Mbit/s", float64(bps)/1e6)
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
	if err := p.sendTo(i, to, pkts); err != nil && p.debugging() {
		p.debugf("train: report to %s not sent: %v", to, err)
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

// SendTrainOnHello makes a server send the probe to the client (the server sends the data in a
// pull): now, if a lane has heard the client, else on the first hello that qualifies. A hello
// qualifies once it proves its address (the cookie round trip, hello.go), or at once when it
// comes from ssh's client (SetSSHClient), which saves that round trip before the sender's STARTUP
// is seeded. Either way the hello is authentic (sealed under the session's key, not a replay), so
// only the peer holding the key can ask for the probe, and it goes once per session.
func (p *Path) SendTrainOnHello() {
	p.trainOnHello.Store(true)
	for i := range p.conns {
		dst, ok := p.Peer(i)
		if !ok || !p.proven[i].Load() {
			h := p.helloFrom[i].Load()
			if h == nil || !p.fromSSHClient(*h) {
				continue
			}
			dst = *h
		}
		if p.trainSent.CompareAndSwap(false, true) {
			go p.sendTrain(i, dst)
		}
		return
	}
}

// SetSSHClient (server) names the address ssh's connection came from (SSH_CONNECTION): an
// authentic hello from it, any port (a NAT maps the lanes' own), may have the pull's probe
// (SendTrainOnHello) and copies of control messages (SendControlEarly) before its lane's address
// is proven. Unset or invalid (a jump host or proxy in between, none known, the doctor): proven
// addresses only.
func (p *Path) SetSSHClient(client netip.Addr) {
	if client.IsValid() {
		c := client.Unmap()
		p.sshClient.Store(&c)
	}
}

// fromSSHClient reports whether a is SetSSHClient's address, any port.
func (p *Path) fromSSHClient(a netip.AddrPort) bool {
	ip := p.sshClient.Load()
	return ip != nil && a.Addr().Unmap() == *ip
}

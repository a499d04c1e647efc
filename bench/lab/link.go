//go:build linux

package lab

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// bufSize holds any packet the TUN device can hand us at MTU 1500; the
	// devices advertise no offloads, so the kernel never passes GSO packets.
	bufSize = 2048
	// ringSlots bounds the packets one direction can hold (queued plus in
	// flight). 400 Mbit/s × 70 ms plus a 1-BDP queue is about 7,000 full-size
	// packets; the rest is headroom for small packets such as ACKs. Slot
	// buffers are allocated on first use, so memory follows the high-water
	// mark, not this bound.
	ringSlots = 1 << 16
	// releaseSlack lets the releaser send packets due within this window
	// together instead of sleeping once per packet.
	releaseSlack = 100 * time.Microsecond
	// preciseWait is the longest wait the releaser sleeps in nanosleep on
	// its own thread; longer ones go through a Go timer first. An idle Go
	// timer fires up to ~1 ms late (the netpoller waits whole milliseconds),
	// which released packets in 1 ms clumps: a 400 Mbit/s link delivered a
	// 48-datagram packet train in 0.1 ms as often as in 1.4 ms.
	preciseWait = 2 * time.Millisecond
	// minQueueBytes is the floor for the default (1 BDP) queue.
	minQueueBytes = 64 << 10
)

// PathStats counts what one direction of the emulator did.
type PathStats struct {
	Packets       uint64 // packets delivered to the far side
	Bytes         uint64 // IP bytes delivered to the far side
	LossDrops     uint64 // packets removed by random loss
	LossBytes     uint64
	QueueDrops    uint64 // packets refused by the full drop-tail queue
	QueueBytes    uint64
	OverflowDrops uint64 // packets refused because the emulator ran out of slots
	WriteErrors   uint64 // packets the far TUN device refused
	Blocked       uint64 // UDP packets dropped because the path blocks UDP (Path.DropUDP), and TCP ones to a blocked port (Path.DropTCP)
	KernelDrops   uint64 // the veth path only: frames either veth dropped (a receive backlog that overflowed)
	MaxQueueBytes int    // largest queue occupancy seen, including the arriving packet
	// IP bytes by protocol: UDP and TCP that arrived at the link (what the senders sent, before
	// random loss and the queue) and that it delivered. A flow's sending rate is its arrivals
	// over time, its share of the bottleneck its deliveries.
	UDPArrived, UDPDelivered uint64
	TCPArrived, TCPDelivered uint64
	// Time the rate-limited link stood idle between packets, in gaps shorter than 2 ms (a
	// flow paced under the rate, or a queue that ran empty between its bursts: with loss before
	// the queue, each lost datagram that finds it empty leaves its slot unused) and in gaps of
	// 2 ms to 1 s (a flow that paused, and the round trips of a start: ssh's handshake, a
	// copy's set-up); longer gaps are no flow at all. Over a whole run, set-ups included.
	IdleShortNs, IdleLongNs int64
}

// Sub returns the counters accumulated since an earlier snapshot o.
// MaxQueueBytes is a high-water mark and is kept as is.
func (s PathStats) Sub(o PathStats) PathStats {
	s.Packets -= o.Packets
	s.Bytes -= o.Bytes
	s.LossDrops -= o.LossDrops
	s.LossBytes -= o.LossBytes
	s.QueueDrops -= o.QueueDrops
	s.QueueBytes -= o.QueueBytes
	s.OverflowDrops -= o.OverflowDrops
	s.WriteErrors -= o.WriteErrors
	s.Blocked -= o.Blocked
	s.KernelDrops -= o.KernelDrops
	s.IdleShortNs -= o.IdleShortNs
	s.IdleLongNs -= o.IdleLongNs
	s.UDPArrived -= o.UDPArrived
	s.UDPDelivered -= o.UDPDelivered
	s.TCPArrived -= o.TCPArrived
	s.TCPDelivered -= o.TCPDelivered
	return s
}

// IPv4 protocol numbers the counters tell apart.
const (
	protoTCP = 6
	protoUDP = 17
)

// proto is an IPv4 packet's protocol number (0 for anything else: IPv6 is off in the lab).
func proto(pkt []byte) byte {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return 0
	}
	return pkt[9]
}

// dstPort is an IPv4 TCP or UDP packet's destination port (0 where it has none).
func dstPort(pkt []byte) uint16 {
	ihl := int(pkt[0]&0x0f) * 4
	if len(pkt) < ihl+4 {
		return 0
	}
	return uint16(pkt[ihl+2])<<8 | uint16(pkt[ihl+3])
}

// countProto adds n bytes of a packet of protocol p to the UDP or TCP counter.
func countProto(p byte, n uint64, udp, tcp *uint64) {
	switch p {
	case protoUDP:
		*udp += n
	case protoTCP:
		*tcp += n
	}
}

type slot struct {
	buf []byte
	n   int
	due int64 // release time in ns since the link's epoch
}

// link emulates one direction: it reads packets from in, drops some at
// random, queues the rest behind a rate limit, and writes each to out once
// its serialization time plus the propagation delay has passed.
//
// The bottleneck is modelled analytically: busyUntil is when the link will
// have finished serializing everything accepted so far, so a packet's
// departure time and the queue occupancy follow from it without a separate
// serializer stage. Departures are monotone, so one FIFO ring ordered by
// release time suffices, and a single releaser goroutine drains it.
type link struct {
	in, out *os.File
	epoch   time.Time
	done    <-chan struct{}
	wake    chan struct{} // releaser waits here only while the ring is empty

	mu         sync.Mutex
	path       Path
	queueLimit int
	nsPerByte  float64 // 0 = unlimited rate
	rng        *rand.Rand
	ring       []slot
	free       [][]byte // released packet buffers, reused by the reader
	head       int
	count      int
	busyUntil  int64
	lastDue    int64
	sleeping   bool
	stats      PathStats
}

func newLink(in, out *os.File, p Path, seed uint64, epoch time.Time, done <-chan struct{}) *link {
	l := &link{
		in:    in,
		out:   out,
		epoch: epoch,
		done:  done,
		wake:  make(chan struct{}, 1),
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ring:  make([]slot, ringSlots),
	}
	l.setPath(p)
	return l
}

// setPath installs p; the caller holds l.mu or owns l exclusively.
func (l *link) setPath(p Path) {
	l.path = p
	l.nsPerByte = 0
	if p.RateBps > 0 {
		l.nsPerByte = 8e9 / p.RateBps
	}
	l.queueLimit = p.QueueBytes
	if l.queueLimit <= 0 {
		l.queueLimit = DefaultQueueBytes(p.RateBps, p.Delay)
	}
}

// DefaultQueueBytes is one bandwidth-delay product of rate over a round trip
// of 2×delay, at least 64 KiB.
func DefaultQueueBytes(rateBps float64, delay time.Duration) int {
	q := int(rateBps * 2 * delay.Seconds() / 8)
	return max(q, minQueueBytes)
}

func (l *link) now() int64 { return int64(time.Since(l.epoch)) }

func (l *link) update(p Path) {
	l.mu.Lock()
	l.setPath(p)
	l.mu.Unlock()
}

func (l *link) snapshot() PathStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// linkThread gives the calling goroutine a thread of its own with a 1 ns
// timer slack (nanosleep then wakes within tens of microseconds of the due
// time) and, where allowed (root), a real-time priority: a link is hardware
// that does not wait for the CPU. On the 2-core test machine, with both
// transfer ends, ssh and the lab sharing the cores, an ordinary thread was
// sometimes kept off the CPU for 1–3 ms, and then released a millisecond of
// packets at once.
func linkThread() {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}
	unix.SchedSetAttr(0, &attr, 0) // not allowed without CAP_SYS_NICE: stay ordinary
}

// readLoop is the producer. It reads into a buffer it owns and, if the
// packet survives loss and the queue, hands the buffer to the tail slot and
// takes a recycled one for the next read, all in one critical section.
func (l *link) readLoop() error {
	linkThread()
	buf := make([]byte, bufSize)
	tail := 0 // == (head+count) % len(ring); only this goroutine moves it
	for {
		n, err := l.in.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN) {
				continue
			}
			select {
			case <-l.done:
				return nil
			default:
			}
			return err
		}
		if n == 0 {
			continue
		}
		now := l.now()

		l.mu.Lock()
		p := proto(buf[:n])
		countProto(p, uint64(n), &l.stats.UDPArrived, &l.stats.TCPArrived)
		if p == protoUDP && l.path.DropUDP || p == protoTCP && l.path.DropTCP.Has(dstPort(buf[:n])) {
			l.stats.Blocked++
			l.mu.Unlock()
			continue
		}
		if p := l.path.Loss; p > 0 && l.rng.Float64() < p {
			l.stats.LossDrops++
			l.stats.LossBytes += uint64(n)
			l.mu.Unlock()
			continue
		}
		if l.count == len(l.ring) {
			l.stats.OverflowDrops++
			l.mu.Unlock()
			continue
		}
		due := now
		if l.nsPerByte > 0 {
			if l.busyUntil < now {
				switch gap := now - l.busyUntil; {
				case l.busyUntil == 0:
				case gap < int64(2*time.Millisecond):
					l.stats.IdleShortNs += gap
				case gap < int64(time.Second):
					l.stats.IdleLongNs += gap
				}
				l.busyUntil = now
			}
			backlog := int(float64(l.busyUntil-now)/l.nsPerByte) + n
			if backlog > l.queueLimit {
				l.stats.QueueDrops++
				l.stats.QueueBytes += uint64(n)
				l.mu.Unlock()
				continue
			}
			l.stats.MaxQueueBytes = max(l.stats.MaxQueueBytes, backlog)
			l.busyUntil += int64(float64(n) * l.nsPerByte)
			due = l.busyUntil
		}
		due += int64(l.path.Delay)
		// A FIFO link cannot reorder: after SetPath shortens the delay,
		// new packets still wait behind older ones.
		due = max(due, l.lastDue)
		l.lastDue = due
		l.ring[tail] = slot{buf: buf, n: n, due: due}
		tail = (tail + 1) % len(l.ring)
		l.count++
		buf = nil
		if k := len(l.free); k > 0 {
			buf = l.free[k-1]
			l.free = l.free[:k-1]
		}
		wake := l.sleeping
		l.sleeping = false
		l.mu.Unlock()
		if wake {
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
		if buf == nil {
			buf = make([]byte, bufSize)
		}
	}
}

// releaseLoop is the consumer. It sleeps until the head packet is due, then
// writes every packet due by now (plus slack) in one batch without holding
// the lock, so the reader is never stalled by a write.
func (l *link) releaseLoop() {
	linkThread()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		for l.count == 0 {
			l.sleeping = true
			l.mu.Unlock()
			select {
			case <-l.wake:
			case <-l.done:
				return
			}
			l.mu.Lock()
		}
		now := l.now()
		limit := now + int64(releaseSlack)
		k := 0
		for k < l.count && l.ring[(l.head+k)%len(l.ring)].due <= limit {
			k++
		}
		if k == 0 {
			wait := time.Duration(l.ring[l.head].due - now)
			l.mu.Unlock()
			if wait <= preciseWait {
				ts := unix.NsecToTimespec(int64(wait))
				for unix.Nanosleep(&ts, &ts) == unix.EINTR {
				}
				continue
			}
			wait -= preciseWait / 2
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-l.done:
				return
			}
			continue
		}
		head := l.head
		l.mu.Unlock()

		var pkts, bytes, errs, udp, tcp uint64
		for i := range k {
			s := &l.ring[(head+i)%len(l.ring)]
			if _, err := l.out.Write(s.buf[:s.n]); err != nil {
				if errors.Is(err, os.ErrClosed) {
					return
				}
				// EIO while the far device is down, EINVAL for a
				// malformed packet: the packet is lost, the link goes on.
				errs++
				continue
			}
			pkts++
			bytes += uint64(s.n)
			countProto(proto(s.buf[:s.n]), uint64(s.n), &udp, &tcp)
		}

		l.mu.Lock()
		for i := range k {
			s := &l.ring[(head+i)%len(l.ring)]
			l.free = append(l.free, s.buf)
			s.buf = nil
		}
		l.head = (l.head + k) % len(l.ring)
		l.count -= k
		l.stats.Packets += pkts
		l.stats.Bytes += bytes
		l.stats.WriteErrors += errs
		l.stats.UDPDelivered += udp
		l.stats.TCPDelivered += tcp
		l.mu.Unlock()
	}
}

package cc

// Per-packet state lives in one ring per lane, indexed by the lane's sequence number modulo the
// ring size. Nothing is allocated per packet: a ring only grows (doubling) when a slot it needs is
// still held by an outstanding packet, which happens a handful of times per session while the
// inflight window grows and never in the steady state.

const (
	stFree        uint8 = iota
	stOutstanding       // sent, fate unknown; counted in bytes in flight
	stLost              // declared lost; kept so that a late ack is recognised as spurious
	stAcked
)

const (
	flAppLimited uint8 = 1 << iota // sent while the delivery-rate estimator was app-limited
	flLowRate                      // sent in a low-rate state: counts towards the random-loss baseline
)

// pkt is the delivery-rate-estimator state of one sent packet (draft-cheng-iccrg-delivery-rate-
// estimation §3.2), plus its fate.
type pkt struct {
	seq         uint64
	sentAt      int64 // ns since controller start
	delivered   int64 // C.delivered when sent
	deliveredAt int64 // C.delivered_time when sent
	firstSentAt int64 // C.first_sent_time when sent
	bytes       int32
	state       uint8
	flags       uint8
}

const (
	ringMin = 1 << 10
	ringMax = 1 << 22 // 4 Mi packets per lane: ~6 GB in flight at 1500 B, far beyond any real window
)

type ring struct {
	buf  []pkt
	mask uint64
}

func newRing(size int) ring {
	n := ringMin
	for n < size && n < ringMax {
		n <<= 1
	}
	return ring{buf: make([]pkt, n), mask: uint64(n - 1)}
}

// lookup returns the packet with sequence seq, or nil if it is not (or no longer) tracked.
func (r *ring) lookup(seq uint64) *pkt {
	p := &r.buf[seq&r.mask]
	if p.state == stFree || p.seq != seq {
		return nil
	}
	return p
}

// slot returns the slot for a new packet seq. evicted is the byte count of an outstanding packet
// that had to be forgotten because the ring is at its maximum size (normally 0).
func (r *ring) slot(seq uint64) (p *pkt, evicted int) {
	p = &r.buf[seq&r.mask]
	if p.state == stOutstanding && p.seq != seq {
		if len(r.buf) < ringMax {
			r.grow()
			return r.slot(seq)
		}
		evicted = int(p.bytes)
	} else if p.state == stOutstanding {
		evicted = int(p.bytes) // same seq sent again while outstanding: the old copy is replaced
	}
	return p, evicted
}

func (r *ring) grow() {
	nb := make([]pkt, 2*len(r.buf))
	nm := uint64(len(nb) - 1)
	for i := range r.buf {
		if q := &r.buf[i]; q.state != stFree {
			nb[q.seq&nm] = *q // distinct modulo n implies distinct modulo 2n
		}
	}
	r.buf, r.mask = nb, nm
}

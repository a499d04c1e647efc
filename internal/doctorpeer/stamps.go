package doctorpeer

import (
	"net/netip"
	"sync"
	"time"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
)

// The client's lanes keep the kernel's receive timestamps on for the probe (the path turns them
// off after the copy's train): the peer's trains are then timed by when each datagram reached
// the socket, not by when a busy process read it (on the lab under a load of 9 on 2 cores, whole
// trains were read out of a backlog and could not be timed). The peer's lanes are the serve
// command's, so the client's trains are timed there by receive batch (reading).

// stampBook holds the kernel receive times of the probe datagrams a lane has read and the path
// has not handled yet, by sequence number: at most maxStamps (the header is read before the
// datagram is authenticated, so a forger can fill it, and then only batch times are lost).
type stampBook struct {
	mu sync.Mutex
	at map[uint64]time.Time
}

const maxStamps = maxProbeTrains * maxProbeLen

func (s *stampBook) note(seq uint64, t time.Time) {
	s.mu.Lock()
	if len(s.at) < maxStamps {
		s.at[seq] = t
	}
	s.mu.Unlock()
}

// take returns and forgets the time noted for seq.
func (s *stampBook) take(seq uint64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[seq]
	delete(s.at, seq)
	return t, ok
}

// stampedLane is a lane whose receive timestamps stay on, and which notes lane 0's feedback
// datagrams' times in book.
type stampedLane struct {
	lane.PacketConn
	book *stampBook
	zero bool // lane 0
}

// SetRxTimestamps keeps them on.
func (l *stampedLane) SetRxTimestamps(bool) error { return l.PacketConn.SetRxTimestamps(true) }

func (l *stampedLane) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	return l.PacketConn.Recv(deadline, func(b []byte, from netip.AddrPort) {
		if l.zero {
			if t := l.PacketConn.RxTime(); !t.IsZero() {
				if h, err := wire.ParseHeader(b); err == nil && h.Type == wire.TypeFeedback {
					l.book.note(h.Seq, t)
				}
			}
		}
		fn(b, from)
	})
}

// Buffers and SetDontFragment pass on what the lane can (session.Path asks for them).
func (l *stampedLane) Buffers() (int, int) {
	if c, ok := l.PacketConn.(interface{ Buffers() (int, int) }); ok {
		return c.Buffers()
	}
	return 0, 0
}

func (l *stampedLane) SetDontFragment(on bool) error {
	if d, ok := l.PacketConn.(session.DontFragmenter); ok {
		return d.SetDontFragment(on)
	}
	return nil
}

// stamped wraps open's lanes as stampedLanes noting into book.
func stamped(open xfer.LaneOpener, book *stampBook) xfer.LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) {
		conns, err := open(bind)
		if err != nil {
			return conns, err
		}
		for i, c := range conns {
			conns[i] = &stampedLane{PacketConn: c, book: book, zero: i == 0}
		}
		return conns, nil
	}
}

package doctorpeer

import (
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/lane"
)

// The client's lanes keep the kernel's receive timestamps on for the probe (the path turns them
// off after the copy's train): the peer's trains are then timed by when each datagram reached
// the socket, not by when a busy process read it (on the lab under a load of 9 on 2 cores, whole
// trains were read out of a backlog and could not be timed). The peer's lanes are the serve
// command's, so the client's trains are timed there by receive batch (reading).

// The times reach the probe with the datagrams they belong to (session.StampedHandler: the path
// reads each datagram's time as the lane hands it over and passes it on once the datagram is
// authenticated), never by a header read before that: a datagram may come from anyone, and a
// forger's times must not become the peer's.

// stampedLane is a lane whose receive timestamps stay on.
type stampedLane struct {
	lane.PacketConn
}

// SetRxTimestamps keeps them on.
func (l *stampedLane) SetRxTimestamps(bool) error { return l.PacketConn.SetRxTimestamps(true) }

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

// stamped wraps open's lanes as stampedLanes.
func stamped(open xfer.LaneOpener) xfer.LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) {
		conns, err := open(bind)
		if err != nil {
			return conns, err
		}
		for i, c := range conns {
			conns[i] = &stampedLane{PacketConn: c}
		}
		return conns, nil
	}
}

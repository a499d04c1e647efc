package lane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A Stream carries a lane's datagrams as records on a reliable byte stream (a TCP connection,
// where UDP is blocked): each datagram is a record of a 2-byte big-endian length and the
// datagram's bytes, unchanged (sealed as on UDP: the session authenticates every record as it
// does every datagram). The receiver checks the length before it reads the record: a length of 0
// or above MaxRecord is not a Farwing stream, and the stream is closed at once (ErrBadRecord).
//
// Send ignores its destination (a stream has one peer); Recv reports the stream's remote address
// as every record's source. Memory is bounded: one receive buffer of streamBuffer bytes.

// MaxRecord is the largest record a Stream takes: a UDP payload within a 9,000-byte MTU, above
// any datagram Farwing sends (its largest, a jumbo session's, is 8,238 bytes).
const MaxRecord = 9000 - IPv6UDPHeaders

// RecordHeader is a record's length prefix.
const RecordHeader = 2

// streamBuffer is a Stream's receive buffer: many records per read system call, and room for a
// whole record of MaxRecord.
const streamBuffer = 256 << 10

// StreamWriteTimeout bounds one Send: a peer that stops reading for this long makes Send fail
// (the session then gives up on its silence), instead of blocking the lane's sender forever.
const StreamWriteTimeout = 20 * time.Second

// ErrBadRecord is returned by Recv when the stream sent a record length out of bounds: what
// follows cannot be framed, and the stream is closed.
var ErrBadRecord = errors.New("lane: stream record length out of bounds")

// Stream is a lane over a byte stream (see above). It implements PacketConn.
type Stream struct {
	c      net.Conn
	remote netip.AddrPort
	local  netip.AddrPort

	// Receive side (one Recv at a time): the unread bytes are buf[r:w].
	buf  []byte
	r, w int

	// Send side (one Send at a time): the length prefixes and the vector handed to writev.
	hdrs []byte
	vec  net.Buffers

	stats     counters
	closeOnce sync.Once
	closed    atomic.Bool
	// BadRecords counts records refused for their length (the stream was closed at the first).
	BadRecords atomic.Uint64
}

var _ PacketConn = (*Stream)(nil)

// NewStream makes a lane of c. pending, if not empty, is bytes already read from c (a first
// record read to authenticate the stream): Recv hands them over first.
func NewStream(c net.Conn, pending []byte) *Stream {
	s := &Stream{c: c, buf: make([]byte, streamBuffer), remote: addrPortOf(c.RemoteAddr()), local: addrPortOf(c.LocalAddr())}
	s.w = copy(s.buf, pending)
	return s
}

// addrPortOf is a net.Addr's address and port (zero where it has none).
func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap
	}
	return netip.AddrPort{}
}

// AppendRecord appends pkt as one record to dst.
func AppendRecord(dst, pkt []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(pkt)))
	return append(dst, pkt...)
}

// ReadRecord reads one record from r within MaxRecord, for a stream's first record, and returns
// it with its length prefix, as NewStream takes it back. A length out of bounds is ErrBadRecord.
func ReadRecord(r io.Reader) ([]byte, error) {
	var h [RecordHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(h[:]))
	if n == 0 || n > MaxRecord {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadRecord, n)
	}
	rec := make([]byte, RecordHeader+n)
	copy(rec, h[:])
	if _, err := io.ReadFull(r, rec[RecordHeader:]); err != nil {
		return nil, err
	}
	return rec, nil
}

// Send writes each packet as one record, all in one write; dst is not used.
func (s *Stream) Send(_ netip.AddrPort, pkts [][]byte) error {
	s.hdrs = s.hdrs[:0]
	s.vec = s.vec[:0]
	total := 0
	for _, p := range pkts {
		if len(p) == 0 || len(p) > MaxRecord {
			return fmt.Errorf("lane: a datagram of %d bytes does not fit a stream record", len(p))
		}
		s.hdrs = binary.BigEndian.AppendUint16(s.hdrs, uint16(len(p)))
		total += len(p)
	}
	for i, p := range pkts {
		s.vec = append(s.vec, s.hdrs[2*i:2*i+2], p)
	}
	s.c.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	v := s.vec // WriteTo consumes its receiver
	_, err := v.WriteTo(s.c)
	s.stats.txCalls.Add(1)
	if err != nil {
		return fmt.Errorf("lane: stream to %s: %w", s.remote, err)
	}
	s.stats.sentD.Add(uint64(len(pkts)))
	s.stats.sentB.Add(uint64(total))
	return nil
}

// Recv hands fn every whole record buffered, reading from the stream until there is one or the
// deadline passes.
func (s *Stream) Recv(deadline time.Time, fn func(b []byte, from netip.AddrPort)) (int, error) {
	for {
		if s.closed.Load() {
			return 0, net.ErrClosed
		}
		n, err := s.deliver(fn)
		if n > 0 || err != nil {
			return n, err
		}
		if s.r > 0 { // make room behind the partial record
			s.w = copy(s.buf, s.buf[s.r:s.w])
			s.r = 0
		}
		s.c.SetReadDeadline(deadline)
		m, err := s.c.Read(s.buf[s.w:])
		s.stats.rxCalls.Add(1)
		s.w += m
		if err != nil && m == 0 {
			if errors.Is(err, os.ErrDeadlineExceeded) && !s.closed.Load() {
				return 0, ErrTimeout
			}
			// The peer closed or reset the stream, or this end closed it: the lane is over.
			s.Close()
			if errors.Is(err, net.ErrClosed) {
				return 0, net.ErrClosed
			}
			return 0, fmt.Errorf("%w: %v", net.ErrClosed, err)
		}
	}
}

// deliver hands fn the whole records in buf[r:w], until fn closes the stream (it distrusts it:
// nothing behind that record is read).
func (s *Stream) deliver(fn func(b []byte, from netip.AddrPort)) (int, error) {
	n := 0
	for !s.closed.Load() && s.w-s.r >= RecordHeader {
		size := int(binary.BigEndian.Uint16(s.buf[s.r:]))
		if size == 0 || size > MaxRecord {
			s.BadRecords.Add(1)
			s.Close()
			return n, fmt.Errorf("%w: %d bytes from %s", ErrBadRecord, size, s.remote)
		}
		if s.w-s.r < RecordHeader+size {
			break
		}
		rec := s.buf[s.r+RecordHeader : s.r+RecordHeader+size]
		s.r += RecordHeader + size
		s.stats.recvD.Add(1)
		s.stats.recvB.Add(uint64(size))
		fn(rec, s.remote)
		n++
	}
	if s.r == s.w {
		s.r, s.w = 0, 0
	}
	return n, nil
}

// LocalAddr is the stream's own address.
func (s *Stream) LocalAddr() netip.AddrPort { return s.local }

// RemoteAddr is the stream's peer.
func (s *Stream) RemoteAddr() netip.AddrPort { return s.remote }

// SetRxTimestamps does nothing: a stream's records have no kernel receive times of their own.
func (s *Stream) SetRxTimestamps(bool) error { return nil }

// RxTime is zero: see SetRxTimestamps.
func (s *Stream) RxTime() time.Time { return time.Time{} }

// Pending is false: it cannot tell without reading the buffer Recv's goroutine owns.
func (s *Stream) Pending() bool { return false }

// Stats returns the stream's counters (datagrams: records).
func (s *Stream) Stats() Stats { return s.stats.snapshot() }

// Close closes the stream; a blocked Recv returns net.ErrClosed.
func (s *Stream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		err = s.c.Close()
	})
	return err
}

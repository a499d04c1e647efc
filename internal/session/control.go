package session

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/farwing/farwing/internal/wire"
)

// Control datagrams (wire.TypeControl) carry copies of the control channel's messages on the
// lanes, so that a message sent once the lanes are up does not wait out a TCP retransmission when
// a segment of ssh's connection is lost (docs/PROTOCOL.md, "Control datagrams"). The control
// channel stays the authority: every message still travels there, in order, and the receiving end
// takes each message from whichever copy comes first (xfer.Control). A copy is sent once on every
// lane, so it is lost only when all four are.
//
// Payload: message number (u32, the sending end's count of control messages before it) | part
// index (u8) | parts (u8) | bytes of the message.
const (
	controlHead = 6
	// ControlPart is the most bytes of a message one control datagram carries; a datagram is at
	// most wire.Overhead + controlHead + ControlPart bytes, inside any path's MTU.
	ControlPart = 1200
	// MaxControlParts bounds a message's parts; MaxControlMessage, the message a copy is sent
	// for (a longer one travels on the control channel only).
	MaxControlParts   = 16
	MaxControlMessage = ControlPart * MaxControlParts
	// maxControlPartial bounds the messages being reassembled at once, and maxControlDone the
	// message numbers remembered as delivered (the copies on the other lanes are dropped).
	maxControlPartial = 8
	maxControlDone    = 64
)

// controlRx reassembles the control datagrams that arrive, on any lane.
type controlRx struct {
	mu      sync.Mutex
	partial map[uint32]*controlMsg
	done    []uint32 // delivered message numbers, the newest maxControlDone
}

type controlMsg struct {
	parts [][]byte
	have  int
}

// ErrControlCopy is SendControl's answer for a message it sent no copy of on any lane.
var ErrControlCopy = errors.New("no control datagram sent")

// SendControl sends a copy of control message number seq on every lane (for a server, every lane
// whose client address is proven). A message longer than MaxControlMessage, or empty, is not sent.
func (p *Path) SendControl(seq uint32, msg []byte) error {
	if len(msg) == 0 || len(msg) > MaxControlMessage {
		return ErrControlCopy
	}
	n := (len(msg) + ControlPart - 1) / ControlPart
	sent := false
	var pt [controlHead + ControlPart]byte
	for i := 0; i < Lanes; i++ {
		pkts := make([][]byte, 0, n)
		for k := 0; k < n; k++ {
			part := msg[k*ControlPart : min(len(msg), (k+1)*ControlPart)]
			b := controlPayload(pt[:0], seq, k, n, part)
			pkts = append(pkts, p.Seal(make([]byte, 0, wire.Overhead+len(b)), wire.TypeControl, i, p.NextSeq(i), b))
		}
		if err := p.Send(i, pkts); err == nil {
			sent = true
		}
	}
	if !sent {
		return ErrControlCopy
	}
	return nil
}

// controlPayload appends a control datagram's payload to dst: part k of the n of message seq.
func controlPayload(dst []byte, seq uint32, k, n int, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, seq)
	return append(append(dst, byte(k), byte(n)), body...)
}

// OnControl installs the receiver of the control messages copied on the lanes: f gets each
// message whole, once, with its number; it is called from the lanes' goroutines and must not
// block. nil stops delivery.
func (p *Path) OnControl(f func(seq uint32, msg []byte)) {
	if f == nil {
		p.controlTo.Store(nil)
		return
	}
	p.controlTo.Store(&f)
}

// onControl takes an authentic, fresh control datagram's payload (valid only during the call).
// Malformed ones are counted as invalid and dropped: the control channel carries the message too.
func (p *Path) onControl(pt []byte) {
	f := p.controlTo.Load()
	if f == nil {
		return
	}
	if len(pt) <= controlHead || len(pt) > controlHead+ControlPart {
		p.ControlInvalid.Add(1)
		return
	}
	seq, k, n := binary.BigEndian.Uint32(pt[0:4]), int(pt[4]), int(pt[5])
	if n == 0 || n > MaxControlParts || k >= n || (k < n-1 && len(pt) != controlHead+ControlPart) {
		p.ControlInvalid.Add(1)
		return
	}
	rx := &p.control
	rx.mu.Lock()
	for _, d := range rx.done {
		if d == seq {
			rx.mu.Unlock()
			return // a copy from another lane
		}
	}
	var m *controlMsg
	if n > 1 {
		if rx.partial == nil {
			rx.partial = map[uint32]*controlMsg{}
		}
		if m = rx.partial[seq]; m == nil {
			if len(rx.partial) >= maxControlPartial {
				// Make room by dropping the oldest message held (the lowest number): its copies
				// were lost on every lane, or a peer sends parts that never complete.
				low := uint32(1<<32 - 1)
				for s := range rx.partial {
					low = min(low, s)
				}
				delete(rx.partial, low)
			}
			m = &controlMsg{parts: make([][]byte, n)}
			rx.partial[seq] = m
		}
		if len(m.parts) != n {
			rx.mu.Unlock()
			p.ControlInvalid.Add(1)
			return
		}
		if m.parts[k] == nil {
			m.parts[k] = append([]byte(nil), pt[controlHead:]...)
			m.have++
		}
		if m.have < n {
			rx.mu.Unlock()
			return
		}
	}
	if len(rx.done) == maxControlDone {
		rx.done = rx.done[1:]
	}
	rx.done = append(rx.done, seq)
	var msg []byte
	if m == nil {
		msg = append(msg, pt[controlHead:]...)
	} else {
		delete(rx.partial, seq)
		for _, b := range m.parts {
			msg = append(msg, b...)
		}
	}
	rx.mu.Unlock()
	(*f)(seq, msg)
}

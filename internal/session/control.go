package session

import (
	"encoding/binary"
	"errors"
	"net/netip"
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
	sent := false
	for i := 0; i < Lanes; i++ {
		if err := p.Send(i, p.sealControl(i, seq, msg)); err == nil {
			sent = true
		}
	}
	if !sent {
		return ErrControlCopy
	}
	return nil
}

// Before the data phase a server's lanes are not yet proven, and the messages that matter then
// (a push's have, a pull's files and list) are the ones whose lost TCP segment costs the most: the
// last a server sends before it waits, recovered only by a tail-loss probe or a retransmission
// timeout (0.3-0.4 s at 140 ms; in the lab at 3 % loss, 7 of 146 starts). So until then a server
// may copy its messages to the address an authentic hello came from, proven or not, when that
// address is ssh's client (SetSSHClient): the rule of the early packet train (train.go).
// A replayed hello can aim these copies only at the ssh client's own address, and at most
// maxEarlyCopyBytes of them per lane, in all, before the lane is proven.
const (
	maxEarlyCopyBytes = 32 << 10 // the messages kept for lanes not heard from yet; what a lane sends unproven
	maxEarlyCopies    = 8        // ... and the count kept
)

// earlyControl is a server's state for SendControlEarly.
type earlyControl struct {
	mu     sync.Mutex
	kept   []earlyMsg            // maxEarlyCopies messages, maxEarlyCopyBytes in all, for lanes heard later
	sentTo [Lanes]netip.AddrPort // where the kept messages went on each lane (none yet: zero)
	spent  [Lanes]int            // message bytes each lane sent to an unproven address
	ended  bool                  // the engine runs: no more early copies (EndControlEarly)
}

// earlyMsg is a control message kept for the lanes not heard yet, with its number.
type earlyMsg struct {
	seq uint32
	msg []byte
}

// EndControlEarly (server) ends SendControlEarly's copies, the kept ones included, once the data
// phase starts: from then on the sending end's lane sequence numbers are its engine's.
func (p *Path) EndControlEarly() {
	p.early.mu.Lock()
	p.early.ended, p.early.kept = true, nil
	p.early.mu.Unlock()
}

// SendControlEarly (server) is SendControl before the data phase: a copy goes on every lane that is
// proven or whose first authentic hello came from ssh's client (SetSSHClient; within the lane's
// maxEarlyCopyBytes until it is proven), and is kept (up to maxEarlyCopies messages,
// maxEarlyCopyBytes in all) for the lanes that hear such a hello or are proven later (onHello).
// The client (which knows the server's address from ssh) copies with SendControl.
func (p *Path) SendControlEarly(seq uint32, msg []byte) error {
	if !p.server {
		return p.SendControl(seq, msg)
	}
	if len(msg) == 0 || len(msg) > MaxControlMessage {
		return ErrControlCopy
	}
	e := &p.early
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return ErrControlCopy
	}
	kept := len(msg)
	for _, m := range e.kept {
		kept += len(m.msg)
	}
	if len(e.kept) < maxEarlyCopies && kept <= maxEarlyCopyBytes {
		e.kept = append(e.kept, earlyMsg{seq, append([]byte(nil), msg...)})
	}
	sent := false
	for i := range p.conns {
		if p.sendEarly(i, seq, msg) {
			sent = true
		}
	}
	if !sent {
		return ErrControlCopy
	}
	return nil
}

// sendEarly sends lane i a copy of message seq where earlyPeer allows, within the lane's
// budget for an unproven address (with e.mu held). It reports whether it did.
func (p *Path) sendEarly(i int, seq uint32, msg []byte) bool {
	dst, proven, ok := p.earlyPeer(i)
	if !ok {
		return false
	}
	if !proven {
		e := &p.early
		if e.spent[i]+len(msg) > maxEarlyCopyBytes {
			return false
		}
		e.spent[i] += len(msg)
	}
	return p.sendTo(i, dst, p.sealControl(i, seq, msg)) == nil
}

// earlyPeer is where lane i's early copies and feedback go: its proven peer, or its first hello's
// source where that is ssh's client (reads only atomics).
func (p *Path) earlyPeer(i int) (dst netip.AddrPort, proven, ok bool) {
	if p.proven[i].Load() {
		dst, ok = p.Peer(i)
		return dst, true, ok
	}
	h := p.helloFrom[i].Load()
	if h == nil || !p.fromSSHClient(*h) {
		return netip.AddrPort{}, false, false
	}
	return *h, false, true
}

// heardEarly (server) sends lane i, whose first authentic hello has just come or whose address
// has just been proven, the copies kept, once to each address: at the first hello from ssh's
// client, and again at the proof where that proved another address (the first hello was a
// replay from another port), or only then (through a jump host or proxy the addresses differ).
func (p *Path) heardEarly(i int) {
	e := &p.early
	e.mu.Lock()
	defer e.mu.Unlock()
	dst, _, ok := p.earlyPeer(i)
	if e.ended || !ok || e.sentTo[i] == dst {
		return
	}
	e.sentTo[i] = dst
	for _, m := range e.kept {
		p.sendEarly(i, m.seq, m.msg)
	}
}

// sealControl seals message seq as lane i's control datagrams.
func (p *Path) sealControl(i int, seq uint32, msg []byte) [][]byte {
	n := (len(msg) + ControlPart - 1) / ControlPart
	var pt [controlHead + ControlPart]byte
	pkts := make([][]byte, 0, n)
	for k := 0; k < n; k++ {
		part := msg[k*ControlPart : min(len(msg), (k+1)*ControlPart)]
		b := controlPayload(pt[:0], seq, k, n, part)
		pkts = append(pkts, p.Seal(make([]byte, 0, wire.Overhead+len(b)), wire.TypeControl, i, p.NextSeq(i), b))
	}
	return pkts
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

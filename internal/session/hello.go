package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/farwing/farwing/internal/wire"
)

// The lane-opening handshake proves the client's address before the server sends it anything
// larger than what it received (docs/PROTOCOL.md, "Hello"). A hello is authentic, but it can be
// captured and replayed from another address before the original arrives; a server that sent its
// packet train, its feedback or a file to whatever address an authentic hello came from would let
// anyone on the path aim it at a third party. So the server answers a hello with a hello-ack of
// the same size carrying a cookie bound to the address it is sent to (an HMAC under a secret of
// this path), and takes the address as the lane's peer only when a hello from that address
// echoes that cookie: only a client that received the ack there can. Until then it sends that
// address nothing but hello-acks; once proven, the lane's peer is fixed for the session.
//
// Payloads (both 18 bytes, so an answer is never larger than its hello):
//
//	hello:     send timestamp (8) | chunk size proposed (2) | cookie (8; zero in the first hellos)
//	hello-ack: the hello's timestamp (8) | chunk size agreed (2) | cookie for this address (8)
//
// A hello-ack carries provenFlag once its lane's address is proven.
const (
	helloLen   = 18
	provenFlag = 0x2 // header flag of a hello-ack: the lane's address is proven
)

// cookieFor is the cookie the server gives address a on lane i.
func (p *Path) cookieFor(i int, a netip.AddrPort) uint64 {
	m := hmac.New(sha256.New, p.secret[:])
	b, _ := a.MarshalBinary()
	m.Write([]byte{byte(i)})
	m.Write(b)
	return binary.BigEndian.Uint64(m.Sum(nil))
}

func newSecret() (s [32]byte) {
	rand.Read(s[:])
	return s
}

// onHello (server) answers an authentic, fresh hello from from on lane i.
func (p *Path) onHello(i int, pt []byte, from netip.AddrPort) {
	if len(pt) < 10 {
		return
	}
	p.helloHeard[i].Store(true)
	first := false
	if p.helloFrom[i].Load() == nil {
		f := from // only the first hello's source goes to the heap
		first = p.helloFrom[i].CompareAndSwap(nil, &f)
	}
	train := false // the probe goes to from once this hello is answered
	proved := false
	if p.proven[i].Load() {
		if cur, _ := p.Peer(i); cur != from {
			return // the lane's address is fixed once proven
		}
	} else {
		if len(pt) >= helloLen && binary.BigEndian.Uint64(pt[10:18]) == p.cookieFor(i, from) {
			p.SetPeer(i, from)
			p.proven[i].Store(true)
			train, proved = true, true
		}
		train = train || p.fromSSHClient(from)
	}
	train = train && p.trainOnHello.Load() && p.trainSent.CompareAndSwap(false, true)
	p.chunkMu.Lock()
	chunk := acceptChunk(pt, from)
	if p.chunkFixed {
		chunk = p.ChunkSize() // the receiver runs with it (FixChunk)
	} else if p.proven[i].Load() {
		p.chunk.Store(int32(chunk)) // only the proven client's hellos decide the session's chunks
	}
	p.chunkMu.Unlock()
	var ack [helloLen]byte
	copy(ack[:8], pt)
	binary.BigEndian.PutUint16(ack[8:], uint16(chunk))
	binary.BigEndian.PutUint64(ack[10:], p.cookieFor(i, from))
	var flags uint8
	if p.proven[i].Load() {
		flags = provenFlag
	}
	buf := make([]byte, 0, wire.HeaderLen+helloLen+wire.TagLen)
	pkt := p.crypto.Seal(buf, wire.Header{Type: wire.TypeHelloAck, Lane: uint8(i), Flags: flags, Seq: p.NextSeq(i)}, ack[:])
	p.sendTo(i, from, [][]byte{pkt})
	if first || proved {
		p.heardEarly(i) // after the answer too: the copies kept for this lane (control.go)
	}
	if train {
		go p.sendTrain(i, from) // after the answer, which it would otherwise delay
	}
}

// onHelloAck (client) takes the server's answer on lane i.
func (p *Path) onHelloAck(i int, h wire.Header, pt []byte, now time.Time) {
	if len(pt) < 10 {
		return
	}
	p.helloRTT.CompareAndSwap(0, now.UnixNano()-int64(beUint64(pt)))
	if binary.BigEndian.Uint16(pt[8:10]) == wire.JumboChunkSize && p.proposeJumbo.Load() {
		p.chunk.Store(wire.JumboChunkSize)
	}
	if h.Flags&provenFlag != 0 {
		p.provenAck[i].Store(true)
	}
	if len(pt) >= helloLen && !p.haveCookie[i].Load() {
		p.cookie[i].Store(binary.BigEndian.Uint64(pt[10:18]))
		p.haveCookie[i].Store(true)
		if !p.provenAck[i].Load() {
			p.sendHellos(i) // prove the address now, not at the next resend
		}
	}
	p.helloAck[i].Store(true)
	select { // wake Handshake
	case p.acked <- struct{}{}:
	default:
	}
}

// sendHellos sends lane i's hello twice (at 3 % loss each way one handshake in five lost a hello
// or its answer on some lane and waited 100 ms for the resend; with two copies, one in 70), with
// the lane's cookie once the server has given one.
func (p *Path) sendHellos(i int) {
	var pt [helloLen]byte
	if p.proposeJumbo.Load() {
		binary.BigEndian.PutUint16(pt[8:], wire.JumboChunkSize)
	} else {
		binary.BigEndian.PutUint16(pt[8:], wire.ChunkSize)
	}
	if p.haveCookie[i].Load() {
		binary.BigEndian.PutUint64(pt[10:], p.cookie[i].Load())
	}
	for range 2 {
		binary.BigEndian.PutUint64(pt[:8], uint64(time.Now().UnixNano()))
		p.SendOne(i, wire.TypeHello, pt[:])
	}
}

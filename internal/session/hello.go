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
//
// Jumbo chunks off loopback (docs/PROTOCOL.md, "Large datagrams") are agreed only where the path
// proves it carries them, each way, on every lane: a client that proposes them (ProposeJumbo)
// also sends, before its two hellos, two hellos padded to jumboProbe bytes, the largest datagram
// of a jumbo session, with the don't-fragment bit. The server answers such a hello with an answer
// of the same size, agreeing to jumbo chunks for this lane only; the client's hellos that prove
// the lane's address then propose jumbo chunks only if such an answer came back on the lane (the
// other way proven). At its proof the server fixes the lane's chunk size (jumbo if the proving
// hello proposes it and a full-size hello came from the same address) and the session's is jumbo
// only if every lane's is; every answer after the proof carries the lane's size, and the client
// takes the session's size from those answers only (ProposeJumbo's Handshake waits for them).
// Both ends therefore settle the same size from the same facts, and anything else either sees
// (a lost full-size datagram, an answer that agrees to what was not proposed) leaves 1406-byte
// chunks.
const (
	helloLen   = 18
	provenFlag = 0x2 // header flag of a hello-ack: the lane's address is proven
	// jumboProbe is the datagram size (UDP payload) of the full-size hellos and their answers: a
	// data datagram of wire.JumboChunkSize chunks (wire.DatagramFor), the largest a jumbo session
	// sends (FEC, whose shards are standard chunks, is off there).
	jumboProbe = wire.JumboChunkSize + wire.Overhead + wire.DataFrameLen + 2
	// jumboProbePT is its plaintext: what a hello or answer must hold to count as full size.
	jumboProbePT = jumboProbe - wire.Overhead
	// jumboGrace is how long a client that proposes jumbo chunks waits, after the first answer
	// on a lane, for the full-size answer before it proves the lane anyway: on a path that keeps
	// order the full-size answer, sent first, comes first or a few microseconds after.
	jumboGrace = 20 * time.Millisecond
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
	p.chunkMu.Lock()
	// full: the hello proposes jumbo chunks and is itself a full-size datagram (or comes over
	// loopback, whose MTU is 65,536): this way of the lane carries them, from this address. Not
	// once the session's size is standard for good: fullSize would turn the lane's
	// don't-fragment bit back on (under chunkMu, as settleChunk's and FixChunk's turning it off).
	full := proposesJumbo(pt) && !p.standardFixed() && p.fullSize(i, len(pt), from)
	if full {
		p.jumboFrom[i] = from
	}
	if p.proven[i].Load() {
		if cur, _ := p.Peer(i); cur != from {
			p.chunkMu.Unlock()
			return // the lane's address is fixed once proven
		}
	} else {
		if len(pt) >= helloLen && binary.BigEndian.Uint64(pt[10:18]) == p.cookieFor(i, from) {
			p.SetPeer(i, from)
			p.proven[i].Store(true)
			train, proved = true, true
			p.laneChunk[i] = p.proofChunk(i, pt, from)
			p.settleChunk()
		}
		train = train || p.fromSSHClient(from)
	}
	// The answer's size: before the proof, jumbo only in the answer to a full-size hello (this
	// lane's one-way evidence, which the client's proof then confirms); from the proof on, the
	// lane's fixed size, or the session's once the receiver runs (FixChunk).
	chunk := wire.ChunkSize
	switch {
	case p.chunkFixed:
		chunk = p.ChunkSize()
	case p.proven[i].Load():
		chunk = p.laneChunk[i]
	case full:
		chunk = wire.JumboChunkSize
	}
	p.chunkMu.Unlock()
	train = train && p.trainOnHello.Load() && p.trainSent.CompareAndSwap(false, true)
	var ack [helloLen]byte
	copy(ack[:8], pt)
	binary.BigEndian.PutUint16(ack[8:], uint16(chunk))
	binary.BigEndian.PutUint64(ack[10:], p.cookieFor(i, from))
	var flags uint8
	if p.proven[i].Load() {
		flags = provenFlag
	}
	// An answer is the size of the hello it answers, never larger: a full-size hello gets a
	// full-size answer (the other way's proof), padded with zeros.
	n := helloLen
	if full && len(pt) >= jumboProbePT {
		n = jumboProbePT
	}
	body := make([]byte, n)
	copy(body, ack[:])
	buf := make([]byte, 0, wire.HeaderLen+n+wire.TagLen)
	pkt := p.crypto.Seal(buf, wire.Header{Type: wire.TypeHelloAck, Lane: uint8(i), Flags: flags, Seq: p.NextSeq(i)}, body)
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
	// The server's word on chunk sizes is taken only where it agrees to what this end proposed:
	// jumbo in a full-size answer (this way of the lane carries them), and the lane's fixed size
	// in the answers after its proof (jumbo only if proposed, anything else standard).
	agrees := p.proposeJumbo.Load() && binary.BigEndian.Uint16(pt[8:10]) == wire.JumboChunkSize
	fullNow := agrees && p.fullSize(i, len(pt), p.peerOf(i)) && !p.fullAck[i].Load()
	if fullNow {
		p.fullAck[i].Store(true)
	}
	if h.Flags&provenFlag != 0 {
		// Jumbo only on a lane whose full-size answer came (or a loopback one): this end proposed
		// jumbo chunks in the lane's proof only then, and a server's jumbo on a lane that never
		// carried a full-size datagram this way is a word on what was not proposed.
		c := int32(wire.ChunkSize)
		if agrees && (p.fullAck[i].Load() || p.peerOf(i).Addr().Unmap().IsLoopback()) {
			c = wire.JumboChunkSize
		}
		p.ackChunk[i].CompareAndSwap(0, c) // the first answer after the proof: the lane's size
		p.provenAck[i].Store(true)
	}
	if len(pt) >= helloLen && !p.haveCookie[i].Load() {
		p.cookie[i].Store(binary.BigEndian.Uint64(pt[10:18]))
		p.haveCookie[i].Store(true)
		if !p.provenAck[i].Load() {
			if p.proposeJumbo.Load() && !p.fullAck[i].Load() {
				// The full-size answer, sent first, is due any moment: proving the lane now would
				// propose standard chunks for it.
				time.AfterFunc(jumboGrace, func() {
					if !p.provenAck[i].Load() && !p.closed.Load() {
						p.sendHellos(i)
					}
				})
			} else {
				p.sendHellos(i) // prove the address now, not at the next resend
			}
		}
	} else if fullNow && !p.provenAck[i].Load() {
		p.sendHellos(i) // the grace's wait is over: prove the lane with jumbo chunks
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
//
// A client that proposes jumbo chunks sends two full-size hellos first (before its lane's
// address is proven), and proposes jumbo chunks in its small ones only once a full-size answer
// has come on the lane: those prove the lane's address, and with it the size.
func (p *Path) sendHellos(i int) {
	jumbo := p.proposeJumbo.Load()
	if jumbo && !p.provenAck[i].Load() && !p.fullAck[i].Load() {
		// Without the cookie: a full-size hello never proves the lane's address, so the proof
		// always comes from a small hello whose proposal says whether an answer came back full size.
		pt := make([]byte, jumboProbePT)
		binary.BigEndian.PutUint16(pt[8:], wire.JumboChunkSize)
		for range 2 {
			binary.BigEndian.PutUint64(pt[:8], uint64(time.Now().UnixNano()))
			p.SendOne(i, wire.TypeHello, pt)
		}
	}
	// haveCookie is read once: a hello that carries the cookie (and so proves the lane) proposes
	// jumbo chunks only where a full-size answer came, even if the cookie arrives meanwhile.
	var pt [helloLen]byte
	haveCookie := p.haveCookie[i].Load()
	if jumbo && (p.fullAck[i].Load() || !haveCookie) {
		binary.BigEndian.PutUint16(pt[8:], wire.JumboChunkSize)
	} else {
		binary.BigEndian.PutUint16(pt[8:], wire.ChunkSize)
	}
	if haveCookie {
		binary.BigEndian.PutUint64(pt[10:], p.cookie[i].Load())
	}
	for range 2 {
		binary.BigEndian.PutUint64(pt[:8], uint64(time.Now().UnixNano()))
		p.SendOne(i, wire.TypeHello, pt[:])
	}
}

// proposesJumbo reports whether a hello's payload proposes jumbo chunks.
func proposesJumbo(pt []byte) bool {
	return len(pt) >= 10 && binary.BigEndian.Uint16(pt[8:10]) == wire.JumboChunkSize
}

// fullSize reports whether a hello or answer of n plaintext bytes on lane i, from or to a, proves
// that this way of the lane carries jumbo datagrams: it is full size (jumboProbePT) and this
// end's lane sends and receives with the don't-fragment bit (a datagram the host fragmented and
// reassembled proves nothing), or a is a loopback address (MTU 65,536).
func (p *Path) fullSize(i, n int, a netip.AddrPort) bool {
	if a.Addr().Unmap().IsLoopback() {
		return true
	}
	return n >= jumboProbePT && p.dontFragment(i)
}

// proofChunk (server, chunkMu held) is lane i's chunk size, fixed at its proof by hello pt from
// from: jumbo where the proving hello proposes it (the client had a full-size answer on this
// lane) and a full-size hello came from the same address (this end had one), and the receiver
// has not fixed the session's size yet.
func (p *Path) proofChunk(i int, pt []byte, from netip.AddrPort) int {
	if p.chunkFixed || !proposesJumbo(pt) {
		return wire.ChunkSize
	}
	if p.jumboFrom[i] == from { // the zero address is no sender's
		return wire.JumboChunkSize
	}
	return wire.ChunkSize
}

// settleChunk (server, chunkMu held) sets the session's chunk size from the lanes': jumbo once
// every lane is proven with jumbo chunks, standard otherwise. Once it is standard for good (a
// lane proven with standard chunks), the lanes a full-size hello switched to the don't-fragment
// bit get the kernel's default back, whatever the role: only a push's receiver calls FixChunk,
// and a server that sends (a pull, doctor) would otherwise send its standard datagrams, up to
// about 1,500 bytes, unfragmentable, into a path whose MTU is smaller on the way back.
func (p *Path) settleChunk() {
	c := int32(wire.JumboChunkSize)
	for i := range p.laneChunk {
		if !p.proven[i].Load() || p.laneChunk[i] != wire.JumboChunkSize {
			c = wire.ChunkSize
		}
	}
	p.chunk.Store(c)
	if p.standardFixed() {
		p.allowFragments()
	}
}

// standardFixed (server, chunkMu held) reports whether the session's chunk size can no longer be
// jumbo: the receiver fixed it at the standard size (FixChunk), or a lane was proven with
// standard chunks (a lane's size is fixed at its proof).
func (p *Path) standardFixed() bool {
	if p.chunkFixed {
		return p.ChunkSize() != wire.JumboChunkSize
	}
	for i := range p.laneChunk {
		if p.proven[i].Load() && p.laneChunk[i] != wire.JumboChunkSize {
			return true
		}
	}
	return false
}

// peerOf is lane i's peer address (the zero address while unknown).
func (p *Path) peerOf(i int) netip.AddrPort {
	a, _ := p.Peer(i)
	return a
}

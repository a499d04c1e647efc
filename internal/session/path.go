// Package session is Farwing's data path between copy and lane: the UDP handshake, sealed
// datagrams over four lanes, selective acknowledgement, loss recovery and the block window.
package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// Lanes is the number of UDP lanes (sockets) per side.
const Lanes = 4

// Handler receives authenticated datagrams of a Path. It is called concurrently from the lane
// goroutines, one per lane; pt is valid only during the call.
type Handler interface {
	Datagram(laneIdx int, h wire.Header, pt []byte, now time.Time)
}

// StampedHandler is a Handler that takes its datagrams with the kernel's receive time: rx is the
// lane's timestamp of that very datagram (zero where the lane takes none: timestamps off, or a
// platform without them), now its receive batch's time. Only authenticated datagrams reach it,
// as they reach Datagram (which the path then does not call).
type StampedHandler interface {
	StampedDatagram(laneIdx int, h wire.Header, pt []byte, now, rx time.Time)
}

// SealedDataHandler is a Handler that may take a data datagram still sealed, to decrypt its
// payload straight to where it belongs (the receiver: a new chunk into its block). taken says it
// did; then authentic says whether pkt passed authentication, and the path marks its sequence
// number received only if it did. What it does not take goes the usual way: opened in place,
// checked against replays, handed to Datagram.
//
// Prefetch is called with each datagram of a receive batch one datagram before it is handled,
// unauthenticated: it may ask the CPU for the memory SealedData will write (a hint only).
type SealedDataHandler interface {
	SealedData(laneIdx int, h wire.Header, pkt []byte, now time.Time) (taken, authentic bool)
	Prefetch(pkt []byte)
}

// Admitter is a Handler that may refuse an authentic data datagram before the path marks it
// received (pt: its plaintext, the data frame first). A refused datagram is dropped without an
// acknowledgement, so that its sender declares it lost and sends it again later; the receiver
// refuses chunks of blocks beyond its window, which it has no memory for. (Acknowledged and
// dropped, such a chunk was never sent again, and the transfer stalled.)
type Admitter interface {
	Admit(pt []byte) bool
}

// Path is one side's four lanes with the session key: it seals, sends, receives, authenticates and
// filters replays, and runs the lane-opening handshake.
type Path struct {
	conns  [Lanes]atomic.Pointer[connBox] // each lane's socket, or its stream once UseStream replaced it (conn)
	crypto *wire.Crypto
	peers  [Lanes]atomic.Pointer[netip.AddrPort]
	txSeq  [Lanes]atomic.Uint64
	rx     [Lanes]laneRx
	server bool

	handler  atomic.Pointer[handlerBox]
	helloAck [Lanes]atomic.Bool
	acked    chan struct{} // (client) a hello was answered: Handshake looks again
	helloRTT atomic.Int64
	// The address proof (hello.go): the server's secret and which lanes' client addresses are
	// proven; the client's cookies and which lanes the server has confirmed.
	secret     [32]byte
	proven     [Lanes]atomic.Bool
	cookie     [Lanes]atomic.Uint64
	haveCookie [Lanes]atomic.Bool
	provenAck  [Lanes]atomic.Bool
	helloHeard [Lanes]atomic.Bool // (server) an authentic hello came on the lane
	// chunk is the agreed file bytes per data datagram (0: wire.ChunkSize): the client proposes
	// wire.JumboChunkSize in its hellos (ProposeJumbo), the server accepts it in its answers when
	// it sees the client on a loopback address too.
	chunk        atomic.Int32
	chunkMu      sync.Mutex // a hello's agreement and FixChunk
	chunkFixed   bool       // FixChunk was called: hellos no longer change chunk
	proposeJumbo atomic.Bool
	// The proof of jumbo datagrams off loopback (hello.go): the server's source of a full-size
	// hello per lane and each lane's size fixed at its proof (chunkMu); the client's full-size
	// answers per lane and the size the first answer after each lane's proof carried.
	jumboFrom [Lanes]netip.AddrPort
	laneChunk [Lanes]int
	fullAck   [Lanes]atomic.Bool
	ackChunk  [Lanes]atomic.Int32
	df        [Lanes]atomic.Int32 // lane sends with the don't-fragment bit: 0 not asked, 1 on, 2 not possible

	heard atomic.Int64 // when the last authenticated datagram arrived (UnixNano; 0: none yet)

	// debugLog is where the engines on this path print their state (SetDebugLog; nil: nowhere).
	debugLog atomic.Pointer[func(format string, args ...any)]

	Foreign      atomic.Uint64 // datagrams that are not this session's: too short, not Farwing's, another connection id or lane
	AuthFailures atomic.Uint64 // datagrams of this session by their header that failed to open (forged, altered, truncated)
	Replays      atomic.Uint64 // datagrams whose sequence number was already seen
	EarlyHeld    atomic.Uint64 // data/feedback datagrams held until the engine was attached
	EarlyDropped atomic.Uint64 // ... and dropped because too many were waiting
	// ControlInvalid counts authentic control datagrams that were malformed (control.go).
	ControlInvalid atomic.Uint64
	// StreamsRefused counts the TCP connections the server closed instead of taking them as a
	// lane's stream (streams.go): a first record that was not authentic, a lane taken, silence.
	StreamsRefused atomic.Uint64
	onStreams      atomic.Bool  // the lanes are TCP streams (UseStream)
	streamsBy      atomic.Int64 // (server) WaitPeers waits for the streams' proofs until then (UnixNano; ExpectStreams)

	controlTo atomic.Pointer[func(seq uint32, msg []byte)]
	control   controlRx
	early     earlyControl // (server) copies sent before the lanes are proven (SendControlEarly)

	wg     sync.WaitGroup
	cancel context.CancelFunc
	closed atomic.Bool

	sendMu       [Lanes]sync.Mutex
	train        trainRx
	trainBps     atomic.Uint64 // 1 + the peer's report of our probe (0: none yet)
	trainGot     atomic.Uint64 // 1 + this end's measurement of the peer's probe (0: none yet)
	trainOnHello atomic.Bool
	trainSent    atomic.Bool
	sshClient    atomic.Pointer[netip.Addr]            // SetSSHClient's address: its hellos need no cookie for the train and early copies
	helloFrom    [Lanes]atomic.Pointer[netip.AddrPort] // each lane's first authentic hello's source, proven or not
	earlyFB      [Lanes]atomic.Int64                   // feedback bytes each lane sent to an unproven address (SendOne)
	gotData      atomic.Bool                           // an authentic data datagram has come (early feedback answers data only)
	hsSent       chan struct{}                         // closed once Handshake has sent its first hellos and train
	hsSentOnce   sync.Once
	stampsOff    sync.Once // kernel receive timestamps (for the train) switched off
}

type handlerBox struct {
	h      Handler
	sealed SealedDataHandler // h, when it takes sealed data datagrams
	admit  Admitter          // h, when it may refuse data datagrams
	stamps StampedHandler    // h, when it takes the kernel's receive times
}

// laneRx is a lane's receive state: the replay/ack window, guarded by mu because the feedback
// writer reads it from another goroutine.
type laneRx struct {
	mu       sync.Mutex
	win      wire.SeqWindow
	lastAt   time.Time // when Largest arrived
	received uint64
	late     uint64 // datagrams that arrived after a later one of the lane (reordered or re-sent)

	ran     atomic.Int64 // when the lane's goroutine last came back from a receive call (UnixNano)
	inBatch atomic.Bool  // it is handling the datagrams of a receive call

	// Datagrams that came before the engine was attached, held (by the lane's goroutine only)
	// and handed over once it is. holding says some are (for the engine's feedback, Holding).
	early      []earlyDatagram
	earlyBytes int
	earlySeqs  *wire.SeqWindow // the sequence numbers held (from the first held, till the hand-over)
	holding    atomic.Bool
}

type earlyDatagram struct {
	h  wire.Header
	pt []byte
	at time.Time
}

// maxEarlyBytes bounds what one lane holds before its engine is attached; beyond it datagrams are
// dropped unacknowledged (the sender re-sends them).
const maxEarlyBytes = 8 << 20

// Open binds four UDP lanes on bind (e.g. "0.0.0.0:0" or "[::]:0") with socket buffers of buf
// bytes (0: lane.DefaultBuffer) and starts the path on them.
func Open(bind string, c *wire.Crypto, server bool, buf int) (*Path, error) {
	conns, err := ListenUDP(bind, lane.Options{Buffer: buf})
	if err != nil {
		return nil, err
	}
	return NewPath(conns, c, server), nil
}

// ListenUDP opens the four UDP sockets of a path on bind, each with opt.
func ListenUDP(bind string, opt lane.Options) ([Lanes]lane.PacketConn, error) {
	var conns [Lanes]lane.PacketConn
	for i := range conns {
		lc, err := lane.Listen(bind, opt)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return conns, fmt.Errorf("open UDP lane on %s: %w", bind, err)
		}
		conns[i] = lc
	}
	return conns, nil
}

// NewPath starts a path on four lanes (real UDP sockets, or lanetest's in-memory ones), which it
// owns from now on: Close closes them.
func NewPath(conns [Lanes]lane.PacketConn, c *wire.Crypto, server bool) *Path {
	p := &Path{crypto: c, server: server, secret: newSecret(), acked: make(chan struct{}, 1), hsSent: make(chan struct{})}
	for i, c := range conns {
		p.conns[i].Store(&connBox{c})
	}
	p.heard.Store(time.Now().UnixNano()) // silence is counted from the start
	fec.Warm()                           // the Leopard tables and the coder of whole blocks: under 1 ms, 100 KiB, once
	// The train is timed with the kernel's receive stamps, not with when a lane goroutine got to
	// read it (late wake-ups made trains look several times faster than the path). The kernel
	// switches stamping on from a work queue, so ask now, well before the train comes.
	for _, c := range conns {
		c.SetRxTimestamps(true)
	}
	time.AfterFunc(10*time.Second, p.stopStamps)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for i := range p.conns {
		p.wg.Add(1)
		go p.recvLoop(ctx, i)
	}
	return p
}

// connBox holds a lane's conn, which UseStream may replace while the path runs.
type connBox struct{ lane.PacketConn }

// conn is lane i's conn now (nil on a Path made without lanes, as tests make).
func (p *Path) conn(i int) lane.PacketConn {
	if b := p.conns[i].Load(); b != nil {
		return b.PacketConn
	}
	return nil
}

func (p *Path) closeConns() {
	for i := range p.conns {
		if c := p.conn(i); c != nil {
			c.Close()
		}
	}
}

// Close stops the lanes.
func (p *Path) Close() {
	p.closed.Store(true)
	p.cancel()
	p.closeConns()
	p.wg.Wait()
}

// mark records seq as received on the lane (for acknowledgement) and reports whether it is new;
// a repeat counts as a replay.
func (p *Path) mark(rx *laneRx, seq uint64, now time.Time) bool {
	rx.mu.Lock()
	l, seen := rx.win.Largest()
	fresh := rx.win.Mark(seq)
	if fresh {
		rx.received++
		if !seen || seq > l { // the new largest
			rx.lastAt = now
		} else {
			rx.late++
		}
	}
	rx.mu.Unlock()
	if !fresh {
		p.Replays.Add(1)
	}
	return fresh
}

// holdEarly keeps a copy of a datagram that arrived before the engine, within maxEarlyBytes.
// A replay is not held: a number the lane has marked received, or one it holds already, counts
// as a replay here (the replay window is only marked at the hand-over), or one captured datagram
// replayed thousands of times filled the lane's hold with copies and pushed out what was new.
// Only lane's own goroutine calls it.
func (p *Path) holdEarly(rx *laneRx, h wire.Header, pt []byte, now time.Time) {
	rx.mu.Lock()
	seen := rx.win.Seen(h.Seq)
	rx.mu.Unlock()
	if seen || rx.earlySeqs != nil && rx.earlySeqs.Seen(h.Seq) {
		p.Replays.Add(1)
		return
	}
	if rx.earlyBytes+len(pt) > maxEarlyBytes {
		p.EarlyDropped.Add(1)
		return
	}
	if rx.earlySeqs == nil {
		rx.earlySeqs = new(wire.SeqWindow)
	}
	rx.earlySeqs.Mark(h.Seq)
	rx.early = append(rx.early, earlyDatagram{h: h, pt: append([]byte(nil), pt...), at: now})
	rx.earlyBytes += len(pt)
	rx.holding.Store(true)
	p.EarlyHeld.Add(1)
}

// Holding reports whether a lane still holds datagrams that came before the engine was attached
// (holdEarly): their sequence numbers are not marked received yet, while a hello, a control
// message or a ping that came after them on the lane is. Feedback that reported the lane now
// would show the held data missing below a larger number received, and the sender would declare
// them lost: it waits (Receiver.sendFeedback) until the lane's goroutine has handed them over,
// within a few milliseconds of the engine's attach (recvLoop). Seen on the lab at 3 % loss, where one
// lane's address proof came a resend (100 ms) late: the held data of all four lanes fell below
// the client's resent hellos, 1,671 of its first 4,745 datagrams were declared lost, and the
// rate controller's hard-loss verdict held a 1 GiB copy at 0.23 Gbit/s for 2.5 s.
func (p *Path) Holding() bool {
	for i := range p.rx {
		if p.rx[i].holding.Load() {
			return true
		}
	}
	return false
}

// replayEarly hands the held datagrams of lane i to the engine, with their arrival times.
func (p *Path) replayEarly(i int, rx *laneRx, hb *handlerBox) {
	q := rx.early
	rx.early, rx.earlyBytes, rx.earlySeqs = nil, 0, nil
	for _, e := range q {
		if e.h.Type == wire.TypeData && hb.admit != nil && !hb.admit.Admit(e.pt) {
			continue
		}
		if p.mark(rx, e.h.Seq, e.at) {
			hb.h.Datagram(i, e.h, e.pt, e.at)
		}
	}
	rx.holding.Store(false)
}

// stopStamps switches the lanes' receive timestamps off once the train no longer needs them.
func (p *Path) stopStamps() {
	p.stampsOff.Do(func() {
		for i := range p.conns {
			p.conn(i).SetRxTimestamps(false)
		}
	})
}

// Ports are the lanes' local UDP ports.
func (p *Path) Ports() []int {
	ports := make([]int, Lanes)
	for i := range p.conns {
		ports[i] = int(p.conn(i).LocalAddr().Port())
	}
	return ports
}

// SetPeer sets the remote address of lane i.
func (p *Path) SetPeer(i int, a netip.AddrPort) { p.peers[i].Store(&a) }

// Peer returns the remote address of lane i (ok false while unknown).
func (p *Path) Peer(i int) (netip.AddrPort, bool) {
	a := p.peers[i].Load()
	if a == nil {
		return netip.AddrPort{}, false
	}
	return *a, true
}

// SetHandler installs the receiver of data and feedback datagrams.
func (p *Path) SetHandler(h Handler) {
	sd, _ := h.(SealedDataHandler)
	ad, _ := h.(Admitter)
	st, _ := h.(StampedHandler)
	p.handler.Store(&handlerBox{h: h, sealed: sd, admit: ad, stamps: st})
}

// NextSeq reserves the next sequence number of lane i.
func (p *Path) NextSeq(i int) uint64 { return p.txSeq[i].Add(1) }

// Seal writes a sealed datagram of type t on lane i with sequence seq into buf.
func (p *Path) Seal(buf []byte, t wire.Type, i int, seq uint64, pt []byte) []byte {
	return p.crypto.Seal(buf, wire.Header{Type: t, Lane: uint8(i), Seq: seq}, pt)
}

// SealData writes a sealed data datagram on lane i with sequence seq into buf, whose
// [HeaderLen:DataAADLen] holds the data frame header; payload is read where it lies.
func (p *Path) SealData(buf []byte, i int, seq uint64, payload []byte) []byte {
	return p.crypto.SealData(buf, wire.Header{Lane: uint8(i), Seq: seq}, payload)
}

// Send writes already sealed datagrams on lane i to its peer: for a server, only once the
// client's address on the lane is proven.
func (p *Path) Send(i int, pkts [][]byte) error {
	dst, ok := p.Peer(i)
	if !ok || p.server && !p.proven[i].Load() {
		return fmt.Errorf("lane %d has no proven peer address yet", i)
	}
	return p.sendTo(i, dst, pkts)
}

// sendTo is the one place datagrams leave: a lane's socket takes one sender at a time (lane's
// contract), and data, feedback, hello answers and probe reports can share a lane.
func (p *Path) sendTo(i int, dst netip.AddrPort, pkts [][]byte) error {
	p.sendMu[i].Lock()
	defer p.sendMu[i].Unlock()
	return p.conn(i).Send(dst, pkts)
}

// SendOne seals pt as a datagram of type t and sends it on lane i. A server's feedback may go
// to a lane not yet proven (sendFeedbackEarly).
func (p *Path) SendOne(i int, t wire.Type, pt []byte) error {
	buf := make([]byte, 0, wire.HeaderLen+len(pt)+wire.TagLen)
	pkt := p.Seal(buf, t, i, p.NextSeq(i), pt)
	if p.server && t == wire.TypeFeedback && !p.proven[i].Load() {
		return p.sendFeedbackEarly(i, pkt)
	}
	return p.Send(i, [][]byte{pkt})
}

// A client that remembers its path sends data as soon as the server has answered over ssh, a
// round trip before the cookie proves its lanes' addresses (docs/PROTOCOL.md, "Data before the
// proof"); the server's receiver answers it at once. Until a lane is proven, its feedback goes
// only where its first authentic hello came from, only where that is ssh's client (the rule of
// the early train and control copies), and at most maxEarlyFeedback bytes of it in all: a
// replayed hello can aim acknowledgements, a fraction of the data they answer, only at the ssh
// client's own address, and only for as long as the client takes to prove the lane (a round trip).
const maxEarlyFeedback = 256 << 10

// sendFeedbackEarly (server) sends feedback datagram pkt on unproven lane i (SendOne).
func (p *Path) sendFeedbackEarly(i int, pkt []byte) error {
	if !p.gotData.Load() {
		return fmt.Errorf("lane %d has no proven peer address yet, and no data came", i)
	}
	dst, _, ok := p.earlyPeer(i)
	if !ok {
		return fmt.Errorf("lane %d has no proven peer address yet", i)
	}
	if p.earlyFB[i].Add(int64(len(pkt))) > maxEarlyFeedback {
		return fmt.Errorf("lane %d spent its feedback before its address was proven", i)
	}
	return p.sendTo(i, dst, [][]byte{pkt})
}

// Heard is when the last fresh authenticated datagram arrived from the peer (the path's opening
// before any did): a replay or a forgery does not count.
func (p *Path) Heard() time.Time { return time.Unix(0, p.heard.Load()) }

// Stalled reports whether some lane's goroutine has not come back from a receive call for longer
// than after although it has datagrams to handle, in the middle of a batch or waiting unread in
// its socket: it is runnable but not running, or held up in a handler. The receiver's feedback
// would then report those datagrams as missing.
func (p *Path) Stalled(now time.Time, after time.Duration) bool {
	for i := range p.rx {
		rx := &p.rx[i]
		if ran := rx.ran.Load(); ran != 0 && now.UnixNano()-ran > int64(after) && (rx.inBatch.Load() || p.conn(i).Pending()) {
			return true
		}
	}
	return false
}

// Late returns, per lane, how many datagrams arrived after a later one of their lane: reordered
// on the way (a re-sent datagram has a new, higher sequence number, so it does not count).
func (p *Path) Late() [Lanes]uint64 {
	var n [Lanes]uint64
	for i := range p.rx {
		p.rx[i].mu.Lock()
		n[i] = p.rx[i].late
		p.rx[i].mu.Unlock()
	}
	return n
}

// LaneStats returns the counters of every lane.
func (p *Path) LaneStats() []lane.Stats {
	s := make([]lane.Stats, Lanes)
	for i := range p.conns {
		s[i] = p.conn(i).Stats()
	}
	return s
}

func (p *Path) recvLoop(ctx context.Context, i int) {
	defer p.wg.Done()
	rx := &p.rx[i]
	for ctx.Err() == nil {
		c := p.conn(i) // UseStream may replace it: a closed one's Recv ends, and the new one is read
		// One clock read per receive batch, not per datagram (4 % of the receiver's CPU on
		// loopback): a batch is read in one system call and handled within a fraction of a
		// millisecond.
		var now time.Time
		authentic := false
		// rxAt is b's kernel receive time, read when the lane handed b over (c.RxTime is the
		// datagram being handed over now, and b is handled one datagram later).
		handle := func(b []byte, from netip.AddrPort, rxAt time.Time) {
			h, err := p.crypto.Check(b)
			if err != nil || int(h.Lane) != i {
				p.Foreign.Add(1)
				p.distrust(c)
				return
			}
			if now.IsZero() {
				now = time.Now()
				rx.inBatch.Store(true)
			}
			hb := p.handler.Load()
			if hb != nil && len(rx.early) > 0 && (h.Type == wire.TypeData || h.Type == wire.TypeFeedback) {
				p.replayEarly(i, rx, hb) // held datagrams first, in order
			}
			if h.Type == wire.TypeData && hb != nil && hb.sealed != nil {
				if taken, ok := hb.sealed.SealedData(i, h, b, now); taken {
					if !ok {
						p.AuthFailures.Add(1)
						p.distrust(c)
					} else if p.mark(rx, h.Seq, now) {
						authentic = true
						if !p.gotData.Load() {
							p.gotData.Store(true)
						}
					}
					return
				}
			}
			pt, err := p.crypto.OpenChecked(h, b)
			if err != nil {
				p.AuthFailures.Add(1)
				p.distrust(c)
				return
			}
			if h.Type == wire.TypeData && !p.gotData.Load() {
				p.gotData.Store(true) // authentic (opened); a replay only repeats what came
			}
			if hb == nil && (h.Type == wire.TypeData || h.Type == wire.TypeFeedback) {
				// No engine yet (the peer's first data can beat the receiver's set-up by tens of
				// milliseconds): hold the datagram, unacknowledged, until there is.
				p.holdEarly(rx, h, pt, now)
				return
			}
			if h.Type == wire.TypeData && hb != nil && hb.admit != nil && !hb.admit.Admit(pt) {
				return
			}
			if !p.mark(rx, h.Seq, now) {
				return
			}
			authentic = true
			switch h.Type {
			case wire.TypePing:
				return // a keepalive: its arrival is all it says
			case wire.TypeControl:
				p.onControl(pt)
				return
			}
			if h.Flags&trainFlag != 0 {
				switch h.Type {
				case wire.TypeHello:
					at := rxAt
					if at.IsZero() {
						at = now
					}
					p.onTrain(i, pt, len(b), at, from)
				case wire.TypeHelloAck:
					if len(pt) >= 8 && beUint64(pt) <= maxTrainBps { // the peer's word: a bounded seed
						p.trainBps.CompareAndSwap(0, beUint64(pt)+1)
						if p.debugging() {
							p.debugf("train report on lane %d: %.0f Mbit/s", i, float64(beUint64(pt))/1e6)
						}
					}
				}
				return
			}
			switch h.Type {
			case wire.TypeHello:
				if p.server {
					p.onHello(i, pt, from)
				}
				return
			case wire.TypeHelloAck:
				if !p.server {
					p.onHelloAck(i, h, pt, now)
				}
				return
			}
			if hb != nil && hb.stamps != nil {
				hb.stamps.StampedDatagram(i, h, pt, now, rxAt)
			} else if hb != nil {
				hb.h.Datagram(i, h, pt, now)
			}
		}
		// Each datagram is handled when the next one has arrived, after the next one's
		// destination was prefetched: a chunk is decrypted into block memory not touched for
		// milliseconds, and waiting for those cache lines one datagram at a time was most of
		// Receiver.SealedData's time. The held datagram is valid until the next Recv.
		var held []byte
		var heldFrom netip.AddrPort
		var heldAt time.Time
		// A lane holding early datagrams comes back soon, to hand them over once the engine is
		// attached even if nothing more arrives on it (Holding).
		wait := 200 * time.Millisecond
		if len(rx.early) > 0 {
			wait = 5 * time.Millisecond
		}
		_, err := c.Recv(time.Now().Add(wait), func(b []byte, from netip.AddrPort) {
			if hb := p.handler.Load(); hb != nil && hb.sealed != nil {
				hb.sealed.Prefetch(b)
			}
			if held != nil {
				handle(held, heldFrom, heldAt)
			}
			held, heldFrom, heldAt = b, from, c.RxTime()
		})
		if held != nil {
			handle(held, heldFrom, heldAt)
		}
		if authentic {
			p.heard.Store(now.UnixNano())
		}
		if len(rx.early) > 0 {
			if hb := p.handler.Load(); hb != nil {
				p.replayEarly(i, rx, hb)
			}
		}
		rx.ran.Store(time.Now().UnixNano())
		rx.inBatch.Store(false)
		if err != nil && !errors.Is(err, lane.ErrTimeout) {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				if p.conn(i) != c {
					continue // replaced (UseStream): read the new one
				}
				return
			}
			// Transient errors (ICMP port unreachable surfaces as ECONNREFUSED on some
			// kernels) must not end the lane; pause briefly to avoid spinning.
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// SetDebugLog injects the debug logger: the path, its sender or receiver and the packet train
// print their state through log (a line per call, without its newline; FARWING_DEBUG, decided by
// cmd/farwing and the hello). nil, the default, prints nothing.
func (p *Path) SetDebugLog(log func(format string, args ...any)) {
	if log == nil {
		p.debugLog.Store(nil)
		return
	}
	p.debugLog.Store(&log)
}

// DebugLog is the logger SetDebugLog injected (nil: none).
func (p *Path) DebugLog() func(format string, args ...any) {
	if l := p.debugLog.Load(); l != nil {
		return *l
	}
	return nil
}

// debugging reports whether a debug logger is injected: the engines compute their state lines
// only then.
func (p *Path) debugging() bool { return p.debugLog.Load() != nil }

// debugf prints one line through the debug logger, if there is one.
func (p *Path) debugf(format string, args ...any) {
	if l := p.debugLog.Load(); l != nil {
		(*l)(format, args...)
	}
}

// ProposeJumbo (client, before Handshake) asks for wire.JumboChunkSize chunks, which the session
// uses only if every lane proves it carries them each way (hello.go); its Handshake then waits
// for every lane's proof. The caller knows the session runs without FEC, and that the path is
// loopback or the user asked for large datagrams (a path MTU of 9,000). It reports whether it
// proposes them: not where a lane cannot send with the don't-fragment bit (a datagram this
// host fragmented would prove nothing).
func (p *Path) ProposeJumbo() bool {
	for i := range p.conns {
		if a, ok := p.Peer(i); ok && a.Addr().Unmap().IsLoopback() {
			continue
		}
		if !p.dontFragment(i) {
			p.allowFragments()
			return false
		}
	}
	p.proposeJumbo.Store(true)
	return true
}

// JumboMTU is the smallest path MTU (IP bytes) that carries a jumbo session's datagrams on IPv4
// and IPv6 alike: a client told its path carries it (farwing copy --mtu) proposes them.
const JumboMTU = jumboProbe + lane.IPv6UDPHeaders

// DontFragmenter is a lane that can send every datagram with the don't-fragment bit set and
// never fragmented by this host (lane.Conn on Linux: IP_PMTUDISC_PROBE). A lane that is not one
// is taken to never fragment (lanetest's in-memory lanes drop what exceeds a link's MTU).
type DontFragmenter interface {
	SetDontFragment(on bool) error
}

// dontFragment turns the don't-fragment bit on for lane i, once, and reports whether its
// datagrams leave with it.
func (p *Path) dontFragment(i int) bool {
	d, ok := p.conn(i).(DontFragmenter)
	if !ok {
		return true
	}
	if p.df[i].Load() == 0 {
		v := int32(1)
		if d.SetDontFragment(true) != nil {
			v = 2
		}
		p.df[i].CompareAndSwap(0, v)
	}
	return p.df[i].Load() == 1
}

// allowFragments gives the lanes that were switched to the don't-fragment bit the kernel's
// default back, once a session settled on standard chunks: a tunnel's smaller MTU then fragments
// them as it does any UDP.
func (p *Path) allowFragments() {
	for i := range p.conns {
		if d, ok := p.conn(i).(DontFragmenter); ok && p.df[i].CompareAndSwap(1, 0) {
			d.SetDontFragment(false)
		}
	}
}

// FixChunk (server) fixes the session's chunk size at what it is now and returns it: a receiver
// made before the client's lanes are proven (data before the proof) sizes its memory by it, and
// a later hello's proposal of jumbo chunks is answered with this size instead.
func (p *Path) FixChunk() int {
	p.chunkMu.Lock()
	defer p.chunkMu.Unlock()
	p.chunkFixed = true
	c := p.ChunkSize()
	if c == wire.ChunkSize {
		p.allowFragments()
	}
	return c
}

// ChunkSize is the session's file bytes per data datagram, as agreed by the handshake: the client
// knows it when Handshake returns, the server when WaitPeers does.
func (p *Path) ChunkSize() int {
	if c := int(p.chunk.Load()); c != 0 {
		return c
	}
	return wire.ChunkSize
}

// Loopback reports whether the peer is this host (a loopback address). There a lost datagram is
// re-sent within microseconds and was dropped by a receiving socket that fell behind, not by a
// network: parity only adds CPU work (see tuning.FEC).
func (p *Path) Loopback() bool {
	a, ok := p.Peer(0)
	return ok && a.Addr().Unmap().IsLoopback()
}

// ErrNoUDP is returned when the lanes could not be opened through the network.
var ErrNoUDP = errors.New("no UDP path")

// Handshake (client side) sends hellos on every lane to server until each lane is answered, and
// returns the measured round-trip time. It fails after timeout with a NoUDPError naming the ports
// that stayed silent.
// With probe, it also sends the packet-train probe (the client sends the data in a push).
func (p *Path) Handshake(ctx context.Context, server []netip.AddrPort, timeout time.Duration, probe bool) (time.Duration, error) {
	for i := range p.conns {
		p.SetPeer(i, server[i])
	}
	deadline := time.Now().Add(timeout)
	// A lane is answered at its first answer; one that proposes jumbo chunks waits for the answer
	// after its proof, which carries the lane's size.
	jumbo := p.proposeJumbo.Load()
	answered := func(i int) bool { return p.helloAck[i].Load() && (!jumbo || p.ackChunk[i].Load() != 0) }
	send := func() {
		for i := range p.conns {
			if !answered(i) {
				p.sendHellos(i)
			}
		}
	}
	send()
	if probe && p.trainSent.CompareAndSwap(false, true) {
		p.sendTrain(0, server[0])
	}
	p.hsSentOnce.Do(func() { close(p.hsSent) })
	// Resend hellos every 100 ms; the handshake ends as soon as the last lane answers (acked), not
	// at the next resend or a poll (a 5 ms poll cost 2.5 ms of every copy's start on average).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for i := range p.conns {
			if !answered(i) {
				done = false
			}
		}
		if done {
			if jumbo {
				p.settleClientChunk()
			}
			// The server has answered every lane; those whose address it has not confirmed yet
			// keep sending their cookie in the background (confirm) while data starts.
			go p.confirm(deadline)
			return time.Duration(p.helloRTT.Load()), nil
		}
		if time.Now().After(deadline) {
			e := &NoUDPError{Server: server[0].Addr(), Local: p.Ports(), Timeout: timeout}
			for i := range p.conns {
				e.Ports = append(e.Ports, int(server[i].Port()))
				if !answered(i) {
					e.Silent = append(e.Silent, int(server[i].Port()))
				}
			}
			return 0, e
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-p.acked:
		case <-tick.C:
			send()
		}
	}
}

// settleClientChunk (client) takes the session's chunk size from the answers after each lane's
// proof: jumbo only if every lane's said jumbo (and this end proposed it: onHelloAck).
func (p *Path) settleClientChunk() {
	for i := range p.ackChunk {
		if p.ackChunk[i].Load() != wire.JumboChunkSize {
			p.chunk.Store(wire.ChunkSize)
			p.allowFragments()
			return
		}
	}
	p.chunk.Store(wire.JumboChunkSize)
}

// confirm (client) resends hellos with their cookies every 100 ms on the lanes whose address the
// server has not confirmed, until all are or deadline passes (or the path closes).
func (p *Path) confirm(deadline time.Time) {
	for {
		left := false
		for i := range p.conns {
			if !p.provenAck[i].Load() {
				left = true
			}
		}
		if !left || time.Now().After(deadline) || p.closed.Load() {
			return
		}
		time.Sleep(100 * time.Millisecond)
		for i := range p.conns {
			if !p.provenAck[i].Load() {
				p.sendHellos(i)
			}
		}
	}
}

// HandshakeSent is closed once Handshake has sent its first hellos and, where asked, its packet
// train: data sent beside the handshake goes after them.
func (p *Path) HandshakeSent() <-chan struct{} { return p.hsSent }

// WaitPeers (server side) waits until the client's address is proven on every lane (hello.go).
func (p *Path) WaitPeers(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n := 0
		for i := range p.conns {
			if p.proven[i].Load() {
				n++
			}
		}
		if n == Lanes {
			return nil
		}
		if now := time.Now(); now.After(deadline) && now.UnixNano() > p.streamsBy.Load() {
			return fmt.Errorf("%w: %d of %d lanes heard from the client within %s", ErrNoUDP, n, Lanes, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

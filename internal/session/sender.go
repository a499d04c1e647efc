package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// SenderConfig tunes a Sender.
type SenderConfig struct {
	Rate       float64       // ceiling in bits/s counted in IP bytes (0: none); the fixed rate with cc.Fixed
	MinRate    float64       // floor in bits/s
	Policy     cc.Policy     // how the rate controller treats congestion signals
	Window     int           // receiver window in blocks (agreed over the control channel)
	InitialRTT time.Duration // from the handshake; 0 = 500 ms
	// ResumeBps, if above 0, is the rate (bits/s) an earlier transfer on this path delivered:
	// the sender starts at it until the packet train's estimate comes (cc.ResumeBandwidth).
	ResumeBps float64
	// Idle is how long the sender waits without any feedback before it gives up.
	Idle time.Duration
	// Stall is how long it waits without progress (a datagram newly acknowledged, the receiver's
	// cursor moving) although feedback arrives and blocks are outstanding, before it gives up
	// (0: 2 minutes).
	Stall time.Duration
	// FEC chooses Reed-Solomon parity: auto (the zero value), off or fixed K+M.
	FEC fec.Mode
	// Memory, if not nil, is the sender's memory made beforehand (NewSenderMemory); used where
	// it fits the window and the path's chunk size, else the sender makes its own.
	Memory *SenderMemory
}

// SenderStats are the sending side's counters.
type SenderStats struct {
	Datagrams     uint64    // data datagrams sent (first transmissions, hashes, parity and repairs)
	WireBytes     uint64    // UDP payload bytes of those
	Retransmitted uint64    // datagrams sent because of a loss: data chunks again, or repair parity
	Lost          uint64    // datagrams declared lost
	LostByTime    uint64    // of those, declared by the time threshold (no later datagram told)
	Parity        uint64    // parity datagrams sent (proactive and repair)
	RepairParity  uint64    // the part of Parity sent as repairs (also counted in Retransmitted)
	Groups        uint64    // FEC groups whose first chunk was sent
	RepairGroups  uint64    // FEC groups that needed a repair round trip
	LastNewDataAt time.Time // when the last chunk was sent for the first time
	Feedback      uint64    // feedback datagrams received and taken
	BadFeedback   uint64    // feedback datagrams ignored: malformed, or out of bounds (a cursor past what was sent, four lanes)
	// SRTT is the rate controller's smoothed round trip at the end (0: no sample came); the
	// controller keeps the only RTT estimate (cc.Controller.SRTT).
	SRTT        time.Duration
	FirstDataAt time.Time
	LastAckAt   time.Time
	CC          cc.Stats // the rate controller's view at the end
	ProbeBps    float64  // the packet-train estimate of the path's capacity (0: none)
	// What held the sender back, in time: new data waiting for the receiver's window (the
	// window full of unfinished blocks), and the window open but no block read yet (the source).
	WindowFull, SourceWait time.Duration
}

// sentRing is the most datagrams a lane's record of datagrams in flight holds; a sender's record
// is sized from its window (ringSize), which bounds what can be in flight.
const sentRing = 1 << 17

// ringSize is the record a lane needs for a window of window blocks of chunks of chunk bytes
// (or up to window × fcopy.WindowSlots short blocks, a digest and a part-filled chunk each):
// every datagram of the window (its chunks, digests and parity) spread over the lanes, twice over
// for re-sends and the time a loss takes to be declared, as a power of two (the record is indexed
// by sequence number modulo its size). A full record pauses the lane's sending; it never loses
// track of a datagram.
func ringSize(window, chunk int) int {
	n := (window*(fcopy.BlockSize/chunk+2) + window*fcopy.WindowSlots*2) * 2 / Lanes
	size := 4096
	for size < n && size < sentRing {
		size *= 2
	}
	return size
}

// sentPkt records one datagram in flight, indexed by its lane sequence number.
type sentPkt struct {
	// at is the send time in ns since the sender's start: when the loop framed the datagram, then
	// (atomically, by the lane's sealer) when it was handed to the kernel, which on a busy machine
	// can be tens of milliseconds later. Read it with atomic.LoadInt64.
	at    int64
	block uint32
	chunk uint16
	size  uint16 // bytes on the wire (IP)
	state uint8
	par   uint8 // 0: chunk (or the block hash); 1+i: parity index i of the group starting at chunk
}

const (
	stFree uint8 = iota
	stInflight
	stAcked
	stLost
)

type laneTx struct {
	ring    []sentPkt     // indexed by sequence number modulo its length, a power of two
	lowest  uint64        // lowest sequence number that may still be in flight
	next    uint64        // last sequence number used
	largest uint64        // highest acknowledged
	sent    atomic.Uint64 // highest handed to the kernel (by the sealer)
	cur     *txBatch      // being filled by the sender loop
	free    chan *txBatch // empty batches
	work    chan *txBatch // filled batches, in sequence order, for the lane's sealer
}

// at is the record of sequence number q.
func (l *laneTx) at(q uint64) *sentPkt { return &l.ring[q&uint64(len(l.ring)-1)] }

// full reports whether the lane's record holds no room for another datagram.
func (l *laneTx) full() bool { return l.lowest != 0 && l.next+1-l.lowest >= uint64(len(l.ring))-1 }

// txBatch is up to maxBatch datagrams of one lane: the sender loop writes each data frame header
// at bufs[k][HeaderLen:], notes where its payload lies (a chunk in its block's memory; a hash or
// parity shard written at bufs[k][DataAADLen:]) and reserves its sequence number; the lane's sealer
// goroutine seals each payload from where it lies into bufs[k] (no copy of file bytes) and sends
// the batch with one Path.Send. Batches, not datagrams, cross goroutines, and each lane's batches
// are sealed and sent in order, so its sequence numbers leave in order.
type txBatch struct {
	n    int
	bufs [maxBatch][]byte
	seqs [maxBatch]uint64
	pay  [maxBatch][]byte // payloads
	// frames are the data frame headers, which the sealer copies into bufs[k]: the loop never
	// writes the buffers a sealer on another CPU writes next (but for hash and parity payloads),
	// so the datagram's first cache line does not cross between them twice per datagram.
	frames [maxBatch][wire.DataFrameLen]byte
	refs   [maxBatch]*txBlock // blocks whose memory payloads lie in: one reference each until sealed
	nref   int
	pkts   [][]byte // sealed datagrams, for Send
}

// batchesPerLane bounds the sealed-but-unsent data per lane (4 × batchBytes, 4 × 181 KiB).
const batchesPerLane = 4

type txBlock struct {
	id      uint32
	data    []byte
	buf     []byte       // pooled buffer to return
	refs    atomic.Int32 // 1 until released, +1 per batch holding chunks of it to be sealed
	hash    [32]byte
	nChunks int
	next    int // next chunk never sent (nChunks = the hash)
	acked   []uint64
	nAcked  int
	// FEC: data chunks in groups of k (the last group of the block may be shorter); k == 0 when
	// the transfer runs without FEC. The hash chunk is outside every group.
	k          int
	groups     []txGroup
	groupsDone int // groups whose receiver holds k distinct shards
}

// unref drops a reference to b's memory; the last one returns it to the pool.
func (b *txBlock) unref(pool *fcopy.Pool) {
	if b.refs.Add(-1) == 0 {
		pool.Put(b.buf)
	}
}

func (b *txBlock) ack(c int) bool {
	w, bit := c/64, uint64(1)<<(c%64)
	if b.acked[w]&bit != 0 {
		return false
	}
	b.acked[w] |= bit
	b.nAcked++
	return true
}

func (b *txBlock) isAcked(c int) bool { return b.acked[c/64]&(1<<(c%64)) != 0 }

// chunkRef names a datagram to send: chunk c of a block (par 0), or parity index par-1 of the
// group that starts at chunk c. In the sender's evalq, chunk is a group index instead.
type chunkRef struct {
	block uint32
	chunk uint16
	par   uint8
	due   int64 // parq: not before this time (ns since the sender's start)
}

// Sender paces sealed data datagrams over the lanes, learns what arrived from feedback and
// re-sends what was lost, holding at most the receiver's window of blocks in memory.
type Sender struct {
	path  *Path
	plan  *fcopy.Plan
	pool  *fcopy.Pool
	cfg   SenderConfig
	chunk int // file bytes per data datagram, agreed by the path's handshake
	dgram int // the largest datagram of that size (wire.DatagramFor)
	// batchMax and laneRun are maxBatch and laneRunBytes in datagrams of that size.
	batchMax, laneRun int
	start             time.Time
	pacer             *lane.Pacer
	cc                *cc.Controller
	// loss is where FEC planning reads the random-loss rate: the rate controller (Run sets it
	// unless it is set already: a test's fixed rate).
	loss  lossEstimate
	lanes [Lanes]laneTx
	rr    int // the lane being filled
	rrN   int // datagrams framed on it in a row
	// sendErr is the first error of a lane sealer; kick wakes the loop when a batch is free again
	// after transmit found none (starved).
	sendErr atomic.Pointer[error]
	kick    chan struct{}
	starved atomic.Bool
	// peerDone is closed when the receiver has confirmed the whole transfer on the control
	// channel, which ends Run even if the last feedback (the cursor past the last block) was lost.
	peerDone     chan struct{}
	peerDoneOnce sync.Once

	blocks   map[uint32]*txBlock
	sendable []*txBlock // blocks with chunks never sent, in order
	inDone   bool
	retx     refQueue   // repairs, sent first
	parq     refQueue   // proactive parity of groups whose data was just sent
	evalq    []chunkRef // FEC groups (chunk = group index) that lost a shard: repair candidates
	lowID    uint32     // every block below lowID has been released
	nextID   uint32     // one past the highest block taken from the reader: no receiver can be past it
	// stallID/stallSince: the block at the cursor that FEC should have completed, and since when.
	stallID    uint32
	stallSince time.Time

	fec       fec.Mode
	fecK      int // group size (0: FEC off; -1: fec.GroupSize of each block)
	waitAt    time.Time
	enc       fec.Encoder
	shard     int // fec.ShardSize, or fec.JumboShardSize with large chunks (wire.JumboChunkSize)
	shards    [fec.MaxK][]byte
	par1      [1][]byte
	parAll    [fec.MaxParity][]byte
	firstSent int64 // file bytes sent at least once
	tnow      int64 // ns since start, as of the current transmit round
	planLoss  float64
	planTab   [fec.MaxK + 1]struct {
		ok         bool
		body, tail uint8
		fewer      float64 // the share of body groups that get body−1 (fec.BodyMix)
	}
	planMix float64 // the fewer shares summed over the body groups planned, less the groups given body−1

	cursor, window uint32
	end            uint32   // the receiver's window's end: plan.WindowEnd(cursor, window)
	sendableBytes  int      // the bytes of the blocks in sendable
	reportAt       [2]int64 // arrival of the newest feedback report and of the one before (ns since start; noteReport)
	fbCh           chan []byte
	ackedBytes     atomic.Int64
	seeded         bool
	progress       atomic.Pointer[Progress]
	lastProgress   time.Time
	debugEvents    uint64 // congestion events already traced (debug)
	fb             wire.Feedback
	stats          SenderStats
	lastTx         time.Time // when the loop last framed a datagram or pinged
}

// PingEvery is how long a sender with nothing to send (its window full, its reader slow, every
// datagram acknowledged) stays silent before it pings the receiver, which gives up on a sender
// it has not heard from for its Idle.
const PingEvery = time.Second

// NewSender prepares a sender; blocks come from copy.Read through in.
func NewSender(p *Path, plan *fcopy.Plan, pool *fcopy.Pool, cfg SenderConfig) *Sender {
	if cfg.InitialRTT <= 0 {
		cfg.InitialRTT = 500 * time.Millisecond
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 20 * time.Second
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 2 * time.Minute
	}
	s := &Sender{path: p, plan: plan, pool: pool, cfg: cfg, chunk: p.ChunkSize(), dgram: wire.DatagramFor(p.ChunkSize()), pacer: lane.NewPacer(1e6, 2*time.Millisecond),
		blocks: map[uint32]*txBlock{}, window: uint32(cfg.Window),
		fbCh: make(chan []byte, 256), kick: make(chan struct{}, 1), peerDone: make(chan struct{}), fec: cfg.FEC, shard: shardFor(p.ChunkSize())}
	s.end = s.windowEnd()
	s.batchMax = min(maxBatch, batchBytes/s.dgram)
	s.laneRun = max(laneRunBytes/s.dgram, 1)
	switch s.fec.Kind {
	case fec.ModeAuto:
		s.fecK = -1
	case fec.ModeFixed:
		s.fecK = cfg.FEC.K
	}
	m := cfg.Memory
	if !m.fits(cfg.Window, s.chunk) {
		m = NewSenderMemory(cfg.Window, s.chunk)
	}
	need := ringSize(cfg.Window, s.chunk)
	for i := range s.lanes {
		l := &s.lanes[i]
		l.ring = m.rings[i][:need:need] // a power of two, as the record's indexing needs
		l.free = make(chan *txBatch, batchesPerLane)
		l.work = make(chan *txBatch, batchesPerLane)
		for _, bt := range m.batches[i] {
			l.free <- bt
		}
	}
	return s
}

// SenderMemory is what a Sender takes at its start, about 15 MiB on a long path: each lane's
// record of the datagrams in flight (sized by the window, ringSize) and its batches. Made while
// the handshake's round trip passes (NewSenderMemory in a goroutine, handed over in
// SenderConfig.Memory), it is not on the way to the first data: made by NewSender, it held that
// 8–17 ms on the lab's two cores, the machine's page faults and collections at the copy's start.
// A Sender whose chunk size turns out different, or whose window needs a larger record, makes
// its own; one whose window needs a smaller one takes its first part (the guess's memory is
// made already: making a smaller one anew would cost the time saved, and more memory until the
// guess's is collected). One memory serves one Sender.
type SenderMemory struct {
	ring, chunk int // the ring's length, and the chunk size the batches are for
	rings       [Lanes][]sentPkt
	batches     [Lanes][batchesPerLane]*txBatch
}

// NewSenderMemory makes the memory of a Sender with a window of window blocks and chunks of
// chunk bytes. Each batch's datagram buffers are one allocation.
func NewSenderMemory(window, chunk int) *SenderMemory {
	m := &SenderMemory{ring: ringSize(window, chunk), chunk: chunk}
	dgram := wire.DatagramFor(chunk)
	n := min(maxBatch, batchBytes/dgram)
	for i := range m.rings {
		m.rings[i] = make([]sentPkt, m.ring)
		for b := range m.batches[i] {
			bt := &txBatch{pkts: make([][]byte, 0, maxBatch)}
			slab := make([]byte, n*dgram)
			for k := range n {
				bt.bufs[k] = slab[k*dgram : (k+1)*dgram : (k+1)*dgram]
			}
			m.batches[i][b] = bt
		}
	}
	return m
}

// fits reports whether m serves a Sender of window blocks and chunk bytes: the same chunks, and
// a record at least as long as it needs.
func (m *SenderMemory) fits(window, chunk int) bool {
	return m != nil && m.chunk == chunk && m.ring >= ringSize(window, chunk)
}

// Datagram implements Handler: feedback is copied to the sender loop.
func (s *Sender) Datagram(_ int, h wire.Header, pt []byte, _ time.Time) {
	if h.Type != wire.TypeFeedback {
		return
	}
	select {
	case s.fbCh <- append([]byte(nil), pt...):
	default: // the loop is behind; the next feedback repeats the information
	}
}

// PeerDone tells Run that the receiver has verified everything; safe to call from any goroutine.
func (s *Sender) PeerDone() { s.peerDoneOnce.Do(func() { close(s.peerDone) }) }

// Stats returns the counters (valid after Run returns).
func (s *Sender) Stats() SenderStats { return s.stats }

// Progress is a snapshot for the progress line.
type Progress struct {
	Bytes            int64 // file bytes acknowledged (sender) or written (receiver)
	RateBps          float64
	SRTT, MinRTT     time.Duration
	RandomLoss       float64
	CongestionEvents uint64
	Competing        bool // a loss-based flow shares the queue: competitive mode or the fair-share cap
	Retransmitted    uint64
	Parity           uint64 // parity datagrams sent (sender)
	RepairParity     uint64 // of which sent as repairs (sender)
	Rebuilt          uint64 // groups rebuilt by FEC (receiver)
}

// Progress returns the latest snapshot (nil before the first).
func (s *Sender) Progress() *Progress { return s.progress.Load() }

// readAhead is how many blocks with chunks never sent the sender holds at most: 8 ms at 10 Gbit/s
// between two turns of its loop. At lower rates it holds what 8 ms of sending at the pacing rate
// takes, at least two blocks (readAheadFor): at 600 Mbit/s eight blocks ahead were 100 ms of
// data, and 6 MiB of a sender's 48 MiB of block buffers.
const readAhead = 8

// readAheadFor is the read-ahead at a pacing rate of bps bits/s.
func readAheadFor(bps float64) int {
	return min(max(int(bps/8*0.008/fcopy.BlockSize)+1, 2), readAhead)
}

// ErrNoFeedback is returned when the receiver stays silent for longer than SenderConfig.Idle.
var ErrNoFeedback = errors.New("no acknowledgements from the receiver")

// ErrStalled is returned when the receiver's feedback arrives but acknowledges nothing new for
// longer than SenderConfig.Stall: data datagrams do not get through (a path that drops
// full-size datagrams), or the receiver cannot take more.
var ErrStalled = errors.New("the transfer made no progress")

// Run sends every block read from in until all are acknowledged or ctx ends.
func (s *Sender) Run(ctx context.Context, in <-chan *fcopy.Block) error {
	s.start = time.Now()
	s.lastTx = s.start
	s.cc = cc.New(cc.Config{MaxRate: s.cfg.Rate, MinRate: s.cfg.MinRate, Policy: s.cfg.Policy,
		MSS: s.dgram + lane.IPv4UDPHeaders, Lanes: Lanes, InitialRTT: s.cfg.InitialRTT}, s.start)
	if s.loss == nil {
		s.loss = s.cc
	}
	if s.cfg.ResumeBps > 0 {
		s.cc.ResumeBandwidth(s.start, s.cfg.ResumeBps)
	}
	s.pacer.SetRate(s.pacingRate())
	s.path.SetHandler(s)
	defer func() {
		s.stats.CC = s.cc.Stats()
		if s.cc.LatestRTT() > 0 {
			s.stats.SRTT = s.cc.SRTT()
		}
		select {
		case <-s.peerDone:
			// The receiver's verdict confirmed the whole transfer, which its last feedback may
			// not have done yet (the verdict does not wait for it): every byte is in.
			if s.plan != nil {
				s.ackedBytes.Store(s.plan.TotalBytes())
			}
		default:
		}
		// The last snapshot, for the progress line's final report (the loop stores one every
		// 200 ms, up to 200 ms old by the end).
		s.storeProgress(s.stats.CC)
	}()
	var sealers sync.WaitGroup
	for i := range s.lanes {
		sealers.Go(func() { s.sealLoop(i) })
	}
	defer func() {
		for i := range s.lanes {
			close(s.lanes[i].work)
		}
		sealers.Wait()
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	lastFB := time.Now()
	var lastDbg time.Time
	progressAt, lastAcks, lastCursor := lastFB, uint64(0), uint32(0)
	for {
		// Take blocks from the reader while the receiver's window allows, and only a few ahead
		// of what is being sent: a block is sealed soon after it was read and hashed, while its
		// bytes are still in the CPU's cache (and the reader's pool recycles a few MiB instead of
		// touching the whole window).
		ahead := readAheadFor(s.pacer.Rate())
		for !s.inDone && len(s.blocks) < s.slots()+1 && s.sendableBytes < ahead*fcopy.BlockSize {
			select {
			case b, ok := <-in:
				if !ok {
					s.inDone = true
					break
				}
				s.addBlock(b)
				continue
			default:
			}
			break
		}
		if s.inDone && len(s.blocks) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.peerDone:
			return nil
		case pt := <-s.fbCh:
			s.onFeedback(pt, time.Now())
			lastFB = time.Now()
			for more := true; more; {
				select {
				case pt := <-s.fbCh:
					s.onFeedback(pt, time.Now())
				default:
					more = false
				}
			}
		case <-tick.C:
		case <-s.kick:
		}
		if e := s.sendErr.Load(); e != nil {
			return *e
		}
		now := time.Now()
		s.noteWait(now)
		if s.path.debugging() && now.Sub(lastDbg) > time.Second {
			lastDbg = now
			s.path.debugf("sender: blocks=%d sendable=%d retx=%d parq=%d evalq=%d cursor=%d window=%d stats=%+v lanes0 lowest=%d next=%d largest=%d budget=%d",
				len(s.blocks), len(s.sendable), s.retx.len(), s.parq.len(), len(s.evalq), s.cursor, s.window, s.stats, s.lanes[0].lowest, s.lanes[0].next, s.lanes[0].largest, s.pacer.Budget(now))
			if b := s.blocks[s.cursor]; b != nil {
				line := fmt.Appendf(nil, "sender: cursor block %d: chunks %d next %d acked %d hash acked %v groups done %d/%d", b.id, b.nChunks, b.next, b.nAcked, b.isAcked(b.nChunks), b.groupsDone, len(b.groups))
				for i := range b.groups {
					g := &b.groups[i]
					line = fmt.Appendf(line, " [k %d m %d next %d acked %d/%d inflight %d pending %d done %v queued %v repaired %v tail %v]", g.k, g.m, g.next, g.dataAcked, bits.OnesCount64(g.parAcked), g.inflight, g.pending, g.done, g.queued, g.repaired, g.tail)
				}
				s.path.debugf("%s", line)
			}
		}
		if now.Sub(lastFB) > s.cfg.Idle && s.stats.Datagrams > 0 {
			var rx uint64
			for _, ls := range s.path.LaneStats() {
				rx += ls.RecvDatagrams
			}
			return fmt.Errorf("%w for %s (%d feedback datagrams before that, %d datagrams received in all, %d failed authentication, %d replays)",
				ErrNoFeedback, s.cfg.Idle.Round(time.Second), s.stats.Feedback, rx, s.path.AuthFailures.Load(), s.path.Replays.Load())
		}
		if acks := s.cc.Acked(); acks != lastAcks || s.cursor != lastCursor || len(s.blocks) == 0 { // (nothing owed: waiting for the reader)
			progressAt, lastAcks, lastCursor = now, acks, s.cursor
		} else if now.Sub(progressAt) > s.cfg.Stall {
			return fmt.Errorf("%w for %s: the receiver is at block %d of %d and acknowledged nothing new (%d datagrams sent, %d lost)",
				ErrStalled, s.cfg.Stall.Round(time.Second), s.cursor, s.plan.NumBlocks(), s.stats.Datagrams, s.stats.Lost)
		}
		s.detectTimeLoss(now)
		s.checkRebuilt(now)
		if !s.seeded {
			if bps, ok := s.path.TrainEstimate(); ok {
				s.seeded = true
				s.stats.ProbeBps = bps
				s.cc.SeedBandwidth(now, bps)
			}
		}
		s.cc.Tick(now)
		if now.Sub(s.lastProgress) >= 200*time.Millisecond {
			s.lastProgress = now
			st := s.cc.Stats()
			if s.path.debugging() {
				s.path.debugf("cc t=%.1f %s/%s rate=%.2fG btlbw=%.2fG bwLo=%.2fG srtt=%v q=%v inflight=%d cap=%d acked=%d ev=%d armed=%v compete=%v shared=%v", now.Sub(s.start).Seconds(), st.Mode, st.Phase,
					st.PacingRate/1e9, st.BtlBw/1e9, st.BwLo/1e9, st.SRTT, st.QueueDelay, st.Inflight, s.inflightCap(), s.ackedBytes.Load()>>20, st.CongestionEvents,
					st.QueueArmed, st.Compete, st.Shared)
				if st.CongestionEvents != s.debugEvents {
					s.debugEvents = st.CongestionEvents
					v := st.Verdicts[len(st.Verdicts)-1]
					s.path.debugf("cc verdict t=%.2f %s in %s/%s: acked %d lost %d (base %.4f) run %d, at queue %d lost/%d acked, queue %v, deep cut %v",
						v.At.Seconds(), v.Reason, v.Mode, v.Phase, v.Acked, v.Lost, v.LossBase, v.MaxRun, v.LostHiQ, v.AckedHiQ, v.Queue, v.AtQueue)
				}
			}
			s.storeProgress(st)
		}
		s.pacer.SetRate(s.pacingRate())
		if err := s.transmit(now); err != nil {
			return err
		}
		if now.Sub(s.lastTx) >= PingEvery {
			s.ping(now)
		}
	}
}

// ping sends a keepalive (wire.TypePing) on a lane whose framed datagrams have all gone to the
// kernel, so that its sequence number leaves in order. The receiver acknowledges it like any
// datagram; it is recorded as resolved at once, never lost or re-sent.
func (s *Sender) ping(now time.Time) {
	for i := range s.lanes {
		l := &s.lanes[i]
		if l.cur != nil && l.cur.n > 0 || l.sent.Load() != l.next || l.full() {
			continue
		}
		seq := s.path.NextSeq(i)
		*l.at(seq) = sentPkt{state: stAcked}
		l.next = seq
		if l.lowest == 0 {
			l.lowest = seq
		}
		l.sent.Store(seq)
		var buf [wire.Overhead]byte
		s.path.Send(i, [][]byte{s.path.Seal(buf[:0], wire.TypePing, i, seq, nil)})
		s.advance(l)
		s.lastTx = now
		return
	}
}

// storeProgress publishes a snapshot for Progress, with the rate controller's view st.
func (s *Sender) storeProgress(st cc.Stats) {
	s.progress.Store(&Progress{Bytes: s.ackedBytes.Load(), RateBps: st.PacingRate, SRTT: st.SRTT, MinRTT: st.MinRTT,
		RandomLoss: st.RandomLoss, CongestionEvents: st.CongestionEvents, Competing: st.Compete || st.Shared,
		Retransmitted: s.stats.Retransmitted, Parity: s.stats.Parity, RepairParity: s.stats.RepairParity})
}

// noteWait adds the time since the last turn of the loop to WindowFull or SourceWait when the
// sender had no new data to send for that reason; it starts counting with the first datagram.
func (s *Sender) noteWait(now time.Time) {
	if s.stats.Datagrams == 0 || s.inDone {
		s.waitAt = now
		return
	}
	d := now.Sub(s.waitAt)
	s.waitAt = now
	switch {
	case len(s.sendable) > 0 && s.sendable[0].id >= s.end, len(s.blocks) >= s.slots()+1:
		s.stats.WindowFull += d
	case len(s.sendable) == 0:
		s.stats.SourceWait += d
	}
}

func (s *Sender) addBlock(b *fcopy.Block) {
	tb := &txBlock{id: b.ID, data: b.Data, buf: b.Data, hash: b.Hash, nChunks: chunksIn(len(b.Data), s.chunk)}
	tb.refs.Store(1)
	tb.acked = make([]uint64, (tb.nChunks+1+63)/64)
	if k := s.fecK; k != 0 && tb.nChunks > 0 && !s.path.OnStreams() { // a stream loses nothing: no parity
		if k < 0 {
			k = fec.GroupSize(tb.nChunks)
		}
		tb.k = k
		tb.groups = make([]txGroup, (tb.nChunks+k-1)/k)
		for g := range tb.groups {
			tb.groups[g].k = uint16(min(k, tb.nChunks-g*k))
		}
	}
	s.blocks[b.ID] = tb
	s.sendable = append(s.sendable, tb)
	s.sendableBytes += len(tb.data)
	s.nextID = max(s.nextID, b.ID+1)
}

// slots is the most blocks the receiver's window holds (fcopy.WindowSlots per block of it).
func (s *Sender) slots() int { return int(s.window) * fcopy.WindowSlots }

// windowEnd is the end of the receiver's window from the cursor: the receiver computes the same
// from the same plan (fcopy.Plan.WindowEnd) and refuses blocks at or beyond it.
func (s *Sender) windowEnd() uint32 {
	if s.plan == nil {
		return s.cursor + s.window
	}
	return s.plan.WindowEnd(s.cursor, s.window)
}

func (s *Sender) release(b *txBlock) {
	s.ackedBytes.Add(int64(len(b.data)))
	delete(s.blocks, b.id)
	b.unref(s.pool) // a re-sent chunk may still wait in a batch: the last reference frees it
	for i := range b.groups {
		b.groups[i].dropParity()
	}
}

// refQueue is a FIFO of datagrams to send that reuses its array: popping never gives up
// capacity, so a queue that keeps a few entries does not allocate as it turns over.
type refQueue struct {
	q    []chunkRef
	head int
}

func (f *refQueue) len() int        { return len(f.q) - f.head }
func (f *refQueue) peek() chunkRef  { return f.q[f.head] }
func (f *refQueue) push(r chunkRef) { f.q = append(f.q, r) }
func (f *refQueue) pop() (r chunkRef) {
	r = f.q[f.head]
	f.head++
	switch {
	case f.head == len(f.q):
		f.q, f.head = f.q[:0], 0
	case f.head >= 256 && 2*f.head >= len(f.q):
		n := copy(f.q, f.q[f.head:])
		f.q, f.head = f.q[:n], 0
	}
	return r
}

// What nextChunk picked.
const (
	srcNew    = iota // a chunk or block hash sent for the first time
	srcParity        // proactive parity, right after its group's data
	srcRepair        // a repair: a chunk again or fresh repair parity
)

// nextChunk picks what to send next: repairs first, then the parity of groups just sent, then new
// chunks within the window. par is the parity index, or -1 for a chunk.
func (s *Sender) nextChunk() (b *txBlock, c, par, src int, ok bool) {
	for s.retx.len() > 0 {
		r := s.retx.pop()
		if b, c, par, ok := s.queued(r); ok {
			return b, c, par, srcRepair, true
		}
	}
	for s.parq.len() > 0 && s.parq.peek().due <= s.tnow {
		r := s.parq.pop()
		if b, c, par, ok := s.queued(r); ok {
			return b, c, par, srcParity, true
		}
	}
	for len(s.sendable) > 0 {
		b := s.sendable[0]
		if b.id >= s.end {
			return nil, 0, 0, 0, false
		}
		c := b.next
		b.next++
		if b.next > b.nChunks {
			s.sendable = s.sendable[1:]
			s.sendableBytes -= len(b.data)
		}
		if b.k > 0 && c < b.nChunks {
			s.startChunk(b, c)
		}
		if c < b.nChunks {
			s.firstSent += int64(min(s.chunk, len(b.data)-c*s.chunk))
		} else {
			s.tailHash(b)
		}
		return b, c, -1, srcNew, true
	}
	return nil, 0, 0, 0, false
}

// queued resolves a queued datagram: false if it is no longer needed.
func (s *Sender) queued(r chunkRef) (*txBlock, int, int, bool) {
	b := s.blocks[r.block]
	if b == nil {
		return nil, 0, 0, false
	}
	c := int(r.chunk)
	if b.k > 0 && c < b.nChunks {
		gr := &b.groups[c/b.k]
		gr.pending--
		if gr.done || r.par == 0 && b.isAcked(c) {
			return nil, 0, 0, false
		}
		return b, c, int(r.par) - 1, true
	}
	if b.isAcked(c) {
		return nil, 0, 0, false
	}
	return b, c, -1, true
}

// maxBatch is the most datagrams of a batch; batchBytes bounds its bytes (128 standard datagrams),
// so that large datagrams make shorter batches.
const (
	maxBatch   = 128
	batchBytes = maxBatch * wire.MaxDatagramV6
)

// laneRunBytes is how much goes to one lane in a row before the next: about one GSO super-packet
// (64 KiB; 44 standard datagrams), so that a burst leaves as a few large sends rather than as a
// small one on every lane, and the receiving lanes wake once per super-packet.
const laneRunBytes = 44 * wire.MaxDatagramV6

// sendQuantum is the least credit, in time at the pacing rate, that transmit waits for before it
// frames anything (or one datagram, whichever is more). The loop wakes on every feedback datagram
// and sealer, often tens of microseconds apart; framing whatever those few microseconds earned
// spread two or three datagrams over each lane's batch, and at 2 Gbit/s on loopback the copy spent
// more CPU on system calls and wakeups for those tiny batches than on the bytes. A quarter of a
// millisecond keeps bursts far below the pacer's 2 ms cap.
const sendQuantum = 250 * time.Microsecond

// transmit frames what the pacer and the inflight cap allow and hands full batches to the lane
// sealers. Only the plaintext copy and the bookkeeping happen here; sealing and the system calls
// run on the lanes' goroutines.
func (s *Sender) transmit(now time.Time) error {
	s.tnow = int64(now.Sub(s.start))
	if len(s.evalq) > 0 {
		s.planRepairs(now)
	}
	budget := s.pacer.Budget(now)
	if budget < max(s.dgram, int(s.pacer.Rate()/8*sendQuantum.Seconds())) {
		return nil
	}
	sent := false
	for budget >= s.dgram && s.cc.Inflight() < s.inflightCap() {
		l := &s.lanes[s.rr]
		if s.path.OnStreams() && !l.ready() {
			l = s.readyStream()
		}
		if l.full() {
			break // the lane's record is full of unresolved datagrams
		}
		if l.cur == nil {
			select {
			case l.cur = <-l.free:
			default:
				// The lane's sealer is behind: this round is over, and the sealer kicks the loop
				// when it frees a batch. Look once more after raising the flag, in case the batch
				// came back in between.
				s.starved.Store(true)
				select {
				case l.cur = <-l.free:
					s.starved.Store(false)
				default:
					s.dispatch()
					return nil
				}
			}
		}
		b, c, par, src, ok := s.nextChunk()
		if !ok {
			break
		}
		size := s.frame(s.rr, l, b, c, par, now)
		budget -= size
		s.pacer.Consume(size)
		s.stats.Datagrams++
		s.stats.WireBytes += uint64(size - lane.IPv4UDPHeaders)
		if par >= 0 {
			s.stats.Parity++
		}
		switch src {
		case srcNew:
			s.stats.LastNewDataAt = now
		case srcRepair:
			s.stats.Retransmitted++
			if par >= 0 {
				s.stats.RepairParity++
			}
		}
		if l.cur.n == s.batchMax {
			l.work <- l.cur // never blocks: a lane has batchesPerLane batches in all
			l.cur = nil
		}
		if s.rrN++; s.rrN >= s.laneRun {
			s.rr, s.rrN = (s.rr+1)%Lanes, 0
		}
		sent = true
	}
	if sent {
		s.lastTx = now
		if s.stats.FirstDataAt.IsZero() {
			s.stats.FirstDataAt = now
		}
	}
	s.dispatch()
	return nil
}

// ready reports whether the lane can take a datagram now: room in its record and a batch to
// frame it in (its sealer is not holding them all in sends that wait).
func (l *laneTx) ready() bool { return !l.full() && (l.cur != nil || len(l.free) > 0) }

// readyStream moves the round robin on from a TCP stream that cannot take data now, to the next
// lane that can, and returns that lane (the current one where none can). TCP's loss recovery can
// hold one stream for a second or more; dealt in turn, the other three would wait for it, and
// at 3 % loss a 256 MiB copy took 28 s where it took 7 when no stream stalled. What the held
// stream already carries is declared lost by time and sent again on the others
// (detectTimeLoss). UDP lanes are dealt strictly in turn: their records fill together.
func (s *Sender) readyStream() *laneTx {
	for i := 1; i < Lanes; i++ {
		if j := (s.rr + i) % Lanes; s.lanes[j].ready() {
			s.rr, s.rrN = j, 0
			break
		}
	}
	return &s.lanes[s.rr]
}

// dispatch hands every partly filled batch to its sealer.
func (s *Sender) dispatch() {
	for i := range s.lanes {
		l := &s.lanes[i]
		if l.cur != nil && l.cur.n > 0 {
			l.work <- l.cur
			l.cur = nil
		}
	}
}

// sealLoop seals and sends lane i's batches in order until its work channel is closed.
func (s *Sender) sealLoop(i int) {
	l := &s.lanes[i]
	for bt := range l.work {
		bt.pkts = bt.pkts[:0]
		for k := range bt.n {
			copy(bt.bufs[k][wire.HeaderLen:wire.DataAADLen], bt.frames[k][:])
			bt.pkts = append(bt.pkts, s.path.SealData(bt.bufs[k], i, bt.seqs[k], bt.pay[k]))
			bt.pay[k] = nil
		}
		for k := range bt.nref {
			bt.refs[k].unref(s.pool)
			bt.refs[k] = nil
		}
		bt.nref = 0
		// The datagrams' clocks start now, not when they were framed: loss detection and RTT
		// samples must not count the time a batch waited for this goroutine. And not after the
		// send returns either: a batch's first datagrams leave while the call still works on the
		// rest (or the goroutine is descheduled in it), and an RTT sample that starts late reads
		// short; the min RTT is the minimum of them, so it read 130–138 ms on the 140 ms lab, and
		// every round's queue (its least RTT over the min) read up to that much too high.
		at := int64(time.Since(s.start))
		if err := s.path.Send(i, bt.pkts); err != nil && !isTransient(err) {
			err = fmt.Errorf("send on lane %d: %w", i, err)
			s.sendErr.CompareAndSwap(nil, &err)
		}
		for k := range bt.n {
			atomic.StoreInt64(&l.at(bt.seqs[k]).at, at)
		}
		if bt.n > 0 {
			l.sent.Store(bt.seqs[bt.n-1])
		}
		bt.n = 0
		l.free <- bt
		if s.starved.Load() && s.starved.Swap(false) {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
}

// streamRate is the pacing rate on TCP streams without --rate: as good as none, so that TCP's
// congestion control, which sees the path's losses and queue, alone sets the rate (two
// controllers in series would fight: this one's losses never happen on a stream, and its
// round trips include the streams' send buffers).
const streamRate = 400e9

// pacingRate is the rate the pacer holds: the controller's on UDP; on TCP streams the user's
// --rate where given, else streamRate.
func (s *Sender) pacingRate() float64 {
	if !s.path.OnStreams() {
		return s.cc.PacingRate()
	}
	if s.cfg.Rate > 0 {
		return s.cfg.Rate
	}
	return streamRate
}

// inflightCap is the controller's cap, but never less than what the pacing rate sends in 4
// feedback intervals: acknowledgements come in batches every feedback interval, so on a path
// whose round trip is shorter than that interval a pure 2·BDP cap would starve the pipe.
func (s *Sender) inflightCap() int {
	if s.path.OnStreams() {
		return math.MaxInt // TCP's own window and send buffer hold the lanes back
	}
	return max(s.cc.InflightCap(), int(s.cc.PacingRate()/8*(4*FeedbackInterval).Seconds()))
}

// isTransient reports send errors that a later retry can get past (a full socket buffer, an ICMP
// error reported on the socket); the loss machinery re-sends what did not leave.
func isTransient(err error) bool {
	var errno interface{ Temporary() bool }
	if errors.As(err, &errno) && errno.Temporary() {
		return true
	}
	return errors.Is(err, errConnRefused)
}

// frame puts chunk c of b (or, with par >= 0, parity index par of the group starting at chunk c)
// into lane i's current batch, reserves its sequence number and records it in flight; it returns
// the datagram's size on the wire (IP bytes).
func (s *Sender) frame(i int, l *laneTx, b *txBlock, c, par int, now time.Time) int {
	bt := l.cur
	k := bt.n
	buf := bt.bufs[k]
	var payload []byte
	f := wire.DataFrame{Kind: wire.KindChunk, Block: b.id, Chunk: uint16(c)}
	var gr *txGroup
	switch {
	case par >= 0:
		gr = &b.groups[c/b.k]
		f.Kind, f.FecK, f.FecM, f.FecIdx = wire.KindParity, gr.k, gr.m, gr.k+uint16(par)
		payload = s.encodeParity(b, gr, c, par, buf[wire.DataAADLen:wire.DataAADLen])
	case c == b.nChunks:
		f.Kind = wire.KindHash
		payload = append(buf[wire.DataAADLen:wire.DataAADLen], b.hash[:]...)
	default:
		off := c * s.chunk
		payload = b.data[off:min(off+s.chunk, len(b.data))]
		if bt.nref == 0 || bt.refs[bt.nref-1] != b {
			// Sealed from the block's memory by the lane's sealer: one reference per run of the
			// block's chunks in the batch, not an atomic shared with the sealer per datagram.
			b.refs.Add(1)
			bt.refs[bt.nref] = b
			bt.nref++
		}
		if b.k > 0 {
			gr = &b.groups[c/b.k]
			f.FecK, f.FecM, f.FecIdx = gr.k, gr.m, uint16(c%b.k)
		}
	}
	n := wire.DataFrameLen + len(payload)
	f.Put(bt.frames[k][:])
	seq := s.path.NextSeq(i)
	bt.seqs[k], bt.pay[k] = seq, payload
	bt.n++
	l.next = seq
	if l.lowest == 0 {
		l.lowest = seq
	}
	size := wire.Overhead + n + lane.IPv4UDPHeaders
	*l.at(seq) = sentPkt{at: s.tnow, block: b.id, chunk: uint16(c), size: uint16(size), state: stInflight, par: uint8(par + 1)}
	if gr != nil {
		gr.inflight++
	}
	appLimited := s.retx.len() == 0 && s.parq.len() == 0 && (len(s.sendable) == 0 || s.sendable[0].id >= s.end)
	s.cc.OnSent(now, i, seq, size, appLimited)
	return size
}

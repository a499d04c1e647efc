package session

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/prefetch"
	"github.com/farwing/farwing/internal/wire"
)

// chunksIn is the number of data chunks of a block of n bytes, in chunks of chunk bytes.
func chunksIn(n, chunk int) int { return (n + chunk - 1) / chunk }

// rxBlock is a block being reassembled. The lane goroutines fill it without a lock: a chunk is
// claimed by setting its bit in have (atomic OR), copied, marked in placed, and then counted in
// nHave; the goroutine whose count completes the block hands it on, and by then every copy has
// happened before. A block object is never reused for another block id, so a late duplicate
// holding a stale pointer only finds its bit already set. A claim not yet placed is a copy in
// progress, which may be a forgery that gives its claim up (SealedData): an authentic copy that
// finds one waits for it rather than count itself a duplicate (Datagram), and so does a rebuilt
// one (claimAuthentic). FEC state (rxFEC) appears with the block's first parity datagram.
type rxBlock struct {
	id      uint32
	data    []byte
	chunk   int // the session's chunk size
	nChunks int // data chunks; the hash travels as chunk index nChunks
	have    []atomic.Uint64
	placed  []atomic.Uint64 // chunks whose bytes are in data (set after the copy)
	nHave   atomic.Int32
	fec     atomic.Pointer[rxFEC]
	shape   atomic.Uint32 // the block's FEC groups, as far as parity has told them (groupOK)
	hash    [32]byte
	// checked is held locked from delivery until a verify worker has compared the block's digest
	// (wireguard-go's locked-container ordering: the writer takes blocks in order and waits on it).
	checked  sync.Mutex
	sum      fcopy.BlockSum
	ok       bool
	complete bool // guarded by Receiver.mu
	// pieceLeft counts, per piece of the block (copy.PieceSize), the chunks overlapping it not
	// yet placed; whoever places the last one hashes the piece into hasher while its bytes are
	// still in that CPU's cache, before counting the chunk in (so the block completes after all
	// its pieces are hashed).
	pieceLeft []atomic.Int32
	hasher    fcopy.BlockHasher
}

// claim marks chunk c as received and reports whether it was new.
func (b *rxBlock) claim(c int) bool {
	bit := uint64(1) << (c % 64)
	return b.have[c/64].Or(bit)&bit == 0
}

// span returns where chunk c's n bytes lie in b.data, or false if c is not a chunk of b or n is
// not its length (malformed: sealed by our peer, so a bug; ignored rather than corrupting).
func (b *rxBlock) span(c, n int) (off int, ok bool) {
	off = c * b.chunk
	return off, c < b.nChunks && off+n == min(off+b.chunk, len(b.data))
}

// claimAuthentic claims chunk c for an authentic copy of it (opened, so acknowledged already), and
// reports false only where the chunk is placed. A chunk claimed but not placed is a copy in
// progress on another lane, which may be a forgery that gives the claim up once it fails to open
// (SealedData): dropping the authentic copy on its word would lose the chunk for good (the sender
// never sends an acknowledged chunk again), so the claim is waited for, placed or released. The
// wait is short and cannot deadlock, even under a group's fx.mu (finishGroup): the holder marks
// the chunk placed (placeChunk) before it takes fx.mu (addData), or unclaims it without taking
// it, and every other claim of a group's chunk is made and placed under fx.mu. Datagram's copies
// and FEC's rebuilt chunks take it.
func (b *rxBlock) claimAuthentic(c int) bool {
	for !b.claim(c) {
		if b.isPlaced(c) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// unclaim gives up a claim whose datagram failed authentication.
func (b *rxBlock) unclaim(c int) { b.have[c/64].And(^(uint64(1) << (c % 64))) }

// isPlaced reports whether chunk c's bytes are in data.
func (b *rxBlock) isPlaced(c int) bool { return b.placed[c/64].Load()&(1<<(c%64)) != 0 }

func (b *rxBlock) markPlaced(c int) { b.placed[c/64].Or(1 << (c % 64)) }

// allPlaced reports whether chunks [lo, hi) are all placed, a 64-chunk word at a time (a parity
// datagram of a whole-block group asks about 746 chunks).
func (b *rxBlock) allPlaced(lo, hi int) bool {
	for c := lo; c < hi; {
		w, bit := c/64, c%64
		n := min(64-bit, hi-c)
		mask := (^uint64(0) >> (64 - n)) << bit
		if b.placed[w].Load()&mask != mask {
			return false
		}
		c += n
	}
	return true
}

// countPlaced counts the chunks of [lo, hi) that are placed, a 64-chunk word at a time.
func (b *rxBlock) countPlaced(lo, hi int) int {
	n := 0
	for c := lo; c < hi; {
		w, bit := c/64, c%64
		k := min(64-bit, hi-c)
		mask := (^uint64(0) >> (64 - k)) << bit
		n += bits.OnesCount64(b.placed[w].Load() & mask)
		c += k
	}
	return n
}

// initPieces sets up pieceLeft and hasher for a block of n bytes (n > 0).
func (b *rxBlock) initPieces(plan *fcopy.Plan, n int) {
	b.hasher.Reset(plan, b.id, n)
	b.pieceLeft = make([]atomic.Int32, fcopy.Pieces(n))
	for p := range b.pieceLeft {
		lo := p * fcopy.PieceSize
		hi := min(lo+fcopy.PieceSize, n) - 1
		b.pieceLeft[p].Store(int32(hi/b.chunk - lo/b.chunk + 1))
	}
}

// hashPieces counts chunk c, whose bytes have just been placed, in the pieces it overlaps and
// hashes those it completes.
func (b *rxBlock) hashPieces(c int) {
	off := c * b.chunk
	end := off + b.chunkLen(c)
	for p := off / fcopy.PieceSize; p <= (end-1)/fcopy.PieceSize; p++ {
		if b.pieceLeft[p].Add(-1) == 0 {
			lo := p * fcopy.PieceSize
			b.hasher.Piece(p, b.data[lo:min(lo+fcopy.PieceSize, len(b.data))])
		}
	}
}

// chunkLen is the length of data chunk c.
func (b *rxBlock) chunkLen(c int) int {
	off := c * b.chunk
	return min(off+b.chunk, len(b.data)) - off
}

// FeedbackInterval is how often the receiver reports.
const FeedbackInterval = 5 * time.Millisecond

// ReceiverStats are the receiving side's counters.
type ReceiverStats struct {
	Datagrams   uint64 // authenticated data datagrams
	Duplicates  uint64 // chunks that had already arrived
	Outside     uint64 // chunks for blocks outside the window
	Invalid     uint64 // data datagrams that cannot belong to the transfer: no such block, chunk or length, malformed FEC fields
	Feedback    uint64 // feedback datagrams sent
	Parity      uint64 // parity datagrams received
	FECRebuilt  uint64 // groups whose missing chunks were rebuilt from the parity sent with them
	FECRepaired uint64 // groups rebuilt with the help of repair parity (after a round trip)
	FECChunks   uint64 // chunks rebuilt
	FECLate     uint64 // rebuilt chunks that arrived anyway afterwards (they were late, not lost)
	Held        uint64 // times feedback was held back for a stalled lane
	MaxBlocks   uint64 // the most blocks held at once (being assembled, or waiting to be written)
}

// laneCounters are one lane goroutine's counters, written per datagram. Each lane's are alone on
// their cache lines (the stride is 128 bytes and Receiver.counts is padded before), away from the
// next lane's and from base and deliver, which every datagram reads. (The stall perf showed on
// the increment after a decrypt was the store buffer draining, not sharing: see Prefetch.)
type laneCounters struct {
	datagrams, duplicates, outside, parity, late, invalid atomic.Uint64
	_                                                     [128 - 6*8]byte
}

// Receiver reassembles blocks from data datagrams, hands them in order to a copy.Writer and
// reports progress to the sender in feedback datagrams. Datagrams are placed by the lane
// goroutines without a shared lock; block digests are checked by a pool of workers; the writer
// takes blocks in order.
type Receiver struct {
	path    *Path
	plan    *fcopy.Plan
	w       *fcopy.Writer
	window  uint32 // in BlockSize blocks: the memory for blocks in flight (fcopy.Plan.WindowEnd)
	slots   uint32 // the most blocks the window holds, however short: the ring's length
	chunk   int    // file bytes per data datagram, agreed by the path's handshake
	fbEvery time.Duration

	base    atomic.Uint32 // blocks below base are written; memory is held for [base, end)
	end     atomic.Uint32 // plan.WindowEnd(base, window): stored after base, so never past base+slots
	deliver atomic.Uint32 // next block to hand to the writer
	ring    []atomic.Pointer[rxBlock]
	_       [128]byte
	counts  [Lanes]laneCounters

	mu      sync.Mutex // block allocation, delivery, the free list
	free    [][]byte
	inRing  int // blocks in the ring now, and the most at once
	maxRing int
	toWrite chan *rxBlock
	verify  chan *rxBlock

	feedback    atomic.Uint64
	held        atomic.Uint64
	fbSent      atomic.Uint64
	written     atomic.Int64
	fecRebuilt  atomic.Uint64
	fecRepaired atomic.Uint64
	fecChunks   atomic.Uint64

	// Idle is how long the receiver waits for blocks with nothing fresh heard from the sender
	// (the sender pings while it has nothing to send: PingEvery) before it gives up with
	// ErrSilent; 0: 20 s. Set it before Run.
	Idle time.Duration

	fbMu  sync.Mutex // the feedback frame and its buffer, reused
	fb    wire.Feedback
	fbBuf []byte
}

// ErrSilent is returned when the other end has said nothing for longer than the protocol allows:
// a receiver that has heard nothing fresh and authentic for its Idle while blocks are still due,
// and (xfer) an end that waits on a control message or a verdict. It has gone, or the path has.
var ErrSilent = errors.New("the other end went silent")

// Progress returns the bytes verified and written so far.
func (r *Receiver) Progress() *Progress {
	return &Progress{Bytes: r.written.Load(), Rebuilt: r.fecRebuilt.Load()}
}

// NewReceiver prepares a receiver that accepts blocks up to window ahead of the writer.
func NewReceiver(p *Path, plan *fcopy.Plan, w *fcopy.Writer, window int) *Receiver {
	slots := window * fcopy.WindowSlots
	r := &Receiver{path: p, plan: plan, w: w, window: uint32(window), slots: uint32(slots), chunk: p.FixChunk(), fbEvery: FeedbackInterval,
		ring: make([]atomic.Pointer[rxBlock], slots), toWrite: make(chan *rxBlock, slots+1),
		verify: make(chan *rxBlock, slots+1)}
	r.end.Store(plan.WindowEnd(0, r.window))
	return r
}

// SealedData implements SealedDataHandler: a new chunk of a block being assembled is decrypted
// straight into the block (the copy from the datagram was 15 % of the receiver's CPU on
// loopback). Anything else (a block not started yet, a duplicate, hash and parity frames) is left
// to the path, which opens it in place and calls Datagram.
func (r *Receiver) SealedData(laneIdx int, h wire.Header, pkt []byte, _ time.Time) (taken, authentic bool) {
	b, f, dst := r.chunkDest(pkt)
	c := int(f.Chunk)
	if b == nil || !b.claim(c) {
		return false, false
	}
	if err := r.path.crypto.OpenDataInto(h, pkt, dst); err != nil {
		b.unclaim(c)
		return true, false
	}
	r.counts[laneIdx%Lanes].datagrams.Add(1)
	r.placeChunk(b, f, c, dst)
	return true, true
}

// Prefetch implements SealedDataHandler: it asks for the cache lines of the block memory a new
// chunk in pkt would be decrypted into. pkt is not authenticated yet; a forged one only costs
// a prefetch.
func (r *Receiver) Prefetch(pkt []byte) {
	if len(pkt) < wire.DataAADLen+wire.TagLen || wire.Type(pkt[1]) != wire.TypeData { // byte 1: the type
		return
	}
	if b, _, dst := r.chunkDest(pkt); b != nil {
		prefetch.ForWrite(dst)
	}
}

// chunkDest finds where the data datagram pkt's payload belongs: a chunk of a block being
// assembled, as its frame (in the clear) says. It returns the block (nil if the frame is not a
// chunk, its block is not in the ring, or chunk and length do not fit), the frame, and the
// payload's place in the block's memory. Nothing is claimed or checked for authenticity.
func (r *Receiver) chunkDest(pkt []byte) (*rxBlock, wire.DataFrame, []byte) {
	f, _, err := wire.ParseDataFrame(pkt[wire.HeaderLen:wire.DataAADLen])
	if err != nil || f.Kind != wire.KindChunk ||
		f.Block < r.deliver.Load() || f.Block >= r.end.Load() || f.Block >= r.plan.NumBlocks() {
		return nil, f, nil
	}
	b := r.ring[f.Block%r.slots].Load()
	if b == nil || b.id != f.Block {
		return nil, f, nil
	}
	n := wire.DataPayloadLen(pkt)
	off, ok := b.span(int(f.Chunk), n)
	if !ok {
		return nil, f, nil
	}
	return b, f, b.data[off : off+n]
}

// placeChunk records chunk c of b as placed (its bytes, payload, are in b.data) and hands it to
// its FEC group.
func (r *Receiver) placeChunk(b *rxBlock, f wire.DataFrame, c int, payload []byte) {
	b.markPlaced(c)
	b.hashPieces(c)
	// Dekker-style with addParity: placed is set before fec is checked, and addParity marks a
	// group open before it reads placed, so the group gets this chunk from one side or both.
	if f.FecK != 0 {
		if fx := b.fec.Load(); fx != nil {
			r.addData(b, fx, f, c, payload)
		}
	}
	r.count(b, 1)
}

// Admit implements Admitter: a data frame for a block at or beyond the window's end is refused
// (counted as outside), so it stays unacknowledged and is sent again once the window has moved.
// A correct sender never sends one: it learns the window before it starts and from every
// feedback.
func (r *Receiver) Admit(pt []byte) bool {
	f, _, err := wire.ParseDataFrame(pt)
	if err != nil || f.Block < r.end.Load() || f.Block >= r.plan.NumBlocks() { // no such block: Datagram counts it invalid
		return true
	}
	r.counts[0].outside.Add(1)
	return false
}

// Datagram implements Handler.
func (r *Receiver) Datagram(laneIdx int, h wire.Header, pt []byte, _ time.Time) {
	if h.Type != wire.TypeData {
		return
	}
	cnt := &r.counts[laneIdx%Lanes]
	f, payload, err := wire.ParseDataFrame(pt)
	if err != nil || f.Block >= r.plan.NumBlocks() {
		cnt.invalid.Add(1)
		return
	}
	cnt.datagrams.Add(1)
	if f.Block < r.deliver.Load() {
		cnt.duplicates.Add(1)
		return
	}
	b := r.ring[f.Block%r.slots].Load() // Admit kept out blocks beyond the window
	if b == nil || b.id != f.Block {
		if b = r.slot(f.Block, cnt); b == nil {
			return
		}
	}
	c := int(f.Chunk)
	switch f.Kind {
	case wire.KindChunk:
		off, ok := b.span(c, len(payload))
		if !ok {
			cnt.invalid.Add(1)
			return
		}
		if !b.claimAuthentic(c) { // this copy is authentic and acknowledged: never dropped for a forgery's claim
			cnt.duplicates.Add(1)
			if fx := b.fec.Load(); fx != nil && fx.wasRebuilt(c) {
				cnt.late.Add(1)
			}
			return
		}
		copy(b.data[off:], payload)
		r.placeChunk(b, f, c, b.data[off:off+len(payload)])
		return
	case wire.KindHash:
		if c != b.nChunks || len(payload) != 32 {
			cnt.invalid.Add(1)
			return
		}
		if !b.claim(c) {
			cnt.duplicates.Add(1)
			return
		}
		copy(b.hash[:], payload)
	case wire.KindParity:
		cnt.parity.Add(1)
		if !r.addParity(b, f, payload) {
			cnt.invalid.Add(1)
		}
		return
	default:
		cnt.invalid.Add(1)
		return
	}
	r.count(b, 1)
}

// count adds n placed chunks to b and hands b on if that completes it.
func (r *Receiver) count(b *rxBlock, n int) {
	if int(b.nHave.Add(int32(n))) == b.nChunks+1 {
		r.closeFEC(b)
		r.completed(b)
	}
}

// slot returns the block being assembled as id, creating it; nil if id is no longer (or not yet)
// inside the window.
func (r *Receiver) slot(id uint32, cnt *laneCounters) *rxBlock {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < r.deliver.Load() {
		cnt.duplicates.Add(1)
		return nil
	}
	if id >= r.end.Load() {
		cnt.outside.Add(1)
		return nil
	}
	// Blocks below base have left the ring, and nothing at or beyond the window's end (at most
	// base+slots) is created, so the slot is either empty or already holds id.
	if b := r.ring[id%r.slots].Load(); b != nil {
		return b
	}
	n := r.plan.BlockLen(id)
	var data []byte
	switch k := len(r.free); {
	case n < fcopy.SmallBlock:
		data = make([]byte, n) // a small file's block: the window charged its length (fcopy.Charge)
	case k > 0:
		data = r.free[k-1][:n]
		r.free = r.free[:k-1]
	default:
		data = fcopy.NewBlockBuffer()[:n]
	}
	b := newRxBlock(r.plan, id, data, r.chunk)
	r.ring[id%r.slots].Store(b)
	r.inRing++
	r.maxRing = max(r.maxRing, r.inRing)
	return b
}

// newRxBlock returns block id of plan, to be assembled in data in chunks of chunk bytes (its length; every block of a
// plan has at least one byte: an empty file has no blocks).
func newRxBlock(plan *fcopy.Plan, id uint32, data []byte, chunk int) *rxBlock {
	n := len(data)
	b := &rxBlock{id: id, data: data, chunk: chunk, nChunks: chunksIn(n, chunk)}
	b.have = make([]atomic.Uint64, (b.nChunks+1+63)/64)
	b.placed = make([]atomic.Uint64, (b.nChunks+63)/64)
	b.initPieces(plan, n)
	return b
}

// completed hands every block that is now complete and next in order to the verify workers and
// the writer.
func (r *Receiver) completed(b *rxBlock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b.complete = true
	total := r.plan.NumBlocks()
	for d := r.deliver.Load(); d < total; d++ {
		nb := r.ring[d%r.slots].Load()
		if nb == nil || nb.id != d || !nb.complete {
			break
		}
		nb.checked.Lock() // unlocked by the verify worker
		r.verify <- nb    // capacity slots+1: never blocks
		r.toWrite <- nb
		r.deliver.Store(d + 1)
	}
}

// verifyLoop checks block digests until ctx ends.
func (r *Receiver) verifyLoop(ctx context.Context) {
	for {
		select {
		case b := <-r.verify:
			b.sum = b.hasher.Sum() // every piece was hashed as it was placed
			b.ok = b.sum.Matches(b.hash)
			b.checked.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// Run writes blocks as they complete and sends feedback until every file is written and
// verified, ctx ends, or a write/verification error occurs.
func (r *Receiver) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if r.Idle <= 0 {
		r.Idle = 20 * time.Second
	}
	r.path.SetHandler(r)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.feedbackLoop(ctx, cancel)
	}()
	for range max(runtime.GOMAXPROCS(0), 2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.verifyLoop(ctx)
		}()
	}
	err := r.writeLoop(ctx)
	cancel(nil)
	wg.Wait()
	if err == nil {
		// Tell the sender that everything is in, now and twice more in case that feedback is
		// lost. The repeats go while the caller sends its verdict, the authoritative end: they
		// used to come first, and held the verdict three feedback intervals (15 ms of a copy's
		// end).
		r.sendFeedback(time.Now())
		go func() {
			for range 2 {
				time.Sleep(r.fbEvery)
				if r.path.closed.Load() {
					return
				}
				r.sendFeedback(time.Now())
			}
		}()
	}
	return err
}

func (r *Receiver) writeLoop(ctx context.Context) error {
	total := r.plan.NumBlocks()
	for n := uint32(0); n < total; n++ {
		var b *rxBlock
		select {
		case b = <-r.toWrite:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		b.checked.Lock() // waits for the verify worker
		if err := r.w.WriteChecked(ctx, b.id, b.data, &b.sum, b.ok); err != nil {
			return err
		}
		r.written.Add(int64(len(b.data)))
		r.mu.Lock()
		if cap(b.data) >= fcopy.BlockSize {
			r.free = append(r.free, b.data)
		}
		r.ring[b.id%r.slots].Store(nil)
		r.inRing--
		r.base.Store(b.id + 1)
		r.end.Store(r.plan.WindowEnd(b.id+1, r.window))
		r.mu.Unlock()
	}
	lastWritten := time.Now()
	if err := r.w.Finish(ctx); err != nil {
		return err
	}
	if r.path.debugging() {
		r.path.debugf("receiver: last block written, files finished %s later", time.Since(lastWritten).Round(time.Millisecond))
	}
	return nil
}

// Feedback is held back while a lane's goroutine is stalled (Path.Stalled: not back from a
// receive call for stallAfter with datagrams waiting), for at most maxHold: a report made then
// would show as missing datagrams that have arrived, and the sender would declare the tail of
// that lane lost. On loopback a receiving lane was seen stalled for 50-130 ms while the feedback
// goroutine kept reporting.
const (
	stallAfter = 10 * time.Millisecond
	maxHold    = 200 * time.Millisecond
)

func (r *Receiver) feedbackLoop(ctx context.Context, fail context.CancelCauseFunc) {
	t := time.NewTicker(r.fbEvery)
	defer t.Stop()
	var holdSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if silent := now.Sub(r.path.Heard()); silent > r.Idle && r.deliver.Load() < r.plan.NumBlocks() {
				fail(fmt.Errorf("%w: nothing from it for %s with block %d of %d due", ErrSilent, silent.Round(time.Second), r.deliver.Load(), r.plan.NumBlocks()))
				return
			}
			if r.path.Stalled(now, stallAfter) {
				if holdSince.IsZero() {
					holdSince = now
					r.held.Add(1)
				}
				if now.Sub(holdSince) < maxHold {
					continue
				}
			} else {
				holdSince = time.Time{}
			}
			r.sendFeedback(now)
			if r.path.debugging() && r.fbSent.Load()%200 == 0 {
				r.path.debugf("receiver: base=%d deliver=%d stats=%+v peers=%v auth=%d replays=%d early=%d/%d dropped", r.base.Load(), r.deliver.Load(), r.Stats(),
					r.path.peers[0].Load(), r.path.AuthFailures.Load(), r.path.Replays.Load(), r.path.EarlyHeld.Load(), r.path.EarlyDropped.Load())
			}
		}
	}
}

// lingerEvery is how often Linger repeats the last feedback: a few datagrams a second, well
// within any sender's patience (PeerIdle, 20 s).
const lingerEvery = 250 * time.Millisecond

// Linger repeats, once Run has returned, the feedback that says everything is in, until stop is
// closed or the path is: a receiver with work left after the last block (--delete's deletions,
// before its verdict) is otherwise silent, and the sender gives up on a silent receiver.
func (r *Receiver) Linger(stop <-chan struct{}) {
	t := time.NewTicker(lingerEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if r.path.closed.Load() {
				return
			}
			r.sendFeedback(now)
		}
	}
}

// sendFeedback reports every lane's received ranges and the window, on two lanes (rotating) so
// that the loss of one feedback datagram does not stall the sender.
func (r *Receiver) sendFeedback(now time.Time) {
	r.fbMu.Lock() // the feedback loop, and Run's last reports while it ends
	defer r.fbMu.Unlock()
	fb := &r.fb
	if fb.Lanes == nil {
		fb.Lanes = make([]wire.LaneAck, Lanes)
		r.fbBuf = make([]byte, 0, wire.MaxDatagramV6)
	}
	fb.Cursor, fb.Window = r.base.Load(), r.window
	for i := range fb.Lanes {
		rx := &r.path.rx[i]
		la := &fb.Lanes[i]
		la.Ranges = la.Ranges[:0]
		rx.mu.Lock()
		if l, ok := rx.win.Largest(); ok {
			la.Largest = l
			la.AckDelay = uint32(now.Sub(rx.lastAt) / time.Microsecond)
			la.Ranges = rx.win.AppendRanges(la.Ranges, 200)
		}
		rx.mu.Unlock()
	}
	if r.path.Holding() {
		// Not before the lanes have handed over what came before the engine (Path.Holding);
		// checked after the ranges are read, since a lane can begin holding while they are.
		return
	}
	pt := wire.AppendFeedback(r.fbBuf[:0], fb, wire.MaxDatagramV6-wire.Overhead)
	k := int(r.fbSent.Add(1))
	for _, i := range []int{k % Lanes, (k + 2) % Lanes} {
		if err := r.path.SendOne(i, wire.TypeFeedback, pt); err == nil {
			r.feedback.Add(1)
		}
	}
}

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats {
	st := ReceiverStats{Feedback: r.feedback.Load(), Held: r.held.Load(), FECRebuilt: r.fecRebuilt.Load(), FECRepaired: r.fecRepaired.Load(),
		FECChunks: r.fecChunks.Load()}
	r.mu.Lock()
	st.MaxBlocks = uint64(r.maxRing)
	r.mu.Unlock()
	for i := range r.counts {
		c := &r.counts[i]
		st.Parity += c.parity.Load()
		st.FECLate += c.late.Load()
		st.Datagrams += c.datagrams.Load()
		st.Duplicates += c.duplicates.Load()
		st.Outside += c.outside.Load()
		st.Invalid += c.invalid.Load()
	}
	return st
}

func init() {
	if min(wire.ChunkSize, wire.JumboChunkSize)*0xFFFF < fcopy.BlockSize {
		panic(fmt.Sprint("block too large for 16-bit chunk numbers"))
	}
}

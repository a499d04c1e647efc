package session

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/wire"
)

// chunksIn is the number of data chunks of a block of n bytes.
func chunksIn(n int) int { return (n + wire.ChunkSize - 1) / wire.ChunkSize }

// rxBlock is a block being reassembled.
type rxBlock struct {
	id       uint32
	data     []byte
	nChunks  int // data chunks; the hash travels as chunk index nChunks
	have     []uint64
	nHave    int
	hash     [32]byte
	hashSeen bool
	complete bool
}

func (b *rxBlock) mark(c int) bool {
	w, bit := c/64, uint64(1)<<(c%64)
	if b.have[w]&bit != 0 {
		return false
	}
	b.have[w] |= bit
	b.nHave++
	return true
}

// FeedbackInterval is how often the receiver reports.
const FeedbackInterval = 5 * time.Millisecond

// ReceiverStats are the receiving side's counters.
type ReceiverStats struct {
	Datagrams  uint64 // authenticated data datagrams
	Duplicates uint64 // chunks that had already arrived
	Outside    uint64 // chunks for blocks outside the window
	Feedback   uint64 // feedback datagrams sent
}

// Receiver reassembles blocks from data datagrams, hands them in order to a copy.Writer and
// reports progress to the sender in feedback datagrams.
type Receiver struct {
	path    *Path
	plan    *fcopy.Plan
	w       *fcopy.Writer
	window  uint32
	fbEvery time.Duration

	mu      sync.Mutex
	base    uint32 // blocks below base are written; memory is held for [base, base+window)
	deliver uint32 // next block to hand to the writer
	ring    []*rxBlock
	free    [][]byte
	toWrite chan *rxBlock
	failed  error
	stats   ReceiverStats

	fbSent  atomic.Uint64
	written atomic.Int64
}

// Progress returns the bytes verified and written so far.
func (r *Receiver) Progress() *Progress { return &Progress{Bytes: r.written.Load()} }

// NewReceiver prepares a receiver that accepts blocks up to window ahead of the writer.
func NewReceiver(p *Path, plan *fcopy.Plan, w *fcopy.Writer, window int) *Receiver {
	r := &Receiver{path: p, plan: plan, w: w, window: uint32(window), fbEvery: FeedbackInterval,
		ring: make([]*rxBlock, window), toWrite: make(chan *rxBlock, window+1)}
	return r
}

// Datagram implements Handler.
func (r *Receiver) Datagram(_ int, h wire.Header, pt []byte, _ time.Time) {
	if h.Type != wire.TypeData {
		return
	}
	f, payload, err := wire.ParseDataFrame(pt)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Datagrams++
	if f.Block < r.deliver || f.Block >= r.base+r.window || f.Block >= r.plan.NumBlocks() {
		if f.Block >= r.base+r.window {
			r.stats.Outside++
		} else {
			r.stats.Duplicates++
		}
		return
	}
	b := r.ring[f.Block%r.window]
	if b == nil || b.id != f.Block {
		n := r.plan.BlockLen(f.Block)
		b = &rxBlock{id: f.Block, nChunks: chunksIn(n)}
		b.have = make([]uint64, (b.nChunks+1+63)/64)
		if k := len(r.free); k > 0 {
			b.data = r.free[k-1][:n]
			r.free = r.free[:k-1]
		} else {
			b.data = make([]byte, n, fcopy.BlockSize)
		}
		r.ring[f.Block%r.window] = b
	}
	if b.complete {
		r.stats.Duplicates++
		return
	}
	c := int(f.Chunk)
	switch f.Kind {
	case wire.KindChunk:
		off := c * wire.ChunkSize
		if c >= b.nChunks || off+len(payload) != min(off+wire.ChunkSize, len(b.data)) {
			return // malformed: sealed by our peer, so a bug; ignore rather than corrupt
		}
		if !b.mark(c) {
			r.stats.Duplicates++
			return
		}
		copy(b.data[off:], payload)
	case wire.KindHash:
		if c != b.nChunks || len(payload) != 32 {
			return
		}
		if !b.mark(c) {
			r.stats.Duplicates++
			return
		}
		copy(b.hash[:], payload)
		b.hashSeen = true
	default:
		return
	}
	if b.nHave == b.nChunks+1 {
		b.complete = true
		for {
			nb := r.ring[r.deliver%r.window]
			if r.deliver >= r.plan.NumBlocks() || nb == nil || nb.id != r.deliver || !nb.complete {
				break
			}
			r.toWrite <- nb // capacity window+1: never blocks
			r.deliver++
		}
	}
}

// Run writes blocks as they complete and sends feedback until every file is written and
// verified, ctx ends, or a write/verification error occurs.
func (r *Receiver) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.path.SetHandler(r)
	fbDone := make(chan struct{})
	go func() {
		defer close(fbDone)
		r.feedbackLoop(ctx)
	}()
	err := r.writeLoop(ctx)
	if err == nil {
		// Tell the sender that everything is in, a few times in case feedback is lost; the
		// control channel's verdict is the authoritative end.
		for i := 0; i < 3; i++ {
			r.sendFeedback(time.Now())
			time.Sleep(r.fbEvery)
		}
	}
	cancel()
	<-fbDone
	return err
}

func (r *Receiver) writeLoop(ctx context.Context) error {
	total := r.plan.NumBlocks()
	for n := uint32(0); n < total; n++ {
		var b *rxBlock
		select {
		case b = <-r.toWrite:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := r.w.WriteBlock(ctx, b.id, b.data, b.hash); err != nil {
			return err
		}
		r.written.Add(int64(len(b.data)))
		r.mu.Lock()
		r.free = append(r.free, b.data)
		r.ring[b.id%r.window] = nil
		r.base = b.id + 1
		r.mu.Unlock()
	}
	if err := r.w.Finish(ctx); err != nil {
		return err
	}
	return nil
}

func (r *Receiver) feedbackLoop(ctx context.Context) {
	t := time.NewTicker(r.fbEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.sendFeedback(now)
			if debug && r.fbSent.Load()%200 == 0 {
				r.mu.Lock()
				fmt.Fprintf(os.Stderr, "receiver: base=%d deliver=%d stats=%+v peers=%v auth=%d replays=%d\n", r.base, r.deliver, r.stats,
					r.path.peers[0].Load(), r.path.AuthFailures.Load(), r.path.Replays.Load())
				r.mu.Unlock()
			}
		}
	}
}

// sendFeedback reports every lane's received ranges and the window, on two lanes (rotating) so
// that the loss of one feedback datagram does not stall the sender.
func (r *Receiver) sendFeedback(now time.Time) {
	fb := wire.Feedback{Lanes: make([]wire.LaneAck, Lanes)}
	r.mu.Lock()
	fb.Cursor, fb.Window = r.base, r.window
	r.mu.Unlock()
	for i := range fb.Lanes {
		rx := &r.path.rx[i]
		rx.mu.Lock()
		if l, ok := rx.win.Largest(); ok {
			fb.Lanes[i].Largest = l
			fb.Lanes[i].AckDelay = uint32(now.Sub(rx.lastAt) / time.Microsecond)
			fb.Lanes[i].Ranges = rx.win.AppendRanges(nil, 200)
		}
		rx.mu.Unlock()
	}
	pt := wire.AppendFeedback(make([]byte, 0, wire.MaxDatagramV6), &fb, wire.MaxDatagramV6-wire.Overhead)
	k := int(r.fbSent.Add(1))
	for _, i := range []int{k % Lanes, (k + 2) % Lanes} {
		if err := r.path.SendOne(i, wire.TypeFeedback, pt); err == nil {
			r.mu.Lock()
			r.stats.Feedback++
			r.mu.Unlock()
		}
	}
}

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func init() {
	if wire.ChunkSize*0xFFFF < fcopy.BlockSize {
		panic(fmt.Sprint("block too large for 16-bit chunk numbers"))
	}
}

package session

import (
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
)

// txGroup is the sender's view of one FEC group: k data chunks of a block, the parity planned for
// it when its first chunk went out, and which of its shards the receiver is known to hold.
//
// Shards are counted, not named: any k distinct shards rebuild the group, so the group needs
// nothing more once acked() reaches k, and otherwise needs k - acked - (shards still in flight or
// queued) fresh ones.
type txGroup struct {
	k          uint16 // data shards
	m          uint8  // parity planned (FecM, fixed at the group's first chunk)
	next       uint8  // next parity index never sent
	dataAcked  uint16 // distinct data chunks acknowledged
	parAcked   uint64 // parity indices acknowledged
	inflight   uint16 // shards sent whose fate is unknown
	pending    uint16 // shards queued (retx or parq) but not yet sent
	done       bool   // acked() >= k: the receiver holds or rebuilds the whole group
	queued     bool   // in Sender.evalq
	repaired   bool   // has had a repair (lastRepair is valid)
	tail       bool   // planned as a tail group
	urgent     bool   // a shard sent before the last repair was lost since
	lastRepair int64  // ns since the sender's start
	// par holds a wide group's parity rows (fec.MaxParity of them, parLen bytes each, one every
	// shard bytes) from when the first is needed until the group is done: the Leopard code
	// computes them all in one pass.
	par    []byte
	parLen int
}

// shardFor is the FEC shard size of a session of chunk-byte chunks: a parity row is a chunk and
// the 2-byte length prefix.
func shardFor(chunk int) int {
	if chunk == wire.JumboChunkSize {
		return fec.JumboShardSize
	}
	return fec.ShardSize
}

// wideParPools hold the parity rows of wide groups of standard and of large chunks.
var wideParPools = [2]sync.Pool{{New: func() any { return new([fec.MaxParity * fec.ShardSize]byte) }},
	{New: func() any { return new([fec.MaxParity * fec.JumboShardSize]byte) }}}

// getParity returns pooled room for a wide group's parity rows of shard bytes each.
func getParity(shard int) []byte {
	if shard == fec.JumboShardSize {
		return wideParPools[1].Get().(*[fec.MaxParity * fec.JumboShardSize]byte)[:]
	}
	return wideParPools[0].Get().(*[fec.MaxParity * fec.ShardSize]byte)[:]
}

// dropParity returns a wide group's parity rows to their pool.
func (g *txGroup) dropParity() {
	switch len(g.par) {
	case 0:
		return
	case fec.MaxParity * fec.JumboShardSize:
		wideParPools[1].Put((*[fec.MaxParity * fec.JumboShardSize]byte)(g.par))
	default:
		wideParPools[0].Put((*[fec.MaxParity * fec.ShardSize]byte)(g.par))
	}
	g.par = nil
}

func (g *txGroup) acked() int { return int(g.dataAcked) + bits.OnesCount64(g.parAcked) }

// lossEstimate is a measure of the path's random loss: cc.Controller's.
type lossEstimate interface{ RandomLoss() float64 }

// fecLoss is the random-loss rate parity is planned for: the rate controller's measure of it
// (s.loss), never its congestion signals (parity sent into a full queue only adds to the queue).
func (s *Sender) fecLoss() float64 { return s.loss.RandomLoss() }

// startChunk runs when chunk c of b is about to be sent for the first time: the group's first
// chunk fixes its parity count, and its last queues that parity right behind it.
func (s *Sender) startChunk(b *txBlock, c int) {
	g := c / b.k
	gr := &b.groups[g]
	first := g * b.k
	if c == first {
		gr.m, gr.tail = s.planParity(int(gr.k))
		s.stats.Groups++
	}
	if c == first+int(gr.k)-1 && gr.m > 0 {
		// Fresh indices: a large group can already have had a repair (parity from index 0) for a
		// loss detected while its later chunks were still unsent, and a second copy of an index
		// would be counted as a second shard.
		due := s.tnow + int64(parityDelay)
		n := 0
		for ; n < int(gr.m) && int(gr.next) < fec.MaxParity; n++ {
			gr.next++
			s.parq.push(chunkRef{block: b.id, chunk: uint16(first), par: gr.next, due: due})
		}
		gr.pending += uint16(n)
	}
}

// parityDelay holds a group's parity back a little behind its data. Each lane's batches are sealed
// and sent by their own goroutine and read by their own goroutine at the receiver, so datagrams of
// one pacing round (a millisecond or two) arrive in no fixed order across lanes: parity sent right
// behind its data would often overtake some of it, and the receiver would rebuild chunks that are
// still on their way. A couple of milliseconds later it arrives after them, and the group's shards
// are spread over a little more time against short bursts, at no cost in throughput (parity is
// paced like data) and ~2 ms at the very end of a transfer.
const parityDelay = 2 * time.Millisecond

// tailFactor sizes the tail: groups whose first chunk leaves when at most tailFactor·BDP of the
// transfer remains unsent get tail parity. A group that fails needs a repair round trip after its
// loss is detected (about one RTT plus the reorder window after it was sent); in the body that
// repair overlaps later data, but a group sent within the last RTT or so before the sender runs
// out of data delays the verified end by that round trip. Two BDPs cover the RTT, the reorder
// window and a queue that inflates srtt.
const tailFactor = 2

// inTail reports whether what is left of the transfer to send for the first time is within its
// tail: at most tailFactor·BDP.
func (s *Sender) inTail() bool {
	remaining := float64(s.plan.TotalBytes() - s.firstSent)
	return remaining <= tailFactor*s.cc.PacingRate()/8*s.cc.SRTT().Seconds()
}

// planParity returns the parity count of a group of k data shards whose first chunk is about to be
// sent, and whether the group is in the tail.
//
// Auto mode makes each block four groups of about 187 chunks (fec.GroupSize), so parity is cheap:
// at 3 % loss a 187-chunk group needs 8 or 9 parity shards (8.6 on average, 4.6 %: fec.BodyMix) to
// complete without a repair round trip nine times in ten, where groups of 10 would need 20 %. The parity replaces most of the re-sending the losses would
// otherwise cause, so the body's parity costs little more than the loss itself, and blocks
// complete about one round trip sooner, which keeps the receiver's window moving. Tail groups
// get the tail count, since a failure there delays the end of the transfer by a round trip.
func (s *Sender) planParity(k int) (m uint8, tail bool) {
	tail = s.inTail()
	switch s.fec.Kind {
	case fec.ModeFixed:
		return uint8(s.fec.M), tail
	case fec.ModeOff:
		return 0, tail
	}
	loss := s.fecLoss()
	// Plan keeps one tail parity shard at a measured loss of 0. Spend it only once this transfer
	// has actually lost something: a path that has not lost a datagram gets no parity at all.
	if loss == 0 && s.stats.Lost == 0 {
		return 0, tail
	}
	if loss != s.planLoss {
		s.planLoss = loss
		clear(s.planTab[:])
	}
	e := &s.planTab[k]
	if !e.ok {
		body, tail := fec.Plan(loss, k)
		e.ok, e.body, e.tail, e.fewer = true, uint8(body), uint8(tail), fec.BodyMix(loss, k, body)
	}
	if tail && float64(e.tail-e.body) <= maxTailShare*float64(k) {
		return e.tail, true
	}
	// Body groups fail BodyTarget of the time on average (fec.BodyMix): the share fewer of them,
	// spread evenly by carrying the remainder from group to group, get one shard less.
	if e.fewer > 0 {
		s.planMix += e.fewer
		if s.planMix >= 1 {
			s.planMix--
			return e.body - 1, tail
		}
	}
	// A small group's tail parity costs more than the round trip it would save: a 4 KiB file's
	// group of 3 chunks needs 1 shard (33 %) at 1 % loss, and the tail (2 BDP) of a tree of small
	// files holds thousands of such groups, of which a few still fail, so the end waits for a
	// repair anyway (10,000 files of 4 KiB at 400 Mbit/s, 140 ms, 1 %: a third of the tree was
	// tail, and the wire carried 1.16 times the files' bytes). Such a group gets the body's
	// parity; its repairs are still over-provisioned as a tail group's (planRepairs).
	return e.body, tail
}

// tailHash queues copies of block b's hash, about to be sent for the first time, where the
// transfer's end is near (its last tailFactor·BDP, as tail parity) and the path loses datagrams.
// The hash is outside every group, so no parity rebuilds it: at 3 % loss the last round trip of
// an 11.8 Gbit/s path carries some 200 blocks, and the hash of about six of them is lost, each
// holding the end a repair round trip. Copies follow parityDelay behind it, enough of them that
// all are lost at most tailHashLoss of the time. A copy whose hash was acknowledged in the
// meantime is not sent (queued).
func (s *Sender) tailHash(b *txBlock) {
	if s.fecK == 0 || s.fec.Kind == fec.ModeOff || s.path.OnStreams() {
		return
	}
	loss := s.fecLoss()
	if loss == 0 && s.stats.Lost == 0 {
		return
	}
	if !s.inTail() {
		return
	}
	p := max(loss, 0.01) // lost something, yet no random-loss rate measured: take 1 %
	all := p             // the chance that every copy queued so far is lost
	for n := 1; n < maxHashCopies && all > tailHashLoss; n++ {
		s.parq.push(chunkRef{block: b.id, chunk: uint16(b.nChunks), due: s.tnow + int64(parityDelay)})
		all *= p
	}
}

// tailHashLoss is how often all the copies of a tail block's hash may be lost (tailHash), and
// maxHashCopies the most copies sent in all.
const (
	tailHashLoss  = 1e-4
	maxHashCopies = 4
)

// maxTailShare is the most extra parity, as a share of a group's data shards, that tail
// protection may add to a group (planParity).
const maxTailShare = 0.1

// planRepairs sizes a repair for every group in evalq that lost a shard it still needs: fresh
// parity indices (any k distinct shards rebuild the group), RepairCount(deficit, loss) of them so
// that the repair survives the loss rate, or the missing chunks themselves once the group has
// used all fec.MaxParity indices. Shards in flight or queued count as on their way, so a group is
// repaired once per loss that leaves it short; and a group whose own repair shards are lost is
// repaired again no sooner than one smoothed RTT after the last repair.
func (s *Sender) planRepairs(now time.Time) {
	tnow := int64(now.Sub(s.start))
	loss := s.fecLoss()
	keep := s.evalq[:0]
	for _, r := range s.evalq {
		b := s.blocks[r.block]
		if b == nil {
			continue
		}
		gr := &b.groups[r.chunk]
		first := int(r.chunk) * b.k
		end := first + int(gr.k)
		unsent := max(0, end-max(first, b.next))
		if unsent > 0 {
			unsent += int(gr.m) // its planned parity follows its last chunk
		}
		deficit := int(gr.k) - gr.acked() - int(gr.inflight) - int(gr.pending) - unsent
		if gr.done || deficit <= 0 {
			gr.queued = false
			continue
		}
		if gr.repaired && !gr.urgent && tnow-gr.lastRepair < int64(s.cc.SRTT()) {
			keep = append(keep, r) // look again on a later round
			continue
		}
		// Over-provision a repair (RepairCount: ceil(d/(1-loss)), so 2 for d=1 at any loss) only
		// where a lost repair would cost time: tail groups, once no new data is left to send, and
		// a group repaired before (its block has held the window's start for two round trips or
		// more, and each further repair adds one). In the body a first repair that is lost is
		// repaired again while data flows; sending exactly the deficit keeps repair traffic equal
		// to the loss, as selective re-sending does.
		n := deficit
		if gr.tail || gr.repaired || s.inDone && len(s.sendable) == 0 {
			n = fec.RepairCount(deficit, loss)
		}
		for ; n > 0 && int(gr.next) < fec.MaxParity; n-- {
			gr.next++
			s.retx.push(chunkRef{block: b.id, chunk: uint16(first), par: gr.next})
			gr.pending++
		}
		for c := first; n > 0 && c < end; c++ {
			if !b.isAcked(c) {
				s.retx.push(chunkRef{block: b.id, chunk: uint16(c)})
				gr.pending++
				n--
			}
		}
		if !gr.repaired {
			s.stats.RepairGroups++
		}
		gr.queued, gr.repaired, gr.urgent, gr.lastRepair = false, true, false, tnow
	}
	clear(s.evalq[len(keep):])
	s.evalq = keep
}

// encodeParity computes parity index par of the group gr of b starting at chunk first into dst's
// spare capacity (the batch buffer, right after the frame header) and returns it. A narrow group
// codes just that index; a wide one codes all its parity once and keeps it until b is released.
func (s *Sender) encodeParity(b *txBlock, gr *txGroup, first, par int, dst []byte) []byte {
	k, z := int(gr.k), s.shard
	if fec.Wide(k) && gr.par != nil {
		return append(dst, gr.par[par*z:par*z+gr.parLen]...)
	}
	data := s.shards[:k]
	for i := range data {
		off := (first + i) * s.chunk
		data[i] = b.data[off:min(off+s.chunk, len(b.data))]
	}
	defer clear(data)
	if fec.Wide(k) {
		gr.par = getParity(z)
		all := s.parAll[:]
		for j := range all {
			all[j] = gr.par[j*z : j*z : (j+1)*z]
		}
		if err := s.enc.Encode(data, 0, all); err != nil {
			panic(fmt.Sprintf("session: parity of a %d-chunk group: %v", k, err))
		}
		gr.parLen = len(all[0])
		clear(all)
		return append(dst, gr.par[par*z:par*z+gr.parLen]...)
	}
	s.par1[0] = dst
	if err := s.enc.Encode(data, par, s.par1[:]); err != nil {
		// Every argument is the sender's own (k <= MaxK, par < MaxParity, chunks <= MaxData).
		panic(fmt.Sprintf("session: parity %d of a %d-chunk group: %v", par, k, err))
	}
	out := s.par1[0]
	s.par1[0] = nil
	return out
}

// rebuildGrace is how long the block at the receiver's cursor may stay unwritten after every one
// of its groups was acknowledged complete (k shards each) and its hash arrived, before the sender
// stops trusting the rebuild and re-sends the chunks never acknowledged. A correct receiver
// rebuilds as the last shard arrives, so this is only a safety net against a hung transfer.
const rebuildGrace = time.Second

// checkRebuilt applies rebuildGrace to the block at the cursor, and makes sure each of its
// unfinished groups has something on its way or is up for a repair: the block at the cursor
// holds back the receiver's window, so a group there must never wait on bookkeeping alone.
func (s *Sender) checkRebuilt(now time.Time) {
	b := s.blocks[s.cursor]
	if b == nil || b.k == 0 {
		return
	}
	if b.groupsDone < len(b.groups) {
		for g := range b.groups {
			gr := &b.groups[g]
			if !gr.done && !gr.queued && gr.inflight == 0 && gr.pending == 0 && b.next > b.nChunks {
				gr.queued = true
				s.evalq = append(s.evalq, chunkRef{block: b.id, chunk: uint16(g)})
			}
		}
		return
	}
	if !b.isAcked(b.nChunks) {
		return
	}
	if s.stallID != b.id || s.stallSince.IsZero() {
		s.stallID, s.stallSince = b.id, now
		return
	}
	if now.Sub(s.stallSince) < rebuildGrace+4*s.cc.SRTT() {
		return
	}
	s.stallSince = now
	for g := range b.groups {
		gr := &b.groups[g]
		for c := g * b.k; c < g*b.k+int(gr.k); c++ {
			if b.isAcked(c) {
				continue
			}
			if gr.done {
				gr.done = false
				b.groupsDone--
			}
			s.retx.push(chunkRef{block: b.id, chunk: uint16(c)})
			gr.pending++
		}
	}
	if s.path.debugging() {
		s.path.debugf("sender: block %d not written %s after FEC completed it; re-sending its missing chunks", b.id, rebuildGrace)
	}
}

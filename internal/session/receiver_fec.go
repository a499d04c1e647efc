package session

import (
	"sync"
	"sync/atomic"

	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
)

// rxFEC is a block's FEC state, created by its first parity datagram. Groups are keyed by their
// first chunk. A group is opened (a fec.Group from the pool) only when parity arrives while some
// of its data is missing, and it holds only that parity (at most 64 shards, 90 KiB) while it
// waits: the group's data is in the block already. Once the chunks placed and the parity held
// make k, the placed chunks are added (a transient copy of up to a block), the missing ones are
// rebuilt into the block and the group is released. (Copying every placed chunk into a group when
// it opened kept a second copy of most blocks in the window: 46 MiB beyond the FEC tables at
// 700 Mbit/s and 60 ms.) Whatever is still open when the block completes is released then, and
// a block's groups are only those its sender makes (groupOK), each holding less parity than its
// k, so FEC memory is bounded by the window: less than a block of parity per block, and an open
// group (about 4 KiB narrow, 15 KiB wide) holds at least one shard.
type rxFEC struct {
	mu     sync.Mutex
	closed bool            // the block is complete: no more groups
	groups []*fec.Group    // by first chunk; nil: none open
	done   []uint64        // by first chunk: finished (rebuilt, or found complete)
	open   []atomic.Uint64 // by first chunk: a group is open (read by the data path without mu)
	built  []atomic.Uint64 // by chunk: rebuilt from parity
}

// wasRebuilt reports whether chunk c was rebuilt from parity.
func (fx *rxFEC) wasRebuilt(c int) bool { return fx.built[c/64].Load()&bit64(c) != 0 }

// Groups are recycled in two pools, narrow and wide, so that a small group never keeps a wide
// one's slices (some 15 KiB for k+64 shards, against 4 KiB for a narrow group's): a block split
// into groups of 2 chunks may have 373 of them open, each holding one parity shard of 1.4 KiB.
var groupPools = [2]sync.Pool{{New: func() any { return new(fec.Group) }}, {New: func() any { return new(fec.Group) }}}

func groupPool(k int) *sync.Pool {
	if fec.Wide(k) {
		return &groupPools[1]
	}
	return &groupPools[0]
}

// putGroup releases g's shards and puts it back in its pool.
func putGroup(g *fec.Group) {
	g.Release()
	groupPool(g.K()).Put(g)
}

func bit64(i int) uint64 { return 1 << (i % 64) }

func (fx *rxFEC) isOpen(first int) bool { return fx.open[first/64].Load()&bit64(first) != 0 }

// fecState returns b's FEC state, creating it.
func (b *rxBlock) fecState() *rxFEC {
	if fx := b.fec.Load(); fx != nil {
		return fx
	}
	w := (b.nChunks + 63) / 64
	fx := &rxFEC{groups: make([]*fec.Group, b.nChunks), done: make([]uint64, w), open: make([]atomic.Uint64, w),
		built: make([]atomic.Uint64, w)}
	if b.fec.CompareAndSwap(nil, fx) {
		return fx
	}
	return b.fec.Load()
}

// groupOK reports whether the group of k chunks from chunk first is one the sender makes of b:
// its chunks split in order into groups of K, the last one shorter (Sender.addBlock), with K the
// same for the whole block. K is fixed by the first parity datagram that tells it (a group that
// is not the block's last has k = K; the last group, if it comes first, fixes only where the
// last group starts). A block so has at most ceil(nChunks/K) groups, none overlapping; a group
// holds fewer parity shards than its k until it is rebuilt, so a block's groups hold less than a
// block of parity. (Groups starting at any chunk let an authenticated sender that withholds the
// data make the receiver keep 64 shards of 682 overlapping groups of 65: 62 MB per block.)
func (b *rxBlock) groupOK(first, k int) bool {
	n := b.nChunks
	if k < 1 || k > fec.MaxK || first < 0 || first+k > n {
		return false
	}
	for {
		s := b.shape.Load()
		if K := s & 0xFFFF; K != 0 { // 32-bit division: a parity datagram's only one
			return uint32(first)%K == 0 && uint32(k) == min(K, uint32(n-first))
		}
		last := int(s >> 16) // 1 + the last group's first chunk (0: not known)
		var next uint32
		switch {
		case first+k < n: // not the last group: k is the block's K
			if first%k != 0 || last != 0 && last-1 != (n-1)/k*k {
				return false
			}
			next = uint32(k)
		case last != 0:
			return first == last-1
		case first == 0: // the block's one group
			next = uint32(k)
		case first < k: // the last group starts at a multiple of K >= k
			return false
		default:
			next = uint32(first+1) << 16
		}
		if b.shape.CompareAndSwap(s, next) {
			return true
		}
	}
}

// addParity takes a parity shard of the group of f.FecK chunks starting at chunk f.Chunk. It
// reports false for a shard that cannot belong to the block (its group's shape, index or length).
func (r *Receiver) addParity(b *rxBlock, f wire.DataFrame, payload []byte) bool {
	k, first, idx := int(f.FecK), int(f.Chunk), int(f.FecIdx)
	if idx < k || idx >= k+fec.MaxParity || int(f.FecM) > fec.MaxParity || !b.groupOK(first, k) {
		return false
	}
	if b.allPlaced(first, first+k) {
		return true // groups that never miss a chunk cost nothing
	}
	fx := b.fecState()
	fx.mu.Lock()
	if fx.closed || fx.done[first/64]&bit64(first) != 0 {
		fx.mu.Unlock()
		return true
	}
	id := fec.ShardID{K: k, M: int(f.FecM), Index: idx}
	var err error
	g := fx.groups[first]
	if g == nil {
		g = groupPool(k).Get().(*fec.Group)
		if err = g.Reset(k, id.M, shardFor(b.chunk)); err == nil {
			_, err = g.Add(id, payload)
		}
		if err != nil {
			// A malformed shard opens nothing: a group is open only while it holds parity.
			putGroup(g)
			fx.mu.Unlock()
			return false
		}
		fx.groups[first] = g
		// Open before counting placed chunks: a chunk placed concurrently is either counted
		// here or looks at the group itself (addData), possibly both.
		fx.open[first/64].Or(bit64(first))
	} else {
		_, err = g.Add(id, payload) // a malformed shard is rejected and changes nothing
	}
	n := r.tryGroup(b, fx, first, g)
	fx.mu.Unlock()
	if n > 0 {
		r.count(b, n)
	}
	return err == nil
}

// tryGroup runs with fx.mu held: if the chunks placed in g's range and the parity g holds make
// k, it adds the placed chunks to g and finishes it (finishGroup), returning the chunks rebuilt.
func (r *Receiver) tryGroup(b *rxBlock, fx *rxFEC, first int, g *fec.Group) int {
	k := g.K()
	if b.countPlaced(first, first+k)+g.Have() < k {
		return 0
	}
	id := fec.ShardID{K: k, M: g.M()}
	for i := range k {
		if c := first + i; b.isPlaced(c) {
			off := c * b.chunk
			id.Index = i
			g.Add(id, b.data[off:off+b.chunkLen(c)])
		}
	}
	if !g.Done() {
		return 0 // a placed chunk the group refused (a length no parity row holds): wait for re-sends
	}
	return r.finishGroup(b, fx, first, g)
}

// addData offers data chunk c, just placed, to its group if one is open.
func (r *Receiver) addData(b *rxBlock, fx *rxFEC, f wire.DataFrame, c int, payload []byte) {
	k, idx := int(f.FecK), int(f.FecIdx)
	first := c - idx
	if idx >= k || first < 0 || !fx.isOpen(first) {
		return
	}
	fx.mu.Lock()
	n := 0
	if g := fx.groups[first]; g != nil && !fx.closed && g.K() == k {
		n = r.tryGroup(b, fx, first, g)
	}
	fx.mu.Unlock()
	if n > 0 {
		r.count(b, n)
	}
}

// finishGroup runs with fx.mu held once g holds k distinct shards: it rebuilds the chunks not yet
// placed, places them, and releases g. It returns how many chunks it placed; the caller counts
// them in after unlocking (counting may complete the block, which closes fx).
func (r *Receiver) finishGroup(b *rxBlock, fx *rxFEC, first int, g *fec.Group) int {
	k := g.K()
	placed := 0
	ok := true
	for c := first; c < first+k; c++ {
		if b.isPlaced(c) {
			continue
		}
		out, err := g.Reconstruct()
		if err != nil {
			// Only a bug can get here (every shard is authenticated). Leave the group unfinished:
			// later shards open a new one, and the sender re-sends the chunks of a block that
			// stays unwritten.
			ok = false
			if r.path.debugging() {
				r.path.debugf("receiver: block %d group %d: %v", b.id, first, err)
			}
			break
		}
		for i, d := range out {
			c := first + i
			if b.isPlaced(c) || len(d) != b.chunkLen(c) || !b.claimAuthentic(c) {
				continue // already here
			}
			copy(b.data[c*b.chunk:], d)
			fx.built[c/64].Or(bit64(c))
			b.markPlaced(c)
			b.hashPieces(c)
			placed++
		}
		break
	}
	if placed > 0 {
		// Parity indices below FecM went out with the group; higher ones are repairs.
		repair := false
		for j := g.M(); j < fec.MaxParity && !repair; j++ {
			repair = g.Has(k + j)
		}
		if repair {
			r.fecRepaired.Add(1)
		} else {
			r.fecRebuilt.Add(1)
		}
		r.fecChunks.Add(uint64(placed))
	}
	fx.groups[first] = nil
	fx.open[first/64].And(^bit64(first))
	if ok {
		fx.done[first/64] |= bit64(first)
	}
	putGroup(g)
	return placed
}

// closeFEC releases b's open groups once b is complete.
func (r *Receiver) closeFEC(b *rxBlock) {
	fx := b.fec.Load()
	if fx == nil {
		return
	}
	fx.mu.Lock()
	fx.closed = true
	for i, g := range fx.groups {
		if g != nil {
			putGroup(g)
			fx.groups[i] = nil
		}
	}
	fx.mu.Unlock()
}

package fec

import (
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// ShardID is what the session header says about a shard: its group's shape (K data shards, M
// parity shards planned up front) and the shard's index in the group: 0..K-1 for data,
// K+i for parity i (0 <= i < MaxParity).
//
// Parity i is the same bytes however many parity shards the sender emits, so a repair is just
// fresh indices beyond those already sent, and any K distinct shards rebuild the group: narrow
// groups (K <= MaxNarrowK) use a systematic Cauchy matrix over GF(2^8), wide ones reedsolomon's
// Leopard code over GF(2^8) with MaxParity parity rows; both are MDS.
//
// Data shards travel as they are (file bytes, at most MaxData each, WideMaxData in a wide group,
// lengths may differ). Parity is computed over rows [len u16 BE | data | zero pad], all ParityLen
// bytes long, so parity fits in ShardSize and a rebuilt data shard carries its own exact length:
// the receiver needs no length information beyond the shards themselves.
type ShardID struct {
	K, M, Index int
}

// bufPools hold shard buffers of the two sizes (ShardSize, JumboShardSize); a pointer to an array
// goes through sync.Pool without allocating.
var bufPools = [2]sync.Pool{{New: func() any { return new([ShardSize]byte) }}, {New: func() any { return new([JumboShardSize]byte) }}}

// getBuf returns a pooled buffer of size bytes (ShardSize or JumboShardSize), its full length.
func getBuf(size int) []byte {
	if size == JumboShardSize {
		return bufPools[1].Get().(*[JumboShardSize]byte)[:]
	}
	return bufPools[0].Get().(*[ShardSize]byte)[:]
}

// putBuf returns a buffer from getBuf to its pool.
func putBuf(b []byte) {
	if len(b) == JumboShardSize {
		bufPools[1].Put((*[JumboShardSize]byte)(b))
	} else {
		bufPools[0].Put((*[ShardSize]byte)(b))
	}
}

// Group assembles one group on the receiver. Shards may be added in any order; as soon as any k
// distinct ones are held the group is done and Reconstruct returns its k data shards with their
// exact lengths. A Group copies what it keeps into pooled buffers, so the caller may reuse a
// payload as soon as Add returns. Not safe for concurrent use.
//
// A Group checks structure (shape, index range, lengths, the form of rebuilt rows) and never
// panics on bad input, but it is not an integrity check: a shard whose header and length are
// plausible but whose bytes are wrong, or whose index was swapped for another valid one, yields
// wrong data. The session's AEAD authenticates every header and payload, and the per-block
// BLAKE3 digest is the end-to-end check.
type Group struct {
	k, m     int
	shard    int // the largest shard: ShardSize or JumboShardSize
	rowLen   int // length of the group's parity shards; 0 until one is held
	maxData  int // longest data shard held
	have     int // distinct shards held, at most k
	dataHave int
	top      int // 1 + highest parity index held
	failed   error
	ready    bool // out is valid

	// Sized for k on Reset; a recycled Group keeps its capacity.
	seen  []uint64 // indices held, 0..k+MaxParity-1
	slot  []uint16
	size  []uint16
	buf   [][]byte // slot s holds shard slot[s] (a shard-sized buffer); data at [lenPrefix:], parity at [0:]
	spare [][]byte // rows rebuilt for missing data shard i

	shards [][]byte // k+MaxParity
	out    [][]byte // k
}

// NewGroup returns an empty group of k data shards (1..MaxK) and m planned parity shards
// (0..MaxParity), whose shards are at most shard bytes (ShardSize, or JumboShardSize in a
// session of large datagrams).
func NewGroup(k, m, shard int) (*Group, error) {
	g := new(Group)
	if err := g.Reset(k, m, shard); err != nil {
		return nil, err
	}
	return g, nil
}

// Reset empties g, returns its buffers to the pool and gives it a new shape, so a receiver can
// recycle Groups. Slices returned by an earlier Reconstruct become invalid.
func (g *Group) Reset(k, m, shard int) error {
	if k < 1 || k > MaxK || m < 0 || m > MaxParity || shard != ShardSize && shard != JumboShardSize {
		return fmt.Errorf("%w: group %d+%d of %d-byte shards, want k 1..%d, m 0..%d, shards of %d or %d bytes",
			ErrArgs, k, m, shard, MaxK, MaxParity, ShardSize, JumboShardSize)
	}
	g.Release()
	g.k, g.m, g.shard = k, m, shard
	n := k + MaxParity
	if cap(g.shards) < n {
		g.seen = make([]uint64, (n+63)/64)
		g.slot = make([]uint16, k)
		g.size = make([]uint16, k)
		g.buf = make([][]byte, k)
		g.spare = make([][]byte, k)
		g.shards = make([][]byte, n)
		g.out = make([][]byte, k)
	}
	g.seen = g.seen[:(n+63)/64]
	g.slot, g.size, g.buf = g.slot[:k], g.size[:k], g.buf[:k]
	g.spare, g.shards, g.out = g.spare[:k], g.shards[:n], g.out[:k]
	return nil
}

// Release returns g's buffers to the pool and leaves it empty with its shape unchanged. Slices
// returned by Reconstruct become invalid.
func (g *Group) Release() {
	for s := range g.have {
		putBuf(g.buf[s])
		g.buf[s] = nil
	}
	for i, b := range g.spare {
		if b != nil {
			putBuf(b)
			g.spare[i] = nil
		}
	}
	clear(g.out)
	g.rowLen, g.maxData, g.have, g.dataHave, g.top = 0, 0, 0, 0, 0
	g.failed, g.ready = nil, false
	clear(g.seen)
}

// K and M return the group's shape.
func (g *Group) K() int { return g.k }
func (g *Group) M() int { return g.m }

// Have returns how many distinct shards are held (at most k).
func (g *Group) Have() int { return g.have }

// Done reports whether k distinct shards are held, so Reconstruct can run.
func (g *Group) Done() bool { return g.have >= g.k }

// Need returns how many more distinct shards the group needs: k - Have, the NAK's "need".
// A repair of RepairCount(Need(), loss) fresh parity shards is expected to finish it.
func (g *Group) Need() int { return max(0, g.k-g.have) }

// Has reports whether the shard with this index is held.
func (g *Group) Has(index int) bool {
	return index >= 0 && index < g.k+MaxParity && g.seen[index>>6]&(1<<(index&63)) != 0
}

// MissingData appends to dst the data indices not held, for a sender that has run out of parity
// indices and re-sends data shards instead.
func (g *Group) MissingData(dst []int) []int {
	for i := range g.k {
		if !g.Has(i) {
			dst = append(dst, i)
		}
	}
	return dst
}

// Add offers one shard. It returns done once k distinct shards are held. A shard whose shape
// differs from the group's (ErrShape), whose index is out of range (ErrIndex), or whose length
// cannot belong to the group (ErrLength: a data shard longer than the group's shard size or its
// parity allows, a parity shard not 2..shard bytes, or not the length of the group's other
// parity) is rejected and changes nothing, duplicate or not. Valid duplicates, and valid shards
// arriving after the group is done, are ignored (nil error). payload is copied; the caller keeps
// it.
func (g *Group) Add(id ShardID, payload []byte) (done bool, err error) {
	done = g.have >= g.k
	if id.K != g.k || id.M != g.m {
		return done, fmt.Errorf("%w: shard says %d+%d, group is %d+%d", ErrShape, id.K, id.M, g.k, g.m)
	}
	if id.Index < 0 || id.Index >= g.k+MaxParity {
		return done, fmt.Errorf("%w: %d, want 0..%d", ErrIndex, id.Index, g.k+MaxParity-1)
	}
	n := len(payload)
	if id.Index < g.k {
		if n > g.maxDataLen() {
			return done, fmt.Errorf("%w: data shard %d of %d bytes, max %d", ErrLength, id.Index, n, g.maxDataLen())
		}
	} else if n < lenPrefix || n > g.shard || g.rowLen != 0 && n != g.rowLen || g.rowLen == 0 && !g.fitsRow(n) {
		return done, fmt.Errorf("%w: parity shard %d of %d bytes (group parity %d, longest data %d)", ErrLength, id.Index, n, g.rowLen, g.maxData)
	}
	if done || g.Has(id.Index) {
		return done, nil
	}

	b := getBuf(g.shard)
	s := g.have
	g.buf[s], g.slot[s], g.size[s] = b, uint16(id.Index), uint16(n)
	if id.Index < g.k {
		copy(b[lenPrefix:], payload)
		g.maxData = max(g.maxData, n)
		g.dataHave++
	} else {
		copy(b, payload)
		g.rowLen = n
		g.top = max(g.top, id.Index-g.k+1)
	}
	g.seen[id.Index>>6] |= 1 << (id.Index & 63)
	g.have++
	return g.have >= g.k, nil
}

// fitsRow reports whether a parity row of n bytes can belong to the group given the data held.
func (g *Group) fitsRow(n int) bool {
	return n-lenPrefix >= g.maxData && (!Wide(g.k) || n%64 == 0)
}

func (g *Group) maxDataLen() int {
	if g.rowLen != 0 {
		return g.rowLen - lenPrefix
	}
	if Wide(g.k) {
		return g.shard/64*64 - lenPrefix // WideMaxData for standard shards
	}
	return g.shard - lenPrefix // MaxData for standard shards
}

// Reconstruct returns the group's k data shards in index order with their exact lengths,
// rebuilding the missing ones from parity. It fails with ErrIncomplete (and returns no data)
// while fewer than k shards are held, and with ErrCorrupt if the rebuilt rows are not
// well-formed (a length beyond the row, non-zero padding, or no shard as long as the row); a
// failed group stays failed. The slices belong to g and stay valid until Reset or Release;
// calling Reconstruct again returns them again.
func (g *Group) Reconstruct() ([][]byte, error) {
	switch {
	case g.failed != nil:
		return nil, g.failed
	case g.ready:
		return g.out, nil
	case g.have < g.k:
		return nil, fmt.Errorf("%w: have %d of %d shards, need %d more", ErrIncomplete, g.have, g.k, g.k-g.have)
	}
	if g.dataHave == g.k {
		for s := range g.have {
			g.out[g.slot[s]] = g.buf[s][lenPrefix : lenPrefix+int(g.size[s])]
		}
		g.ready = true
		return g.out, nil
	}

	rowLen := g.rowLen
	sh := g.shards[:g.k+g.top]
	if Wide(g.k) {
		sh = g.shards // Leopard wants every index, absent ones empty
	}
	clear(sh)
	for s := range g.have {
		b := g.buf[s]
		if i := int(g.slot[s]); i < g.k {
			n := int(g.size[s])
			b[0], b[1] = byte(n>>8), byte(n)
			clear(b[lenPrefix+n : rowLen])
			sh[i] = b[:rowLen]
		} else {
			sh[i] = b[:rowLen]
		}
	}
	for i := range g.k {
		if sh[i] == nil {
			g.spare[i] = getBuf(g.shard)
			sh[i] = g.spare[i][:0]
		}
	}
	var err error
	if Wide(g.k) {
		var rs reedsolomon.Encoder
		if rs, err = wideCodec(g.k); err == nil {
			err = rs.ReconstructData(sh)
		}
	} else {
		var c *codec
		if c, err = getCodec(g.k, 0, g.top); err == nil {
			err = c.rs.ReconstructData(sh)
			noteRebuild(g.k, g.top, c)
		}
	}
	if err != nil {
		clear(sh)
		return nil, g.fail(fmt.Errorf("%w: %v", ErrCorrupt, err))
	}

	longest := 0
	for i := range g.k {
		row := sh[i]
		n := int(row[0])<<8 | int(row[1])
		if n > rowLen-lenPrefix || !allZero(row[lenPrefix+n:]) {
			clear(sh)
			return nil, g.fail(fmt.Errorf("%w: data shard %d: length %d in a %d-byte row", ErrCorrupt, i, n, rowLen))
		}
		longest = max(longest, n)
		g.out[i] = row[lenPrefix : lenPrefix+n]
	}
	clear(sh)
	if rowLen != rowLenFor(g.k, longest) {
		return nil, g.fail(fmt.Errorf("%w: longest data shard %d bytes, parity is %d", ErrCorrupt, longest, rowLen))
	}
	g.ready = true
	return g.out, nil
}

func (g *Group) fail(err error) error {
	clear(g.out)
	g.failed = err
	return err
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

package fec

import (
	"sync"
	"sync/atomic"

	"github.com/klauspost/reedsolomon"
)

// GF(2^8) with reedsolomon's field polynomial x^8+x^4+x^3+x^2+1 (0x11d), generator 2. Only the
// two length bytes of each parity row are computed here; the bulk goes through reedsolomon.
var gfExp, gfLog = func() (exp [510]byte, log [256]byte) {
	x := 1
	for i := range 255 {
		exp[i], exp[i+255] = byte(x), byte(x)
		log[x] = byte(i)
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
	return
}()

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

// cauchyRow returns the coefficients of parity index i in a group of k data shards:
// 1/(x_i + y_c) with x_i = k+i and y_c = c. The x's and y's are distinct and disjoint
// (k+i >= k > c), so every square submatrix of [I; C] is invertible: any k shards decode.
// The row depends only on (k, i), never on how many parity shards exist, which is what lets a
// repair send parity k+i for an i the first transmission never used.
func cauchyRow(k, i int) []byte {
	row := make([]byte, k)
	for c := range row {
		row[c] = reedsolomon.Inv(byte((k + i) ^ c))
	}
	return row
}

// codec is a reedsolomon coder for parity indices [first, first+count) of a k-data-shard group.
type codec struct {
	rs       reedsolomon.Encoder
	rows     [][]byte // the count parity rows, k coefficients each
	rebuilds atomic.Uint32
}

// inversionReset bounds the inversion cache of a decoding codec: reedsolomon keeps one inverted
// matrix per loss pattern forever, and over a long lossy transfer with k=32 the patterns are
// many. After this many rebuilds the codec is replaced by a fresh one.
const inversionReset = 4096

// Codecs are built once per (k, first, count): construction allocates matrices and tables.
// first == 0 (body parity, and every decoder) is the hot case and uses a lock-free table.
var codecs struct {
	zero [MaxNarrowK + 1][MaxParity + 1]atomic.Pointer[codec] // [k][count], first == 0
	mu   sync.Mutex
	m    map[uint32]*codec // first > 0
}

func codecKey(k, first, count int) uint32 { return uint32(k)<<16 | uint32(first)<<8 | uint32(count) }

// getCodec returns the shared codec for parity [first, first+count) of a k-group.
// Callers have checked 1 <= k <= MaxNarrowK, first >= 0, count >= 1, first+count <= MaxParity.
func getCodec(k, first, count int) (*codec, error) {
	if first == 0 {
		if c := codecs.zero[k][count].Load(); c != nil {
			return c, nil
		}
	}
	codecs.mu.Lock()
	defer codecs.mu.Unlock()
	if first == 0 {
		if c := codecs.zero[k][count].Load(); c != nil {
			return c, nil
		}
	} else if c := codecs.m[codecKey(k, first, count)]; c != nil {
		return c, nil
	}
	c, err := newCodec(k, first, count)
	if err != nil {
		return nil, err
	}
	if first == 0 {
		codecs.zero[k][count].Store(c)
	} else {
		if codecs.m == nil {
			codecs.m = make(map[uint32]*codec)
		}
		codecs.m[codecKey(k, first, count)] = c
	}
	return c, nil
}

func newCodec(k, first, count int) (*codec, error) {
	rows := make([][]byte, count)
	for j := range rows {
		rows[j] = cauchyRow(k, first+j)
	}
	// One goroutine: a group is ~14 KB, far below where splitting pays; parallelism comes from
	// lanes, each with its own Encoder.
	rs, err := reedsolomon.New(k, count,
		reedsolomon.WithCustomMatrix(rows),
		reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return nil, err
	}
	return &codec{rs: rs, rows: rows}, nil
}

// noteRebuild counts a reconstruction on a decoding codec (first == 0) and replaces the codec
// once its inversion cache may have grown large. Users of the old one are unaffected.
func noteRebuild(k, count int, c *codec) {
	if c.rebuilds.Add(1) != inversionReset {
		return
	}
	fresh, err := newCodec(k, 0, count)
	if err != nil {
		return
	}
	codecs.zero[k][count].CompareAndSwap(c, fresh)
}

// Wide coders, one per k: Leopard GF(2^8) with MaxParity parity shards. reedsolomon's Leopard
// coder keeps no per-pattern state above 64 shards and is safe for concurrent use. Most groups
// are quarters of whole 1 MiB blocks (one k); others are in the last blocks of files, so the
// cache is simply dropped when it grows past wideCache shapes.
var wide struct {
	mu sync.Mutex
	m  map[int]reedsolomon.Encoder
}

const wideCache = 64

func wideCodec(k int) (reedsolomon.Encoder, error) {
	wide.mu.Lock()
	defer wide.mu.Unlock()
	if rs := wide.m[k]; rs != nil {
		return rs, nil
	}
	rs, err := reedsolomon.New(k, MaxParity, reedsolomon.WithLeopardGF(true), reedsolomon.WithWorkAllocator(&work))
	if err != nil {
		return nil, err
	}
	if wide.m == nil || len(wide.m) >= wideCache {
		wide.m = make(map[int]reedsolomon.Encoder)
	}
	wide.m[k] = rs
	return rs, nil
}

// Warm builds reedsolomon's GF(2^8) Leopard tables (under 1 ms of CPU and 100 KiB, once per
// process) and the coder of whole-block groups; later calls cost a map lookup. A session calls
// it in the background as it starts, so that nothing is built on a lane's hot path.
func Warm() {
	wideCodec(wideWarmK)
	wideCodec(jumboWarmK)
}

// wideWarmK and jumboWarmK are the group sizes Warm prepares: a quarter of a 1 MiB block of
// 1406-byte chunks, and a whole block of 8190-byte ones (large datagrams).
var wideWarmK, jumboWarmK = GroupSize(746), GroupSize(129)

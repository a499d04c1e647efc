package fec

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// testGroup is a group as the sender has it: data shards and parity indices 0..len(parity)-1.
type testGroup struct {
	data   [][]byte
	parity [][]byte
}

// newTestGroup makes k data shards with the given lengths and random contents, and nParity
// parity shards.
func newTestGroup(t testing.TB, rng *rand.Rand, lens []int, nParity int) testGroup {
	t.Helper()
	g := testGroup{data: make([][]byte, len(lens))}
	for i, n := range lens {
		g.data[i] = make([]byte, n)
		for j := range g.data[i] {
			g.data[i][j] = byte(rng.Uint32())
		}
	}
	g.parity = make([][]byte, nParity)
	for j := range g.parity {
		g.parity[j] = make([]byte, 0, JumboShardSize) // ParityLen: at most this
	}
	var e Encoder
	if nParity > 0 {
		if err := e.Encode(g.data, 0, g.parity); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func (tg testGroup) shard(k, index int) []byte {
	if index < k {
		return tg.data[index]
	}
	return tg.parity[index-k]
}

// lengthSets returns data-shard length patterns for k shards: all full, a short final shard,
// ragged lengths, and all empty.
func lengthSets(rng *rand.Rand, k int) map[string][]int {
	full := make([]int, k)
	tail := make([]int, k)
	ragged := make([]int, k)
	for i := range k {
		full[i], tail[i], ragged[i] = MaxData, MaxData, rng.IntN(200)
	}
	tail[k-1] = 37
	return map[string][]int{"full": full, "tail": tail, "ragged": ragged, "empty": make([]int, k)}
}

// subsets calls fn with every subset of {0..n-1} of size r.
func subsets(n, r int, fn func([]int)) {
	s := make([]int, r)
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == r {
			fn(s)
			return
		}
		for i := start; i <= n-(r-depth); i++ {
			s[depth] = i
			rec(i+1, depth+1)
		}
	}
	rec(0, 0)
}

func checkData(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d shards, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("shard %d: got %d bytes, want %d (equal prefix: %v)", i, len(got[i]), len(want[i]),
				bytes.HasPrefix(got[i], want[i]) || bytes.HasPrefix(want[i], got[i]))
		}
	}
}

// TestRoundTripEveryLossPattern loses every subset of at most m shards, delivers the rest in a
// random order with duplicates, and checks the rebuilt bytes and lengths. It then loses every
// subset of m+1 shards, checks the group asks for exactly the missing count and yields no data,
// and finishes it with fresh repair parity beyond m.
func TestRoundTripEveryLossPattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 3, 4, 6, 10} {
		for _, m := range []int{1, 2, 3} {
			for name, lens := range lengthSets(rng, k) {
				t.Run(fmt.Sprintf("k=%d,m=%d,%s", k, m, name), func(t *testing.T) {
					tg := newTestGroup(t, rng, lens, m+2) // two indices beyond m for repairs
					n := k + m
					g, err := NewGroup(k, m, ShardSize)
					if err != nil {
						t.Fatal(err)
					}
					for lost := 0; lost <= m+1; lost++ {
						subsets(n, lost, func(missing []int) {
							deliver(t, rng, g, tg, k, m, missing)
						})
					}
				})
			}
		}
	}
}

func deliver(t *testing.T, rng *rand.Rand, g *Group, tg testGroup, k, m int, missing []int) {
	t.Helper()
	if err := g.Reset(k, m, ShardSize); err != nil {
		t.Fatal(err)
	}
	n := k + m
	var order []int
	for i := range n {
		skip := false
		for _, x := range missing {
			skip = skip || x == i
		}
		if !skip {
			order = append(order, i, i) // every shard twice: duplicates are ignored
		}
	}
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	held := map[int]bool{}
	for _, idx := range order {
		done, err := g.Add(ShardID{K: k, M: m, Index: idx}, tg.shard(k, idx))
		if err != nil {
			t.Fatalf("missing %v: add %d: %v", missing, idx, err)
		}
		held[idx] = true
		if want := len(held) >= k; done != want {
			t.Fatalf("missing %v: done=%v after %d distinct shards", missing, done, len(held))
		}
	}
	if len(missing) <= m {
		out, err := g.Reconstruct()
		if err != nil {
			t.Fatalf("missing %v: %v", missing, err)
		}
		checkData(t, out, tg.data)
		return
	}
	// More lost than parity: the group must ask for the rest and deliver nothing.
	if want := len(missing) - m; g.Need() != want || g.Have() != k-want || g.Done() {
		t.Fatalf("missing %v: need %d have %d done %v, want need %d", missing, g.Need(), g.Have(), g.Done(), want)
	}
	if out, err := g.Reconstruct(); !errors.Is(err, ErrIncomplete) || out != nil {
		t.Fatalf("missing %v: incomplete group returned %d shards, err %v", missing, len(out), err)
	}
	// Repair with fresh parity indices m, m+1, ...
	for j := range g.Need() {
		idx := k + m + j
		if _, err := g.Add(ShardID{K: k, M: m, Index: idx}, tg.parity[m+j]); err != nil {
			t.Fatalf("missing %v: repair %d: %v", missing, idx, err)
		}
	}
	out, err := g.Reconstruct()
	if err != nil {
		t.Fatalf("missing %v, repaired: %v", missing, err)
	}
	checkData(t, out, tg.data)
}

// TestLargeGroups covers k up to MaxK and parity indices up to MaxParity-1, with random losses
// repaired by random fresh indices.
func TestLargeGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{7, 16, 32} {
		for trial := range 40 {
			lens := make([]int, k)
			for i := range lens {
				lens[i] = MaxData
			}
			lens[k-1] = rng.IntN(MaxData + 1)
			tg := newTestGroup(t, rng, lens, MaxParity)
			g, _ := NewGroup(k, 16, ShardSize)
			// Lose a random set of data shards, then fill up with random parity indices.
			perm := rng.Perm(k + MaxParity)
			for _, idx := range perm {
				if idx < k && rng.IntN(3) == 0 {
					continue
				}
				if done, err := g.Add(ShardID{K: k, M: 16, Index: idx}, tg.shard(k, idx)); err != nil {
					t.Fatal(err)
				} else if done {
					break
				}
			}
			out, err := g.Reconstruct()
			if err != nil {
				t.Fatalf("k=%d trial %d: %v", k, trial, err)
			}
			checkData(t, out, tg.data)
			g.Release()
		}
	}
}

// TestParityRanges checks that parity index i is the same bytes however it is requested, and
// that it is the Cauchy code reedsolomon itself builds over [len|data|pad] rows.
func TestParityRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{1, 3, 10, 17} {
		lens := make([]int, k)
		for i := range lens {
			lens[i] = rng.IntN(MaxData + 1)
		}
		tg := newTestGroup(t, rng, lens, 12)
		var e Encoder
		for first := range 12 {
			for count := 1; first+count <= 12; count++ {
				par := make([][]byte, count)
				for j := range par {
					par[j] = make([]byte, 0, ShardSize)
				}
				if err := e.Encode(tg.data, first, par); err != nil {
					t.Fatal(err)
				}
				for j := range par {
					if !bytes.Equal(par[j], tg.parity[first+j]) {
						t.Fatalf("k=%d parity %d differs when encoded as [%d,%d)", k, first+j, first, first+count)
					}
				}
			}
		}
		// Reference: reedsolomon's own Cauchy matrix over explicit rows.
		rs, err := reedsolomon.New(k, 12, reedsolomon.WithCauchyMatrix())
		if err != nil {
			t.Fatal(err)
		}
		rowLen := ParityLen(tg.data)
		sh := make([][]byte, k+12)
		for i, d := range tg.data {
			sh[i] = make([]byte, rowLen)
			sh[i][0], sh[i][1] = byte(len(d)>>8), byte(len(d))
			copy(sh[i][2:], d)
		}
		for j := range 12 {
			sh[k+j] = make([]byte, rowLen)
		}
		if err := rs.Encode(sh); err != nil {
			t.Fatal(err)
		}
		for j := range 12 {
			if !bytes.Equal(sh[k+j], tg.parity[j]) {
				t.Fatalf("k=%d parity %d differs from reedsolomon's Cauchy code", k, j)
			}
		}
	}
}

func TestGF(t *testing.T) {
	for a := 1; a < 256; a++ {
		if got := gfMul(byte(a), reedsolomon.Inv(byte(a))); got != 1 {
			t.Fatalf("%#x * inv = %#x", a, got)
		}
		if gfMul(byte(a), 0) != 0 || gfMul(byte(a), 1) != byte(a) {
			t.Fatalf("gfMul identities fail at %#x", a)
		}
	}
}

func TestAddRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	k, m := 4, 2
	tg := newTestGroup(t, rng, []int{100, 100, 100, 60}, m)
	g, _ := NewGroup(k, m, ShardSize)
	id := func(i int) ShardID { return ShardID{K: k, M: m, Index: i} }
	if _, err := g.Add(id(0), tg.data[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Add(id(k), tg.parity[0]); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		id      ShardID
		payload []byte
		want    error
	}{
		{"k differs", ShardID{K: 5, M: m, Index: 1}, tg.data[1], ErrShape},
		{"m differs", ShardID{K: k, M: 3, Index: 1}, tg.data[1], ErrShape},
		{"negative index", id(-1), tg.data[1], ErrIndex},
		{"index past parity", id(k + MaxParity), tg.parity[1], ErrIndex},
		{"data longer than parity row", id(1), make([]byte, 101), ErrLength},
		{"data over MaxData", id(2), make([]byte, MaxData+1), ErrLength},
		{"parity length differs", id(k + 1), tg.parity[1][:101], ErrLength},
		{"parity too short", id(k + 1), []byte{1}, ErrLength},
		{"parity over ShardSize", id(k + 1), make([]byte, ShardSize+1), ErrLength},
	}
	for _, c := range cases {
		done, err := g.Add(c.id, c.payload)
		if !errors.Is(err, c.want) || done {
			t.Errorf("%s: done=%v err=%v, want %v", c.name, done, err, c.want)
		}
		if g.Have() != 2 {
			t.Fatalf("%s: rejected shard changed the group (have %d)", c.name, g.Have())
		}
	}
	// Parity shorter than data already held.
	g2, _ := NewGroup(k, m, ShardSize)
	g2.Add(id(0), tg.data[0])
	if _, err := g2.Add(id(k), tg.parity[0][:50]); !errors.Is(err, ErrLength) {
		t.Errorf("short parity after long data: %v", err)
	}
	if g.Has(1) || !g.Has(0) || !g.Has(k) || g.Need() != 2 {
		t.Fatalf("has/need wrong: need %d", g.Need())
	}
	if got := g.MissingData(nil); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("MissingData = %v", got)
	}
	if _, err := NewGroup(0, 1, ShardSize); !errors.Is(err, ErrArgs) {
		t.Errorf("NewGroup(0,1): %v", err)
	}
	if _, err := NewGroup(MaxK+1, 1, ShardSize); !errors.Is(err, ErrArgs) {
		t.Errorf("NewGroup(MaxK+1,1): %v", err)
	}
}

// TestCorruptParity shows the row checks at work: parity extended by a non-zero byte rebuilds a
// row whose padding is not zero, and the group reports ErrCorrupt rather than data.
func TestCorruptParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	k, m := 3, 2
	tg := newTestGroup(t, rng, []int{80, 80, 80}, m)
	g, _ := NewGroup(k, m, ShardSize)
	bad := append(append([]byte{}, tg.parity[0]...), 0x55)
	bad2 := append(append([]byte{}, tg.parity[1]...), 0x17)
	g.Add(ShardID{K: k, M: m, Index: k}, bad)
	g.Add(ShardID{K: k, M: m, Index: k + 1}, bad2)
	g.Add(ShardID{K: k, M: m, Index: 2}, tg.data[2])
	out, err := g.Reconstruct()
	if !errors.Is(err, ErrCorrupt) || out != nil {
		t.Fatalf("got %d shards, err %v; want ErrCorrupt", len(out), err)
	}
	if _, err2 := g.Reconstruct(); !errors.Is(err2, ErrCorrupt) {
		t.Fatalf("failed group recovered: %v", err2)
	}
}

func TestEncodeArgs(t *testing.T) {
	var e Encoder
	d := [][]byte{make([]byte, 10)}
	p := [][]byte{make([]byte, 0, ShardSize)}
	for name, err := range map[string]error{
		"no data":       e.Encode(nil, 0, p),
		"too many data": e.Encode(make([][]byte, MaxK+1), 0, p),
		"no parity":     e.Encode(d, 0, nil),
		"negative":      e.Encode(d, -1, p),
		"past max":      e.Encode(d, MaxParity, p),
		"big data":      e.Encode([][]byte{make([]byte, MaxData+1)}, 0, p),
		"small buffer":  e.Encode(d, 0, [][]byte{make([]byte, 5)}),
	} {
		if !errors.Is(err, ErrArgs) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := e.Encode(d, MaxParity-1, p); err != nil || len(p[0]) != 12 {
		t.Errorf("last parity index: %v, len %d", err, len(p[0]))
	}
}

// TestEncodeAllocs holds Encode to zero allocations per call once a shape's coder exists,
// including short final shards, k above the fused-kernel limit and repair ranges.
func TestEncodeAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ k, first, count int }{{10, 0, 2}, {10, 0, 4}, {8, 0, 2}, {10, 5, 3}, {32, 0, 16}, {1, 63, 1}} {
		lens := make([]int, c.k)
		for i := range lens {
			lens[i] = MaxData
		}
		lens[c.k-1] = 300
		tg := newTestGroup(t, rng, lens, 0)
		par := make([][]byte, c.count)
		for j := range par {
			par[j] = make([]byte, 0, ShardSize)
		}
		var e Encoder
		encode := func() {
			if err := e.Encode(tg.data, c.first, par); err != nil {
				t.Fatal(err)
			}
		}
		encode()
		if got := testing.AllocsPerRun(100, encode); got != 0 {
			t.Errorf("Encode k=%d parity [%d,%d): %.1f allocs per call", c.k, c.first, c.first+c.count, got)
		}
	}
}

// TestInversionReset checks that a decoding coder is replaced after inversionReset rebuilds, so
// reedsolomon's per-loss-pattern cache cannot grow without bound.
func TestInversionReset(t *testing.T) {
	const k, count = 5, 7
	c, err := getCodec(k, 0, count)
	if err != nil {
		t.Fatal(err)
	}
	for range inversionReset - int(c.rebuilds.Load()) - 1 {
		noteRebuild(k, count, c)
	}
	if now, _ := getCodec(k, 0, count); now != c {
		t.Fatal("replaced too early")
	}
	noteRebuild(k, count, c)
	now, _ := getCodec(k, 0, count)
	if now == c {
		t.Fatal("not replaced")
	}
	// The fresh coder is the same code.
	rng := rand.New(rand.NewPCG(13, 14))
	tg := newTestGroup(t, rng, []int{9, 9, 9, 9, 4}, count)
	g, _ := NewGroup(k, count, ShardSize)
	for idx := k; idx < 2*k; idx++ {
		g.Add(ShardID{K: k, M: count, Index: idx}, tg.shard(k, idx))
	}
	out, err := g.Reconstruct()
	if err != nil {
		t.Fatal(err)
	}
	checkData(t, out, tg.data)
}

// TestAfterDone checks that shards arriving after completion are ignored but still validated.
func TestAfterDone(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	tg := newTestGroup(t, rng, []int{50, 50}, 2)
	g, _ := NewGroup(2, 2, ShardSize)
	g.Add(ShardID{K: 2, M: 2, Index: 0}, tg.data[0])
	if done, _ := g.Add(ShardID{K: 2, M: 2, Index: 3}, tg.parity[1]); !done {
		t.Fatal("not done with 2 of 2")
	}
	if done, err := g.Add(ShardID{K: 2, M: 2, Index: 1}, tg.data[1]); !done || err != nil || g.Has(1) {
		t.Fatalf("late shard: done=%v err=%v held=%v", done, err, g.Has(1))
	}
	if _, err := g.Add(ShardID{K: 2, M: 2, Index: 2}, tg.parity[0][:10]); !errors.Is(err, ErrLength) {
		t.Fatalf("late bad shard: %v", err)
	}
	out, err := g.Reconstruct()
	if err != nil {
		t.Fatal(err)
	}
	checkData(t, out, tg.data)
	again, _ := g.Reconstruct()
	if &again[0][0] != &out[0][0] {
		t.Fatal("second Reconstruct rebuilt")
	}
}

// TestWideGroups covers the Leopard code of groups beyond MaxNarrowK, up to MaxK (a quarter of
// a block is 187 chunks): random losses of up to m shards rebuild from planned parity, more than m leave the
// group incomplete until fresh repair indices arrive, a short final shard keeps its length, and
// parity index i is the same bytes however it is requested.
func TestWideGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, c := range []struct{ k, m int }{{33, 2}, {100, 6}, {187, 9}, {MaxK, 14}} {
		lens := make([]int, c.k)
		for i := range lens {
			lens[i] = WideMaxData
		}
		lens[c.k-1] = 1 + rng.IntN(WideMaxData)
		tg := newTestGroup(t, rng, lens, MaxParity)
		if got := ParityLen(tg.data); got%64 != 0 || got > ShardSize {
			t.Fatalf("k=%d: parity row %d bytes", c.k, got)
		}
		var e Encoder
		par := make([][]byte, 5)
		for j := range par {
			par[j] = make([]byte, 0, ShardSize)
		}
		if err := e.Encode(tg.data, 7, par); err != nil {
			t.Fatal(err)
		}
		for j := range par {
			if !bytes.Equal(par[j], tg.parity[7+j]) {
				t.Fatalf("k=%d: parity %d differs when encoded alone", c.k, 7+j)
			}
		}

		g, err := NewGroup(c.k, c.m, ShardSize)
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 6 {
			lost := c.m + trial - 2 // some trials lose more than the planned parity
			perm := rng.Perm(c.k + c.m)
			missing := map[int]bool{}
			for _, i := range perm[:max(lost, 0)] {
				missing[i] = true
			}
			g.Reset(c.k, c.m, ShardSize)
			for _, idx := range perm {
				if missing[idx] {
					continue
				}
				if _, err := g.Add(ShardID{K: c.k, M: c.m, Index: idx}, tg.shard(c.k, idx)); err != nil {
					t.Fatalf("k=%d add %d: %v", c.k, idx, err)
				}
			}
			if lost > c.m {
				if g.Need() != lost-c.m {
					t.Fatalf("k=%d lost %d: need %d", c.k, lost, g.Need())
				}
				if out, err := g.Reconstruct(); !errors.Is(err, ErrIncomplete) || out != nil {
					t.Fatalf("k=%d: incomplete group gave %d shards, %v", c.k, len(out), err)
				}
				for j := range g.Need() {
					idx := c.k + c.m + j
					g.Add(ShardID{K: c.k, M: c.m, Index: idx}, tg.parity[c.m+j])
				}
			}
			out, err := g.Reconstruct()
			if err != nil {
				t.Fatalf("k=%d lost %d: %v", c.k, lost, err)
			}
			checkData(t, out, tg.data)
		}
		// Rows that are not a multiple of 64 bytes cannot be a wide group's parity; data longer
		// than WideMaxData cannot be its data.
		g.Reset(c.k, c.m, ShardSize)
		if _, err := g.Add(ShardID{K: c.k, M: c.m, Index: c.k}, tg.parity[0][:len(tg.parity[0])-1]); !errors.Is(err, ErrLength) {
			t.Fatalf("k=%d: short parity row: %v", c.k, err)
		}
		if _, err := g.Add(ShardID{K: c.k, M: c.m, Index: 0}, make([]byte, WideMaxData+1)); !errors.Is(err, ErrLength) {
			t.Fatalf("k=%d: long data shard: %v", c.k, err)
		}
		g.Release()
	}
}

// TestJumboShards: groups of large-datagram shards (JumboShardSize, data up to 8190 bytes),
// narrow and wide, full, with a short last shard and ragged, rebuild exactly from any k shards;
// a group of standard shards refuses them, and only the two shard sizes are groups at all.
func TestJumboShards(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const maxData = JumboShardSize - lenPrefix
	for _, k := range []int{1, 10, 32, 33, 129} {
		full, tail, ragged := make([]int, k), make([]int, k), make([]int, k)
		for i := range k {
			full[i], tail[i], ragged[i] = maxData, maxData, rng.IntN(maxData+1)
		}
		tail[k-1] = 1 + rng.IntN(maxData-1)
		for name, lens := range map[string][]int{"full": full, "tail": tail, "ragged": ragged} {
			const m = 12
			tg := newTestGroup(t, rng, lens, m)
			if n := len(tg.parity[0]); n > JumboShardSize || Wide(k) && n%64 != 0 {
				t.Fatalf("k=%d %s: %d-byte parity rows", k, name, n)
			}
			for trial := range 5 {
				g, err := NewGroup(k, m, JumboShardSize)
				if err != nil {
					t.Fatal(err)
				}
				lost := rng.Perm(k)[:min(k, m)]
				missing := map[int]bool{}
				for _, i := range lost[:rng.IntN(len(lost)+1)] {
					missing[i] = true
				}
				done := false
				for _, idx := range rng.Perm(k + m) {
					if missing[idx] || done {
						continue
					}
					if done, err = g.Add(ShardID{K: k, M: m, Index: idx}, tg.shard(k, idx)); err != nil {
						t.Fatalf("k=%d %s trial %d: shard %d: %v", k, name, trial, idx, err)
					}
				}
				out, err := g.Reconstruct()
				if err != nil {
					t.Fatalf("k=%d %s trial %d, %d data shards lost: %v", k, name, trial, len(missing), err)
				}
				checkData(t, out, tg.data)
				g.Release()
			}
		}
	}
	tg := newTestGroup(t, rng, []int{maxData, maxData}, 1)
	std, _ := NewGroup(2, 1, ShardSize)
	if _, err := std.Add(ShardID{K: 2, M: 1, Index: 0}, tg.data[0]); !errors.Is(err, ErrLength) {
		t.Errorf("a standard group took an 8190-byte data shard: %v", err)
	}
	if _, err := std.Add(ShardID{K: 2, M: 1, Index: 2}, tg.parity[0]); !errors.Is(err, ErrLength) {
		t.Errorf("a standard group took an 8192-byte parity shard: %v", err)
	}
	big, _ := NewGroup(2, 1, JumboShardSize)
	if _, err := big.Add(ShardID{K: 2, M: 1, Index: 0}, make([]byte, maxData+1)); !errors.Is(err, ErrLength) {
		t.Errorf("a jumbo group took an 8191-byte data shard: %v", err)
	}
	if _, err := big.Add(ShardID{K: 2, M: 1, Index: 2}, make([]byte, JumboShardSize+1)); !errors.Is(err, ErrLength) {
		t.Errorf("a jumbo group took an 8193-byte parity shard: %v", err)
	}
	for _, n := range []int{0, 4096, JumboShardSize * 2} {
		if _, err := NewGroup(2, 1, n); !errors.Is(err, ErrArgs) {
			t.Errorf("a group of %d-byte shards: %v", n, err)
		}
	}
	var e Encoder
	par := [][]byte{make([]byte, 0, JumboShardSize+64)}
	if err := e.Encode([][]byte{make([]byte, maxData+1)}, 0, par); !errors.Is(err, ErrArgs) {
		t.Errorf("encoding an 8191-byte data shard: %v", err)
	}
}

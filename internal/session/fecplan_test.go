package session

import (
	"math"
	"testing"
	"time"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
)

// Tail groups get tail parity unless it would add more than maxTailShare of their data shards:
// a small file's group of 3 or 10 chunks keeps the body's count (none at 1 %), a 64 KiB file's
// group and a full group get the tail count.
func TestTailParityShare(t *testing.T) {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: 16 << 10, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSender(&Path{}, plan, nil, SenderConfig{InitialRTT: 100 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeAuto}})
	s.loss = fixedLoss(0.01)
	s.cc = cc.New(cc.Config{MSS: wire.MaxDatagramV6 + lane.IPv4UDPHeaders, Lanes: Lanes, InitialRTT: 100 * time.Millisecond}, time.Now())
	for _, c := range []struct {
		k    int
		want func(body, tail int) int
	}{
		{3, func(body, tail int) int { return body }},
		{10, func(body, tail int) int { return body }},
		{47, func(body, tail int) int { return tail }},
		{187, func(body, tail int) int { return tail }},
	} {
		body, tail := fec.Plan(0.01, c.k)
		m, inTail := s.planParity(c.k)
		if !inTail {
			t.Fatalf("k %d: a 16 KiB transfer at its start is not in the tail (2 BDP)", c.k)
		}
		if want := c.want(body, tail); int(m) != want {
			t.Errorf("k %d at 1 %% in the tail: %d parity shards, want %d (plan: body %d, tail %d)", c.k, m, want, body, tail)
		}
		if c.k <= 10 && body == tail {
			t.Errorf("k %d: fec.Plan gives body %d = tail %d; the case no longer tests anything", c.k, body, tail)
		}
	}
}

// A tail block's hash goes with copies enough that all are lost at most tailHashLoss of the
// time, each queued parityDelay behind it; none in the body, none where nothing was lost, none
// without FEC.
func TestTailHashCopies(t *testing.T) {
	for _, c := range []struct {
		size   int64 // the transfer's: 16 KiB is all tail at the start, 64 GiB none of it
		mode   fec.ModeKind
		loss   float64
		lost   uint64
		copies int // queued beside the hash itself
	}{
		{16 << 10, fec.ModeAuto, 0.03, 0, 2},
		{16 << 10, fec.ModeAuto, 0.01, 0, 1},
		{16 << 10, fec.ModeAuto, 0.001, 0, 1},
		{16 << 10, fec.ModeAuto, 0, 0, 0},
		{16 << 10, fec.ModeAuto, 0, 3, 1}, // lost something, no rate yet: taken as 1 %
		{16 << 10, fec.ModeAuto, 0.5, 0, maxHashCopies - 1},
		{16 << 10, fec.ModeFixed, 0.03, 0, 2},
		{16 << 10, fec.ModeOff, 0.03, 0, 0},
		{64 << 30, fec.ModeAuto, 0.03, 0, 0},
	} {
		plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: c.size, Mode: 0o644}})
		if err != nil {
			t.Fatal(err)
		}
		mode := fec.Mode{Kind: c.mode}
		if c.mode == fec.ModeFixed {
			mode.K, mode.M = 10, 2
		}
		s := NewSender(&Path{}, plan, nil, SenderConfig{InitialRTT: 100 * time.Millisecond, FEC: mode})
		s.loss = fixedLoss(c.loss)
		s.stats.Lost = c.lost
		s.cc = cc.New(cc.Config{MSS: wire.MaxDatagramV6 + lane.IPv4UDPHeaders, Lanes: Lanes, InitialRTT: 100 * time.Millisecond}, time.Now())
		s.tnow = int64(time.Second)
		b := &txBlock{id: 7, nChunks: 12}
		s.tailHash(b)
		if n := s.parq.len(); n != c.copies {
			t.Errorf("%+v: %d copies of the hash queued, want %d", c, n, c.copies)
		}
		for s.parq.len() > 0 {
			if r := s.parq.pop(); r.block != b.id || int(r.chunk) != b.nChunks || r.par != 0 || r.due != s.tnow+int64(parityDelay) {
				t.Errorf("%+v: queued %+v, want the hash of block %d (chunk %d) due at %d", c, r, b.id, b.nChunks, s.tnow+int64(parityDelay))
			}
		}
	}
}

// A body group's first repair sends exactly what it lacks; a group repaired before, whose block has
// held the window's start for round trips, and a tail group get fec.RepairCount of it, so that a
// lost repair shard does not cost yet another round trip.
func TestRepairSizes(t *testing.T) {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: 64 << 30, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	const loss, k = 0.03, 100
	for _, c := range []struct {
		repaired, tail bool
		want           int
	}{
		{false, false, 2},
		{true, false, fec.RepairCount(2, loss)},
		{false, true, fec.RepairCount(2, loss)},
	} {
		s := NewSender(&Path{}, plan, nil, SenderConfig{InitialRTT: 100 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeAuto}})
		s.loss = fixedLoss(loss)
		s.cc = cc.New(cc.Config{MSS: wire.MaxDatagramV6 + lane.IPv4UDPHeaders, Lanes: Lanes, InitialRTT: 100 * time.Millisecond}, time.Now())
		b := &txBlock{id: 3, nChunks: k, next: k + 1, k: k, groups: []txGroup{{k: k, dataAcked: k - 2, repaired: c.repaired, tail: c.tail}}}
		s.blocks[b.id] = b
		s.evalq = append(s.evalq, chunkRef{block: b.id})
		s.planRepairs(s.start.Add(10 * time.Second)) // long after any earlier repair
		if n := s.retx.len(); n != c.want || int(b.groups[0].pending) != c.want {
			t.Errorf("%+v: a group 2 shards short got %d repair shards (%d pending), want %d", c, n, b.groups[0].pending, c.want)
		}
	}
	if fec.RepairCount(2, loss) <= 2 {
		t.Fatalf("fec.RepairCount(2, %v) = %d: the cases no longer tell the sizes apart", loss, fec.RepairCount(2, loss))
	}
}

// Body groups get Plan's body count or one less, in the share fec.BodyMix gives, spread evenly:
// their expected failure is the body target, not the smaller one the whole count would give.
func TestBodyParityMix(t *testing.T) {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: 64 << 30, Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	for _, loss := range []float64{0.001, 0.01, 0.03} {
		s := NewSender(&Path{}, plan, nil, SenderConfig{InitialRTT: 100 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeAuto}})
		s.loss = fixedLoss(loss)
		s.cc = cc.New(cc.Config{MSS: wire.MaxDatagramV6 + lane.IPv4UDPHeaders, Lanes: Lanes, InitialRTT: 100 * time.Millisecond}, time.Now())
		k := fec.GroupSize(746) // a 1 MiB block's groups on a 1500-byte path: 187 shards
		body, _ := fec.Plan(loss, k)
		fewer := fec.BodyMix(loss, k, body)
		if fewer == 0 {
			t.Fatalf("loss %v: fec.BodyMix mixes nothing; the case no longer tests anything", loss)
		}
		const groups = 1000
		less, run := 0, 0
		for i := range groups {
			m, tail := s.planParity(k)
			if tail {
				t.Fatalf("loss %v group %d: a 64 GiB transfer at its start is in the tail", loss, i)
			}
			switch int(m) {
			case body:
				run = 0
			case body - 1:
				less++
				run++
				if fewer < 0.5 && run > 1 {
					t.Fatalf("loss %v: two groups in a row with %d shards, where %.2f of them should", loss, m, fewer)
				}
			default:
				t.Fatalf("loss %v group %d: %d parity shards; want %d or %d", loss, i, m, body, body-1)
			}
		}
		if want := fewer * groups; math.Abs(float64(less)-want) > 1 {
			t.Errorf("loss %v: %d of %d groups got %d shards; want %.1f", loss, less, groups, body-1, want)
		}
	}
}

// fixedLoss is a loss estimate that never moves: FEC planned for a known random-loss rate
// instead of the controller's, which starts at zero and grows.
type fixedLoss float64

func (f fixedLoss) RandomLoss() float64 { return float64(f) }

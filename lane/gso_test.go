package lane

import (
	"bytes"
	"slices"
	"testing"
)

// sized returns packets of the given lengths, each filled with its index so that order is visible.
func sized(lens ...int) [][]byte {
	pkts := make([][]byte, len(lens))
	for i, l := range lens {
		pkts[i] = bytes.Repeat([]byte{byte(i)}, l)
	}
	return pkts
}

func repeat(n, l int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = l
	}
	return s
}

func TestCoalesce(t *testing.T) {
	tests := []struct {
		name     string
		lens     []int
		maxSegs  int
		maxBytes int
		maxSpans int
		want     []span
	}{
		{"empty", nil, 64, maxGSOBytes4, 64, nil},
		{"one", []int{1452}, 64, maxGSOBytes4, 64, []span{{0, 1, 0}}},
		{"equal run", repeat(5, 1000), 64, maxGSOBytes4, 64, []span{{0, 5, 1000}}},
		{"short tail ends it", []int{1000, 1000, 10, 1000, 1000}, 64, maxGSOBytes4, 64,
			[]span{{0, 3, 1000}, {3, 5, 1000}}},
		{"longer packet starts a new one", []int{100, 100, 200, 200}, 64, maxGSOBytes4, 64,
			[]span{{0, 2, 100}, {2, 4, 200}}},
		{"short then equal", []int{100, 50, 50}, 64, maxGSOBytes4, 64, []span{{0, 2, 100}, {2, 3, 0}}},
		{"segment limit", repeat(10, 10), 4, maxGSOBytes4, 64,
			[]span{{0, 4, 10}, {4, 8, 10}, {8, 10, 10}}},
		{"byte limit IPv4: 45 × 1452", repeat(100, 1452), 64, maxGSOBytes4, 64,
			[]span{{0, 45, 1452}, {45, 90, 1452}, {90, 100, 1452}}},
		{"byte limit IPv6", repeat(46, 1424), 64, maxGSOBytes6, 64, []span{{0, 46, 1424}}},
		{"byte limit IPv4 same sizes", repeat(47, 1424), 64, maxGSOBytes4, 64,
			[]span{{0, 46, 1424}, {46, 47, 0}}},
		{"128 segments", repeat(300, 100), 128, maxGSOBytes4, 64,
			[]span{{0, 128, 100}, {128, 256, 100}, {256, 300, 100}}},
		{"no GSO", repeat(3, 1452), 1, maxGSOBytes4, 64, []span{{0, 1, 0}, {1, 2, 0}, {2, 3, 0}}},
		{"span limit", repeat(5, 1), 1, maxGSOBytes4, 2, []span{{0, 1, 0}, {1, 2, 0}}},
		{"empty packets stand alone", []int{0, 0, 10, 0, 10}, 64, maxGSOBytes4, 64,
			[]span{{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {3, 4, 0}, {4, 5, 0}}},
		{"oversized packet alone", []int{70000, 10, 10}, 64, maxGSOBytes4, 64,
			[]span{{0, 1, 0}, {1, 3, 10}}},
		{"tail that would overflow bytes", []int{40000, 30000}, 64, maxGSOBytes4, 64,
			[]span{{0, 1, 0}, {1, 2, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := coalesce(nil, sized(tt.lens...), tt.maxSegs, tt.maxBytes, tt.maxSpans)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("coalesce(%v) =\n %v, want\n %v", tt.lens, got, tt.want)
			}
			checkSpans(t, tt.lens, got, tt.maxSegs, tt.maxBytes)
		})
	}
}

// checkSpans verifies the kernel's rules on any coalescing result.
func checkSpans(t *testing.T, lens []int, spans []span, maxSegs, maxBytes int) {
	t.Helper()
	next := 0
	for _, s := range spans {
		if s.start != next || s.end <= s.start {
			t.Fatalf("span %v does not continue at %d", s, next)
		}
		next = s.end
		if s.end-s.start == 1 {
			if s.gso != 0 {
				t.Fatalf("single-packet span %v has a gso size", s)
			}
			continue
		}
		if s.gso != lens[s.start] || s.end-s.start > maxSegs {
			t.Fatalf("span %v: bad gso or too many segments (max %d)", s, maxSegs)
		}
		total := 0
		for i := s.start; i < s.end; i++ {
			total += lens[i]
			if i < s.end-1 && lens[i] != s.gso || lens[i] > s.gso || lens[i] == 0 {
				t.Fatalf("span %v: packet %d has length %d", s, i, lens[i])
			}
		}
		if total > maxBytes {
			t.Fatalf("span %v: %d bytes > %d", s, total, maxBytes)
		}
	}
}

// TestCoalesceRandom checks the rules on random size patterns, as a sender produces them.
func TestCoalesceRandom(t *testing.T) {
	seed := uint32(1)
	rnd := func(n int) int { seed = seed*1664525 + 1013904223; return int(seed>>8) % n }
	for range 500 {
		lens := make([]int, rnd(300))
		size := 1 + rnd(MaxDatagram)
		for i := range lens {
			if rnd(10) == 0 {
				size = rnd(MaxDatagram + 1)
			}
			lens[i] = size
		}
		maxSegs := []int{1, 2, 64, 128}[rnd(4)]
		spans := coalesce(nil, sized(lens...), maxSegs, maxGSOBytes4, 1<<30)
		checkSpans(t, lens, spans, maxSegs, maxGSOBytes4)
		if len(lens) > 0 && spans[len(spans)-1].end != len(lens) {
			t.Fatalf("spans end at %d of %d", spans[len(spans)-1].end, len(lens))
		}
	}
}

func TestNextSegment(t *testing.T) {
	tests := []struct {
		n, gso int
		want   []int
	}{
		{0, 0, []int{0}},
		{100, 0, []int{100}},
		{100, 100, []int{100}},
		{100, 200, []int{100}},
		{300, 100, []int{100, 100, 100}},
		{250, 100, []int{100, 100, 50}},
		{1452*45 - 1, 1452, append(repeat(44, 1452), 1451)},
	}
	for _, tt := range tests {
		b := make([]byte, tt.n)
		for i := range b {
			b[i] = byte(i)
		}
		var got []int
		off := 0
		for rest := b; ; {
			var seg []byte
			seg, rest = nextSegment(rest, tt.gso)
			if len(seg) > 0 && &seg[0] != &b[off] {
				t.Fatalf("n=%d gso=%d: segment at %d was copied", tt.n, tt.gso, off)
			}
			if cap(seg) > len(seg) && len(rest) > 0 {
				t.Fatalf("segment capacity reaches into the next segment")
			}
			off += len(seg)
			got = append(got, len(seg))
			if len(rest) == 0 {
				break
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("split %d by %d = %v, want %v", tt.n, tt.gso, got, tt.want)
		}
	}
}

package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzHeader: any bytes parse without panicking; an accepted header re-encodes to the same 16
// bytes and names a known type.
func FuzzHeader(f *testing.F) {
	b := make([]byte, HeaderLen+TagLen)
	Header{Type: TypeData, Lane: 2, Flags: 1, ConnID: 7, Seq: 99}.Put(b)
	f.Add(b)
	f.Add([]byte{0xf2, 6, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if !h.Type.valid() || len(b) < HeaderLen+TagLen {
			t.Fatalf("accepted %+v from %d bytes", h, len(b))
		}
		out := make([]byte, HeaderLen)
		h.Put(out)
		if !bytes.Equal(out, b[:HeaderLen]) {
			t.Fatalf("header %x re-encodes as %x", b[:HeaderLen], out)
		}
	})
}

// FuzzDataFrame: a data frame parses without panicking, re-encodes to its bytes, and its payload
// is exactly the rest of the input.
func FuzzDataFrame(f *testing.F) {
	b := make([]byte, DataFrameLen, DataFrameLen+4)
	DataFrame{Kind: KindParity, FecM: 3, FecK: 746, FecIdx: 750, Block: 1 << 31, Chunk: 700}.Put(b)
	f.Add(append(b, 1, 2, 3, 4))
	f.Add([]byte{9, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, payload, err := ParseDataFrame(b)
		if err != nil {
			return
		}
		if fr.Kind < KindChunk || fr.Kind > KindParity || len(payload) != len(b)-DataFrameLen {
			t.Fatalf("accepted %+v with %d payload bytes of %d", fr, len(payload), len(b))
		}
		out := make([]byte, DataFrameLen)
		fr.Put(out)
		if !bytes.Equal(out, b[:DataFrameLen]) {
			t.Fatalf("frame %x re-encodes as %x", b[:DataFrameLen], out)
		}
	})
}

// FuzzFeedback: a feedback frame parses without panicking; every accepted range lies at or below
// its lane's largest number, the ranges of a lane are disjoint and descend with gaps, and the
// frame re-encodes to one that parses to the same report.
func FuzzFeedback(f *testing.F) {
	fb := Feedback{Cursor: 5, Window: 64, Lanes: []LaneAck{
		{Largest: 1000, AckDelay: 30, Ranges: []SeqRange{{990, 1000}, {900, 980}, {1, 10}}}, {}, {Largest: 7, Ranges: []SeqRange{{7, 7}}}, {}}}
	f.Add(AppendFeedback(nil, &fb, 1400))
	f.Add([]byte{0x10, 0, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	// Two ranges, the second's gap 2^64-1 (gap+1 wraps): refused.
	f.Add([]byte{0x10, 0, 1, 0, 0, 0, 0, 5, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 3, 232, 0, 0, 0, 0, 0, 2,
		10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Feedback
		if ParseFeedback(b, &got) != nil {
			return
		}
		for i, la := range got.Lanes {
			prevLo := la.Largest + 1
			for j, r := range la.Ranges {
				if r.Lo > r.Hi || r.Hi > la.Largest || j > 0 && r.Hi+1 >= prevLo || j == 0 && r.Hi != la.Largest {
					t.Fatalf("lane %d range %d: %+v (largest %d, previous low %d)", i, j, r, la.Largest, prevLo)
				}
				prevLo = r.Lo
			}
		}
		re := AppendFeedback(nil, &got, 1<<20)
		var again Feedback
		if err := ParseFeedback(re, &again); err != nil {
			t.Fatalf("re-encoded report does not parse: %v", err)
		}
		if again.Cursor != got.Cursor || again.Window != got.Window || len(again.Lanes) != len(got.Lanes) {
			t.Fatalf("round trip: %+v → %+v", got, again)
		}
		for i := range got.Lanes {
			a, b := got.Lanes[i], again.Lanes[i]
			if a.Largest != b.Largest || a.AckDelay != b.AckDelay || len(a.Ranges) != len(b.Ranges) {
				t.Fatalf("lane %d: %+v → %+v", i, a, b)
			}
			for j := range a.Ranges {
				if a.Ranges[j] != b.Ranges[j] {
					t.Fatalf("lane %d range %d: %+v → %+v", i, j, a.Ranges[j], b.Ranges[j])
				}
			}
		}
	})
}

// FuzzSeqWindow checks the replay window against a model: the input is a list of sequence
// numbers (as deltas from the largest so far, so that they cluster); Mark accepts a number if and
// only if it is new and not older than the window, and the ranges it reports hold exactly the
// numbers marked within the window. Seen says beforehand what Mark will.
func FuzzSeqWindow(f *testing.F) {
	f.Add([]byte{1, 0, 0, 2, 0, 0, 1, 0, 0, 0x80, 3, 0, 0x80, 1, 0})
	f.Add([]byte{0xff, 0xff, 0x7f, 0x80, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, in []byte) {
		var w SeqWindow
		seen := map[uint64]bool{}
		var largest uint64
		for len(in) >= 3 {
			d := uint64(binary.LittleEndian.Uint16(in[1:3]))
			var seq uint64
			if in[0]&0x80 == 0 {
				seq = largest + d // ahead (or a repeat of the largest)
			} else if d <= largest {
				seq = largest - d // behind
			}
			in = in[3:]
			if seq == 0 {
				continue // sequence numbers start at 1
			}
			isNew := !seen[seq] && (len(seen) == 0 || seq > largest || largest-seq < seqWindowBits-64)
			if got := w.Seen(seq); got == isNew {
				t.Fatalf("Seen(%d) = %v before Mark, want %v (largest %d)", seq, got, !isNew, largest)
			}
			if got := w.Mark(seq); got != isNew {
				t.Fatalf("Mark(%d) = %v, want %v (largest %d)", seq, got, isNew, largest)
			}
			if isNew {
				seen[seq] = true
				largest = max(largest, seq)
			}
		}
		if len(seen) == 0 {
			return
		}
		inRanges := map[uint64]bool{}
		for _, r := range w.AppendRanges(nil, 1<<20) {
			for q := r.Lo; q <= r.Hi; q++ {
				if !seen[q] {
					t.Fatalf("range %+v holds %d, never marked", r, q)
				}
				inRanges[q] = true
			}
		}
		for q := range seen {
			if largest-q < seqWindowBits-64 && !inRanges[q] {
				t.Fatalf("%d marked (largest %d) but in no range", q, largest)
			}
		}
	})
}

// FuzzOpen: any bytes given to a session's Open never panic and never authenticate (the fuzzer
// cannot forge a tag); a datagram sealed by the other end opens to what was sealed.
func FuzzOpen(f *testing.F) {
	key := bytes.Repeat([]byte{7}, KeyLen)
	tx, _ := NewCrypto(key, 42, ClientToServer)
	rx, _ := NewCrypto(key, 42, ServerToClient)
	sealed := tx.Seal(make([]byte, 0, 100), Header{Type: TypeFeedback, Lane: 1, Seq: 5}, []byte("report"))
	f.Add(sealed, []byte("report"))
	f.Add([]byte{0xf2, 1, 0, 0, 0, 0, 0, 42}, []byte{})
	f.Fuzz(func(t *testing.T, b, pt []byte) {
		if _, _, err := rx.Open(append([]byte(nil), b...)); err == nil && !bytes.Equal(b, sealed) {
			t.Fatalf("forged datagram %x authenticated", b)
		}
		if len(pt) > 1400 {
			pt = pt[:1400]
		}
		pkt := tx.Seal(make([]byte, 0, len(pt)+Overhead), Header{Type: TypeFeedback, Lane: 3, Seq: 1 << 40}, pt)
		h, got, err := rx.Open(pkt)
		if err != nil || !bytes.Equal(got, pt) || h.Seq != 1<<40 || h.Lane != 3 {
			t.Fatalf("round trip of %d bytes: %v", len(pt), err)
		}
	})
}

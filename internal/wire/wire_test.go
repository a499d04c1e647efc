package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Type: TypeFeedback, Lane: 3, Flags: 0x5a, ConnID: 0xdeadbeef, Seq: 1<<40 + 7}
	b := make([]byte, HeaderLen+TagLen)
	h.Put(b)
	got, err := ParseHeader(b)
	if err != nil || got != h {
		t.Fatalf("got %+v, %v; want %+v", got, err, h)
	}
	b[0] = magic | (Version + 1)
	if _, err := ParseHeader(b); !errors.Is(err, ErrVersion) {
		t.Fatalf("version %d accepted: %v", Version+1, err)
	}
	b[0], b[1] = magic|Version, 99
	if _, err := ParseHeader(b); !errors.Is(err, ErrType) {
		t.Fatalf("type 99 accepted: %v", err)
	}
	if _, err := ParseHeader(b[:20]); !errors.Is(err, ErrShort) {
		t.Fatalf("short datagram accepted: %v", err)
	}
}

func TestDataFrameRoundTrip(t *testing.T) {
	payload := []byte("hello, far wing")
	f := DataFrame{Kind: KindParity, FecK: 746, FecM: 29, FecIdx: 775, Block: 123456, Chunk: 700}
	b := make([]byte, DataFrameLen, 64)
	f.Put(b)
	b = append(b, payload...)
	got, p, err := ParseDataFrame(b)
	if err != nil || got != f || !bytes.Equal(p, payload) {
		t.Fatalf("got %+v %q %v", got, p, err)
	}
	if _, _, err := ParseDataFrame(b[:DataFrameLen-1]); err == nil {
		t.Fatal("short frame accepted")
	}
	b[0] = KindParity + 1
	if _, _, err := ParseDataFrame(b); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func newPair(t *testing.T) (*Crypto, *Crypto, []byte) {
	key := make([]byte, KeyLen)
	rand.Read(key)
	c, err := NewCrypto(key, 42, ClientToServer)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewCrypto(key, 42, ServerToClient)
	return c, s, key
}

func TestAEAD(t *testing.T) {
	c, s, _ := newPair(t)
	msg := bytes.Repeat([]byte("x"), 1000)
	buf := make([]byte, 0, 2048)
	pkt := c.Seal(buf, Header{Type: TypeData, Lane: 1, Seq: 9}, msg)
	if len(pkt) != len(msg)+Overhead {
		t.Fatalf("len %d", len(pkt))
	}
	good := append([]byte(nil), pkt...)
	h, pt, err := s.Open(append([]byte(nil), good...))
	if err != nil || h.Seq != 9 || h.Lane != 1 || !bytes.Equal(pt, msg) {
		t.Fatalf("open: %v %+v", err, h)
	}
	// Every single flipped bit, in the header or the body, must be rejected.
	for i := 0; i < len(good)*8; i += 7 {
		bad := append([]byte(nil), good...)
		bad[i/8] ^= 1 << (i % 8)
		if _, _, err := s.Open(bad); err == nil {
			t.Fatalf("flipped bit %d accepted", i)
		}
	}
	// The sender's own direction does not open with its own key (no reflection).
	if _, _, err := c.Open(append([]byte(nil), good...)); !errors.Is(err, ErrAuth) {
		t.Fatalf("reflected datagram accepted: %v", err)
	}
	// A foreign key with the same conn id fails.
	key2 := make([]byte, KeyLen)
	rand.Read(key2)
	f, _ := NewCrypto(key2, 42, ServerToClient)
	if _, _, err := f.Open(append([]byte(nil), good...)); !errors.Is(err, ErrAuth) {
		t.Fatalf("foreign key accepted: %v", err)
	}
	if _, err := NewCrypto(key2[:16], 1, 0); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestSeqWindowReplay(t *testing.T) {
	var w SeqWindow
	for _, s := range []uint64{5, 6, 8, 7} {
		if !w.Mark(s) {
			t.Fatalf("%d rejected", s)
		}
	}
	for _, s := range []uint64{5, 6, 7, 8} {
		if w.Mark(s) {
			t.Fatalf("replay %d accepted", s)
		}
	}
	w.Mark(8 + seqWindowBits)
	if w.Mark(9) {
		t.Fatal("too-old number accepted")
	}
}

// TestFeedbackRanges checks that ranges produced by SeqWindow survive encoding and describe
// exactly the set of received numbers.
func TestFeedbackRanges(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		var w SeqWindow
		got := map[uint64]bool{}
		base := uint64(r.IntN(100000))
		n := 1 + r.IntN(5000)
		for i := 0; i < n; i++ {
			s := base + uint64(i)
			if r.Float64() < 0.05 {
				continue
			}
			w.Mark(s)
			got[s] = true
		}
		if len(got) == 0 {
			continue
		}
		ranges := w.AppendRanges(nil, 1<<20)
		largest, _ := w.Largest()
		fb := Feedback{Cursor: 3, Window: 77, Lanes: []LaneAck{{Largest: largest, AckDelay: 1234, Ranges: ranges}}}
		enc := AppendFeedback(nil, &fb, 1<<20)
		var dec Feedback
		if err := ParseFeedback(enc, &dec); err != nil {
			t.Fatal(err)
		}
		if dec.Cursor != 3 || dec.Window != 77 || dec.Lanes[0].AckDelay != 1234 || dec.Lanes[0].Largest != largest {
			t.Fatalf("header fields: %+v", dec)
		}
		seen := 0
		prevLo := largest + 2
		for _, rg := range dec.Lanes[0].Ranges {
			if rg.Hi+1 >= prevLo || rg.Lo > rg.Hi {
				t.Fatalf("ranges not strictly descending: %+v", dec.Lanes[0].Ranges)
			}
			for s := rg.Lo; s <= rg.Hi; s++ {
				if !got[s] {
					t.Fatalf("trial %d: %d reported but not received", trial, s)
				}
				seen++
			}
			prevLo = rg.Lo
		}
		if seen != len(got) {
			t.Fatalf("trial %d: %d of %d reported", trial, seen, len(got))
		}
	}
}

func TestFeedbackBudget(t *testing.T) {
	var w SeqWindow
	for s := uint64(0); s < 20000; s += 2 {
		w.Mark(s)
	}
	largest, _ := w.Largest()
	fb := Feedback{Lanes: make([]LaneAck, 4)}
	for i := range fb.Lanes {
		fb.Lanes[i] = LaneAck{Largest: largest, Ranges: w.AppendRanges(nil, 5000)}
	}
	enc := AppendFeedback(nil, &fb, 1200)
	if len(enc) > 1200 {
		t.Fatalf("feedback %d bytes over budget", len(enc))
	}
	var dec Feedback
	if err := ParseFeedback(enc, &dec); err != nil || len(dec.Lanes[3].Ranges) == 0 {
		t.Fatalf("%v %d", err, len(dec.Lanes[3].Ranges))
	}
	if err := ParseFeedback(enc[:len(enc)/2], &dec); err == nil {
		t.Fatal("truncated feedback accepted")
	}
}

// A data datagram sealed from a payload where it lies opens straight into another buffer, and the
// clear frame header is authenticated: a chunk cannot be moved to another block or position.
func TestSealDataOpenInto(t *testing.T) {
	c, s, _ := newPair(t)
	block := make([]byte, 3000)
	rand.Read(block)
	f := DataFrame{Kind: KindChunk, Block: 77, Chunk: 1}
	payload := block[1000:2406]
	buf := make([]byte, DataAADLen, 2048)
	f.Put(buf[HeaderLen:])
	pkt := c.SealData(buf, Header{Lane: 2, Seq: 41}, payload)
	if len(pkt) != DataAADLen+len(payload)+TagLen || DataPayloadLen(pkt) != len(payload) {
		t.Fatalf("len %d", len(pkt))
	}
	h, err := s.Check(pkt)
	if err != nil || h.Type != TypeData || h.Seq != 41 {
		t.Fatalf("check: %+v %v", h, err)
	}
	if got, _, err := ParseDataFrame(pkt[HeaderLen:DataAADLen]); err != nil || got != f {
		t.Fatalf("clear frame %+v %v", got, err)
	}
	dst := make([]byte, len(payload))
	if err := s.OpenDataInto(h, pkt, dst); err != nil || !bytes.Equal(dst, payload) {
		t.Fatalf("open into: %v, equal %v", err, bytes.Equal(dst, payload))
	}
	// The same datagram opens in place to frame ‖ payload, as Seal took it.
	h2, pt, err := s.Open(append([]byte(nil), pkt...))
	if err != nil || h2 != h {
		t.Fatalf("open: %v", err)
	}
	if got, p, err := ParseDataFrame(pt); err != nil || got != f || !bytes.Equal(p, payload) {
		t.Fatalf("open: frame %+v %v, payload equal %v", got, err, bytes.Equal(p, payload))
	}
	// A changed chunk number (clear, but authenticated) is rejected.
	bad := append([]byte(nil), pkt...)
	bad[DataAADLen-1] ^= 1
	if err := s.OpenDataInto(h, bad, dst); !errors.Is(err, ErrAuth) {
		t.Fatalf("moved chunk accepted: %v", err)
	}
	if err := s.OpenDataInto(h, pkt, dst[:10]); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong destination length accepted: %v", err)
	}
}

// TestFeedbackGapWraps: an ack gap of 2^64-1 (gap+1 wraps to 0) or of exactly the previous
// range's low end would put the next range at or above that low end (overlapping it) or below
// sequence number 0; it is refused, as is every gap that leaves no room below the previous range.
func TestFeedbackGapWraps(t *testing.T) {
	frame := func(gap uint64) []byte {
		b := []byte{0x10, 0, 1, 0, 0, 0, 0, 5, 0, 0, 0, 64}
		b = binary.BigEndian.AppendUint64(b, 1000) // largest
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint16(b, 2) // two ranges
		b = binary.AppendUvarint(b, 10)         // [990, 1000]
		b = binary.AppendUvarint(b, gap)
		return binary.AppendUvarint(b, 0) // a range of one number
	}
	var f Feedback
	for _, gap := range []uint64{1<<64 - 1, 990, 991, 1 << 63} {
		if err := ParseFeedback(frame(gap), &f); err == nil {
			t.Errorf("gap %d below a range starting at 990 accepted: %+v", gap, f.Lanes[0].Ranges)
		}
	}
	// The largest gap that fits: one number, 0, below the range [990, 1000].
	if err := ParseFeedback(frame(989), &f); err != nil || f.Lanes[0].Ranges[1] != (SeqRange{0, 0}) {
		t.Fatalf("gap 989: %v %+v", err, f.Lanes[0].Ranges)
	}
}

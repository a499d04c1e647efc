package wire

// SeqWindow tracks which sequence numbers of one lane have been received. It is the replay filter
// (a datagram whose number was seen, or is older than the window, is rejected) and the source of the
// ack ranges in feedback frames. The zero value is ready to use; not safe for concurrent use.
type SeqWindow struct {
	bits    [seqWindowWords]uint64
	largest uint64
	any     bool
}

const (
	seqWindowBits  = 1 << 16 // history kept per lane: 65,536 datagrams
	seqWindowWords = seqWindowBits / 64
)

// Mark records seq and reports whether it is new (not a replay and not too old).
func (w *SeqWindow) Mark(seq uint64) bool {
	if !w.any {
		w.any = true
		w.largest = seq
		w.set(seq)
		return true
	}
	if seq > w.largest {
		// Clear the bits between the old largest and seq: they now stand for new numbers.
		if seq-w.largest >= seqWindowBits {
			w.bits = [seqWindowWords]uint64{}
		} else {
			for s := w.largest + 1; s < seq; {
				if s%64 == 0 && seq-s >= 64 {
					w.bits[(s/64)%seqWindowWords] = 0
					s += 64
					continue
				}
				w.clear(s)
				s++
			}
		}
		w.largest = seq
		w.set(seq)
		return true
	}
	if w.largest-seq >= seqWindowBits-64 {
		return false
	}
	if w.has(seq) {
		return false
	}
	w.set(seq)
	return true
}

// Seen reports whether Mark would refuse seq (a number received already, or older than the
// window) without marking it: a datagram that is not handed on yet can be told a replay.
func (w *SeqWindow) Seen(seq uint64) bool {
	if !w.any || seq > w.largest {
		return false
	}
	return w.largest-seq >= seqWindowBits-64 || w.has(seq)
}

func (w *SeqWindow) set(s uint64)      { w.bits[(s/64)%seqWindowWords] |= 1 << (s % 64) }
func (w *SeqWindow) clear(s uint64)    { w.bits[(s/64)%seqWindowWords] &^= 1 << (s % 64) }
func (w *SeqWindow) has(s uint64) bool { return w.bits[(s/64)%seqWindowWords]&(1<<(s%64)) != 0 }

// Largest returns the highest number received and whether anything was.
func (w *SeqWindow) Largest() (uint64, bool) { return w.largest, w.any }

// AppendRanges appends up to max received runs, newest first, to dst.
func (w *SeqWindow) AppendRanges(dst []SeqRange, max int) []SeqRange {
	if !w.any {
		return dst
	}
	floor := uint64(0)
	if w.largest >= seqWindowBits-64 {
		floor = w.largest - (seqWindowBits - 64) + 1
	}
	s := w.largest
	for n := 0; n < max; n++ {
		// s is received; walk down to the run's low end.
		hi := s
		for s > floor && w.has(s-1) {
			if s%64 == 0 && s-64 >= floor && w.bits[((s-64)/64)%seqWindowWords] == ^uint64(0) {
				s -= 64
				continue
			}
			s--
		}
		dst = append(dst, SeqRange{Lo: s, Hi: hi})
		if s == floor {
			return dst
		}
		// Skip the gap.
		s--
		for s > floor && !w.has(s) {
			if s%64 == 63 && s >= floor+64 && w.bits[(s/64)%seqWindowWords] == 0 {
				s -= 64
				continue
			}
			s--
		}
		if !w.has(s) {
			return dst
		}
	}
	return dst
}

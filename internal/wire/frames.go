package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame kinds inside a TypeData datagram.
const (
	KindChunk  = 1 // file bytes of a block
	KindHash   = 2 // the block's BLAKE3 digest, sent as the block's last "chunk"
	KindParity = 3 // Reed-Solomon parity over a group of chunks
)

// DataFrameLen is the plaintext header of a data frame.
const DataFrameLen = 12

// DataFrame heads every TypeData plaintext. FEC fields are zero when the chunk is not protected.
// The payload is the rest of the plaintext: its length is the datagram's.
type DataFrame struct {
	Kind   uint8
	FecM   uint8  // parity shards planned for the chunk's FEC group
	FecK   uint16 // data shards in that group (up to a whole block)
	FecIdx uint16 // shard index within the group: data 0..FecK-1, parity FecK+i
	Block  uint32
	Chunk  uint16 // index within the block (for parity: the group's first chunk)
}

// ErrFrame reports a malformed frame.
var ErrFrame = errors.New("wire: malformed frame")

// Put encodes f into b[:DataFrameLen].
func (f DataFrame) Put(b []byte) {
	_ = b[DataFrameLen-1]
	b[0], b[1] = f.Kind, f.FecM
	binary.BigEndian.PutUint16(b[2:4], f.FecK)
	binary.BigEndian.PutUint16(b[4:6], f.FecIdx)
	binary.BigEndian.PutUint32(b[6:10], f.Block)
	binary.BigEndian.PutUint16(b[10:12], f.Chunk)
}

// ParseDataFrame decodes a data frame and returns its payload.
func ParseDataFrame(b []byte) (DataFrame, []byte, error) {
	if len(b) < DataFrameLen {
		return DataFrame{}, nil, ErrFrame
	}
	f := DataFrame{
		Kind: b[0], FecM: b[1],
		FecK:   binary.BigEndian.Uint16(b[2:4]),
		FecIdx: binary.BigEndian.Uint16(b[4:6]),
		Block:  binary.BigEndian.Uint32(b[6:10]),
		Chunk:  binary.BigEndian.Uint16(b[10:12]),
	}
	if f.Kind < KindChunk || f.Kind > KindParity {
		return f, nil, ErrFrame
	}
	return f, b[DataFrameLen:], nil
}

// LaneAck is one lane's acknowledgement state in a feedback frame.
type LaneAck struct {
	Largest  uint64 // highest sequence number received (valid when Ranges is non-empty)
	AckDelay uint32 // microseconds between receiving Largest and sending this frame
	// Ranges are received runs, newest first: Ranges[0] ends at Largest; each later range lies
	// below the previous one. Each is [Lo, Hi] inclusive.
	Ranges []SeqRange
}

// SeqRange is an inclusive range of sequence numbers.
type SeqRange struct{ Lo, Hi uint64 }

// Feedback is the receiver's report, sent every few milliseconds on two lanes.
type Feedback struct {
	Cursor uint32 // lowest block not yet verified and handed to the writer
	Window uint32 // the sender may send blocks < Cursor+Window
	Lanes  []LaneAck
}

const feedbackKind = 0x10

// AppendFeedback encodes f after b. Each lane's ranges are cut to fit within max bytes in total.
func AppendFeedback(b []byte, f *Feedback, max int) []byte {
	start := len(b)
	b = append(b, feedbackKind, 0, byte(len(f.Lanes)), 0)
	b = binary.BigEndian.AppendUint32(b, f.Cursor)
	b = binary.BigEndian.AppendUint32(b, f.Window)
	per := (max - (len(b) - start)) / max1(len(f.Lanes))
	for _, la := range f.Lanes {
		ls := len(b)
		b = binary.BigEndian.AppendUint64(b, la.Largest)
		b = binary.BigEndian.AppendUint32(b, la.AckDelay)
		np := len(b)
		b = append(b, 0, 0)
		n := 0
		prevLo := la.Largest + 1
		for _, r := range la.Ranges {
			if len(b)-ls+2*binary.MaxVarintLen64 > per {
				break
			}
			if n == 0 {
				b = binary.AppendUvarint(b, r.Hi-r.Lo)
			} else {
				b = binary.AppendUvarint(b, prevLo-r.Hi-1) // gap below the previous range, ≥ 1
				b = binary.AppendUvarint(b, r.Hi-r.Lo)
			}
			prevLo = r.Lo
			n++
		}
		binary.BigEndian.PutUint16(b[np:], uint16(n))
	}
	return b
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// ParseFeedback decodes a feedback frame into f, reusing f.Lanes and their Ranges.
func ParseFeedback(b []byte, f *Feedback) error {
	if len(b) < 12 || b[0] != feedbackKind {
		return ErrFrame
	}
	nl := int(b[2])
	f.Cursor = binary.BigEndian.Uint32(b[4:8])
	f.Window = binary.BigEndian.Uint32(b[8:12])
	b = b[12:]
	if cap(f.Lanes) < nl {
		f.Lanes = make([]LaneAck, nl)
	}
	f.Lanes = f.Lanes[:nl]
	for i := range f.Lanes {
		la := &f.Lanes[i]
		if len(b) < 14 {
			return ErrFrame
		}
		la.Largest = binary.BigEndian.Uint64(b)
		la.AckDelay = binary.BigEndian.Uint32(b[8:])
		n := int(binary.BigEndian.Uint16(b[12:]))
		b = b[14:]
		la.Ranges = la.Ranges[:0]
		var prevLo uint64
		for j := 0; j < n; j++ {
			hi := la.Largest
			if j > 0 {
				gap, k := binary.Uvarint(b)
				// The next range ends at prevLo-1-gap: at least one number below the previous
				// range's low end, and not below 0 (gap < prevLo; gap+1 would wrap at 2^64-1).
				if k <= 0 || gap == 0 || gap >= prevLo {
					return fmt.Errorf("%w: bad ack gap", ErrFrame)
				}
				b = b[k:]
				hi = prevLo - 1 - gap
			}
			l, k := binary.Uvarint(b)
			if k <= 0 || l > hi {
				return fmt.Errorf("%w: bad ack range", ErrFrame)
			}
			b = b[k:]
			la.Ranges = append(la.Ranges, SeqRange{Lo: hi - l, Hi: hi})
			prevLo = hi - l
		}
	}
	return nil
}

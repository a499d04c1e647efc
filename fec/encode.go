package fec

import "fmt"

// ParityLen returns the length of every parity shard of the group whose data shards are data:
// 2 + the longest data shard, rounded up to 64 bytes in a wide group. Size parity buffers with
// it (it is at most ShardSize when every data shard is at most MaxData, or WideMaxData; at most
// JumboShardSize when every one is at most JumboShardSize-2).
func ParityLen(data [][]byte) int {
	n := 0
	for _, d := range data {
		n = max(n, len(d))
	}
	return rowLenFor(len(data), n)
}

// rowLenFor is the parity row length of a k-shard group whose longest data shard is longest.
func rowLenFor(k, longest int) int {
	n := lenPrefix + longest
	if Wide(k) {
		n = (n + 63) &^ 63
	}
	return n
}

// Encoder computes parity shards. Its zero value is ready to use. An Encoder keeps scratch space
// and is not safe for concurrent use: give each sending goroutine its own. The Reed-Solomon
// coders behind it are built once per shape and shared process-wide.
type Encoder struct {
	par [MaxParity][]byte

	// Wide groups: rows [len|data|pad] for the data and all MaxParity parity rows.
	rows []byte
	sh   [][]byte
}

// Encode writes parity indices first, first+1, ..., first+len(parity)-1 of the group formed by
// data (k = len(data) data shards, 1..MaxK, each at most MaxData bytes, WideMaxData when k >
// MaxNarrowK, or in a session of large datagrams JumboShardSize-2) into parity. Each
// parity[j] must have capacity ParityLen(data); Encode reslices it to that length. data is
// read, never written, and must not overlap parity.
//
// Body parity is Encode(data, 0, parity[:m]); tail parity continues at first = m; a repair for a
// group NAKed with need n sends RepairCount(n, loss) indices from the next unused one. Any mix
// of k distinct shards decodes. For a narrow group Encode never allocates once the coder for its
// shape exists, and never copies data: a short shard's zero padding contributes nothing to
// parity, so it is coded over its own length only. A wide group's code computes every parity row
// in one pass (about 100 µs for a 187-shard group) whatever is asked for, so ask for all the
// indices a group will need at once (first 0, MaxParity of them) and keep them.
func (e *Encoder) Encode(data [][]byte, first int, parity [][]byte) error {
	k, count := len(data), len(parity)
	if k < 1 || k > MaxK {
		return fmt.Errorf("%w: k=%d, want 1..%d", ErrArgs, k, MaxK)
	}
	if count < 1 || first < 0 || first > MaxParity-count {
		return fmt.Errorf("%w: parity %d..%d, want indices 0..%d", ErrArgs, first, first+count-1, MaxParity-1)
	}
	rowLen := ParityLen(data)
	if rowLen > JumboShardSize {
		return fmt.Errorf("%w: data shard of %d bytes, max %d", ErrArgs, rowLen-lenPrefix, JumboShardSize-lenPrefix)
	}
	for j, p := range parity {
		if cap(p) < rowLen {
			return fmt.Errorf("%w: parity buffer %d has capacity %d, need %d", ErrArgs, j, cap(p), rowLen)
		}
		parity[j] = p[:rowLen]
	}
	if Wide(k) {
		return e.encodeWide(data, first, parity, rowLen)
	}
	c, err := getCodec(k, first, count)
	if err != nil {
		return err
	}

	// Length columns: parity[j][0:2] = sum over i of row[i] * len(data[i]), big-endian.
	for j, row := range c.rows {
		var hi, lo byte
		for i, d := range data {
			hi ^= gfMul(row[i], byte(len(d)>>8))
			lo ^= gfMul(row[i], byte(len(d)))
		}
		parity[j][0], parity[j][1] = hi, lo
		clear(parity[j][lenPrefix:])
	}

	// Body columns, one data shard at a time. reedsolomon's fused multi-input kernels (Encode)
	// are up to 1.6x faster at k=10 but allocate on every call (a GFNI matrix that escapes, or a
	// boxed pool slice on AVX2); EncodeIdx on a datagram-sized shard takes the per-row AVX2 path,
	// which does not, and still codes ~10-20 GB/s of data per core at k=10 (BenchmarkEncode).
	par := e.par[:count]
	for i, d := range data {
		if len(d) == 0 {
			continue
		}
		for j := range par {
			par[j] = parity[j][lenPrefix : lenPrefix+len(d)]
		}
		if err = c.rs.EncodeIdx(d, i, par); err != nil {
			break
		}
	}
	clear(par) // keep no references to the caller's buffers
	return err
}

// encodeWide computes every parity row of a wide group over explicit rows and copies out the
// indices asked for.
func (e *Encoder) encodeWide(data [][]byte, first int, parity [][]byte, rowLen int) error {
	k := len(data)
	rs, err := wideCodec(k)
	if err != nil {
		return err
	}
	n := k + MaxParity
	if cap(e.rows) < n*rowLen {
		e.rows = make([]byte, n*max(rowLen, ShardSize))
	}
	if cap(e.sh) < n {
		e.sh = make([][]byte, n)
	}
	sh := e.sh[:n]
	for i := range sh {
		sh[i] = e.rows[i*rowLen : (i+1)*rowLen]
	}
	for i, d := range data {
		row := sh[i]
		row[0], row[1] = byte(len(d)>>8), byte(len(d))
		clear(row[lenPrefix+copy(row[lenPrefix:], d):])
	}
	if err := rs.Encode(sh); err != nil {
		clear(sh)
		return err
	}
	for j := range parity {
		copy(parity[j], sh[k+first+j])
	}
	clear(sh)
	return nil
}

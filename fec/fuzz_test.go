package fec

import (
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"testing"
)

// digest hashes shards with their lengths, so a shard that is right but one byte short differs.
func digest(shards [][]byte) [32]byte {
	h := sha256.New()
	for _, s := range shards {
		h.Write([]byte{byte(len(s) >> 8), byte(len(s))})
		h.Write(s)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Shard classes the fuzzer sends.
const (
	genuine   = iota
	mustFail  // structurally impossible for the group: Add must return an error
	parityLen // a parity shard truncated or extended: may be accepted, must never yield wrong bytes
	forged    // plausible header and length, wrong bytes: outside fec's guarantees (AEAD's job)
)

// FuzzDecoder drives a Group with genuine shards in any order and subset, duplicates, and
// corrupted shards: wrong (k, m), out-of-range indices, impossible lengths, resized parity, and
// forgeries. It never panics; it rejects what cannot belong to the group; an incomplete group
// yields nothing; a group fed only genuine shards decodes to exactly the originals (compared by
// digest); resized parity leads to the right bytes or ErrCorrupt, never to wrong bytes.
//
// Input: k, m, extra parity, shard length, two seed bytes, then 3-byte ops (shard, kind, arg).
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{9, 2, 1, 255, 1, 0, 0, 0, 0, 3, 0, 0, 5, 0, 0, 7, 0, 0, 10, 0, 0, 11, 0, 0, 1, 0, 0, 2, 0, 0, 4, 0, 0, 6, 0, 0, 8, 0, 0, 9, 0, 0})
	f.Add([]byte{3, 2, 2, 40, 7, 1, 4, 0, 0, 5, 0, 0, 6, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 2, 2, 40, 7, 1, 4, 10, 3, 5, 10, 200, 2, 0, 0, 6, 0, 0})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 6, 1, 0, 7, 2, 0, 8, 3, 0, 9, 4, 1, 9, 5})
	f.Add([]byte{5, 3, 1, 100, 3, 1, 1, 11, 0, 5, 11, 4, 6, 11, 8, 7, 0, 0, 8, 0, 0, 9, 0, 0, 2, 0, 0})
	f.Add([]byte{31, 4, 3, 255, 9, 9, 40, 0, 0, 33, 0, 0, 34, 0, 0, 35, 0, 0, 36, 0, 0, 37, 0, 0})
	f.Add([]byte{39, 3, 2, 255, 4, 2, 41, 0, 0, 42, 10, 9, 43, 0, 0, 1, 0, 0, 2, 0, 0, 3, 11, 4})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 6 {
			return
		}
		// Narrow groups and wide ones just past MaxNarrowK; TestWideGroups covers whole blocks.
		k := 1 + int(in[0])%(MaxNarrowK+16)
		m := int(in[1]) % 5
		nParity := m + int(in[2])%4
		width := int(in[3])
		if width == 255 {
			width = MaxData
			if Wide(k) {
				width = WideMaxData
			}
		}
		rng := rand.New(rand.NewPCG(uint64(in[4]), uint64(in[5])))
		lens := make([]int, k)
		for i := range lens {
			lens[i] = width
			if in[5]&1 != 0 || i == k-1 {
				lens[i] = rng.IntN(width + 1)
			}
		}
		tg := newTestGroup(t, rng, lens, nParity)
		n := k + nParity
		g, err := NewGroup(k, m, ShardSize)
		if err != nil {
			t.Fatal(err)
		}

		held := map[int]bool{}
		sawParityLen, sawForged := false, false
		for ops := in[6:]; len(ops) >= 3; ops = ops[3:] {
			idx, kind, arg := int(ops[0])%n, ops[1]%12, int(ops[2])
			id := ShardID{K: k, M: m, Index: idx}
			payload := tg.shard(k, idx)
			class := genuine
			switch kind {
			case 6:
				id.K, class = k+1+arg%3, mustFail
			case 7:
				id.M, class = m+1+arg%3, mustFail
			case 8:
				id.Index, class = k+MaxParity+arg, mustFail
				if arg&1 != 0 {
					id.Index = -1 - arg
				}
			case 9:
				class = mustFail
				switch {
				case idx < k:
					payload = make([]byte, MaxData+1+arg)
				case arg&1 != 0:
					payload = payload[:arg%2]
				default:
					payload = make([]byte, ShardSize+1+arg)
				}
			case 10:
				if idx >= k {
					class = parityLen
					d := 1 + arg%4
					if arg&4 != 0 {
						payload = payload[:max(0, len(payload)-d)]
					} else {
						payload = append(append([]byte{}, payload...), make([]byte, d)...)
						for i := len(payload) - d; i < len(payload); i++ {
							payload[i] = byte(arg >> 3)
						}
					}
					if len(payload) < lenPrefix || len(payload) > ShardSize || Wide(k) {
						class = mustFail // wide rows are whole multiples of 64 bytes
					}
				}
			case 11:
				class = forged
				switch {
				case arg%3 == 0 || len(payload) == 0:
					id.Index = (idx + 1 + arg/3) % n
				case arg%3 == 1 && idx < k:
					payload = payload[:len(payload)-1-(arg/3)%len(payload)]
				default:
					payload = append([]byte{}, payload...)
					payload[(arg/3)%len(payload)] ^= 1 + byte(arg)
				}
			}

			haveBefore, doneBefore := g.Have(), g.Done()
			done, err := g.Add(id, payload)
			switch {
			case class == mustFail && err == nil:
				t.Fatalf("accepted impossible shard %+v (%d bytes)", id, len(payload))
			case class == genuine && err != nil && !sawParityLen && !sawForged:
				t.Fatalf("rejected genuine shard %+v: %v", id, err)
			case err != nil && g.Have() != haveBefore:
				t.Fatalf("rejected shard changed the group: %v", err)
			}
			if err == nil && g.Have() == haveBefore+1 {
				held[id.Index] = true
				sawParityLen = sawParityLen || class == parityLen
				sawForged = sawForged || class == forged
			} else if err == nil && g.Have() != haveBefore {
				t.Fatalf("have went %d -> %d", haveBefore, g.Have())
			} else if err == nil && !doneBefore && !held[id.Index] {
				t.Fatalf("shard %+v accepted but not held", id)
			}
			if g.Have() != len(held) || done != (len(held) >= k) || g.Need() != k-min(k, len(held)) {
				t.Fatalf("have %d need %d done %v; model holds %d of %d", g.Have(), g.Need(), done, len(held), k)
			}
		}

		out, err := g.Reconstruct()
		switch {
		case !g.Done():
			if out != nil || !errors.Is(err, ErrIncomplete) {
				t.Fatalf("incomplete group: %d shards, err %v", len(out), err)
			}
		case err != nil:
			if !errors.Is(err, ErrCorrupt) || out != nil {
				t.Fatalf("complete group: %d shards, err %v", len(out), err)
			}
			if !sawParityLen && !sawForged {
				t.Fatalf("genuine shards failed to decode: %v", err)
			}
		default:
			if len(out) != k {
				t.Fatalf("%d shards, want %d", len(out), k)
			}
			for i, s := range out {
				if len(s) > MaxData {
					t.Fatalf("shard %d: %d bytes", i, len(s))
				}
			}
			if !sawForged && digest(out) != digest(tg.data) {
				t.Fatalf("wrong bytes (parity resized: %v)", sawParityLen)
			}
		}

		// The recycled group and its pooled buffers decode genuine shards afterwards, from the
		// last k indices so that parity is used whenever there is some.
		if err := g.Reset(k, m, ShardSize); err != nil {
			t.Fatal(err)
		}
		for idx := n - 1; idx >= 0 && !g.Done(); idx-- {
			if _, err := g.Add(ShardID{K: k, M: m, Index: idx}, tg.shard(k, idx)); err != nil {
				t.Fatal(err)
			}
		}
		out, err = g.Reconstruct()
		if err != nil || digest(out) != digest(tg.data) {
			t.Fatalf("recycled group: %v", err)
		}
		g.Release()
	})
}

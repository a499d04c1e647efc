// Package fec protects Farwing's shard groups with Reed-Solomon parity sized from the measured
// random-loss rate, so that any k of a group's shards rebuild it without a round-trip.
package fec

import "errors"

const (
	// ShardSize is the largest shard payload, data or parity: the session's per-datagram shard
	// budget (lane.MaxDatagram 1452 minus the session header and AEAD tag).
	ShardSize = 1424

	// JumboShardSize is the largest shard of a session whose lanes agreed on large datagrams
	// (wire.JumboChunkSize, 8190 bytes, is JumboShardSize less the length prefix): a multiple of
	// 64, so a wide group's parity rows of whole chunks fit it exactly. A Group is given its shard
	// size when it is Reset.
	JumboShardSize = 8192

	// lenPrefix is the length field in front of every parity row.
	lenPrefix = 2

	// MaxData is the largest data shard: ShardSize less the row's length prefix, so that parity
	// shards fit in ShardSize too.
	MaxData = ShardSize - lenPrefix

	// MaxK is the largest number of data shards in a group: k + MaxParity is the 256 points of
	// GF(2^8). Auto mode splits a 1 MiB block of datagram chunks (746) into four groups of about
	// 187 (GroupSize). Larger groups need less parity for the same failure rate (see Plan): at
	// 3 % loss a 187-shard group fails 10 % of the time with 4.8 % parity, a 10-shard group
	// needs 20 %. A whole block as one group (3.9 %) would need GF(2^16), whose tables take
	// 72 MiB of memory in every process.
	MaxK = 256 - MaxParity

	// MaxNarrowK is the largest group coded over GF(2^8) with a Cauchy matrix. The field would
	// allow k + MaxParity up to 256; the limit stays where a rebuild's matrix inversion (k³, one
	// per loss pattern) is cheap. Larger ("wide") groups use reedsolomon's Leopard
	// code over GF(2^8) (O(n log n), no matrix inversion), which always computes all MaxParity
	// parity rows at once and needs rows a multiple of 64 bytes long.
	MaxNarrowK = 32

	// MaxParity bounds parity indices: body and tail parity plus every fresh repair index. Once a
	// group has used them all, the sender falls back to re-sending its missing data shards.
	MaxParity = 64

	// MaxBodyParity and MaxTailParity cap what Plan asks for (research/congestion-control.md §2.4),
	// leaving at least 8 fresh indices for repairs. A 187-shard group needs 9 at 3 % loss and
	// 14 at 5 %.
	MaxBodyParity = 48
	MaxTailParity = 56

	// WideMaxData is the largest data shard of a wide group: its rows (length prefix, data,
	// zero padding) are rounded up to 64 bytes and must still fit in ShardSize.
	WideMaxData = ShardSize/64*64 - lenPrefix
)

// Wide reports whether a group of k data shards uses the Leopard code.
func Wide(k int) bool { return k > MaxNarrowK }

// GroupSize returns the data shards per group when n chunks (a block) are split into as few
// groups of at most MaxK as possible, of sizes as equal as possible: every group but the last
// has GroupSize(n) shards, the last the rest. A 746-chunk block is 187+187+187+185.
func GroupSize(n int) int {
	if n <= MaxK {
		return max(n, 1)
	}
	groups := (n + MaxK - 1) / MaxK
	return (n + groups - 1) / groups
}

// Errors returned by this package; match them with errors.Is.
var (
	ErrShape      = errors.New("fec: shard does not match its group's (k, m)")
	ErrIndex      = errors.New("fec: shard index out of range")
	ErrLength     = errors.New("fec: bad shard length")
	ErrIncomplete = errors.New("fec: group incomplete")
	ErrCorrupt    = errors.New("fec: rebuilt group is malformed")
	ErrArgs       = errors.New("fec: invalid arguments")
)

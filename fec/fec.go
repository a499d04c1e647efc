// Package fec protects Farwing's shard groups with Reed-Solomon parity sized from the measured
// random-loss rate, so that any k of a group's shards rebuild it without a round-trip.
package fec

import "errors"

const (
	// ShardSize is the largest shard payload, data or parity: the session's per-datagram shard
	// budget (lane.MaxDatagram 1452 minus the session header and AEAD tag).
	ShardSize = 1424

	// lenPrefix is the length field in front of every parity row.
	lenPrefix = 2

	// MaxData is the largest data shard: ShardSize less the row's length prefix, so that parity
	// shards fit in ShardSize too.
	MaxData = ShardSize - lenPrefix

	// MaxK is the largest number of data shards in a group: a whole 1 MiB block of datagram
	// chunks (746) fits. Larger groups need less parity for the same failure rate (see Plan):
	// at 3 % loss a 746-shard group fails 10 % of the time with 3.9 % parity, a 10-shard group
	// needs 20 %.
	MaxK = 1024

	// MaxNarrowK is the largest group coded over GF(2^8) with a Cauchy matrix. The field would
	// allow k + MaxParity up to 256; the limit stays where a rebuild's matrix inversion (k³, one
	// per loss pattern) is cheap. Larger ("wide") groups use reedsolomon's Leopard
	// code over GF(2^16), which always computes all MaxParity parity rows at once and needs rows
	// a multiple of 64 bytes long.
	MaxNarrowK = 32

	// MaxParity bounds parity indices: body and tail parity plus every fresh repair index. Once a
	// group has used them all, the sender falls back to re-sending its missing data shards.
	MaxParity = 64

	// MaxBodyParity and MaxTailParity cap what Plan asks for (research/congestion-control.md §2.4),
	// leaving at least 8 fresh indices for repairs. A 746-shard group needs 29 at 3 % loss and
	// 48 at 5 %.
	MaxBodyParity = 48
	MaxTailParity = 56

	// WideMaxData is the largest data shard of a wide group: its rows (length prefix, data,
	// zero padding) are rounded up to 64 bytes and must still fit in ShardSize.
	WideMaxData = ShardSize/64*64 - lenPrefix
)

// Wide reports whether a group of k data shards uses the GF(2^16) code.
func Wide(k int) bool { return k > MaxNarrowK }

// Errors returned by this package; match them with errors.Is.
var (
	ErrShape      = errors.New("fec: shard does not match its group's (k, m)")
	ErrIndex      = errors.New("fec: shard index out of range")
	ErrLength     = errors.New("fec: bad shard length")
	ErrIncomplete = errors.New("fec: group incomplete")
	ErrCorrupt    = errors.New("fec: rebuilt group is malformed")
	ErrArgs       = errors.New("fec: invalid arguments")
)

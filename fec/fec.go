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

	// MaxK is the largest number of data shards in a group. Larger groups need less parity for
	// the same failure rate (see Plan) but rebuild more slowly and wait longer for their shards.
	MaxK = 32

	// DefaultK is the group size "auto" uses: reedsolomon rebuilds groups of at most 10 data
	// shards in one pass with its fused GFNI/AVX2 kernels (research/fast-udp-go.md §5).
	DefaultK = 10

	// MaxParity bounds parity indices: body and tail parity plus every fresh repair index. Once a
	// group has used them all, the sender falls back to re-sending its missing data shards.
	MaxParity = 64

	// MaxBodyParity and MaxTailParity cap what Plan asks for (research/congestion-control.md §2.4).
	MaxBodyParity = 16
	MaxTailParity = 24
)

// Errors returned by this package; match them with errors.Is.
var (
	ErrShape      = errors.New("fec: shard does not match its group's (k, m)")
	ErrIndex      = errors.New("fec: shard index out of range")
	ErrLength     = errors.New("fec: bad shard length")
	ErrIncomplete = errors.New("fec: group incomplete")
	ErrCorrupt    = errors.New("fec: rebuilt group is malformed")
	ErrArgs       = errors.New("fec: invalid arguments")
)

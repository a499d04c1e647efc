package fec

// Lane returns the lane (0..lanes-1) that shard index of group goes out on. Shards are dealt
// round-robin starting at lane group mod lanes, so consecutive groups start on different lanes
// and a burst that wipes out one lane costs any group at most ceil(shards/lanes) of its shards.
// Repair parity continues the same sequence. lanes < 1 counts as 1.
func Lane(group uint64, index, lanes int) int {
	if lanes < 1 || index < 0 {
		return 0
	}
	return int((group%uint64(lanes) + uint64(index)%uint64(lanes)) % uint64(lanes))
}

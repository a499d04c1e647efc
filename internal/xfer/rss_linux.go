package xfer

// rssBytes converts getrusage's ru_maxrss, which Linux counts in KiB.
func rssBytes(maxrss int64) int64 { return maxrss << 10 }

package lane

// Packet shaping for UDP GSO/GRO, as pure functions so that the rules can be table-tested without
// a kernel (compare wireguard-go conn/bind_std.go coalesceMessages / splitCoalescedMessages).

const (
	// udpSegmentMaxDatagrams mirrors the kernel's UDP_MAX_SEGMENTS before Linux 6.x (1 << 6).
	udpSegmentMaxDatagrams = 64
	// udpSegmentMaxDatagramsNew is UDP_MAX_SEGMENTS on recent kernels (measured on 6.18: 129 segments
	// fail with EINVAL).
	udpSegmentMaxDatagramsNew = 128
	// maxGSOBytes4 and maxGSOBytes6 are the largest UDP payloads of one (super-)datagram: 65535 minus
	// the IPv4 and UDP headers, and 65535 minus the UDP header (the IPv6 payload length excludes the
	// fixed IPv6 header).
	maxGSOBytes4 = 65535 - IPv4UDPHeaders
	maxGSOBytes6 = 65535 - 8
)

// span is one datagram handed to the kernel: packets pkts[start:end] of a Send call. If gso > 0 the
// span is a GSO super-packet that the kernel cuts into datagrams of gso bytes (the last may be
// shorter); if gso == 0 it is exactly one packet, sent without a UDP_SEGMENT control message.
type span struct {
	start, end int
	gso        int
}

// coalesce appends to spans the datagrams for pkts, at most maxSpans of them, and returns the
// extended slice. The spans cover a prefix of pkts in order: if maxSpans is reached before the end,
// the caller continues from spans[len(spans)-1].end.
//
// A packet joins the current super-packet only if
//   - it is no longer than the first packet (the gso size), and it is not empty;
//   - the super-packet then has at most maxSegs segments;
//   - the super-packet then has at most maxBytes bytes.
//
// A packet shorter than the gso size ends the super-packet (only the last segment may be short).
// maxSegs <= 1 disables coalescing.
func coalesce(spans []span, pkts [][]byte, maxSegs, maxBytes, maxSpans int) []span {
	n := 0
	for i := 0; i < len(pkts) && n < maxSpans; n++ {
		gso := len(pkts[i])
		total := gso
		j := i + 1
		if gso > 0 {
			for j < len(pkts) && j-i < maxSegs {
				l := len(pkts[j])
				if l == 0 || l > gso || total+l > maxBytes {
					break
				}
				total += l
				j++
				if l < gso {
					break
				}
			}
		}
		s := span{start: i, end: j}
		if j-i > 1 {
			s.gso = gso
		}
		spans = append(spans, s)
		i = j
	}
	return spans
}

// nextSegment cuts the first segment of a GRO-coalesced datagram b whose segments are gso bytes
// long (gso <= 0: b is one datagram). It returns the segment and the rest, both aliasing b.
func nextSegment(b []byte, gso int) (seg, rest []byte) {
	if gso <= 0 || gso >= len(b) {
		return b, nil
	}
	return b[:gso:gso], b[gso:]
}

package xfer

import (
	"fmt"
	"runtime"

	"github.com/farwing/farwing/internal/units"
)

// Limiter says what held a transfer's rate where it was, from the counters both ends keep, with
// the evidence: the figures the verdict rests on, so that a reader can disagree.
type Limiter struct {
	Cause  string `json:"cause"`  // capacity, ceiling, loss_backoff, queue_backoff, sender_cpu, receiver_cpu, source, window, socket_buffers, undetermined
	Detail string `json:"detail"` // one human sentence

	GoodputBps       float64 `json:"goodput_bps"`
	CapacityBps      float64 `json:"capacity_bps,omitempty"`  // the path's capacity, where the evidence agrees on one (pathCapacity); 0: not known
	TrainBps         float64 `json:"train_bps,omitempty"`     // the packet train's reading before data flowed
	DeliveredBps     float64 `json:"delivered_bps,omitempty"` // the most the path delivered during the copy (the controller's bottleneck estimate)
	CeilingBps       float64 `json:"ceiling_bps,omitempty"`   // --rate
	CongestionEvents uint64  `json:"congestion_events"`
	QueueEvents      uint64  `json:"queue_events,omitempty"` // of them, on a growing queue with no loss behind them
	SenderCPU        float64 `json:"sender_cpu"`             // CPU seconds per data second, of its cores
	ReceiverCPU      float64 `json:"receiver_cpu"`           // the same at the receiver
	WindowFull       float64 `json:"window_full"`            // share of the data phase the sender waited on the window
	SourceWait       float64 `json:"source_wait"`            // share it waited for the source to be read
	RxDropped        uint64  `json:"rx_dropped"`             // receive-buffer overflows at either end
	Datagrams        uint64  `json:"datagrams"`
}

// Thresholds of the verdict: a resource that was busy this share of the data phase held it.
const (
	busyCPU   = 0.85 // of the cores a side has
	busyWait  = 0.20 // of the data phase
	nearLimit = 0.85 // of a rate limit (capacity, ceiling)
	overflows = 0.001

	// A packet train is weak evidence: read through a lossy or loaded path its datagrams arrive
	// spread out (it reads low) or bunched (it reads high). It names the capacity only where the
	// copy does not contradict it: not below the goodput the copy achieved, and not far above the
	// most the path delivered while the controller probed it.
	trainOverGoodput   = 0.98 // a train below this share of the goodput is contradicted
	trainOverDelivered = 1.2  // a train above this many times the delivered maximum is contradicted
)

// pathCapacity is the capacity a verdict may name, 0 where the evidence does not agree on one:
// the train's reading where the copy bears it out (above).
func pathCapacity(l Limiter) float64 {
	t := l.TrainBps
	switch {
	case !(t > 0), t < trainOverGoodput*l.GoodputBps, l.DeliveredBps > 0 && t > trainOverDelivered*l.DeliveredBps:
		return 0
	}
	return t
}

// limiter decides in order of certainty: overflowing sockets and saturated CPUs are direct
// evidence, waits on the window or the source next, then whether the rate stood near what the
// path or the ceiling allows, and last the rate controller's backoff. It names a capacity only
// where the evidence agrees on one (pathCapacity); where it does not, it says what it knows: the
// rate the path carried, and whether anything held it below that.
func limiter(l Limiter) *Limiter {
	g := l.GoodputBps
	l.QueueEvents = min(l.QueueEvents, l.CongestionEvents) // on a pull, the peer's word
	l.CapacityBps = pathCapacity(l)
	switch {
	case l.Datagrams > 0 && float64(l.RxDropped) > overflows*float64(l.Datagrams):
		l.Cause, l.Detail = "socket_buffers", fmt.Sprintf("receive-buffer overflows: %d (raise net.core.rmem_max)", l.RxDropped)
	case l.SenderCPU >= busyCPU:
		l.Cause, l.Detail = "sender_cpu", fmt.Sprintf("the sender's CPU (sealing, hashing, reading): %.0f %% of its cores", 100*l.SenderCPU)
	case l.ReceiverCPU >= busyCPU:
		l.Cause, l.Detail = "receiver_cpu", fmt.Sprintf("the receiver's CPU (opening, hashing, writing): %.0f %% of its cores", 100*l.ReceiverCPU)
	case l.SourceWait >= busyWait && l.SourceWait >= l.WindowFull:
		l.Cause, l.Detail = "source", fmt.Sprintf("reading the source: the sender waited on it %.0f %% of the time", 100*l.SourceWait)
	case l.WindowFull >= busyWait:
		l.Cause, l.Detail = "window", fmt.Sprintf("the receive window: the sender waited on it %.0f %% of the time (the receiver's disk writes, or --window)", 100*l.WindowFull)
	case l.CeilingBps > 0 && g >= nearLimit*l.CeilingBps:
		l.Cause, l.Detail = "ceiling", fmt.Sprintf("the --rate ceiling (%s)", units.Rate(l.CeilingBps))
	case l.CapacityBps > 0 && g >= nearLimit*l.CapacityBps:
		l.Cause, l.Detail = "capacity", fmt.Sprintf("the path's capacity (about %s)", units.Rate(l.CapacityBps))
	case l.CapacityBps == 0 && l.DeliveredBps > 0 && g >= nearLimit*l.DeliveredBps:
		// No capacity to name, but the copy ran at the most the path delivered.
		l.Cause, l.Detail = "capacity", fmt.Sprintf("the path: at least %s, no sign of a limit below it", units.Rate(g))
	case l.CongestionEvents > 0:
		// Below what the path carried: the controller backed off. Say on what: a queue that kept
		// growing with no loss behind it (a receiver short of CPU, or a deep buffer) is not loss.
		below := fmt.Sprintf("the %s the path delivered at its best", units.Rate(l.DeliveredBps))
		if l.CapacityBps > 0 {
			below = fmt.Sprintf("the path's %s", units.Rate(l.CapacityBps))
		}
		switch q := l.QueueEvents; {
		case q == l.CongestionEvents:
			l.Cause, l.Detail = "queue_backoff", fmt.Sprintf("backoff on a growing queue: %d congestion events on rising delay, none on loss, held the rate below %s (a busy receiver or a deep buffer)", l.CongestionEvents, below)
		case q > 0:
			l.Cause, l.Detail = "loss_backoff", fmt.Sprintf("loss-driven backoff: %d congestion events (%d of them on a growing queue) held the rate below %s", l.CongestionEvents, q, below)
		default:
			l.Cause, l.Detail = "loss_backoff", fmt.Sprintf("loss-driven backoff: %d congestion events held the rate below %s", l.CongestionEvents, below)
		}
	default:
		l.Cause, l.Detail = "undetermined", "nothing in the counters stands out"
	}
	return &l
}

// cpuShare is CPU seconds over data seconds, of cores.
func cpuShare(cpu, seconds float64, cores int) float64 {
	if seconds <= 0 || cores <= 0 {
		return 0
	}
	return cpu / seconds / float64(cores)
}

// setLimiter fills r.Limiter once the result is complete. pushed: this end sent.
func (r *Result) setLimiter(pushed bool, window, source float64, peerCores int) {
	if r.DataSeconds <= 0 {
		return
	}
	// On a pull the waits are the peer's word: a share is bounded to the data phase.
	share := func(s float64) float64 { return min(max(s/r.DataSeconds, 0), 1) }
	l := Limiter{GoodputBps: r.GoodputBps, TrainBps: r.ProbeBps, CeilingBps: r.RateBps, RxDropped: r.RxDropped,
		Datagrams: r.DatagramsSent + r.DatagramsRecv, WindowFull: share(window), SourceWait: share(source)}
	if r.CC != nil {
		l.CongestionEvents = r.CC.CongestionEvents
		l.QueueEvents = r.CC.QueueEvents
		l.DeliveredBps = r.CC.BtlBwBps
	}
	// Whole-process CPU over the whole command (the CPU counters cover the process, not the data
	// phase alone): the start's share is small beside a copy's.
	local, peer := cpuShare(r.CPUSeconds, r.Seconds, runtime.NumCPU()), cpuShare(r.PeerCPU, r.Seconds, peerCores)
	if pushed {
		l.SenderCPU, l.ReceiverCPU = local, peer
	} else {
		l.SenderCPU, l.ReceiverCPU = peer, local
	}
	r.Limiter = limiter(l)
}

package xfer

// The published column in virtual time (docs/PERFORMANCE.md, "The published column in virtual
// time"): whole pushes, client and Serve, over lanetest's in-memory path at the published table's
// 11.8 Gbit/s and 139 ms, in testing/synctest's virtual time.

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// delayed is one way of the control channel on a long path: what its source gives arrives d
// later (ssh's TCP connection, without its losses).
type delayed struct {
	ch  chan piece
	cur []byte
	err error
	d   time.Duration
}

type piece struct {
	b   []byte
	at  time.Time
	err error
}

func newDelayed(r io.Reader, d time.Duration) *delayed {
	x := &delayed{ch: make(chan piece, 4096), d: d}
	go func() {
		for {
			b := make([]byte, 64<<10)
			n, err := r.Read(b)
			if n > 0 {
				x.ch <- piece{b: b[:n], at: time.Now()}
			}
			if err != nil {
				x.ch <- piece{at: time.Now(), err: err}
				return
			}
		}
	}()
	return x
}

func (x *delayed) Read(b []byte) (int, error) {
	for len(x.cur) == 0 {
		if x.err != nil {
			return 0, x.err
		}
		p := <-x.ch
		time.Sleep(time.Until(p.at.Add(x.d)))
		if p.err != nil {
			x.err = p.err
			continue
		}
		x.cur = p.b
	}
	n := copy(b, x.cur)
	x.cur = x.cur[n:]
	return n, nil
}

type delayedRemote struct {
	Remote
	d time.Duration
}

func (r delayedRemote) Control() (io.Reader, io.WriteCloser) {
	out, in := r.Remote.Control()
	return newDelayed(out, r.d), in
}

// simPath is the path of a simulated copy.
type simPath struct {
	rate float64       // bottleneck each way, bits/s of IP bytes
	rtt  time.Duration // round trip
	loss float64       // random loss each way, before the bottleneck's queue
	mtu  int           // the links' MTU (IP bytes); 9000 and up: the client says --mtu
	seed uint64
}

// simRun is one push: what it took and what it needed.
type simRun struct {
	res          *Result
	whole        time.Duration // the client's first control message to the verdict (Push returns)
	chunk        int
	window       int
	heap, heapOS uint64 // the most heap in use, and taken from the OS, sampled while it ran
}

// simPush pushes a sparse file of size bytes through p, with --sink, as a repeat copy (a
// remembered path) where the chunks are standard.
func simPush(t *testing.T, p simPath, size int64, window int, remembered float64) simRun {
	src := filepath.Join(t.TempDir(), "sparse")
	if err := os.WriteFile(src, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(src, size); err != nil {
		t.Fatal(err)
	}
	var out simRun
	synctest.Test(t, func(t *testing.T) {
		bdp := int(p.rate / 8 * p.rtt.Seconds())
		e := newEnv(t, lanetest.Link{Rate: p.rate, Delay: p.rtt / 2, Loss: p.loss, Queue: bdp, MTU: p.mtu}, p.seed)
		// A Conn's queue holds what is in flight to it as well as what waits: a quarter of the
		// path's delay line and queue. It is not the bottleneck.
		e.net.RecvBuf = 4 * bdp
		// ssh's start: two round trips (the channel's open and the exec) and the peer's own
		// start, 60 ms (docs/PERFORMANCE.md, "Where a copy's wall time goes on a long path").
		e.took = 2*p.rtt + 60*time.Millisecond
		d := p.rtt / 2
		e.serve = func(ctx context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error {
			return Serve(ctx, newDelayed(r, d), w, pub, so)
		}
		o := e.options()
		start := o.Start
		o.Start = func(ctx context.Context, host string, args []string, preface []byte) (Remote, error) {
			r, err := start(ctx, host, args, preface)
			if err != nil {
				return nil, err
			}
			return delayedRemote{r, d}, nil
		}
		o.Sink, o.Window = true, window
		if p.mtu >= session.JumboMTU {
			o.MTU = p.mtu
		}
		o.PathMemory = filepath.Join(t.TempDir(), "paths")
		if remembered > 0 {
			// What the last push on this path sustained (a copy over 1 s long records it).
			if err := rememberPath(o.PathMemory, pathKey("host", serverHost), pathRecord{At: time.Now().Unix(), RateBps: remembered, MinRTTus: p.rtt.Microseconds()}); err != nil {
				t.Fatal(err)
			}
		}
		var heap, heapOS atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			tk := time.NewTicker(250 * time.Millisecond)
			defer tk.Stop()
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap.Store(max(heap.Load(), ms.HeapInuse))
				heapOS.Store(max(heapOS.Load(), ms.HeapSys))
				select {
				case <-stop:
					return
				case <-tk.C:
				}
			}
		}()
		var chunk atomic.Int64
		t0 := time.Now()
		trace := os.Getenv("FARWING_SIM_TRACE") != ""
		var last time.Time
		var lastBytes int64
		o.Progress = func(pr Progress) {
			if !trace {
				return
			}
			now := time.Now()
			if last.IsZero() || now.Sub(last) >= 250*time.Millisecond {
				if !last.IsZero() {
					t.Logf("trace %.2f s: %.0f Mbit/s acknowledged, pacing %.0f Mbit/s, srtt %v, random loss %.4f, events %d, re-sent %d",
						now.Sub(t0).Seconds(), float64(pr.Bytes-lastBytes)*8/now.Sub(last).Seconds()/1e6, pr.RateBps/1e6, pr.SRTT, pr.RandomLoss, pr.CongestionEvents, pr.Retransmitted)
				}
				last, lastBytes = now, pr.Bytes
			}
		}
		o.Log = func(format string, args ...any) {
			if strings.HasPrefix(format, "UDP chunks") && len(args) > 0 {
				if c, ok := args[0].(int); ok {
					chunk.Store(int64(c))
				}
			}
		}
		if trace {
			o.Tuning.Debug = true
			o.DebugLog = func(format string, args ...any) {
				if strings.HasPrefix(format, "cc ") {
					t.Logf(format, args...)
				}
			}
		}
		res, err := Push(context.Background(), o, []string{src}, "host", "dst")
		out.whole = time.Since(t0)
		close(stop)
		<-sampled
		// The remote peer ends, and the control channel's delayed ways drain, inside the bubble.
		e.mu.Lock()
		for _, r := range e.serves {
			<-r.done
		}
		e.mu.Unlock()
		time.Sleep(2 * p.rtt)
		if err != nil {
			t.Fatalf("push: %v", err)
		}
		out.res, out.window, out.heap, out.heapOS = res, window, heap.Load(), heapOS.Load()
		out.chunk = int(chunk.Load())
		if out.chunk == 0 {
			out.chunk = wire.ChunkSize // not proposed
		}
	})
	return out
}

// The published table's path (/work/shared/reference/published-results.md): 11.8 Gbit/s,
// 139 ms, loss added at 0, 0.1, 1 and 3 %; here each way, before a one-BDP drop-tail queue.
const (
	pubRate = 11.8e9
	pubRTT  = 139 * time.Millisecond
)

var pubLosses = []float64{0, 0.001, 0.01, 0.03}

// ceiling is the file bytes a path of rate carries with chunks of chunk bytes (bits/s): file
// bytes per IP byte of a full data datagram.
func ceiling(rate float64, chunk int) float64 {
	return rate * float64(chunk) / float64(wire.DatagramFor(chunk)-2+lane.IPv4UDPHeaders)
}

// TestPublishedColumn prints the published table's Farwing column as the real engine makes it
// in virtual time: the 20 s throughput run (a --sink push of 20 s of data at the goal, its data
// phase's goodput, as farwing bench's row) and the 1 GiB and 10 GiB copies (--sink pushes, timed
// from the client's first control message to the verdict), median and range over seeds.
//
// FARWING_SIM=published runs it (minutes of CPU per run; a column of three seeds at four levels
// is about an hour at MTU 1500): FARWING_SIM_MTU (9000, or 1500; default both), FARWING_SIM_SEEDS
// (3), FARWING_SIM_FIRST (1, the first seed), FARWING_SIM_ROWS (throughput,1G,10G),
// FARWING_SIM_LOSS (0,0.1,1,3, in per cent). Without
// it a small path checks that the harness runs (seconds).
func TestPublishedColumn(t *testing.T) {
	type row struct {
		name string
		size int64
	}
	if os.Getenv("FARWING_SIM") != "published" {
		// 200 Mbit/s, 40 ms, 1 %, MTU 9000: a 16 MiB copy agrees on jumbo chunks and completes.
		r := simPush(t, simPath{rate: 200e6, rtt: 40 * time.Millisecond, loss: 0.01, mtu: 9000, seed: 1}, 16<<20, 64, 0)
		if r.chunk != wire.JumboChunkSize {
			t.Fatalf("chunks of %d bytes over an MTU of 9000, want %d", r.chunk, wire.JumboChunkSize)
		}
		r = simPush(t, simPath{rate: 200e6, rtt: 40 * time.Millisecond, loss: 0.01, mtu: 1500, seed: 1}, 16<<20, 64, 190e6)
		if r.chunk != wire.ChunkSize || r.res.StartBps == 0 {
			t.Fatalf("MTU 1500: chunks of %d bytes, start at %.0f bit/s: want %d and the remembered rate", r.chunk, r.res.StartBps, wire.ChunkSize)
		}
		t.Logf("small path: %.2f s, %.0f Mbit/s", r.whole.Seconds(), r.res.GoodputBps/1e6)
		return
	}
	// Block buffers from the Go heap, not the process's never-returned arena: runs in one
	// process then reuse their memory, and the heap figure counts both ends' blocks.
	fcopy.SetHugePages(false)
	defer fcopy.SetHugePages(true)
	mtus := []int{9000, 1500}
	if s := os.Getenv("FARWING_SIM_MTU"); s != "" {
		mtus = nil
		for _, f := range strings.Split(s, ",") {
			m, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			mtus = append(mtus, m)
		}
	}
	seeds := 3
	if s := os.Getenv("FARWING_SIM_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	first := 1 // FARWING_SIM_FIRST: the first seed (to add seeds to a column run in parts)
	if s := os.Getenv("FARWING_SIM_FIRST"); s != "" {
		first, _ = strconv.Atoi(s)
	}
	losses := pubLosses
	if s := os.Getenv("FARWING_SIM_LOSS"); s != "" {
		losses = nil
		for _, f := range strings.Split(s, ",") {
			l, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, l/100)
		}
	}
	want := "throughput,1G,10G"
	if s := os.Getenv("FARWING_SIM_ROWS"); s != "" {
		want = s
	}
	var rows []row
	for _, r := range strings.Split(want, ",") {
		switch r {
		case "throughput":
			rows = append(rows, row{"throughput", 0})
		case "1G":
			rows = append(rows, row{"1 GiB copy", 1 << 30})
		case "10G":
			rows = append(rows, row{"10 GiB copy", 10 << 30})
		}
	}
	// The window a user gives such a path (--window): four round trips at the path's rate, as
	// tuning.WindowBlocks sizes it for a --rate (the default, sized for 2.5 Gbit/s, would hold
	// the copy to 181 MiB a round trip, 10.9 Gbit/s at 139 ms).
	window := min(int(4*pubRate/8*pubRTT.Seconds()/fcopy.BlockSize)+16, 1024)
	for _, mtu := range mtus {
		chunk := wire.ChunkSize
		if mtu >= session.JumboMTU {
			chunk = wire.JumboChunkSize
		}
		ceil := ceiling(pubRate, chunk)
		// A repeat copy: the path remembers what a push sustained (wire bytes over the data
		// phase); standard chunks only, jumbo ones wait for the handshake's proof.
		remembered := 0.0
		if chunk == wire.ChunkSize {
			remembered = 0.97 * pubRate * float64(lane.MaxDatagram) / float64(lane.MaxDatagram+lane.IPv4UDPHeaders)
		}
		var table strings.Builder
		fmt.Fprintf(&table, "Virtual time: the algorithm, not this machine's CPU. Path MTU %d: %d-byte chunks, payload ceiling %.0f Mbit/s.\n", mtu, chunk, ceil/1e6)
		fmt.Fprintf(&table, "11.8 Gbit/s, 139 ms, one-BDP drop-tail queue, loss each way before it; --sink pushes, --window %d; median, min-max over %d seeds.\n\n", window, seeds)
		fmt.Fprintf(&table, "| Added loss |")
		for _, r := range rows {
			fmt.Fprintf(&table, " %s |", r.name)
		}
		fmt.Fprintf(&table, " memory: window each end, heap (both ends) |\n|---|")
		for range rows {
			fmt.Fprintf(&table, "---|")
		}
		fmt.Fprintf(&table, "---|\n")
		for _, loss := range losses {
			fmt.Fprintf(&table, "| %s |", lossName(loss))
			var heap, heapOS uint64
			for _, r := range rows {
				var vals []float64
				for seed := range seeds {
					size := r.size
					if size == 0 { // 20 s at the goal (11,300 Mbit/s), whole blocks
						size = int64(11.3e9/8*20) / fcopy.BlockSize * fcopy.BlockSize
					}
					p := simPath{rate: pubRate, rtt: pubRTT, loss: loss, mtu: mtu, seed: uint64(seed + first)}
					wallStart := time.Now()
					run := simPush(t, p, size, window, remembered)
					heap, heapOS = max(heap, run.heap), max(heapOS, run.heapOS)
					v := run.whole.Seconds()
					if r.size == 0 {
						v = run.res.GoodputBps / 1e6
					}
					vals = append(vals, v)
					c := run.res.CC
					cuts := uint64(0)
					if c != nil {
						cuts = c.CongestionEvents
					}
					t.Logf("MTU %d, loss %s, %s, seed %d: %s in %.3f s (data %.3f s, goodput %.0f Mbit/s = %.1f %% of the ceiling, start at %.0f Mbit/s, train %.0f Mbit/s), chunks %d, wire/file %.4f, re-sent %d, tail %.3f s, %d congestion events; heap %d MiB, %d MiB from the OS; limiter %s; %.0f s of this machine",
						mtu, lossName(loss), r.name, seed+first, sizeName(size), run.whole.Seconds(), run.res.DataSeconds, run.res.GoodputBps/1e6, 100*run.res.GoodputBps/ceil,
						run.res.StartBps/1e6, run.res.ProbeBps/1e6, run.chunk, run.res.WireRatio, run.res.Retransmitted, run.res.TailSeconds, cuts,
						run.heap>>20, run.heapOS>>20, limiterOf(run.res), time.Since(wallStart).Seconds())
				}
				fmt.Fprintf(&table, " %s |", cell(vals, r.size != 0))
			}
			fmt.Fprintf(&table, " %d MiB, %d MiB (%d from the OS) |\n", window, heap>>20, heapOS>>20)
		}
		t.Logf("\n%s", table.String())
	}
}

func lossName(l float64) string {
	if l == 0 {
		return "None"
	}
	return strconv.FormatFloat(l*100, 'g', -1, 64) + "%"
}

func sizeName(n int64) string {
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// cell is a table cell: the median, then the min-max, as the published table writes them.
func cell(v []float64, seconds bool) string {
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if seconds {
		return fmt.Sprintf("%.2f s %.2f–%.2f s", med, s[0], s[len(s)-1])
	}
	f := func(x float64) string { return commas(int64(math.Round(x))) }
	return fmt.Sprintf("%s %s–%s", f(med), f(s[0]), f(s[len(s)-1]))
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func limiterOf(r *Result) string {
	if r.Limiter == nil {
		return "none"
	}
	l := r.Limiter
	return fmt.Sprintf("%s (window full %.0f %%, delivered %.0f Mbit/s): %s", l.Cause, 100*l.WindowFull, l.DeliveredBps/1e6, l.Detail)
}

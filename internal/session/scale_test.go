package session

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// scaleCell is one path of TestVirtualScale: a bottleneck rate each way, 140 ms round trip,
// a one-BDP drop-tail queue, random loss each way, for about dur of virtual time.
type scaleCell struct {
	rate, loss float64
	dur        time.Duration
}

// TestVirtualScale runs the real sender and receiver (session, cc, fec, wire: everything but the
// sockets) over lanetest's in-memory network in virtual time (testing/synctest), so paths far
// beyond what this machine's sockets and CPUs carry can be measured: CPU work takes no virtual
// time, and what the figures show is the engine's algorithm and its bookkeeping. The file is
// sparse, read and verified as any file, and the receiver discards it (--sink).
//
// Every run checks a small cell (250 Mbit/s, 1 %, 2 s). FARWING_SCALE=1 runs the published
// path's cells instead, 10 s of virtual time each (minutes of CPU, about 2 GiB of memory at
// 10 Gbit/s): 2.5 and 10 Gbit/s at 0 and 3 % loss.
func TestVirtualScale(t *testing.T) {
	cells := []scaleCell{{250e6, 0.01, 2 * time.Second}}
	if os.Getenv("FARWING_SCALE") != "" {
		cells = []scaleCell{{2.5e9, 0, 10 * time.Second}, {2.5e9, 0.03, 10 * time.Second}, {10e9, 0, 10 * time.Second}, {10e9, 0.03, 10 * time.Second}}
	}
	for _, c := range cells {
		t.Run(fmt.Sprintf("%.2gGbit-%.0f%%", c.rate/1e9, c.loss*100), func(t *testing.T) {
			// The payload ceiling: file bytes per IP byte of a full data datagram.
			ceiling := c.rate * float64(wire.ChunkSize) / float64(wire.DatagramFor(wire.ChunkSize)+lane.IPv4UDPHeaders)
			size := int64(ceiling / 8 * c.dur.Seconds())
			size -= size % fcopy.BlockSize
			src := filepath.Join(t.TempDir(), "sparse")
			if err := os.WriteFile(src, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(src, size); err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) { runScaleCell(t, c, src, size, ceiling) })
		})
	}
}

func runScaleCell(t *testing.T, c scaleCell, src string, size int64, ceiling float64) {
	const rtt = 140 * time.Millisecond
	bdp := int(c.rate / 8 * rtt.Seconds())
	n := lanetest.New(lanetest.Link{Rate: c.rate, Delay: rtt / 2, Loss: c.loss, Queue: bdp}, 7)
	// A Conn's queue holds what is in flight to it as well as what waits: up to a quarter of
	// the path's delay line and queue. It is not the bottleneck here.
	n.RecvBuf = 4 * bdp
	ccrypto, scrypto := memCryptos()
	// Not loopback addresses: a loopback path turns FEC off and proposes large chunks.
	ca, sa := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	server := NewPath(memLanes(t, n, sa), scrypto, true)
	client := NewPath(memLanes(t, n, ca), ccrypto, false)
	defer client.Close()
	defer server.Close()
	var dst []netip.AddrPort
	for _, p := range server.Ports() {
		dst = append(dst, netip.AddrPortFrom(sa, uint16(p)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hsRTT, err := client.Handshake(ctx, dst, 5*time.Second, true) // with the packet train, as a push
	if err != nil {
		t.Fatal(err)
	}
	if err := server.WaitPeers(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	sources, err := fcopy.Collect([]string{src}, fcopy.CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := fcopy.NewPlan(sources.Files)
	if err != nil {
		t.Fatal(err)
	}
	// The window a copy picks (xfer's Options.window): four BDPs of blocks at the rate, 64–1024.
	window := min(max(int(4*c.rate/8*rtt.Seconds()/fcopy.BlockSize)+16, 64), 1024)
	var sums sync.Map
	pool := fcopy.NewPool(window + 4)
	blocks := make(chan *fcopy.Block, 4)
	go func() {
		fcopy.Read(ctx, plan, sources.Open(), pool, blocks, func(i int, s [32]byte) { sums.Store(i, s) })
		close(blocks)
	}()
	w := fcopy.NewWriter(plan, nil, fcopy.WriterOptions{Sink: true, Digest: digestFrom(&sums)})
	defer w.Close()
	recv := NewReceiver(server, plan, w, window)
	errc := make(chan error, 1)
	var recvDone time.Time
	go func() {
		err := recv.Run(ctx)
		recvDone = time.Now()
		errc <- err
	}()
	snd := NewSender(client, plan, pool, SenderConfig{Window: window, InitialRTT: hsRTT, FEC: fec.Mode{Kind: fec.ModeAuto}})
	// The acknowledged bytes every 100 ms, for the steady state between 3 s in and 1 s before the
	// end (what cc/simnet's figures measure).
	type mark struct {
		at    time.Time
		bytes int64
	}
	var marks []mark
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tk.C:
				if p := snd.Progress(); p != nil {
					marks = append(marks, mark{now, int64(p.Bytes)})
				}
			}
		}
	}()
	err = snd.Run(ctx, blocks)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatalf("sender: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("receiver: %v", err)
	}
	st, rs := snd.Stats(), recv.Stats()
	if got := w.Results(); len(got) != 1 {
		t.Fatalf("receiver results %v, want one file", got)
	}
	if rs.Outside != 0 || rs.Invalid != 0 {
		t.Fatalf("receiver refused %d chunks outside its window, %d invalid", rs.Outside, rs.Invalid)
	}
	if st.FirstDataAt.IsZero() || !recvDone.After(st.FirstDataAt) {
		t.Fatalf("no data phase: first data at %v, receiver done at %v", st.FirstDataAt, recvDone)
	}
	data := recvDone.Sub(st.FirstDataAt)
	goodput := float64(size) * 8 / data.Seconds()
	steady := "no steady state (under 5 s)"
	var from, to *mark
	for i := range marks {
		m := &marks[i]
		if from == nil && m.at.Sub(st.FirstDataAt) >= 3*time.Second {
			from = m
		}
		if recvDone.Sub(m.at) >= time.Second {
			to = m
		}
	}
	if from != nil && to != nil && to.at.Sub(from.at) >= 2*time.Second {
		g := float64(to.bytes-from.bytes) * 8 / to.at.Sub(from.at).Seconds()
		steady = fmt.Sprintf("steady state (%.1f–%.1f s) %.3f Gbit/s = %.1f %%", from.at.Sub(st.FirstDataAt).Seconds(), to.at.Sub(st.FirstDataAt).Seconds(), g/1e9, 100*g/ceiling)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%.2g Gbit/s, %.0f %% loss, 140 ms, 1-BDP queue: %d MiB in %.2f s of virtual time: goodput %.3f Gbit/s = %.1f %% of the payload ceiling %.3f Gbit/s, %s; "+
		"window %d blocks (pool %d MiB each side), wire/file %.4f, re-sent %d, parity %d (%d repair), %d congestion events (%d PROBE_RTT), btlbw %.3f Gbit/s, srtt %v; "+
		"heap %d MiB in use, %d MiB from the OS (both ends and the network)",
		c.rate/1e9, c.loss*100, size>>20, data.Seconds(), goodput/1e9, 100*goodput/ceiling, ceiling/1e9, steady,
		window, window+4, float64(st.WireBytes)/float64(size), st.Retransmitted, st.Parity, st.RepairParity, st.CC.CongestionEvents, st.CC.ProbeRTTs, st.CC.BtlBw/1e9, st.SRTT,
		ms.HeapInuse>>20, ms.Sys>>20)
	client.Close()
	server.Close()
	cancel()
}

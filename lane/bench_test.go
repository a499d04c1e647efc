package lane

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// benchCase is one loopback configuration.
type benchCase struct {
	name     string
	addr     string
	gso, gro bool
	copy     bool // coalesce by copying instead of iovecs (Linux only)
	portable bool // the portable path (Options.Portable), macOS's
}

var benchCases = []benchCase{
	{"v4/gso+gro", "127.0.0.1:0", true, true, false, false},
	{"v4/gso+gro-copy", "127.0.0.1:0", true, true, true, false},
	{"v4/gso", "127.0.0.1:0", true, false, false, false},
	{"v4/gro", "127.0.0.1:0", false, true, false, false},
	{"v4/plain", "127.0.0.1:0", false, false, false, false},
	{"v4/portable", "127.0.0.1:0", false, false, false, true},
	{"v6/gso+gro", "[::1]:0", true, true, false, false},
	{"v6/plain", "[::1]:0", false, false, false, false},
	{"v6/portable", "[::1]:0", false, false, false, true},
}

// BenchmarkLoopback sends MaxDatagram packets from one lane to another over loopback and receives
// them; one op is one packet. The sender keeps at most window bytes in flight, so the receiver's
// socket buffer does not overflow and the figures are sustainable throughput, not send speed.
// Each received datagram is checked for size and increasing sequence numbers.
func BenchmarkLoopback(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) { benchLoopback(b, bc) })
	}
}

func benchLoopback(b *testing.B, bc benchCase) {
	const (
		size   = MaxDatagram
		chunk  = 64 // packets per Send
		window = 4 << 20
	)
	tx := listen(b, bc.addr, Options{DisableGSO: !bc.gso, Portable: bc.portable})
	rx := listen(b, bc.addr, Options{DisableGRO: !bc.gro, Portable: bc.portable})
	setCopyMode(tx, bc.copy)
	if g, _ := tx.Offload(); g != bc.gso {
		b.Skipf("GSO not available")
	}
	if _, g := rx.Offload(); g != bc.gro {
		b.Skipf("GRO not available")
	}
	pkts := numbered(chunk, func(int) int { return size })
	dst := rx.LocalAddr()

	var got, bad atomic.Int64
	done := make(chan struct{})
	var last uint32
	first := true
	check := func(p []byte, _ netip.AddrPort) {
		seq := binary.BigEndian.Uint32(p)
		if len(p) != size || !first && seq <= last {
			bad.Add(1)
		}
		first, last = false, seq
	}
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := rx.Recv(time.Now().Add(200*time.Millisecond), check)
			got.Add(int64(n))
			select {
			case <-stop:
				if err != nil {
					return
				}
			default:
			}
			if err != nil && err != ErrTimeout {
				return
			}
		}
	}()

	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	limit := start.Add(60 * time.Second)
	seq := uint32(0)
	for sent := 0; sent < b.N; {
		n := min(chunk, b.N-sent)
		for i := range n {
			binary.BigEndian.PutUint32(pkts[i], seq)
			seq++
		}
		for int64(sent)-got.Load() > window/size && time.Now().Before(limit) {
			runtime.Gosched()
		}
		if err := tx.Send(dst, pkts[:n]); err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	// Wait for the tail: until everything arrived or nothing moved for 200 ms.
	for prev, idle := got.Load(), time.Now(); got.Load() < int64(b.N) && time.Since(idle) < 200*time.Millisecond; {
		runtime.Gosched()
		if g := got.Load(); g != prev {
			prev, idle = g, time.Now()
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	close(stop)
	<-done

	n := got.Load()
	if bad.Load() > 0 {
		b.Fatalf("%d datagrams out of order or wrong size", bad.Load())
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "pkts/s")
	b.ReportMetric(float64(n)*size*8/elapsed.Seconds()/1e9, "Gbit/s")
	b.ReportMetric(float64(b.N-int(n))*100/float64(b.N), "loss%")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(n, 1)), "cpu-ns/pkt")
	}
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(max(n, 1)), "allocs/pkt")
	st := tx.Stats()
	b.ReportMetric(float64(st.SentDatagrams)/float64(max(st.TxSyscalls, 1)), "pkts/sendcall")
	b.ReportMetric(float64(rx.Stats().RecvDatagrams)/float64(max(rx.Stats().RxSyscalls, 1)), "pkts/recvcall")
}

// BenchmarkSend measures the send path alone: the receiving socket is never read, so the kernel
// drops at its queue, which is cheap. One op is one packet.
func BenchmarkSend(b *testing.B) {
	for _, bc := range benchCases {
		if bc.addr != "127.0.0.1:0" || bc.gso != bc.gro { // GRO is the receiver's business
			continue
		}
		b.Run(bc.name, func(b *testing.B) {
			tx := listen(b, bc.addr, Options{DisableGSO: !bc.gso, Portable: bc.portable})
			rx := listen(b, bc.addr, Options{Buffer: 64 << 10})
			setCopyMode(tx, bc.copy)
			pkts := numbered(64, func(int) int { return MaxDatagram })
			dst := rx.LocalAddr()
			b.SetBytes(MaxDatagram)
			b.ReportAllocs()
			start, cpu0 := time.Now(), cpuTime()
			sent := 0
			for sent < b.N {
				n := min(len(pkts), b.N-sent)
				if err := tx.Send(dst, pkts[:n]); err != nil {
					b.Fatal(err)
				}
				sent += n
			}
			el, cpu := time.Since(start), cpuTime()-cpu0
			if cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(sent), "cpu-ns/pkt")
			}
			b.ReportMetric(float64(sent)/el.Seconds(), "pkts/s")
			b.ReportMetric(float64(sent)*MaxDatagram*8/el.Seconds()/1e9, "Gbit/s")
		})
	}
}

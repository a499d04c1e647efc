package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/netip"
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/zeebo/blake3"
)

// benchPair opens a client and a server Path on loopback, with socket buffers of buf bytes,
// joined by the handshake.
func benchPair(tb testing.TB, buf int) (client, server *Path) {
	tb.Helper()
	return pairWith(tb, buf, false)
}

// pairWith is benchPair with the client proposing large chunks (jumbo).
func pairWith(tb testing.TB, buf int, jumbo bool) (client, server *Path) {
	tb.Helper()
	key := make([]byte, wire.KeyLen)
	rand.Read(key)
	cc, _ := wire.NewCrypto(key, 9, wire.ClientToServer)
	sc, _ := wire.NewCrypto(key, 9, wire.ServerToClient)
	// Each path's lane goroutines carry a label naming its end, so that a profile of the
	// benchmark splits by end: go tool pprof -tagfocus end=receiver (or sender).
	var err error
	pprof.Do(context.Background(), pprof.Labels("end", "receiver"), func(context.Context) {
		server, err = Open("127.0.0.1:0", sc, true, buf)
	})
	if err != nil {
		tb.Fatal(err)
	}
	pprof.Do(context.Background(), pprof.Labels("end", "sender"), func(context.Context) {
		client, err = Open("127.0.0.1:0", cc, false, buf)
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close(); server.Close() })
	if jumbo {
		client.ProposeJumbo()
	}
	var dst []netip.AddrPort
	for _, p := range server.Ports() {
		dst = append(dst, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p)))
	}
	if _, err := client.Handshake(context.Background(), dst, 5*time.Second, false); err != nil {
		tb.Fatal(err)
	}
	if err := server.WaitPeers(context.Background(), 5*time.Second); err != nil {
		tb.Fatal(err)
	}
	return client, server
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// patternFile is a virtual file of size bytes: a 4 MiB random pattern repeated at an odd stride,
// so that a large transfer needs no memory of its size.
type patternFile struct {
	pat  []byte
	size int64
}

const patternLen = 4<<20 + 4093

func (p *patternFile) ReadAt(b []byte, off int64) (int, error) {
	if off >= p.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.size-off)]
	n := 0
	for n < len(b) {
		n += copy(b[n:], p.pat[(off+int64(n))%patternLen:])
	}
	return n, nil
}

// BenchmarkTransfer sends a 1 GiB file (generated on the fly) from a Sender to a sink Receiver
// over the four loopback lanes in this process, with everything the real engines do per byte:
// block and whole-file BLAKE3 at both ends, sealing, opening, reassembly and feedback, in the
// 1,406-byte chunks of every path but loopback (a veth pair's, a network's). One op is one
// transfer; MB/s is file data. Wall time means little on a shared machine: cpu-s/GiB is the
// process's CPU time (user and system, getrusage, both ends and the kernel's work on their system
// calls) per GiB, and cpu-ns/dgram the same per data datagram sent. FARWING_BENCH_CPUPROFILE=path
// writes a CPU profile of all ops, its samples labelled end=sender or end=receiver (the reader,
// the sender's loop and sealers; the receiver's lanes, verify workers and writer).
func BenchmarkTransfer(b *testing.B) { benchTransfer(b, fec.Mode{Kind: fec.ModeAuto}) }

// BenchmarkTransferJumbo is BenchmarkTransfer with the 8 KiB chunks a loopback copy agrees on.
func BenchmarkTransferJumbo(b *testing.B) {
	benchTransferWith(b, fec.Mode{Kind: fec.ModeAuto}, "", true)
}

// BenchmarkTransferFEC is BenchmarkTransfer with fixed 10+2 parity on every group: the sender
// encodes and sends 20 % more datagrams, and the receiver opens a group wherever parity overtakes
// data (no loss, so nothing is rebuilt unless it does).
func BenchmarkTransferFEC(b *testing.B) { benchTransfer(b, fec.Mode{Kind: fec.ModeFixed, K: 10, M: 2}) }

// BenchmarkTransferDisk is BenchmarkTransfer writing the file to disk (a temporary directory):
// temp file, direct (or page-cache) writes, fsync and rename, as a real copy does.
func BenchmarkTransferDisk(b *testing.B) {
	benchTransferTo(b, fec.Mode{Kind: fec.ModeAuto}, b.TempDir())
}

func benchTransfer(b *testing.B, mode fec.Mode) { benchTransferTo(b, mode, "") }

func benchTransferTo(b *testing.B, mode fec.Mode, dir string) { benchTransferWith(b, mode, dir, false) }

// benchTransferWith sends a 1 GiB file over loopback into dir, or into a sink when dir is "",
// in large chunks with jumbo.
func benchTransferWith(b *testing.B, mode fec.Mode, dir string, jumbo bool) {
	const size = 1 << 30
	const window = 64
	pf := &patternFile{pat: make([]byte, patternLen), size: size}
	rand.Read(pf.pat)
	h := blake3.New()
	io.Copy(h, io.NewSectionReader(pf, 0, size))
	want := hex.EncodeToString(h.Sum(nil))
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: size, Mode: 0o644}})
	if err != nil {
		b.Fatal(err)
	}
	open := func(int) (io.ReaderAt, io.Closer, error) { return pf, nopCloser{}, nil }
	if p := os.Getenv("FARWING_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	pool := fcopy.NewPool(window + 4) // as the engines size it; reused so that ops do not pay page faults
	b.SetBytes(size)
	b.ReportAllocs()
	var cpu time.Duration
	var datagrams uint64
	for b.Loop() {
		b.StopTimer()
		client, server := pairWith(b, 16<<20, jumbo)
		b.StartTimer()
		cpu0 := processCPU()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var sums sync.Map
		blocks := make(chan *fcopy.Block, 4)
		senderEnd := pprof.WithLabels(ctx, pprof.Labels("end", "sender"))
		receiverEnd := pprof.WithLabels(ctx, pprof.Labels("end", "receiver"))
		pprof.SetGoroutineLabels(senderEnd)
		go func() {
			fcopy.Read(ctx, plan, open, pool, blocks, func(i int, s [32]byte) { sums.Store(i, s) })
			close(blocks)
		}()
		var target *fcopy.Target
		if dir != "" {
			if target, err = fcopy.ResolveTarget(dir+"/", plan.Files); err != nil {
				b.Fatal(err)
			}
		}
		w := fcopy.NewWriter(plan, target, fcopy.WriterOptions{Sink: dir == "", Digest: digestFrom(&sums)})
		recv := NewReceiver(server, plan, w, window)
		errc := make(chan error, 1)
		pprof.SetGoroutineLabels(receiverEnd)
		go func() { errc <- recv.Run(ctx) }()
		pprof.SetGoroutineLabels(senderEnd)
		snd := NewSender(client, plan, pool, SenderConfig{Window: window, InitialRTT: time.Millisecond, FEC: mode})
		if err := snd.Run(ctx, blocks); err != nil {
			b.Fatalf("sender: %v", err)
		}
		if err := <-errc; err != nil {
			b.Fatalf("receiver: %v", err)
		}
		cancel()
		cpu += processCPU() - cpu0
		pprof.SetGoroutineLabels(context.Background())
		if got := w.Results(); len(got) != 1 || got[0].Sum != want {
			b.Fatalf("results %+v, want blake3 %s", got, want)
		}
		st := snd.Stats()
		if testing.Verbose() {
			var drops uint64
			for _, ls := range server.LaneStats() {
				drops += ls.RxDropped
			}
			b.Logf("sender %+v\nreceiver %+v kernel drops %d", st, recv.Stats(), drops)
		}
		datagrams += st.Datagrams
		b.ReportMetric(float64(st.Retransmitted)/float64(st.Datagrams)*100, "%retx")
		b.ReportMetric(float64(st.Datagrams), "datagrams/op")
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N)/(size/(1<<30)), "cpu-s/GiB")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(datagrams), "cpu-ns/dgram")
}

// processCPU is the user and system time this process has used (getrusage).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func blake3sum(b []byte) string { // kept for tests that hash a whole buffer
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}

// BenchmarkTransferNoFEC is BenchmarkTransfer with FEC off, for comparison.
func BenchmarkTransferNoFEC(b *testing.B) { benchTransfer(b, fec.Mode{Kind: fec.ModeOff}) }

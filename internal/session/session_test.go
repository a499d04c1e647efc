package session

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bytes"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// memPair opens a client and a server Path on lanetest's in-memory network, on two loopback
// addresses (127.0.0.1 and 127.0.0.2, as a copy between two ends of one host), joined by the
// handshake; every link of the network is def.
func memPair(tb testing.TB, def lanetest.Link, seed uint64, jumbo bool) (client, server *Path, n *lanetest.Network) {
	tb.Helper()
	n = lanetest.New(def, seed)
	client, server = memPairOn(tb, n, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), jumbo)
	return client, server, n
}

// memPairOn is memPair on the network n, with the client at ca and the server at sa.
func memPairOn(tb testing.TB, n *lanetest.Network, ca, sa netip.Addr, jumbo bool) (client, server *Path) {
	tb.Helper()
	cc, sc := memCryptos()
	server = NewPath(memLanes(tb, n, sa), sc, true)
	client = NewPath(memLanes(tb, n, ca), cc, false)
	tb.Cleanup(func() { client.Close(); server.Close() })
	if jumbo {
		client.ProposeJumbo()
	}
	var dst []netip.AddrPort
	for _, p := range server.Ports() {
		dst = append(dst, netip.AddrPortFrom(sa, uint16(p)))
	}
	if _, err := client.Handshake(context.Background(), dst, 5*time.Second, false); err != nil {
		tb.Fatal(err)
	}
	if err := server.WaitPeers(context.Background(), 5*time.Second); err != nil {
		tb.Fatal(err)
	}
	return client, server
}

// memCryptos are a client's and a server's ends of a session under a fresh key.
func memCryptos() (client, server *wire.Crypto) {
	key := make([]byte, wire.KeyLen)
	rand.Read(key)
	client, _ = wire.NewCrypto(key, 9, wire.ClientToServer)
	server, _ = wire.NewCrypto(key, 9, wire.ServerToClient)
	return client, server
}

// memLanes opens a Path's four lanes on host a of n.
func memLanes(tb testing.TB, n *lanetest.Network, a netip.Addr) (conns [Lanes]lane.PacketConn) {
	tb.Helper()
	for i := range conns {
		c, err := n.Listen(a)
		if err != nil {
			tb.Fatal(err)
		}
		conns[i] = c
	}
	return conns
}

// lossyPair is memPair with random loss of the given fraction in both directions.
func lossyPair(t *testing.T, loss float64, seed uint64) (client, server *Path) {
	t.Helper()
	client, server, _ = memPair(t, lanetest.Link{Loss: loss}, seed, false)
	return client, server
}

// transfer sends files of the given sizes from a Sender to a Receiver through loopback with random
// loss in both directions (data and feedback), checks that every byte arrives and verifies, and
// returns both ends' counters.
func transfer(t *testing.T, loss float64, seed uint64, sizes []int, cfg SenderConfig) (SenderStats, ReceiverStats) {
	t.Helper()
	return transferWith(t, loss, seed, sizes, cfg, xferOpts{})
}

// xferOpts vary transferWith: a receiver window other than the sender's, and feedback held back
// at the start.
type xferOpts struct {
	recvWindow int                             // 0: cfg.Window
	muteFor    time.Duration                   // the receiver's datagrams are dropped until this long after the sender's first
	dropFirst  bool                            // the sender's first datagram (block 0, chunk 0) is lost
	admitAll   bool                            // the receiver acknowledges chunks beyond its window, then drops them (admitAll)
	fecLoss    float64                         // FEC plans for this random-loss rate, not the controller's (0: the controller's)
	wantErr    error                           // the sender must fail with this
	jumbo      bool                            // the client proposes large chunks in the handshake
	streams    bool                            // UDP is blocked: the paths fall back to TCP streams (streamPair)
	accepts    func(net.Listener) net.Listener // with streams: the server accepts them on accepts(ln)
	// before runs once the receiver runs, before the sender starts; during runs alongside the
	// sender until stop is closed (hostile peers and floods).
	before func(t *testing.T, h *harness)
	during func(t *testing.T, h *harness, stop <-chan struct{})
}

// harness is what before and during hooks act on.
type harness struct {
	client, server *Path
	net            *lanetest.Network
	plan           *fcopy.Plan
	recv           *Receiver
	recvDone       <-chan struct{} // closed when the receiver's Run has returned
}

func transferWith(t *testing.T, loss float64, seed uint64, sizes []int, cfg SenderConfig, o xferOpts) (SenderStats, ReceiverStats) {
	t.Helper()
	dir := t.TempDir()
	var paths [][]byte
	var srcs []string
	for i, sz := range sizes {
		b := make([]byte, sz)
		rand.Read(b)
		p := filepath.Join(dir, "in", testName(i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, b, 0o644)
		paths = append(paths, b)
		srcs = append(srcs, p)
	}
	src, err := fcopy.Collect(srcs, fcopy.CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := fcopy.NewPlan(src.Files)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	target, err := fcopy.ResolveTarget(out, src.Files)
	if err != nil {
		t.Fatal(err)
	}
	var client, server *Path
	var n *lanetest.Network
	if o.streams {
		var ln *net.TCPListener
		wrap := o.accepts
		if wrap == nil {
			wrap = func(ln net.Listener) net.Listener { return ln }
		}
		client, server, ln, _ = streamPairOn(t, func([]byte) {}, wrap)
		dialAndShake(t, client, server, ln)
	} else {
		client, server, n = memPair(t, lanetest.Link{Loss: loss}, seed, o.jumbo)
	}
	ca, sa := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	if o.jumbo && (client.ChunkSize() != wire.JumboChunkSize || server.ChunkSize() != wire.JumboChunkSize) {
		t.Fatalf("loopback handshake agreed on chunks of %d (client) and %d (server) bytes, want %d", client.ChunkSize(), server.ChunkSize(), wire.JumboChunkSize)
	}
	if o.muteFor > 0 || o.dropFirst {
		// The mute counts from the sender's first datagram, not from here: on a loaded machine
		// the sender may start later than muteFor from now, and would then hear the window in
		// time (TestStallDetected saw the copy succeed).
		var first atomic.Int64 // when the sender's first datagram crossed (UnixNano; 0: not yet)
		var dropped atomic.Bool
		n.SetLink(ca, sa, lanetest.Link{Loss: loss, Drop: func(_, _ netip.AddrPort, _ []byte) bool {
			first.CompareAndSwap(0, time.Now().UnixNano())
			return o.dropFirst && dropped.CompareAndSwap(false, true)
		}})
		if o.muteFor > 0 {
			n.SetLink(sa, ca, lanetest.Link{Loss: loss, Drop: func(_, _ netip.AddrPort, _ []byte) bool {
				f := first.Load()
				return f == 0 || time.Now().UnixNano() < f+int64(o.muteFor)
			}})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var sums sync.Map
	window := cfg.Window
	pool := fcopy.NewPool(window + 2)
	blocks := make(chan *fcopy.Block, 2)
	go func() {
		fcopy.Read(ctx, plan, src.Open(), pool, blocks, func(i int, s [32]byte) { sums.Store(i, s) })
		close(blocks)
	}()
	w := fcopy.NewWriter(plan, target, fcopy.WriterOptions{Digest: digestFrom(&sums)})
	rw := window
	if o.recvWindow > 0 {
		rw = o.recvWindow
	}
	recv := NewReceiver(server, plan, w, rw)
	errc := make(chan error, 1)
	recvDone := make(chan struct{})
	go func() {
		errc <- recv.Run(ctx)
		close(recvDone)
	}()
	if o.admitAll {
		admitAllOn(t, server, recv)
	}
	h := &harness{client: client, server: server, net: n, plan: plan, recv: recv, recvDone: recvDone}
	if o.before != nil {
		o.before(t, h)
	}
	stop, hooked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hooked)
		if o.during != nil {
			o.during(t, h, stop)
		}
	}()
	snd := NewSender(client, plan, pool, cfg)
	if o.fecLoss > 0 {
		snd.loss = fixedLoss(o.fecLoss)
	}
	err = snd.Run(ctx, blocks)
	close(stop)
	<-hooked
	if o.wantErr != nil {
		if !errors.Is(err, o.wantErr) {
			t.Fatalf("sender: %v, want %v", err, o.wantErr)
		}
		t.Logf("sender: %v", err)
		return snd.Stats(), recv.Stats()
	}
	if err != nil {
		t.Fatalf("loss %.0f%%, fec %s: sender: %v", loss*100, cfg.FEC, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("loss %.0f%%, fec %s: receiver: %v", loss*100, cfg.FEC, err)
	}
	for i, want := range paths {
		got, err := os.ReadFile(filepath.Join(out, testName(i)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("loss %.0f%%, fec %s: file %d differs (%v)", loss*100, cfg.FEC, i, err)
		}
	}
	st, rs := snd.Stats(), recv.Stats()
	if rs.Outside != 0 && o.recvWindow == 0 {
		t.Fatalf("sender overran the window: %+v", rs)
	}
	t.Logf("loss %.0f%%, fec %s: %d datagrams, %d re-sent, %d declared lost, parity %d (%d repair), %d groups repaired, %d rebuilt by FEC (%d more after a repair; %d chunks, %d of them late), srtt %s",
		loss*100, cfg.FEC, st.Datagrams, st.Retransmitted, st.Lost, st.Parity, st.RepairParity, st.RepairGroups, rs.FECRebuilt, rs.FECRepaired, rs.FECChunks, rs.FECLate, st.SRTT)
	return st, rs
}

// TestWindowOverrun: a sender that starts with a wider window than the receiver's (as a
// loopback copy did when only the receiver applied the loopback window) sends chunks of blocks the
// receiver has no room for before the first feedback narrows it; here block 0 cannot complete
// (its first chunk is lost) while the feedback is held back, so the receiver's window stays at
// blocks 0-1 while the sender sends ~5 MB. The receiver must leave the chunks beyond its window
// unacknowledged, so they are declared lost and sent again: acknowledged and dropped, they were
// never sent again and the transfer stalled for good.
func TestWindowOverrun(t *testing.T) {
	_, rs := transferWith(t, 0, 5, []int{12 * fcopy.BlockSize}, SenderConfig{Rate: 2e9, Policy: cc.Fixed, Window: 16,
		InitialRTT: 5 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeOff}, Idle: 10 * time.Second},
		xferOpts{recvWindow: 2, muteFor: 100 * time.Millisecond, dropFirst: true})
	if rs.Outside == 0 {
		t.Fatalf("the sender never overran the receiver's window: the test did not test it (%+v)", rs)
	}
	t.Logf("%d chunks refused outside the window, all sent again", rs.Outside)
}

// TestDebugLog: the engines print their state through the logger injected into their path
// (FARWING_DEBUG), and only there: the receiver's line at its end comes once, through the
// server path's logger, and the client's logger hears nothing of the receiver.
func TestDebugLog(t *testing.T) {
	var mu sync.Mutex
	lines := map[string][]string{}
	logTo := func(side string) func(string, ...any) {
		return func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines[side] = append(lines[side], fmt.Sprintf(f, a...))
		}
	}
	transferWith(t, 0, 4, testSizes, SenderConfig{Rate: 200e6, Window: 4, InitialRTT: 5 * time.Millisecond},
		xferOpts{before: func(t *testing.T, h *harness) {
			h.server.SetDebugLog(logTo("server"))
			h.client.SetDebugLog(logTo("client"))
		}})
	mu.Lock()
	defer mu.Unlock()
	count := func(side, prefix string) (n int) {
		for _, l := range lines[side] {
			if strings.HasPrefix(l, prefix) {
				n++
			}
			if strings.HasSuffix(l, "\n") {
				t.Errorf("%s: a line with its own newline: %q", side, l)
			}
		}
		return n
	}
	if n := count("server", "receiver: last block written, files finished "); n != 1 {
		t.Fatalf("the receiver's end line came %d times through the server's logger: %q", n, lines["server"])
	}
	if n := count("client", "receiver:"); n != 0 {
		t.Fatalf("the client's logger heard the receiver: %q", lines["client"])
	}
}

// TestStallDetected: with the receiver acknowledging and dropping what lies beyond its window
// (the bug TestWindowOverrun guards against), the sender ends with ErrStalled once nothing new is
// acknowledged for SenderConfig.Stall, rather than waiting forever on feedback that keeps coming.
func TestStallDetected(t *testing.T) {
	transferWith(t, 0, 5, []int{12 * fcopy.BlockSize}, SenderConfig{Rate: 2e9, Policy: cc.Fixed, Window: 16,
		InitialRTT: 5 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeOff}, Stall: time.Second},
		xferOpts{recvWindow: 2, muteFor: 100 * time.Millisecond, dropFirst: true, admitAll: true, wantErr: ErrStalled})
}

// admitAll is a receiver as it was before Admitter: it admits every authentic data datagram, so
// the path acknowledges chunks of blocks beyond the window, which the receiver then drops.
type admitAll struct{ *Receiver }

func (admitAll) Admit([]byte) bool { return true }

// admitAllOn replaces the handler recv's Run installs on its path p with admitAll, before any
// data comes (the sender has not started).
func admitAllOn(t *testing.T, p *Path, recv *Receiver) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if hb := p.handler.Load(); hb != nil && hb.h == Handler(recv) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the receiver never installed its handler")
		}
	}
	p.SetHandler(admitAll{recv})
	if hb := p.handler.Load(); hb.admit == nil || !hb.admit.Admit(nil) || hb.sealed == nil {
		t.Fatal("admitAll is not the path's admitter, or lost the receiver's sealed-data path")
	}
}

// TestJumboTransfer: on a path whose handshake agreed on large chunks, files of sizes around
// chunk, piece and block boundaries arrive intact, without loss and with 3 % each way, where
// parity of large chunks rebuilds groups at the receiver; the datagram count shows the chunk size
// in use.
func TestJumboTransfer(t *testing.T) {
	sizes := []int{3*fcopy.BlockSize + 5*wire.JumboChunkSize + 17, wire.JumboChunkSize, wire.JumboChunkSize + 1, 1, fcopy.BlockSize - 1}
	total := 0
	for _, n := range sizes {
		total += n
	}
	for _, loss := range []float64{0, 0.03} {
		st, rs := transferWith(t, loss, 11, sizes, SenderConfig{Rate: 500e6, Window: 4, InitialRTT: 5 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeAuto}},
			xferOpts{jumbo: true, fecLoss: loss})
		if loss == 0 && st.Parity != 0 || loss > 0 && (st.Parity == 0 || rs.FECRebuilt == 0) {
			t.Fatalf("loss %.0f%%: %d parity datagrams, %d groups rebuilt by FEC", loss*100, st.Parity, rs.FECRebuilt)
		}
		// One datagram per 8 KiB chunk and one per block hash, plus re-sends.
		if minDg := uint64(total / wire.JumboChunkSize); st.Datagrams < minDg || st.Datagrams-st.Retransmitted > 2*minDg {
			t.Fatalf("loss %.0f%%: %d datagrams (%d re-sent) for %d bytes: not %d-byte chunks", loss*100, st.Datagrams, st.Retransmitted, total, wire.JumboChunkSize)
		}
	}
}

var testSizes = []int{5*fcopy.BlockSize + 333, 0, 777}

// TestTransferUnderLoss sends files through loopback with random loss in both directions (data
// and feedback), with FEC off and in its default (auto) mode, and checks that every byte arrives
// and verifies.
func TestTransferUnderLoss(t *testing.T) {
	for _, mode := range []fec.Mode{{Kind: fec.ModeOff}, {Kind: fec.ModeAuto}} {
		for _, loss := range []float64{0, 0.03} {
			st, _ := transfer(t, loss, 99, testSizes, SenderConfig{Rate: 200e6, Window: 4, InitialRTT: 5 * time.Millisecond, FEC: mode})
			if loss > 0 && st.Retransmitted == 0 && st.Parity == 0 {
				t.Fatalf("loss %.0f%%: neither retransmissions nor parity recorded: %+v", loss*100, st)
			}
			if loss == 0 && st.Retransmitted != 0 {
				t.Logf("loss 0: %d spurious retransmissions", st.Retransmitted)
			}
			t.Logf("cc %+v", st.CC)
		}
	}
}

// TestFECRepairsUnderLoss: at 3 % random loss each way, parity rebuilds groups at the receiver
// without a repair round trip, so far fewer datagrams are re-sent than without FEC: with a fixed
// 10+2, and with auto (groups of fec.GroupSize per block) at a loss estimate of 3 %, where most groups need no
// repair at all.
func TestFECRepairsUnderLoss(t *testing.T) {
	cfg := SenderConfig{Rate: 200e6, Window: 4, InitialRTT: 5 * time.Millisecond}
	const loss = 0.03
	cfg.FEC = fec.Mode{Kind: fec.ModeOff}
	off, _ := transfer(t, loss, 7, testSizes, cfg)
	if off.Retransmitted == 0 || off.Parity != 0 || off.Groups != 0 {
		t.Fatalf("fec off: %d re-sent, %d parity, %d groups", off.Retransmitted, off.Parity, off.Groups)
	}
	fixed, auto := cfg, cfg
	fixed.FEC = fec.Mode{Kind: fec.ModeFixed, K: 10, M: 2}
	auto.FEC = fec.Mode{Kind: fec.ModeAuto}
	autoAt := xferOpts{fecLoss: loss} // auto plans for the path's loss from the start
	for _, c := range []struct {
		SenderConfig
		o xferOpts
	}{{fixed, xferOpts{}}, {auto, autoAt}} {
		st, rs := transferWith(t, loss, 7, testSizes, c.SenderConfig, c.o)
		if st.Parity == 0 || rs.Parity == 0 {
			t.Fatalf("fec %s: no parity sent (%d) or received (%d)", c.FEC, st.Parity, rs.Parity)
		}
		if rs.FECRebuilt == 0 || rs.FECChunks < rs.FECRebuilt+rs.FECRepaired || rs.FECLate > rs.FECChunks/2 {
			t.Fatalf("fec %s: %d groups rebuilt by FEC, %d after a repair (%d chunks, %d late)", c.FEC, rs.FECRebuilt, rs.FECRepaired, rs.FECChunks, rs.FECLate)
		}
		if st.Retransmitted >= off.Retransmitted {
			t.Fatalf("fec %s: %d datagrams re-sent, no fewer than %d without FEC", c.FEC, st.Retransmitted, off.Retransmitted)
		}
		t.Logf("fec %s: %d groups, %d repaired; %d parity (%d repair) of %d datagrams; %d re-sent (off: %d)",
			c.FEC, st.Groups, st.RepairGroups, st.Parity, st.RepairParity, st.Datagrams, st.Retransmitted, off.Retransmitted)
	}
	// Auto: four groups per whole block (the 5 MiB file's 5, then its last block's one and the
	// small file's one), parity about the loss rate, and no more than one group in three needing a
	// repair round trip.
	st, _ := transferWith(t, loss, 8, testSizes, auto, autoAt)
	if want := autoGroups(testSizes); st.Groups != want || want != 22 || st.RepairGroups > st.Groups/3 {
		t.Fatalf("auto: %d groups (want %d), %d needed a repair", st.Groups, want, st.RepairGroups)
	}
	if body := st.Parity - st.RepairParity; body > st.Datagrams/10 {
		t.Fatalf("auto: %d proactive parity of %d datagrams", body, st.Datagrams)
	}
}

// TestFECNoParityWithoutLoss: with auto FEC on a path that loses nothing, not one parity datagram
// is sent.
func TestFECNoParityWithoutLoss(t *testing.T) {
	st, rs := transfer(t, 0, 3, testSizes, SenderConfig{Rate: 200e6, Window: 4, InitialRTT: 5 * time.Millisecond})
	if st.Lost == 0 && st.Parity != 0 || rs.FECRebuilt != 0 {
		t.Fatalf("no loss, yet %d parity sent and %d groups rebuilt", st.Parity, rs.FECRebuilt)
	}
	if st.Lost != 0 {
		t.Logf("loopback lost %d datagrams; %d parity sent", st.Lost, st.Parity)
	}
}

// digestFrom is a copy.Writer digest source for tests: it waits for the sender's whole-file
// digests, which the reader stores in sums as it finishes each file.
func digestFrom(sums *sync.Map) func(context.Context, int) ([32]byte, error) {
	return func(ctx context.Context, i int) ([32]byte, error) {
		for ctx.Err() == nil {
			if s, ok := sums.Load(i); ok {
				return s.([32]byte), nil
			}
			time.Sleep(time.Millisecond)
		}
		return [32]byte{}, ctx.Err()
	}
}

// autoGroups counts the groups auto FEC makes of files of the given sizes: each block of n chunks
// is split into groups of fec.GroupSize(n).
func autoGroups(sizes []int) uint64 {
	groups := uint64(0)
	for _, size := range sizes {
		for off := 0; off < size; off += fcopy.BlockSize {
			n := chunksIn(min(fcopy.BlockSize, size-off), wire.ChunkSize)
			groups += uint64((n + fec.GroupSize(n) - 1) / fec.GroupSize(n))
		}
	}
	return groups
}

// TestFECAutoGroups runs auto FEC (four groups per 1 MiB block) through 3 % random loss with
// the controller's own loss estimate, which starts at zero and grows: losses early in a block are
// detected while its later chunks are still unsent, so repairs can precede the block's planned
// parity. Parity indices must stay distinct (a duplicate counted as a second shard once left a
// group short with nothing queued to complete it, and the transfer hung).
func TestFECAutoGroups(t *testing.T) {
	sizes := []int{20<<20 + 12345, 3<<20 + 1}
	want := autoGroups(sizes)
	if want != 4*23+2 {
		t.Fatalf("autoGroups: %d, want 94", want)
	}
	for seed := range uint64(4) {
		cfg := SenderConfig{Rate: 300e6, Window: 16, InitialRTT: 5 * time.Millisecond}
		st, rs := transfer(t, 0.03, 100+seed, sizes, cfg)
		if st.Groups != want || rs.FECRebuilt == 0 {
			t.Fatalf("seed %d: %d groups (want %d), %d rebuilt by FEC", seed, st.Groups, want, rs.FECRebuilt)
		}
	}
}

// TestAllPlaced compares the word-at-a-time range check with chunk-by-chunk isPlaced.
func TestAllPlaced(t *testing.T) {
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	b := &rxBlock{nChunks: 746, placed: make([]atomic.Uint64, 12)}
	for trial := range 2000 {
		for w := range b.placed {
			v := ^uint64(0)
			if trial%2 == 0 {
				v &^= 1 << rng.IntN(64) // one chunk missing somewhere in most words
			}
			b.placed[w].Store(v)
		}
		lo := rng.IntN(746)
		hi := lo + rng.IntN(747-lo)
		want := true
		for c := lo; c < hi; c++ {
			want = want && b.isPlaced(c)
		}
		if got := b.allPlaced(lo, hi); got != want {
			t.Fatalf("allPlaced(%d, %d) = %v, chunk by chunk %v", lo, hi, got, want)
		}
	}
}

// TestWindowShortBlocks: the receive window is memory, not a count of blocks. Small files'
// blocks are charged their length (fcopy.Charge), so a window of 2 BlockSize blocks holds many of
// them at once (up to fcopy.WindowSlots per block of window), where whole blocks stay at 2; the
// sender stays inside it (the receiver refuses nothing as outside), and every file is intact.
func TestWindowShortBlocks(t *testing.T) {
	cfg := SenderConfig{Rate: 200e6, Window: 2, InitialRTT: 20 * time.Millisecond, FEC: fec.Mode{Kind: fec.ModeAuto}}
	delay := func(t *testing.T, h *harness) {
		ca, sa := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
		h.net.SetLink(ca, sa, lanetest.Link{Delay: 10 * time.Millisecond})
		h.net.SetLink(sa, ca, lanetest.Link{Delay: 10 * time.Millisecond})
	}
	small := make([]int, 150)
	for i := range small {
		small[i] = 3000 + i
	}
	_, rs := transferWith(t, 0, 5, small, cfg, xferOpts{before: delay})
	t.Logf("small files: %d blocks at once", rs.MaxBlocks)
	if slots := uint64(cfg.Window * fcopy.WindowSlots); rs.MaxBlocks <= uint64(cfg.Window) || rs.MaxBlocks > slots || rs.Outside != 0 {
		t.Errorf("small files: at most %d blocks held at once (want more than %d, at most %d), %d chunks outside the window",
			rs.MaxBlocks, cfg.Window, slots, rs.Outside)
	}
	_, rs = transferWith(t, 0, 6, []int{8 * fcopy.BlockSize}, cfg, xferOpts{before: delay})
	if rs.MaxBlocks > uint64(cfg.Window) || rs.Outside != 0 {
		t.Errorf("whole blocks: %d held at once, want at most %d; %d chunks outside the window", rs.MaxBlocks, cfg.Window, rs.Outside)
	}
}

// testName is the name of transferWith's i-th file: a letter, or past z a numbered name.
func testName(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return fmt.Sprintf("f%04d", i)
}

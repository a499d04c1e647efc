package session

import (
	"context"
	"crypto/rand"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"bytes"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
)

// lossyPair opens a client and a server Path on loopback joined by the handshake, each dropping
// the given fraction of the datagrams it sends.
func lossyPair(t *testing.T, loss float64, seed uint64) (client, server *Path) {
	t.Helper()
	client, server = benchPair(t, 4<<20)
	for i, p := range []*Path{client, server} {
		var mu sync.Mutex
		r := mathrand.New(mathrand.NewPCG(seed, uint64(i)))
		drop := func() bool { mu.Lock(); defer mu.Unlock(); return r.Float64() < loss }
		p.dropSend.Store(&drop)
	}
	return client, server
}

// transfer sends files of the given sizes from a Sender to a Receiver through loopback with random
// loss in both directions (data and feedback), checks that every byte arrives and verifies, and
// returns both ends' counters.
func transfer(t *testing.T, loss float64, seed uint64, sizes []int, cfg SenderConfig) (SenderStats, ReceiverStats) {
	t.Helper()
	dir := t.TempDir()
	var paths [][]byte
	var srcs []string
	for i, sz := range sizes {
		b := make([]byte, sz)
		rand.Read(b)
		p := filepath.Join(dir, "in", string(rune('a'+i)))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, b, 0o644)
		paths = append(paths, b)
		srcs = append(srcs, p)
	}
	src, err := fcopy.Collect(srcs, false)
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
	client, server := lossyPair(t, loss, seed)
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
	recv := NewReceiver(server, plan, w, window)
	errc := make(chan error, 1)
	go func() { errc <- recv.Run(ctx) }()
	snd := NewSender(client, plan, pool, cfg)
	if err := snd.Run(ctx, blocks); err != nil {
		t.Fatalf("loss %.0f%%, fec %s: sender: %v", loss*100, cfg.FEC, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("loss %.0f%%, fec %s: receiver: %v", loss*100, cfg.FEC, err)
	}
	for i, want := range paths {
		got, err := os.ReadFile(filepath.Join(out, string(rune('a'+i))))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("loss %.0f%%, fec %s: file %d differs (%v)", loss*100, cfg.FEC, i, err)
		}
	}
	st, rs := snd.Stats(), recv.Stats()
	if rs.Outside != 0 {
		t.Fatalf("sender overran the window: %+v", rs)
	}
	t.Logf("loss %.0f%%, fec %s: %d datagrams, %d re-sent, %d declared lost, parity %d (%d repair), %d groups repaired, %d rebuilt by FEC (%d more after a repair; %d chunks, %d of them late), srtt %s",
		loss*100, cfg.FEC, st.Datagrams, st.Retransmitted, st.Lost, st.Parity, st.RepairParity, st.RepairGroups, rs.FECRebuilt, rs.FECRepaired, rs.FECChunks, rs.FECLate, st.SRTT)
	return st, rs
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
// 10+2, and with auto at a loss estimate of 3 % while body parity is on (as when the receiver's
// window limits the sender). Auto without window pressure sends parity only on the tail and as
// repairs, sized to what was lost, so it re-sends about as much as FEC off.
func TestFECRepairsUnderLoss(t *testing.T) {
	cfg := SenderConfig{Rate: 200e6, Window: 4, InitialRTT: 5 * time.Millisecond}
	const loss = 0.03
	cfg.FEC = fec.Mode{Kind: fec.ModeOff}
	off, _ := transfer(t, loss, 7, testSizes, cfg)
	if off.Retransmitted == 0 || off.Parity != 0 {
		t.Fatalf("fec off: %d re-sent, %d parity", off.Retransmitted, off.Parity)
	}
	fixed, auto := cfg, cfg
	fixed.FEC = fec.Mode{Kind: fec.ModeFixed, K: 10, M: 2}
	auto.FEC, auto.lossHint, auto.bodyParity = fec.Mode{Kind: fec.ModeAuto}, loss, true
	for _, c := range []SenderConfig{fixed, auto} {
		st, rs := transfer(t, loss, 7, testSizes, c)
		if st.Parity == 0 || rs.Parity == 0 {
			t.Fatalf("fec %s: no parity sent (%d) or received (%d)", c.FEC, st.Parity, rs.Parity)
		}
		if rs.FECRebuilt == 0 || rs.FECChunks < rs.FECRebuilt+rs.FECRepaired || rs.FECLate > rs.FECChunks/2 {
			t.Fatalf("fec %s: %d groups rebuilt by FEC, %d after a repair (%d chunks, %d late)", c.FEC, rs.FECRebuilt, rs.FECRepaired, rs.FECChunks, rs.FECLate)
		}
		if st.Retransmitted >= off.Retransmitted {
			t.Fatalf("fec %s: %d datagrams re-sent, no fewer than %d without FEC", c.FEC, st.Retransmitted, off.Retransmitted)
		}
	}
	auto.bodyParity = false
	st, _ := transfer(t, loss, 7, testSizes, auto)
	if body := st.Parity - st.RepairParity; body > st.Datagrams/50 {
		t.Fatalf("auto without window pressure: %d proactive parity of %d datagrams", body, st.Datagrams)
	}
	if st.Retransmitted > off.Retransmitted+off.Retransmitted/4 {
		t.Fatalf("auto without window pressure re-sent %d datagrams, FEC off %d", st.Retransmitted, off.Retransmitted)
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

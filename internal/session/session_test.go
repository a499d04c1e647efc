package session

import (
	"context"
	"crypto/rand"
	mathrand "math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"bytes"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/wire"
)

// lossyPair opens a client and a server Path on loopback joined by the handshake, each dropping
// the given fraction of the datagrams it sends.
func lossyPair(t *testing.T, loss float64, seed uint64) (client, server *Path) {
	t.Helper()
	key := make([]byte, wire.KeyLen)
	rand.Read(key)
	cc, _ := wire.NewCrypto(key, 7, wire.ClientToServer)
	sc, _ := wire.NewCrypto(key, 7, wire.ServerToClient)
	server, err := Open("127.0.0.1:0", sc, true, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	client, err = Open("127.0.0.1:0", cc, false, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	var dst []netip.AddrPort
	for _, p := range server.Ports() {
		dst = append(dst, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p)))
	}
	if _, err := client.Handshake(context.Background(), dst, 5*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if err := server.WaitPeers(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, p := range []*Path{client, server} {
		var mu sync.Mutex
		r := mathrand.New(mathrand.NewPCG(seed, uint64(i)))
		drop := func() bool { mu.Lock(); defer mu.Unlock(); return r.Float64() < loss }
		p.dropSend.Store(&drop)
	}
	return client, server
}

// TestTransferUnderLoss sends files through loopback with random loss in both directions (data
// and feedback) and checks that every byte arrives and verifies.
func TestTransferUnderLoss(t *testing.T) {
	for _, loss := range []float64{0, 0.03} {
		dir := t.TempDir()
		var paths [][]byte
		var srcs []string
		for i, sz := range []int{5*fcopy.BlockSize + 333, 0, 777} {
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
		client, server := lossyPair(t, loss, 99)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		var sums sync.Map
		const window = 4
		pool := fcopy.NewPool(window + 2)
		blocks := make(chan *fcopy.Block, 2)
		go func() {
			fcopy.Read(ctx, plan, src.Open(), pool, blocks, func(i int, s [32]byte) { sums.Store(i, s) })
			close(blocks)
		}()
		w := fcopy.NewWriter(plan, target, fcopy.WriterOptions{Digest: func(ctx context.Context, i int) ([32]byte, error) {
			for ctx.Err() == nil {
				if s, ok := sums.Load(i); ok {
					return s.([32]byte), nil
				}
				time.Sleep(time.Millisecond)
			}
			return [32]byte{}, ctx.Err()
		}})
		recv := NewReceiver(server, plan, w, window)
		errc := make(chan error, 1)
		go func() { errc <- recv.Run(ctx) }()
		snd := NewSender(client, plan, pool, SenderConfig{Rate: 200e6, Window: window, InitialRTT: 5 * time.Millisecond})
		if err := snd.Run(ctx, blocks); err != nil {
			t.Fatalf("loss %.0f%%: sender: %v", loss*100, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("loss %.0f%%: receiver: %v", loss*100, err)
		}
		for i, want := range paths {
			got, err := os.ReadFile(filepath.Join(out, string(rune('a'+i))))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("loss %.0f%%: file %d differs (%v)", loss*100, i, err)
			}
		}
		st := snd.Stats()
		if loss > 0 && st.Retransmitted == 0 {
			t.Fatalf("loss %.0f%%: no retransmissions recorded: %+v", loss*100, st)
		}
		if loss == 0 && st.Retransmitted != 0 {
			t.Logf("loss 0: %d spurious retransmissions", st.Retransmitted)
		}
		if rs := recv.Stats(); rs.Outside != 0 {
			t.Fatalf("sender overran the window: %+v", rs)
		}
		t.Logf("loss %.0f%%: %d datagrams, %d re-sent, %d declared lost, srtt %s, cc %+v", loss*100, st.Datagrams, st.Retransmitted, st.Lost, st.SRTT, st.CC)
	}
}

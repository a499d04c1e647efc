package session

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestChunkAgreement: jumbo chunks are agreed only where the client proposes them and every lane
// proves, each way, that it carries a full-size datagram; any lane or way that drops them leaves
// both ends at the standard size, and the two ends never disagree, loss or not.
func TestChunkAgreement(t *testing.T) {
	far := [2]netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}
	lo := [2]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	// big drops datagrams over 1,500 IP bytes to the server's lane k (or -1: none).
	big := func(k int) func(from, to netip.AddrPort, b []byte) bool {
		return func(from, to netip.AddrPort, b []byte) bool {
			return k >= 0 && int(to.Port()) == 40000+k && len(b)+lane.IPv4UDPHeaders > 1500
		}
	}
	for _, c := range []struct {
		name       string
		hosts      [2]netip.Addr
		propose    bool
		up, down   lanetest.Link // client to server, server to client
		loss       float64
		seeds      int
		want       int // 0: either, as long as both ends agree
		wantJumbos int // with seeds: at least this many sessions agree on jumbo chunks
	}{
		{name: "not proposed", hosts: far, up: lanetest.Link{MTU: 9000}, down: lanetest.Link{MTU: 9000}, want: wire.ChunkSize},
		{name: "mtu 9000", hosts: far, propose: true, up: lanetest.Link{MTU: 9000}, down: lanetest.Link{MTU: 9000}, want: wire.JumboChunkSize},
		{name: "mtu 8500 (AWS inter-region peering)", hosts: far, propose: true, up: lanetest.Link{MTU: 8500}, down: lanetest.Link{MTU: 8500}, want: wire.JumboChunkSize},
		{name: "mtu 8265", hosts: far, propose: true, up: lanetest.Link{MTU: jumboProbe + lane.IPv4UDPHeaders - 1}, down: lanetest.Link{MTU: 9000}, want: wire.ChunkSize},
		{name: "mtu 1500", hosts: far, propose: true, up: lanetest.Link{MTU: 1500}, down: lanetest.Link{MTU: 1500}, want: wire.ChunkSize},
		{name: "mtu 1500 to the server", hosts: far, propose: true, up: lanetest.Link{MTU: 1500}, down: lanetest.Link{MTU: 9000}, want: wire.ChunkSize},
		{name: "mtu 1500 to the client", hosts: far, propose: true, up: lanetest.Link{MTU: 9000}, down: lanetest.Link{MTU: 1500}, want: wire.ChunkSize},
		{name: "one lane 1500", hosts: far, propose: true, up: lanetest.Link{MTU: 9000, Drop: big(2)}, down: lanetest.Link{MTU: 9000}, want: wire.ChunkSize},
		{name: "loopback", hosts: lo, propose: true, want: wire.JumboChunkSize},
		{name: "loopback not proposed", hosts: lo, want: wire.ChunkSize},
		{name: "mtu 9000 at 3% loss", hosts: far, propose: true, up: lanetest.Link{MTU: 9000, Loss: 0.03, Delay: 5 * time.Millisecond},
			down: lanetest.Link{MTU: 9000, Loss: 0.03, Delay: 5 * time.Millisecond}, seeds: 40, wantJumbos: 34},
		{name: "mtu 1500 at 3% loss", hosts: far, propose: true, up: lanetest.Link{MTU: 1500, Loss: 0.03, Delay: 5 * time.Millisecond},
			down: lanetest.Link{MTU: 1500, Loss: 0.03, Delay: 5 * time.Millisecond}, seeds: 10, want: wire.ChunkSize},
	} {
		t.Run(c.name, func(t *testing.T) {
			jumbos := 0
			for seed := range max(c.seeds, 1) {
				n := lanetest.New(lanetest.Link{}, uint64(seed)+1)
				n.SetLink(c.hosts[0], c.hosts[1], c.up)
				n.SetLink(c.hosts[1], c.hosts[0], c.down)
				client, server := memPairOn(t, n, c.hosts[0], c.hosts[1], c.propose)
				cs, ss := client.ChunkSize(), server.FixChunk()
				if cs != ss {
					t.Fatalf("seed %d: the client settled on %d-byte chunks, the server on %d", seed, cs, ss)
				}
				if c.want != 0 && cs != c.want {
					t.Fatalf("seed %d: %d-byte chunks, want %d", seed, cs, c.want)
				}
				if cs == wire.JumboChunkSize {
					jumbos++
				}
				client.Close()
				server.Close()
			}
			if c.seeds > 0 {
				t.Logf("%d of %d sessions agreed on jumbo chunks", jumbos, c.seeds)
				if jumbos < c.wantJumbos {
					t.Fatalf("%d of %d sessions agreed on jumbo chunks, want at least %d", jumbos, c.seeds, c.wantJumbos)
				}
			}
		})
	}
}

// TestChunkWordChecked: what the server says about chunk sizes counts only where it agrees to
// what the client proposed, in a full-size answer before the proof and in the answers after it.
func TestChunkWordChecked(t *testing.T) {
	ack := func(chunk, size int) []byte {
		pt := make([]byte, size)
		binary.BigEndian.PutUint16(pt[8:], uint16(chunk))
		return pt
	}
	for _, c := range []struct {
		propose       bool
		chunk, size   int
		proven        bool
		before, lo    bool // a full-size answer saying jumbo came first; the server is on loopback
		full, settled bool // fullAck; ackChunk says jumbo
	}{
		{false, wire.JumboChunkSize, jumboProbePT, true, false, false, false, false}, // agrees to what was not proposed
		{true, wire.JumboChunkSize, helloLen, false, false, false, false, false},     // a small answer proves nothing
		{true, wire.JumboChunkSize, jumboProbePT, false, false, false, true, false},
		// The lane's full-size answer never came: the client's proof proposed 1406 there, and a
		// server that says jumbo after it is not taken at its word.
		{true, wire.JumboChunkSize, helloLen, true, false, false, false, false},
		{true, wire.JumboChunkSize, helloLen, true, true, false, true, true},
		{true, wire.JumboChunkSize, helloLen, true, false, true, true, true}, // loopback: no full-size answer needed
		{true, wire.ChunkSize, helloLen, true, true, false, true, false},
		{true, 4096, jumboProbePT, true, false, false, false, false},
		{true, 65535, jumboProbePT, true, false, false, false, false},
	} {
		t.Run(fmt.Sprintf("propose=%v,chunk=%d,size=%d,proven=%v,before=%v,lo=%v", c.propose, c.chunk, c.size, c.proven, c.before, c.lo), func(t *testing.T) {
			n := lanetest.New(lanetest.Link{}, 1)
			cc, _ := memCryptos()
			host, peer := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddrPort("198.18.0.2:40000")
			if c.lo {
				host, peer = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddrPort("127.0.0.2:40000")
			}
			p := NewPath(memLanes(t, n, host), cc, false)
			defer p.Close()
			p.SetPeer(0, peer)
			if c.propose {
				p.ProposeJumbo()
			}
			if c.before {
				p.onHelloAck(0, wire.Header{}, ack(wire.JumboChunkSize, jumboProbePT), time.Now())
			}
			var h wire.Header
			if c.proven {
				h.Flags = provenFlag
			}
			p.onHelloAck(0, h, ack(c.chunk, c.size), time.Now())
			if p.fullAck[0].Load() != c.full || (p.ackChunk[0].Load() == wire.JumboChunkSize) != c.settled {
				t.Fatalf("full-size answer %v (want %v), lane settled on %d", p.fullAck[0].Load(), c.full, p.ackChunk[0].Load())
			}
			if p.ChunkSize() != wire.ChunkSize {
				t.Fatalf("chunk size %d before the handshake settled", p.ChunkSize())
			}
		})
	}
}

// TestJumboClaimUnproven: a server that says jumbo after the proof on every lane, where one lane's
// full-size answer never reached the client, leaves the client at 1406-byte chunks (the lane's
// proof proposed 1406 there, as an honest server's answer would say).
func TestJumboClaimUnproven(t *testing.T) {
	ack := func(size int) []byte {
		pt := make([]byte, size)
		binary.BigEndian.PutUint16(pt[8:], wire.JumboChunkSize)
		return pt
	}
	for _, missing := range []int{-1, 2} {
		t.Run(fmt.Sprintf("missing=%d", missing), func(t *testing.T) {
			n := lanetest.New(lanetest.Link{}, 1)
			cc, _ := memCryptos()
			p := NewPath(memLanes(t, n, netip.MustParseAddr("198.18.0.1")), cc, false)
			defer p.Close()
			for i := range Lanes {
				p.SetPeer(i, netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), uint16(40000+i)))
			}
			if !p.ProposeJumbo() {
				t.Fatal("jumbo chunks not proposed")
			}
			for i := range Lanes {
				if i != missing {
					p.onHelloAck(i, wire.Header{}, ack(jumboProbePT), time.Now())
				}
				p.onHelloAck(i, wire.Header{Flags: provenFlag}, ack(helloLen), time.Now())
			}
			p.settleClientChunk()
			want := wire.JumboChunkSize
			if missing >= 0 {
				want = wire.ChunkSize
			}
			if p.ChunkSize() != want {
				t.Fatalf("the client settled on %d-byte chunks, want %d", p.ChunkSize(), want)
			}
		})
	}
}

// dfLane is a lanetest lane that records its don't-fragment bit (lanetest drops what exceeds a
// link's MTU, so the bit changes nothing else).
type dfLane struct {
	lane.PacketConn
	on atomic.Bool
}

func (l *dfLane) SetDontFragment(on bool) error { l.on.Store(on); return nil }

// TestServerAllowsFragments: a server whose lanes took full-size hellos (and so were switched to
// the don't-fragment bit) gives them the kernel's default back once the session settles on
// standard chunks, without FixChunk (a pull's or doctor's server sends, and has no receiver); in a
// jumbo session they keep the bit.
func TestServerAllowsFragments(t *testing.T) {
	far := [2]netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}
	for _, c := range []struct {
		name     string
		up, down lanetest.Link
		want     int
	}{
		{name: "mtu 1500 to the client", up: lanetest.Link{MTU: 9000}, down: lanetest.Link{MTU: 1500}, want: wire.ChunkSize},
		{name: "mtu 9000", up: lanetest.Link{MTU: 9000}, down: lanetest.Link{MTU: 9000}, want: wire.JumboChunkSize},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := lanetest.New(lanetest.Link{}, 1)
			n.SetLink(far[0], far[1], c.up)
			n.SetLink(far[1], far[0], c.down)
			cc, sc := memCryptos()
			var sl [Lanes]lane.PacketConn
			var dfs [Lanes]*dfLane
			for i, l := range memLanes(t, n, far[1]) {
				dfs[i] = &dfLane{PacketConn: l}
				sl[i] = dfs[i]
			}
			server := NewPath(sl, sc, true)
			client := NewPath(memLanes(t, n, far[0]), cc, false)
			defer client.Close()
			defer server.Close()
			if !client.ProposeJumbo() {
				t.Fatal("jumbo chunks not proposed")
			}
			var dst []netip.AddrPort
			for _, p := range server.Ports() {
				dst = append(dst, netip.AddrPortFrom(far[1], uint16(p)))
			}
			if _, err := client.Handshake(context.Background(), dst, 5*time.Second, false); err != nil {
				t.Fatal(err)
			}
			if err := server.WaitPeers(context.Background(), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if cs, ss := client.ChunkSize(), server.ChunkSize(); cs != c.want || ss != c.want {
				t.Fatalf("the client settled on %d-byte chunks, the server on %d, want %d", cs, ss, c.want)
			}
			// Hellos after the proof (a late full-size one among them) leave the bit as it is.
			for i := range Lanes {
				client.sendHellos(i)
				pt := make([]byte, jumboProbePT)
				binary.BigEndian.PutUint16(pt[8:], wire.JumboChunkSize)
				client.SendOne(i, wire.TypeHello, pt)
			}
			time.Sleep(50 * time.Millisecond)
			for i, l := range dfs {
				if on := l.on.Load(); on != (c.want == wire.JumboChunkSize) {
					t.Errorf("server lane %d: don't-fragment %v with %d-byte chunks", i, on, c.want)
				}
			}
		})
	}
}

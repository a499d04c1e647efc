package session

import (
	"encoding/binary"
	"math"
	"net/netip"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// FuzzTrainRate: any arrival pattern of the packet train gives a finite, non-negative estimate.
func FuzzTrainRate(f *testing.F) {
	f.Add([]byte{0, 10, 10, 10, 200, 10, 10, 0, 0, 255})
	f.Fuzz(func(t *testing.T, in []byte) {
		var at []time.Duration
		var size []int
		var now time.Duration
		for i, b := range in {
			if len(at) == trainLen {
				break
			}
			now += time.Duration(b) * time.Microsecond
			at = append(at, now)
			size = append(size, 100+i*37%1400)
		}
		if r := trainRate(at, size); r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			t.Fatalf("rate %v from %v", r, at)
		}
	})
}

// fuzzPath is a server and a client path on an in-memory network, unconnected.
func fuzzPath(f *testing.F) (server, client *Path) {
	n := lanetest.New(lanetest.Link{}, 1)
	key := make([]byte, wire.KeyLen)
	mk := func(a string, dir wire.Direction, srv bool) *Path {
		var conns [Lanes]lane.PacketConn
		for i := range conns {
			c, _ := n.Listen(netip.MustParseAddr(a))
			conns[i] = c
		}
		c, _ := wire.NewCrypto(key, 1, dir)
		return NewPath(conns, c, srv)
	}
	server, client = mk("198.18.0.2", wire.ServerToClient, true), mk("198.18.0.1", wire.ClientToServer, false)
	f.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// FuzzHello: hello and hello-ack payloads of any content never panic; a server proves a lane's
// address only for a hello that carries the cookie it gave that address, and a client never
// takes large chunks it did not propose.
func FuzzHello(f *testing.F) {
	server, client := fuzzPath(f)
	from := netip.MustParseAddrPort("198.18.0.1:40001")
	good := make([]byte, helloLen)
	binary.BigEndian.PutUint64(good[10:], server.cookieFor(1, from))
	f.Add(good, uint8(0))
	f.Add([]byte{1, 2, 3}, uint8(provenFlag))
	f.Fuzz(func(t *testing.T, pt []byte, flags uint8) {
		for i := range Lanes {
			server.proven[i].Store(false)
		}
		server.onHello(1, pt, from)
		want := len(pt) >= helloLen && binary.BigEndian.Uint64(pt[10:18]) == server.cookieFor(1, from)
		if server.proven[1].Load() != want {
			t.Fatalf("hello %x: proven %v, want %v", pt, server.proven[1].Load(), want)
		}
		client.onHelloAck(2, wire.Header{Type: wire.TypeHelloAck, Lane: 2, Flags: flags}, pt, time.Now())
		if client.ChunkSize() != wire.ChunkSize {
			t.Fatalf("client agreed on %d-byte chunks it never proposed", client.ChunkSize())
		}
	})
}

// fuzzPlan is three files: 2.5 blocks, empty, one byte.
func fuzzPlan(f *testing.F) *fcopy.Plan {
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "a", Size: 5 * fcopy.BlockSize / 2}, {Name: "b"}, {Name: "c", Size: 1}})
	if err != nil {
		f.Fatal(err)
	}
	return plan
}

// FuzzReceiverData: authentic data frames with any fields (the peer is authenticated but may be
// hostile) never panic and never touch memory outside a block of the plan: every chunk the
// receiver takes lies inside its block, and only then counts.
func FuzzReceiverData(f *testing.F) {
	server, _ := fuzzPath(f)
	plan := fuzzPlan(f)
	b := make([]byte, wire.DataFrameLen, wire.DataFrameLen+32)
	wire.DataFrame{Kind: wire.KindChunk, Block: 1, Chunk: 3}.Put(b)
	f.Add(append(b, make([]byte, 20)...))
	wire.DataFrame{Kind: wire.KindParity, Block: 0, Chunk: 0, FecK: 746, FecM: 3, FecIdx: 746}.Put(b)
	f.Add(append(b, make([]byte, 30)...))
	wire.DataFrame{Kind: wire.KindHash, Block: 2, Chunk: 1}.Put(b)
	f.Add(append(b, make([]byte, 32)...))
	f.Fuzz(func(t *testing.T, pt []byte) {
		r := NewReceiver(server, plan, nil, 4)
		r.Datagram(0, wire.Header{Type: wire.TypeData}, pt, time.Now())
		st := r.Stats()
		if st.Datagrams+st.Invalid == 0 && len(pt) >= wire.DataFrameLen {
			if fr, _, err := wire.ParseDataFrame(pt); err == nil && fr.Block < plan.NumBlocks() {
				t.Fatalf("frame %+v neither taken nor refused", fr)
			}
		}
		for i := range r.ring {
			if blk := r.ring[i].Load(); blk != nil {
				if blk.id >= plan.NumBlocks() || len(blk.data) != plan.BlockLen(blk.id) || int(blk.nHave.Load()) > blk.nChunks+1 {
					t.Fatalf("block %d: %d bytes, %d chunks counted of %d", blk.id, len(blk.data), blk.nHave.Load(), blk.nChunks)
				}
			}
		}
	})
}

// FuzzSenderFeedback: feedback of any content never panics, never moves the cursor past the first
// block whose digest was never sent, and never widens the agreed window.
func FuzzSenderFeedback(f *testing.F) {
	_, client := fuzzPath(f)
	plan := fuzzPlan(f)
	fb := wire.Feedback{Cursor: 1, Window: 1 << 30, Lanes: []wire.LaneAck{{Largest: 5, Ranges: []wire.SeqRange{{Lo: 1, Hi: 5}}}, {}, {}, {}}}
	f.Add(wire.AppendFeedback(nil, &fb, 1400))
	fb.Cursor = 1<<32 - 1
	f.Add(wire.AppendFeedback(nil, &fb, 1400))
	f.Fuzz(func(t *testing.T, pt []byte) {
		pool := fcopy.NewPool(8)
		s := NewSender(client, plan, pool, SenderConfig{Window: 4})
		s.start = time.Now()
		s.Run(t.Context(), closedBlocks()) // sets up the controller; returns at once
		for id := range uint32(2) {
			buf, _ := pool.Get(t.Context())
			s.addBlock(&fcopy.Block{ID: id, Data: buf[:plan.BlockLen(id)]})
		}
		l := &s.lanes[0]
		for q := uint64(1); q <= 5; q++ {
			*l.at(q) = sentPkt{state: stInflight, size: 1000}
		}
		l.lowest, l.next = 1, 5
		l.sent.Store(5)
		unsent := s.firstUnsent()
		s.onFeedback(pt, time.Now())
		if s.cursor > unsent || s.window > 4 {
			t.Fatalf("cursor %d (blocks read: %d, the first unsent %d), window %d (agreed 4)", s.cursor, s.nextID, unsent, s.window)
		}
	})
}

func closedBlocks() <-chan *fcopy.Block {
	c := make(chan *fcopy.Block)
	close(c)
	return c
}

// FuzzControl: authentic control datagrams with any payload, on any lane, never panic; what is
// delivered is whole (every part but the last full, the parts' count as announced), once per
// message number, and the messages waiting in parts stay within maxControlPartial.
func FuzzControl(f *testing.F) {
	_, client := fuzzPath(f)
	part := func(seq uint32, k, n int, body []byte) []byte { return controlPayload(nil, seq, k, n, body) }
	f.Add(part(1, 0, 1, []byte("{}\n")), part(2, 1, 2, []byte("tail")), uint8(3))
	f.Add(part(5, 0, 2, make([]byte, ControlPart)), part(5, 1, 2, []byte("x")), uint8(0))
	f.Add([]byte{1, 2}, part(9, 0, 0, nil), uint8(17))
	f.Fuzz(func(t *testing.T, a, b []byte, k uint8) {
		seen := map[uint32]bool{}
		client.OnControl(func(seq uint32, msg []byte) {
			if seen[seq] {
				t.Fatalf("message %d delivered twice", seq)
			}
			seen[seq] = true
			if len(msg) == 0 || len(msg) > MaxControlMessage {
				t.Fatalf("message %d of %d bytes delivered", seq, len(msg))
			}
		})
		defer client.OnControl(nil)
		client.control.mu.Lock()
		client.control.partial, client.control.done = nil, nil
		client.control.mu.Unlock()
		for i := range int(k%8) + 1 {
			client.onControl(a)
			client.onControl(b)
			// and the same parts under the numbers next to theirs
			if len(a) >= controlHead {
				c := append([]byte(nil), a...)
				binary.BigEndian.PutUint32(c, binary.BigEndian.Uint32(a)+uint32(i))
				client.onControl(c)
			}
		}
		client.control.mu.Lock()
		n := len(client.control.partial)
		client.control.mu.Unlock()
		if n > maxControlPartial {
			t.Fatalf("%d messages held in parts", n)
		}
	})
}

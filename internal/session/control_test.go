package session

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane/lanetest"
)

// controlGot collects the messages OnControl delivers.
type controlGot struct {
	mu   sync.Mutex
	msgs map[uint32][][]byte
	n    int
}

func (g *controlGot) take(seq uint32, msg []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.msgs == nil {
		g.msgs = map[uint32][][]byte{}
	}
	g.msgs[seq] = append(g.msgs[seq], msg)
	g.n++
}

// waitFor waits up to 5 s for n deliveries.
func (g *controlGot) waitFor(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		g.mu.Lock()
		got := g.n
		g.mu.Unlock()
		if got >= n {
			return
		}
	}
	t.Fatalf("%d control messages delivered, want %d", g.n, n)
}

// TestControlCopies: a control message copied on the lanes arrives whole and once, though every
// lane carries it, in one part or in several; one beyond MaxControlMessage is not sent.
func TestControlCopies(t *testing.T) {
	client, server, _ := memPair(t, lanetest.Link{}, 1, false)
	var got controlGot
	client.OnControl(got.take)
	msgs := map[uint32][]byte{
		0: []byte("{\"t\":\"done\"}\n"),
		1: bytes.Repeat([]byte("a"), ControlPart),     // one full part
		2: bytes.Repeat([]byte("b"), 2*ControlPart+7), // three parts, the last short
		3: bytes.Repeat([]byte("c"), MaxControlMessage),
	}
	for seq := uint32(0); seq < 4; seq++ {
		if err := server.SendControl(seq, msgs[seq]); err != nil {
			t.Fatalf("SendControl(%d): %v", seq, err)
		}
	}
	if err := server.SendControl(4, make([]byte, MaxControlMessage+1)); err != ErrControlCopy {
		t.Fatalf("a message of %d bytes: %v, want ErrControlCopy", MaxControlMessage+1, err)
	}
	got.waitFor(t, 4)
	time.Sleep(50 * time.Millisecond) // the other lanes' copies have come by now
	got.mu.Lock()
	defer got.mu.Unlock()
	if got.n != 4 {
		t.Fatalf("%d deliveries, want 4 (one per message)", got.n)
	}
	for seq, want := range msgs {
		if len(got.msgs[seq]) != 1 || !bytes.Equal(got.msgs[seq][0], want) {
			t.Errorf("message %d: got %d deliveries, first %d bytes; want %d bytes once", seq, len(got.msgs[seq]), len(first(got.msgs[seq])), len(want))
		}
	}
	if n := client.ControlInvalid.Load(); n != 0 {
		t.Errorf("ControlInvalid = %d", n)
	}
}

func first(b [][]byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[0]
}

// TestControlCopiesUnderLoss: with 20 % random loss on every link, a message in three parts sent
// on all four lanes still arrives whole (it is lost only where one part is lost on every lane).
func TestControlCopiesUnderLoss(t *testing.T) {
	client, server, net := memPair(t, lanetest.Link{}, 7, false)
	var got controlGot
	client.OnControl(got.take)
	// The handshake ran loss-free; the copies meet the loss.
	net.SetLink(netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1"), lanetest.Link{Loss: 0.2})
	msg := bytes.Repeat([]byte("x"), 2*ControlPart+100)
	const n = 50
	for seq := uint32(0); seq < n; seq++ {
		server.SendControl(seq, msg)
		time.Sleep(time.Millisecond) // as a session sends them: far apart, not eight at once in parts
	}
	time.Sleep(200 * time.Millisecond)
	got.mu.Lock()
	defer got.mu.Unlock()
	// P(one message lost) = 1 - (1 - 0.2^4)^3 ≈ 0.5 %: with this seed all 50 arrive.
	if got.n < n-1 {
		t.Fatalf("%d of %d messages arrived whole under 20 %% loss", got.n, n)
	}
	for seq, m := range got.msgs {
		if len(m) != 1 || !bytes.Equal(m[0], msg) {
			t.Fatalf("message %d delivered %d times or changed", seq, len(m))
		}
	}
}

// TestControlHostileParts: authentic control datagrams that break the format (no parts, a part
// beyond the count, more than MaxControlParts, a short part before the last, an empty one) are
// counted and dropped; parts of messages that never complete are bounded to maxControlPartial.
func TestControlHostileParts(t *testing.T) {
	client, server, _ := memPair(t, lanetest.Link{}, 3, false)
	var got controlGot
	client.OnControl(got.take)
	part := func(seq uint32, k, n int, body []byte) []byte { return controlPayload(nil, seq, k, n, body) }
	full := bytes.Repeat([]byte("p"), ControlPart)
	bad := [][]byte{
		part(1, 0, 0, []byte("x")),          // no parts
		part(1, 2, 2, []byte("x")),          // part beyond the count
		part(1, 0, MaxControlParts+1, full), // too many parts
		part(1, 0, 2, []byte("short")),      // a short part before the last
		part(1, 0, 1, nil),                  // empty
		append(part(1, 0, 1, full), 'z'),    // longer than a part
		{1, 2, 3},                           // shorter than the head
	}
	for _, pt := range bad {
		if err := server.SendOne(0, wire.TypeControl, pt); err != nil {
			t.Fatal(err)
		}
	}
	// Twenty messages of two parts, only the first part of each: at most maxControlPartial are
	// kept, and none is delivered.
	for seq := uint32(100); seq < 120; seq++ {
		server.SendOne(1, wire.TypeControl, part(seq, 0, 2, full))
	}
	// A part that disagrees with the count of the message it belongs to.
	server.SendOne(2, wire.TypeControl, part(119, 1, 3, []byte("y")))
	// And one good message after all that.
	server.SendOne(3, wire.TypeControl, part(7, 0, 1, []byte("ok\n")))
	got.waitFor(t, 1)
	time.Sleep(20 * time.Millisecond)
	if n := client.ControlInvalid.Load(); n != uint64(len(bad))+1 {
		t.Errorf("ControlInvalid = %d, want %d", n, len(bad)+1)
	}
	got.mu.Lock()
	if got.n != 1 || string(first(got.msgs[7])) != "ok\n" {
		t.Errorf("delivered %v, want only message 7", got.msgs)
	}
	got.mu.Unlock()
	client.control.mu.Lock()
	if n := len(client.control.partial); n > maxControlPartial {
		t.Errorf("%d messages held in parts, more than %d", n, maxControlPartial)
	}
	client.control.mu.Unlock()
}

package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farwing/farwing/cc"
	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// streamPair opens a client and a server Path on lanetest's network whose links drop every
// datagram (UDP blocked), sees the client's UDP handshake fail, and moves both to TCP streams on
// loopback, as a copy falls back: the server accepts, the client dials and shakes hands again.
func streamPair(tb testing.TB) (client, server *Path, ln *net.TCPListener, accepted <-chan error) {
	return streamPairSeen(tb, func([]byte) {})
}

// streamPairSeen is streamPair where seen is given every UDP datagram the network drops, as an
// eavesdropper near either end sees them.
func streamPairSeen(tb testing.TB, seen func(pkt []byte)) (client, server *Path, ln *net.TCPListener, accepted <-chan error) {
	return streamPairOn(tb, seen, func(ln net.Listener) net.Listener { return ln })
}

// streamPairOn is streamPairSeen where the server accepts on wrap(ln).
func streamPairOn(tb testing.TB, seen func(pkt []byte), wrap func(net.Listener) net.Listener) (client, server *Path, ln *net.TCPListener, accepted <-chan error) {
	tb.Helper()
	n := lanetest.New(lanetest.Link{Drop: func(_, _ netip.AddrPort, pkt []byte) bool { seen(pkt); return true }}, 1)
	ca, sa := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ccr, scr := memCryptos()
	server = NewPath(memLanes(tb, n, sa), scr, true)
	client = NewPath(memLanes(tb, n, ca), ccr, false)
	tb.Cleanup(func() { client.Close(); server.Close() })
	var dst []netip.AddrPort
	for _, p := range server.Ports() {
		dst = append(dst, netip.AddrPortFrom(sa, uint16(p)))
	}
	ctx := context.Background()
	if _, err := client.Handshake(ctx, dst, 300*time.Millisecond, false); !errors.Is(err, ErrNoUDP) {
		tb.Fatalf("UDP handshake through a network that drops everything: %v, want ErrNoUDP", err)
	}
	ln, err := ListenTCPRange("127.0.0.1:0", PortRange{})
	if err != nil {
		tb.Fatal(err)
	}
	acc := make(chan error, 1)
	go func() { acc <- server.AcceptStreams(ctx, 5*time.Second, testToken, wrap(ln)) }()
	return client, server, ln, acc // the caller dials: hostile tests dial their own way first
}

// dialAndShake is the client's side of the fallback once the server listens on ln.
func dialAndShake(tb testing.TB, client, server *Path, ln *net.TCPListener) {
	tb.Helper()
	ctx := context.Background()
	if err := client.DialStreams(ctx, ln.Addr().(*net.TCPAddr).AddrPort(), 5*time.Second, testToken); err != nil {
		tb.Fatal(err)
	}
	var dst []netip.AddrPort
	for _, p := range server.Ports() {
		dst = append(dst, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(p)))
	}
	if _, err := client.Handshake(ctx, dst, 5*time.Second, false); err != nil {
		tb.Fatalf("handshake over the streams: %v", err)
	}
	if err := server.WaitPeers(ctx, 5*time.Second); err != nil {
		tb.Fatalf("server, over the streams: %v", err)
	}
	if !client.OnStreams() || !server.OnStreams() {
		tb.Fatal("the paths do not say they are on streams")
	}
}

// TestStreamsTransfer: with UDP blocked, the same sender and receiver move files over four TCP
// streams, every byte verified, with no FEC parity (auto FEC asked for) and nothing declared lost.
func TestStreamsTransfer(t *testing.T) {
	st, _ := transferWith(t, 0, 1, []int{3*fcopy.BlockSize + 12345, 1000, 0}, SenderConfig{Window: 8, InitialRTT: time.Millisecond,
		FEC: fec.Mode{Kind: fec.ModeAuto}}, xferOpts{streams: true})
	if st.Parity != 0 {
		t.Errorf("%d parity datagrams sent on streams, want none", st.Parity)
	}
	if st.Datagrams == 0 {
		t.Error("no datagrams sent")
	}
}

// TestStreamsHeldBack: where TCP holds one stream back (its reader stops for 10 s, as a stream in
// loss recovery stops delivering), the copy goes on over the other three: what the held stream
// was given is declared lost by time and sent on them, and the receiver has every byte verified
// while that stream is still held. (The sender's own end still waits for the held stream's last
// send: its sealer is in it.)
func TestStreamsHeldBack(t *testing.T) {
	h := &heldStream{hold: 10 * time.Second, after: 1 << 20, released: make(chan struct{})}
	t.Cleanup(func() { close(h.released) })
	var doneHeld, doneAfter bool
	transferWith(t, 0, 1, []int{24 << 20, 1000}, SenderConfig{Window: 8, InitialRTT: time.Millisecond, FEC: fec.Mode{Kind: fec.ModeAuto}},
		xferOpts{streams: true, accepts: func(ln net.Listener) net.Listener { return &heldListener{ln, h} },
			during: func(t *testing.T, hs *harness, stop <-chan struct{}) {
				select {
				case <-hs.recvDone:
				case <-stop:
				}
				h.mu.Lock()
				doneHeld, doneAfter = h.holding, !h.heldAt.IsZero() && !h.holding
				h.mu.Unlock()
			}})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heldAt.IsZero() {
		t.Fatal("no stream was held: the case tests nothing")
	}
	if !doneHeld {
		t.Errorf("the receiver finished with the held stream let go (%v), not while it was held: the other streams waited for it", doneAfter)
	}
}

// heldStream holds the reading of the first stream accepted once it has read after bytes, for
// hold (or until released), as TCP's loss recovery holds a stream's delivery.
type heldStream struct {
	hold     time.Duration
	after    int
	released chan struct{}
	mu       sync.Mutex
	n        int // streams accepted
	heldAt   time.Time
	holding  bool
}

type heldListener struct {
	net.Listener
	h *heldStream
}

func (l *heldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if l.h.n++; l.h.n == 1 {
		return &heldConn{Conn: c, h: l.h}, nil
	}
	return c, nil
}

type heldConn struct {
	net.Conn
	h    *heldStream
	read int
	held bool
}

func (c *heldConn) Read(b []byte) (int, error) {
	if !c.held && c.read >= c.h.after {
		c.held = true
		c.h.mu.Lock()
		c.h.heldAt, c.h.holding = time.Now(), true
		c.h.mu.Unlock()
		select {
		case <-time.After(c.h.hold):
		case <-c.h.released:
		}
		c.h.mu.Lock()
		c.h.holding = false
		c.h.mu.Unlock()
	}
	n, err := c.Conn.Read(b)
	c.read += n
	return n, err
}

// TestStreamsRate: on streams the user's --rate still holds the pacer (TCP sets the rate only
// below it).
func TestStreamsRate(t *testing.T) {
	client, server, ln, _ := streamPair(t)
	dialAndShake(t, client, server, ln)
	s := NewSender(client, nil, nil, SenderConfig{Rate: 123e6, Policy: cc.Fair, Window: 4})
	s.cc = cc.New(cc.Config{MaxRate: 123e6, MSS: 1500, Lanes: Lanes}, time.Now())
	if got := s.pacingRate(); got != 123e6 {
		t.Errorf("pacing rate on streams with --rate 123M: %.0f", got)
	}
	s.cfg.Rate = 0
	if got := s.pacingRate(); got != streamRate {
		t.Errorf("pacing rate on streams without --rate: %.0f, want %.0f (TCP governs)", got, streamRate)
	}
}

// rawDial connects to ln and writes b.
func rawDial(t *testing.T, ln *net.TCPListener, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByPeer reports whether the server closed c (a read gets EOF or a reset within 6 s).
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(streamAuthWait + time.Second))
	_, err := c.Read(make([]byte, 64))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestStreamsHostile: the server takes a stream only with an authentic first record for a free
// lane: an oversized length, a record under another key, garbage and a fifth stream for a lane
// already taken are closed and counted, and the copy's own four streams still work after them.
// Once a stream is taken, a record that fails authentication on it closes it.
func TestStreamsHostile(t *testing.T) {
	client, server, ln, accepted := streamPair(t)
	wrong, _ := memCryptos() // a client's crypto under another key
	over := binary.BigEndian.AppendUint16(nil, lane.MaxRecord+1)
	over = append(over, make([]byte, 100)...)
	other := NewStreamToken()
	cases := map[string][]byte{
		"oversized length": withToken(over),
		"zero length":      withToken([]byte{0, 0, 1, 2, 3}),
		"wrong key":        withToken(hello(wrong, 0)),
		"garbage":          withToken(lane.AppendRecord(nil, bytes.Repeat([]byte{0x5a}, 200))),
		"no token":         hello(client.crypto, 0),
		"another token":    append(other[:], hello(client.crypto, 0)...),
	}
	for name, b := range cases {
		c := rawDial(t, ln, b)
		if !closedByPeer(c) {
			t.Errorf("%s: the server kept the stream open", name)
		}
	}
	if got := server.StreamsRefused.Load(); got != uint64(len(cases)) {
		t.Errorf("%d streams refused, want %d", got, len(cases))
	}
	if server.OnStreams() {
		t.Fatal("a refused stream moved the server to streams")
	}
	dialAndShake(t, client, server, ln)
	if err := <-accepted; err != nil {
		t.Fatalf("AcceptStreams: %v", err)
	}
	// A forged record on a taken stream: the server counts it and closes the stream.
	before := server.AuthFailures.Load()
	if err := client.conn(2).Send(netip.AddrPort{}, [][]byte{hello(wrong, 2)[lane.RecordHeader:]}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return server.AuthFailures.Load() > before }) {
		t.Fatal("a forged record on a stream was not counted")
	}
	if !eventually(func() bool { return server.conn(2).Send(netip.AddrPort{}, [][]byte{{1}}) != nil }) {
		t.Error("the server kept a stream that sent a forged record")
	}
}

// TestStreamsTooMany: the server takes one stream per lane: a second authentic stream for a lane
// already taken is closed, and once every lane has its stream the listener is gone.
func TestStreamsTooMany(t *testing.T) {
	client, server, ln, accepted := streamPair(t)
	rawDial(t, ln, withToken(hello(client.crypto, 0)))
	if !eventually(func() bool { return server.OnStreams() }) {
		t.Fatal("the server did not take an authentic stream")
	}
	second := rawDial(t, ln, withToken(hello(client.crypto, 0)))
	if !closedByPeer(second) {
		t.Error("a second stream for lane 0 stayed open")
	}
	for i := 1; i < Lanes; i++ {
		rawDial(t, ln, withToken(hello(client.crypto, i)))
	}
	if err := <-accepted; err != nil {
		t.Fatalf("AcceptStreams: %v", err)
	}
	if got := server.StreamsRefused.Load(); got != 1 {
		t.Errorf("%d streams refused, want 1", got)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Write(withToken(hello(client.crypto, 1)))
		if !closedByPeer(c) {
			t.Error("a fifth stream stayed open")
		}
		c.Close()
	}
}

// testToken is the token of streamPair's streams.
var testToken = NewStreamToken()

// withToken is b after testToken, as a client's stream starts.
func withToken(b []byte) []byte { return append(testToken[:], b...) }

// hello is an authentic hello of lane i under c, as a stream record.
func hello(c *wire.Crypto, i int) []byte {
	var pt [helloLen]byte
	return lane.AppendRecord(nil, c.Seal(make([]byte, 0, wire.HeaderLen+helloLen+wire.TagLen), wire.Header{Type: wire.TypeHello, Lane: uint8(i), Seq: 1}, pt[:]))
}

// eventually reports whether cond holds within 5 s.
func eventually(cond func() bool) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestStreamsSilentStrangers: connections that never send a record (anyone who can reach the
// port, no key needed) cannot keep the copy's own streams out: with the server's room for
// strangers full of silent ones, the client's four streams are still taken and shake hands.
func TestStreamsSilentStrangers(t *testing.T) {
	client, server, ln, accepted := streamPair(t)
	for range maxStrangers {
		rawDial(t, ln, nil)
	}
	dialAndShake(t, client, server, ln)
	if err := <-accepted; err != nil {
		t.Fatalf("AcceptStreams: %v", err)
	}
}

// TestStreamsReplayedHello: an eavesdropper who saw the client's UDP hellos (which never got an
// answer) cannot take a lane's stream with one of them before the client connects: the client's
// four streams are still the ones taken.
func TestStreamsReplayedHello(t *testing.T) {
	var mu sync.Mutex
	var captured []byte
	client, server, ln, accepted := streamPairSeen(t, func(pkt []byte) {
		mu.Lock()
		defer mu.Unlock()
		if h, err := wire.ParseHeader(pkt); captured == nil && err == nil && h.Type == wire.TypeHello && h.Lane == 0 {
			captured = append([]byte(nil), pkt...)
		}
	})
	mu.Lock()
	rec := lane.AppendRecord(nil, captured)
	mu.Unlock()
	if len(rec) == lane.RecordHeader {
		t.Fatal("no hello of lane 0 seen")
	}
	thief := rawDial(t, ln, rec)
	dialAndShake(t, client, server, ln)
	if err := <-accepted; err != nil {
		t.Fatalf("AcceptStreams: %v", err)
	}
	if !closedByPeer(thief) {
		t.Error("the server kept a stream that replayed a hello seen on UDP")
	}
}

// TestStreamToken: the token's text form is exactly 32 lowercase hex digits, read back unchanged.
func TestStreamToken(t *testing.T) {
	tok := NewStreamToken()
	if got, err := ParseStreamToken(tok.String()); err != nil || got != tok {
		t.Fatalf("ParseStreamToken(%q) = %v, %v", tok, got, err)
	}
	if tok == NewStreamToken() {
		t.Error("two tokens alike")
	}
	for _, bad := range []string{"", "00", strings.ToUpper(tok.String()), tok.String() + "0", strings.Repeat("g", 32)} {
		if _, err := ParseStreamToken(bad); err == nil {
			t.Errorf("ParseStreamToken(%q) took it", bad)
		}
	}
}

// TestStreamsFloodFromElsewhere: connections from another address cannot push out a client's
// stream that has connected but not yet sent its token (its other streams still connecting):
// where the server's room for strangers is full, the one pushed out is from the address with the
// most of them.
func TestStreamsFloodFromElsewhere(t *testing.T) {
	client, server, ln, _ := streamPair(t)
	slow := rawDial(t, ln, nil) // from 127.0.0.1, as the client's streams
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}
	for range 2 * maxStrangers {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	// The slow stream's own send comes once the flood is accepted and some of it pushed out.
	if !eventually(func() bool { return server.StreamsRefused.Load() == maxStrangers+1 }) {
		t.Fatalf("%d connections refused, want %d", server.StreamsRefused.Load(), maxStrangers+1)
	}
	if _, err := slow.Write(withToken(hello(client.crypto, 0))); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return server.OnStreams() }) {
		t.Fatal("a flood from another address pushed out the client's stream")
	}
}

// TestStreamsAcceptFails: an Accept that fails for a moment (no file descriptor left, say) does
// not end the accepting: the client's streams are still taken.
func TestStreamsAcceptFails(t *testing.T) {
	client, server, ln, accepted := streamPairOn(t, func([]byte) {}, func(ln net.Listener) net.Listener {
		return &failingListener{Listener: ln, fails: 3}
	})
	dialAndShake(t, client, server, ln)
	if err := <-accepted; err != nil {
		t.Fatalf("AcceptStreams: %v", err)
	}
}

// failingListener's first Accepts fail as where the process has no file descriptor left.
type failingListener struct {
	net.Listener
	fails int
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestStreamsTokenHolders: connections that send the token (seen by someone on the streams'
// path) but no record are bounded as strangers are: beyond maxStrangers one is closed at once for
// each new one, not held for its 5 s.
func TestStreamsTokenHolders(t *testing.T) {
	_, server, ln, _ := streamPair(t)
	for range 3 * maxStrangers {
		rawDial(t, ln, testToken[:])
	}
	want := uint64(2 * maxStrangers)
	for end := time.Now().Add(streamAuthWait / 2); server.StreamsRefused.Load() < want && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := server.StreamsRefused.Load(); got != want {
		t.Errorf("%d of %d connections that sent only the token closed well within %s, want %d", got, 3*maxStrangers, streamAuthWait, want)
	}
}

package session

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane/lanetest"
)

// earlyTrainEnv is a server Path on lanetest's network and a bare client socket at ca that sends
// it hellos by hand: without a cookie, so that no lane is ever proven.
type earlyTrainEnv struct {
	server *Path
	client *lanetest.Conn
	cc     *wire.Crypto
	dst    netip.AddrPort // the server's lane 0
	seq    uint64
}

func newEarlyTrainEnv(t *testing.T, ca netip.Addr) *earlyTrainEnv {
	t.Helper()
	n := lanetest.New(lanetest.Link{Delay: 5 * time.Millisecond}, 1)
	cc, sc := memCryptos()
	sa := netip.MustParseAddr("198.18.0.2")
	server := NewPath(memLanes(t, n, sa), sc, true)
	client, err := n.Listen(ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return &earlyTrainEnv{server: server, client: client, cc: cc, dst: netip.AddrPortFrom(sa, uint16(server.Ports()[0]))}
}

// hello sends lane 0 a cookie-less hello, sealed under key (the session's unless forged).
func (e *earlyTrainEnv) hello(forged bool) {
	var pt [helloLen]byte
	binary.BigEndian.PutUint64(pt[:8], uint64(time.Now().UnixNano()))
	binary.BigEndian.PutUint16(pt[8:], wire.ChunkSize)
	c := e.cc
	if forged {
		c, _ = memCryptos() // another session's key
	}
	e.seq++
	pkt := c.Seal(make([]byte, 0, wire.HeaderLen+helloLen+wire.TagLen), wire.Header{Type: wire.TypeHello, Lane: 0, Seq: e.seq}, pt[:])
	e.client.Send(e.dst, [][]byte{pkt})
}

// heard counts, for wait, the hello answers and train datagrams the client socket receives.
func (e *earlyTrainEnv) heard(wait time.Duration) (acks, train int) {
	end := time.Now().Add(wait)
	for time.Now().Before(end) && train < trainMax {
		e.client.Recv(time.Now().Add(20*time.Millisecond), func(b []byte, _ netip.AddrPort) {
			h, err := wire.ParseHeader(b)
			if err != nil {
				return
			}
			switch {
			case h.Type == wire.TypeHelloAck:
				acks++
			case h.Type == wire.TypeHello && h.Flags&trainFlag != 0:
				train++
			}
		})
	}
	return acks, train
}

// TestTrainToSSHClient: in a pull the server's probe goes at once to an authentic hello from the
// address ssh's connection came from (any port), before any lane is proven, whether the hello
// comes before or after SendTrainOnHello; from another address, or on a forged hello, it waits
// for a proven lane (never here: the client sends no cookie). Nothing is proven by it.
func TestTrainToSSHClient(t *testing.T) {
	ca := netip.MustParseAddr("198.18.0.1")
	for _, c := range []struct {
		name        string
		sshClient   netip.Addr
		helloFirst  bool
		forged      bool
		wantTrained bool
	}{
		{"ssh client, call first", ca, false, false, true},
		{"ssh client, hello first", ca, true, false, true},
		{"ssh client as IPv4-mapped IPv6", netip.AddrFrom16(ca.As16()), false, false, true},
		{"another address", netip.MustParseAddr("198.18.0.9"), false, false, false},
		{"no ssh client known", netip.Addr{}, false, false, false},
		{"forged hello from the ssh client", ca, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEarlyTrainEnv(t, ca)
			if c.helloFirst {
				e.hello(c.forged)
				time.Sleep(50 * time.Millisecond) // heard, unproven
				e.server.SetSSHClient(c.sshClient)
				e.server.SendTrainOnHello()
			} else {
				e.server.SetSSHClient(c.sshClient)
				e.server.SendTrainOnHello()
				e.hello(c.forged)
			}
			wait := 2 * time.Second
			if !c.wantTrained {
				wait = 300 * time.Millisecond // 60 round trips of this network
			}
			acks, train := e.heard(wait)
			switch {
			case c.wantTrained && train != trainMax:
				t.Errorf("%d of %d train datagrams arrived (%d answers)", train, trainMax, acks)
			case !c.wantTrained && train != 0:
				t.Errorf("%d train datagrams went to an unproven address", train)
			case c.forged && acks != 0:
				t.Errorf("a forged hello was answered %d times", acks)
			case !c.forged && !c.helloFirst && acks != 1:
				t.Errorf("%d answers to one hello", acks)
			}
			if e.server.proven[0].Load() {
				t.Errorf("a cookie-less hello proved the lane")
			}
			// Once per session: a second hello brings no second train.
			e.hello(false)
			if _, again := e.heard(300 * time.Millisecond); c.wantTrained && again != 0 {
				t.Errorf("a second hello brought %d more train datagrams", again)
			}
		})
	}
}

package benchpeer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/internal/xfer/xfertest"
	"github.com/farwing/farwing/lane/lanetest"
)

// benchEnv is an in-process bench peer whose TCP listener is on loopback.
func benchEnv(t *testing.T) (*Peer, *xfertest.Env) {
	e := xfertest.New(t, lanetest.Link{}, 1)
	e.Roles = map[string]xfer.Role{xfer.RoleBench: Serve}
	e.SSHConn = "127.0.0.1 50000 127.0.0.1 22"
	b, err := Open(context.Background(), e.Options(), "bench-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, e
}

// TestBenchTCP runs the bench's TCP rows against an in-process peer, both directions: the
// receiver counts, and the sending sockets used the congestion control asked for (CUBIC, or where
// this user may not choose it, one the kernel allows everyone: tcp_allowed_congestion_control).
func TestBenchTCP(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("congestion control choice is Linux only")
	}
	cc := "cubic"
	if err := tcpbench.CheckCC(cc); err != nil {
		i := slices.IndexFunc(tcpbench.Available(), func(name string) bool { return tcpbench.CheckCC(name) == nil })
		if i < 0 {
			t.Skipf("no congestion control this user may choose: %v", err)
		}
		cc = tcpbench.Available()[i]
	}
	b, _ := benchEnv(t)
	if b.Facts.Cores <= 0 || b.Facts.Go == "" || b.Addr.String() != "127.0.0.1" {
		t.Fatalf("peer facts %+v at %s", b.Facts, b.Addr)
	}
	ctx := context.Background()
	for _, tt := range []xfer.TCPTest{{Streams: 1, CC: cc, Seconds: 1}, {Streams: 2, CC: cc, Seconds: 1, PeerSends: true}} {
		r, err := b.TCP(ctx, tt, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tt, err)
		}
		if r.Streams != tt.Streams || r.Bytes <= 0 || r.Seconds <= 0 || len(r.CC) != tt.Streams || slices.ContainsFunc(r.CC, func(s string) bool { return s != cc }) {
			t.Errorf("%+v: result %+v", tt, r)
		}
	}
	f, err := b.HostFacts(ctx)
	if err != nil || f.Cores <= 0 {
		t.Errorf("fresh facts %+v: %v", f, err)
	}
}

// TestBenchRefusals: a peer refuses tests beyond its limits and congestion controls its kernel
// lacks, with the reason, and stays for the next test.
func TestBenchRefusals(t *testing.T) {
	b, _ := benchEnv(t)
	ctx := context.Background()
	// The client checks its own request first; send a bad one as a hostile client would.
	b.s.Control().Send(xfer.Msg{T: xfer.KindTCP, TCPTest: &xfer.TCPTest{Streams: 1000, Seconds: 1}})
	if _, err := b.s.Control().Expect(ctx, xfer.KindListen, xfer.PeerIdle); !IsRemote(err) || !strings.Contains(err.Error(), "1000 streams") {
		t.Errorf("1000 streams: %v", err)
	}
	_, err := b.TCP(ctx, xfer.TCPTest{Streams: 1, Seconds: 1, CC: "no_such_cc", PeerSends: true}, nil)
	if !IsRemote(err) || !strings.Contains(err.Error(), "lacks tcp_no_such_cc") {
		t.Errorf("missing algorithm: %v", err)
	}
	if _, err := b.TCP(ctx, xfer.TCPTest{Streams: 1, Seconds: 1, CC: "no_such_cc"}, nil); err == nil || !strings.Contains(err.Error(), "lacks tcp_no_such_cc") {
		t.Errorf("missing algorithm, this end: %v", err)
	}
	if _, err := b.TCP(ctx, xfer.TCPTest{Streams: tcpbench.MaxStreams + 1, Seconds: 1}, nil); !errors.Is(err, xfer.ErrProtocol) {
		t.Errorf("too many streams, this end: %v", err)
	}
	if runtime.GOOS == "linux" {
		if r, err := b.TCP(ctx, xfer.TCPTest{Streams: 1, Seconds: 1}, nil); err != nil || r.Bytes <= 0 {
			t.Errorf("a good test after refusals: %+v, %v", r, err)
		}
	}
}

// IsRemote reports whether err came from the peer (a test it refused or could not run).
func IsRemote(err error) bool {
	var re *xfer.RemoteError
	return errors.As(err, &re)
}

// TestMakeStream: a throughput row's source is size bytes of zeros, made anew over an older file
// of another size, and a cancelled bench stops making it.
func TestMakeStream(t *testing.T) {
	p := t.TempDir() + "/stream"
	if err := os.WriteFile(p, []byte("an older, longer stream file's bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 5
	if err := MakeStream(context.Background(), p, size); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size || !bytes.Equal(b, make([]byte, size)) {
		t.Fatalf("%d bytes, zeros %v; want %d zeros", len(b), bytes.Equal(b, make([]byte, len(b))), size)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := MakeStream(ctx, p, size); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
	// What is read through: all of it, unless that is more than half the memory available.
	for _, c := range []struct{ size, avail, want int64 }{
		{256 << 20, 0, 256 << 20},
		{256 << 20, 16 << 30, 256 << 20},
		{25 << 30, 16 << 30, 8 << 30},
		{3 << 30, 6 << 30, 3 << 30},
		{3<<30 + 1, 6 << 30, 3 << 30},
	} {
		if got := streamWarm(c.size, c.avail); got != c.want {
			t.Errorf("streamWarm(%d, %d) = %d, want %d", c.size, c.avail, got, c.want)
		}
	}
}

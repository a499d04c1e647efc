package xfer

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/lane"
	"github.com/farwing/farwing/lane/lanetest"
)

// laneLog keeps the lanes an opener opened, to look at them after the copy.
type laneLog struct {
	mu    sync.Mutex
	conns []lane.PacketConn
}

// record wraps open so that what it opens is kept in l.
func (l *laneLog) record(open LaneOpener) LaneOpener {
	return func(bind string) ([session.Lanes]lane.PacketConn, error) {
		conns, err := open(bind)
		if err == nil {
			l.mu.Lock()
			l.conns = append(l.conns, conns[:]...)
			l.mu.Unlock()
		}
		return conns, err
	}
}

// check fails t unless l holds lanes, every one a UDP lane on the portable path (or on the
// batched one, with portable false) that moved datagrams. On the portable path each datagram
// takes its own system call, each way.
func (l *laneLog) check(t *testing.T, end string, portable bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) == 0 {
		t.Fatalf("%s: no lanes opened", end)
	}
	var sent, recv uint64
	for i, pc := range l.conns {
		c, ok := pc.(*lane.Conn)
		if !ok {
			t.Fatalf("%s: lane %d is a %T, not a UDP lane", end, i, pc)
		}
		st := c.Stats()
		sent += st.SentDatagrams
		recv += st.RecvDatagrams
		if c.Portable() != portable {
			t.Fatalf("%s: lane %d on the portable path: %v, want %v", end, i, c.Portable(), portable)
		}
		if portable && (st.TxSyscalls != st.SentDatagrams || st.RxSyscalls != st.RecvDatagrams) {
			t.Fatalf("%s: portable lane %d: %d datagrams in %d send calls, %d in %d receive calls", end, i,
				st.SentDatagrams, st.TxSyscalls, st.RecvDatagrams, st.RxSyscalls)
		}
	}
	if sent == 0 || recv == 0 {
		t.Fatalf("%s: lanes sent %d and received %d datagrams", end, sent, recv)
	}
}

// portableEnv is an in-process environment whose two ends copy over real UDP on loopback, with
// the lane options of tun (cmd/farwing's tuning.FromEnv of each end's environment): the client's
// lanes as a copy opens them (udpLanes, here without the lanes' notices: quietLane), the
// remote's as Serve opens them (ListenUDPRange in ServeOptions.Ports, with ServeOptions.Tuning's
// lane options), both kept for a look.
func portableEnv(t *testing.T, tun tuning.Settings) (e *env, o Options, client, server *laneLog) {
	e = newEnv(t, lanetest.Link{}, 1)
	e.realUDP = true
	e.sshConn = "127.0.0.1 50000 127.0.0.1 22"
	client, server = &laneLog{}, &laneLog{}
	e.serve = func(ctx context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error {
		so.Tuning = tun
		so.Lanes = server.record(func(bind string) ([session.Lanes]lane.PacketConn, error) {
			return session.ListenUDPRange(bind, so.Ports, quietLane(so.Tuning))
		})
		return Serve(ctx, r, w, pub, so)
	}
	o = Options{Start: e.start, Tuning: tun, Lanes: client.record(func(bind string) ([session.Lanes]lane.PacketConn, error) {
		return session.ListenUDP(bind, quietLane(tun))
	})}
	return e, o, client, server
}

// quietLane is t's lane options (as Serve takes them) without the lanes' one-line
// notices on the test's standard error.
func quietLane(t tuning.Settings) lane.Options {
	opt := t.Lane(0)
	opt.Warn = func(string) {}
	return opt
}

// portableTuning is the tuning of an environment with FARWING_SOCKETS=portable.
func portableTuning() tuning.Settings {
	return tuning.FromEnv(func(k string) string {
		if k == "FARWING_SOCKETS" {
			return "portable"
		}
		return ""
	})
}

// TestInProcessPortable: with FARWING_SOCKETS=portable at both ends, a tree (nested directories,
// an empty one, an empty file, files of a few blocks and of a few bytes) is pushed over real UDP
// on loopback and pulled back, then a file of 24 blocks and a few bytes pushed and pulled: every
// digest right, nothing else in the destinations, and every lane of both ends on the portable
// path (macOS's), one datagram per system call.
func TestInProcessPortable(t *testing.T) {
	tun := portableTuning()
	if !tun.Portable {
		t.Fatal("FARWING_SOCKETS=portable does not ask for the portable path")
	}
	src, remote, back := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]int{"t/a.bin": 3<<20 + 12345, "t/sub/b.bin": 777, "t/sub/deep/c.bin": 1 << 20, "t/empty.bin": 0, "t/nothing": -1}
	sums := tree(t, src, files)
	big := tree(t, src, map[string]int{"big.bin": 24<<20 + 4321})["big.bin"]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	run := func(what string, copy func(o Options) (*Result, error), check func()) {
		t.Helper()
		e, o, client, server := portableEnv(t, tun)
		res, err := copy(o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		e.wait()
		check()
		client.check(t, what+", client", true)
		server.check(t, what+", remote", true)
		t.Logf("%s on the portable path: %d bytes, %.0f Mbit/s, %d datagrams sent, %d re-sent", what, res.Bytes, res.GoodputBps/1e6, res.DatagramsSent, res.Retransmitted)
	}
	run("tree push", func(o Options) (*Result, error) {
		o.Recursive = true
		return Push(ctx, o, []string{filepath.Join(src, "t")}, "host", remote)
	}, func() { sameTree(t, filepath.Join(remote, "t"), stripTop(sums), "nothing") })
	run("tree pull", func(o Options) (*Result, error) {
		o.Recursive = true
		return Pull(ctx, o, "host", []string{filepath.Join(remote, "t")}, back)
	}, func() { sameTree(t, filepath.Join(back, "t"), stripTop(sums), "nothing") })
	run("file push", func(o Options) (*Result, error) {
		return Push(ctx, o, []string{filepath.Join(src, "big.bin")}, "host", remote)
	}, func() { sameFile(t, filepath.Join(remote, "big.bin"), big) })
	run("file pull", func(o Options) (*Result, error) {
		return Pull(ctx, o, "host", []string{filepath.Join(remote, "big.bin")}, filepath.Join(back, "big.bin"))
	}, func() { sameFile(t, filepath.Join(back, "big.bin"), big) })
}

// TestInProcessBatched: the same harness without FARWING_SOCKETS keeps both ends on the batched
// path (a check that TestInProcessPortable's can fail).
func TestInProcessBatched(t *testing.T) {
	e, o, client, server := portableEnv(t, tuning.Settings{})
	src, dst := t.TempDir(), t.TempDir()
	sum := tree(t, src, map[string]int{"f": 2<<20 + 99})["f"]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", dst); err != nil {
		t.Fatal(err)
	}
	e.wait()
	sameFile(t, filepath.Join(dst, "f"), sum)
	client.check(t, "client", false)
	server.check(t, "remote", false)
}

// sameFile fails t unless the file at p has the BLAKE3 digest sum.
func sameFile(t *testing.T, p string, sum [32]byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if blake3.Sum256(b) != sum {
		t.Fatalf("%s (%d bytes) differs from its source", p, len(b))
	}
}

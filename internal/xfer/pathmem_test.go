package xfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestPathRecord: a remembered path is used only when it is recent, plausible and agrees with
// this session's ssh start, and only for its own path (ssh host, UDP destination, local source);
// anything else (no file, another path, garbage, a link, a directory others may write) starts as
// a first copy. A forgotten record is gone.
func TestPathRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "paths")
	now := time.Now()
	key := pathKey("h", netip.MustParseAddr("127.0.0.2"))
	if key == "" || key == pathKey("g", netip.MustParseAddr("127.0.0.2")) || key == pathKey("h", netip.MustParseAddr("127.0.0.3")) {
		t.Fatalf("keys: %q for h, and the same for another host or address", key)
	}
	good := pathRecord{At: now.Add(-time.Hour).Unix(), RateBps: 390e6, MinRTTus: 140_000}
	if err := rememberPath(dir, key, good); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, key)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}
	if r, ok := recallPath(dir, key, now, 300*time.Millisecond); !ok || r != good {
		t.Fatalf("recall: %+v %v, want %+v", r, ok, good)
	}
	for _, c := range []struct {
		name string
		key  string
		took time.Duration
		rec  *pathRecord
		raw  string
	}{
		{name: "another path", key: pathKey("g", netip.MustParseAddr("127.0.0.2")), took: time.Second},
		{name: "ssh started faster than the round trip allows", key: key, took: 200 * time.Millisecond},
		{name: "a day old", key: key, took: time.Second, rec: &pathRecord{At: now.Add(-25 * time.Hour).Unix(), RateBps: 390e6, MinRTTus: 140_000}},
		{name: "from the future", key: key, took: time.Second, rec: &pathRecord{At: now.Add(time.Hour).Unix(), RateBps: 390e6, MinRTTus: 140_000}},
		{name: "no rate", key: key, took: time.Second, rec: &pathRecord{At: now.Unix(), MinRTTus: 140_000}},
		{name: "rate beyond reason", key: key, took: time.Second, rec: &pathRecord{At: now.Unix(), RateBps: 1e12, MinRTTus: 140_000}},
		{name: "no round trip", key: key, took: time.Second, rec: &pathRecord{At: now.Unix(), RateBps: 390e6}},
		{name: "garbage", key: key, took: time.Second, raw: "{not json"},
		{name: "too long", key: key, took: time.Second, raw: `{"at":1,` + strings.Repeat(" ", maxPathRecord) + `"rate_bps":390e6}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := dir
			if c.rec != nil || c.raw != "" {
				d = filepath.Join(t.TempDir(), "paths")
				if c.rec != nil {
					if err := rememberPath(d, c.key, *c.rec); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Mkdir(d, 0o700); err != nil || os.WriteFile(filepath.Join(d, c.key), []byte(c.raw), 0o600) != nil {
					t.Fatal(err)
				}
			}
			if r, ok := recallPath(d, c.key, now, c.took); ok {
				t.Errorf("recalled %+v", r)
			}
		})
	}
	t.Run("a link", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "paths")
		if err := rememberPath(d, "target", good); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(d, "target"), filepath.Join(d, key)); err != nil {
			t.Fatal(err)
		}
		if r, ok := recallPath(d, key, now, time.Second); ok {
			t.Errorf("recalled %+v through a link", r)
		}
	})
	t.Run("a directory others may write", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "paths")
		if err := rememberPath(d, key, good); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if r, ok := recallPath(d, key, now, time.Second); ok {
			t.Errorf("recalled %+v from a directory anyone may write", r)
		}
		if err := rememberPath(d, key, good); err == nil {
			t.Errorf("wrote a record into a directory anyone may write")
		}
	})
	forgetPath(dir, key)
	if _, ok := recallPath(dir, key, now, time.Second); ok {
		t.Errorf("a forgotten record was recalled")
	}
	if _, ok := recallPath("", key, now, time.Second); ok {
		t.Errorf("recalled with no directory")
	}
}

// ackHold drops the server's hello answers until the client has sent until data datagrams (or
// for at most max, so that a client that waits for them is released and fails the count), and
// counts the client's data datagrams sent before an answer went through. A count, not a time:
// how much a client sends in a given time depends on how busy this machine is.
type ackHold struct {
	mu         sync.Mutex
	start      time.Time
	until      int
	max        time.Duration
	firstData  time.Duration // after start (0: none)
	dataBefore int           // data datagrams sent before an answer went through
	answered   bool
}

func (a *ackHold) drop(from, to netip.AddrPort, b []byte) bool {
	h, err := wire.ParseHeader(b)
	if err != nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case h.Type == wire.TypeData && from.Addr() == clientHost:
		if a.firstData == 0 {
			a.firstData = time.Since(a.start)
		}
		if !a.answered {
			a.dataBefore++
		}
	case h.Type == wire.TypeHelloAck && from.Addr() == serverHost:
		if a.dataBefore < a.until && time.Since(a.start) < a.max {
			return true
		}
		a.answered = true
	}
	return false
}

// TestInProcessPathMemory: a push whose data phase lasted over pathMemoryData keeps the path's
// rate and round trip; the next push to that host starts at the remembered rate (Result.StartBps)
// and sends its data without waiting for the UDP handshake: with the server's hello answers held
// back until half the file's data datagrams have gone (or 10 s), its first data goes out at once
// and half the file is sent and acknowledged before any answer gets through (the server's
// receiver takes the data before the client's lanes are proven, and answers it). Both deliver the same bytes at 1 % loss, with
// the peer finding its preface in the environment as well.
func TestInProcessPathMemory(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 0.01, Delay: 5 * time.Millisecond, Rate: 30e6}, 3)
	e.hostName, e.took, e.envPreface = serverHost.String(), 40*time.Millisecond, true
	src := t.TempDir()
	sums := tree(t, src, map[string]int{"f": 5 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := e.options()
	o.PathMemory = t.TempDir()
	first := t.TempDir()
	res, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", first)
	if err != nil {
		t.Fatalf("first push: %v", err)
	}
	sameTree(t, first, sums)
	if res.StartBps != 0 {
		t.Fatalf("a first push started at %.0f bit/s", res.StartBps)
	}
	rec, ok := recallPath(o.PathMemory, pathKey("host", serverHost), time.Now(), e.took)
	if !ok || rec.RateBps > 33e6 || rec.RateBps < 3e6 || rec.MinRTTus < 10_000 {
		t.Fatalf("the first push (data %.2f s, %d wire bytes) left the record %+v (usable %v)", res.DataSeconds, res.WireBytes, rec, ok)
	}

	half := (5 << 20) / wire.ChunkSize / 2
	a := &ackHold{start: time.Now(), until: half, max: 10 * time.Second}
	e2 := newEnv(t, lanetest.Link{Loss: 0.01, Delay: 5 * time.Millisecond, Rate: 100e6, Drop: a.drop}, 4)
	e2.hostName, e2.took, e2.envPreface = e.hostName, e.took, true
	o2 := e2.options()
	o2.PathMemory = o.PathMemory
	second := t.TempDir()
	res, err = Push(ctx, o2, []string{filepath.Join(src, "f")}, "host", second)
	if err != nil {
		t.Fatalf("second push: %v", err)
	}
	sameTree(t, second, sums)
	if res.StartBps != rec.RateBps {
		t.Errorf("the second push started at %.0f bit/s, the record says %.0f", res.StartBps, rec.RateBps)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstData == 0 || a.firstData > 2*time.Second || a.dataBefore < half {
		t.Errorf("the second push sent its first data after %s, and %d data datagrams before a hello answer got through", a.firstData, a.dataBefore)
	}
}

// TestInProcessPathMemoryNoUDP: with --udp-only, a remembered path whose UDP no longer gets
// through fails as a first push does, with the handshake's own error (exit 6), though the data
// went first, and its record is forgotten.
func TestInProcessPathMemoryNoUDP(t *testing.T) {
	e := newEnv(t, lanetest.Link{Loss: 1}, 1)
	e.hostName, e.took = serverHost.String(), 40*time.Millisecond
	o := e.options()
	o.UDPOnly = true
	o.PathMemory = t.TempDir()
	if err := rememberPath(o.PathMemory, pathKey("host", serverHost), pathRecord{At: time.Now().Unix(), RateBps: 50e6, MinRTTus: 10_000}); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	tree(t, src, map[string]int{"f": 100000})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", t.TempDir())
	if !errors.Is(err, session.ErrNoUDP) || CodeOf(err) != CodeUDP {
		t.Fatalf("push without UDP: %v (exit %d)", err, CodeOf(err))
	}
	if _, ok := recallPath(o.PathMemory, pathKey("host", serverHost), time.Now(), time.Second); ok {
		t.Errorf("the record of a path without UDP is still there")
	}
}

// TestInProcessPathMemoryFallback: a remembered path whose UDP no longer gets through sends its
// first data into the blocked path, then falls back to TCP streams under the running sender: the
// file arrives whole, and the record is forgotten.
func TestInProcessPathMemoryFallback(t *testing.T) {
	e := streamsEnv(t)
	e.took = 40 * time.Millisecond
	o := e.options()
	o.Warn = func(string) {}
	o.Tuning.NoJumbo = true // a loopback client proposes jumbo chunks, which only the handshake settles: no data before it
	o.PathMemory = t.TempDir()
	key := pathKey("host", netip.MustParseAddr("127.0.0.1"))
	if err := rememberPath(o.PathMemory, key, pathRecord{At: time.Now().Unix(), RateBps: 50e6, MinRTTus: 10_000}); err != nil {
		t.Fatal(err)
	}
	src, dst := t.TempDir(), t.TempDir()
	sums := tree(t, src, map[string]int{"f": 2<<20 + 5})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", dst)
	if err != nil {
		t.Fatal(err)
	}
	if res.StartBps == 0 || res.Transport != TransportTCP {
		t.Errorf("start_bps %.0f, transport %q: want data before the handshake, then tcp", res.StartBps, res.Transport)
	}
	sameTree(t, dst, sums)
	if _, ok := recallPath(o.PathMemory, key, time.Now(), time.Second); ok {
		t.Errorf("the record of a path without UDP is still there")
	}
}

// TestEnvPrefaced: the peer's control channel reads the environment's copy of the preface at once;
// standard input must then begin with the same bytes, which are dropped, whatever the reads' sizes;
// anything else ends it (ErrPrefaceMismatch), as does its end inside the preface.
func TestEnvPrefaced(t *testing.T) {
	pre := []byte("{\"t\":\"hello\"}\n{\"t\":\"list\"}\n")
	rest := []byte("{\"t\":\"more\"}\n")
	for _, c := range []struct {
		name  string
		stdin []byte
		want  []byte
		err   error
	}{
		{"same", append(bytes.Clone(pre), rest...), append(bytes.Clone(pre), rest...), nil},
		{"same, nothing after", bytes.Clone(pre), pre, nil},
		{"differs", append([]byte("{\"t\":\"hellO\"}\n{\"t\":\"list\"}\n"), rest...), pre, ErrPrefaceMismatch},
		{"differs in its last byte", append(append(bytes.Clone(pre[:len(pre)-1]), 'x'), rest...), pre, ErrPrefaceMismatch},
		{"ends inside it", pre[:10], pre, io.ErrUnexpectedEOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, in := range []io.Reader{bytes.NewReader(c.stdin), iotest.OneByteReader(bytes.NewReader(c.stdin))} {
				got, err := io.ReadAll(EnvPrefaced(in, pre))
				if !errors.Is(err, c.err) || !bytes.Equal(got, c.want) {
					t.Errorf("read %q, %v; want %q, %v", got, err, c.want, c.err)
				}
			}
		})
	}
	if !strings.Contains(ErrPrefaceMismatch.Error(), "LC_FARWING_PREFACE") {
		t.Errorf("the error does not name the variable: %v", ErrPrefaceMismatch)
	}
}

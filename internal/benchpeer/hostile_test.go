package benchpeer

// Hostile peers of the bench role. A hostile client of the real bench server (Serve) already
// has an ssh login, so what is checked there is that the server stays bounded: names only of its
// own directory, sizes within limits, listeners that close. A hostile bench server (a double of
// Serve) must not make the client write outside its destination, hang, hold unbounded memory,
// print raw escapes or report figures it did not measure.
//
// The tests whose comment says "a defect" failed on the code they were written against and
// pass since it was fixed. All network traffic is on 127.0.0.1.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/internal/xfer"
	"github.com/farwing/farwing/internal/xfer/xfertest"
	"github.com/farwing/farwing/lane/lanetest"
)

// ---- the hostile client: raw requests to the real bench server ----

// benchAsk sends a raw request to the real bench server, as a hostile client would.
func benchAsk(t *testing.T, b *Peer, m xfer.Msg, want xfer.Kind) (xfer.Msg, error) {
	t.Helper()
	if err := b.s.Control().Send(m); err != nil {
		t.Fatal(err)
	}
	return b.s.Control().Expect(context.Background(), want, 10*time.Second)
}

// benchStillServes: after a refusal the bench server answers the next request.
func benchStillServes(t *testing.T, b *Peer) {
	t.Helper()
	if f, err := b.HostFacts(context.Background()); err != nil || f.Cores <= 0 {
		t.Fatalf("the bench server after a refusal: %+v, %v", f, err)
	}
}

// TestBenchHostileCheckNames: "check" of a name that is not a plain name of the bench's directory
// is refused with the protocol code and an escaped message, and a file beside the directory that
// the name points at is neither read nor removed.
func TestBenchHostileCheckNames(t *testing.T) {
	b, _ := benchEnv(t)
	victim := filepath.Join(filepath.Dir(b.Dir), "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(victim)
	for _, name := range []string{"", ".", "..", "../victim", "/etc/passwd", victim, "a/b", "./victim",
		"x\x1b]0;owned\x07", "x\ny", strings.Repeat("a", 5000)} {
		_, err := benchAsk(t, b, xfer.Msg{T: xfer.KindCheck, Name: name}, xfer.KindChecked)
		var re *xfer.RemoteError
		if !errors.As(err, &re) || re.Code != xfer.CodeProtocol {
			t.Errorf("check %q: %v", name, err)
			continue
		}
		treetest.NoControl(t, err.Error())
	}
	// A plain name with a bidirectional override is a name of the directory (not there): an
	// error, escaped. (A name that is not UTF-8 arrives as U+FFFD: JSON replaces it.)
	if _, err := benchAsk(t, b, xfer.Msg{T: xfer.KindCheck, Name: "\u202etxt.exe"}, xfer.KindChecked); !IsRemote(err) || strings.ContainsRune(err.Error(), '\u202e') {
		t.Errorf("check of a name with U+202E: %v", err)
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "keep me" {
		t.Fatalf("the file beside the bench directory: %q, %v", got, err)
	}
	benchStillServes(t, b)
}

// TestBenchHostileCheckSymlink: a symbolic link in the bench's directory (which only a client with
// a login can make) is removed by "check", and what it points at stays. (The server does read
// through the link: its digest is that of the file outside; harmless for the same user.)
func TestBenchHostileCheckSymlink(t *testing.T) {
	b, _ := benchEnv(t)
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("outside"), 0o600)
	if err := os.Symlink(outside, filepath.Join(b.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := benchAsk(t, b, xfer.Msg{T: xfer.KindCheck, Name: "link"}, xfer.KindChecked); err != nil {
		t.Logf("check of a symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(b.Dir, "link")); !os.IsNotExist(err) {
		t.Errorf("the link is still there: %v", err)
	}
	if got, err := os.ReadFile(outside); err != nil || string(got) != "outside" {
		t.Fatalf("the link's target: %q, %v", got, err)
	}
}

// TestBenchHostileCheckFIFO covers a defect, fixed (low severity: it needs a login on the host):
// "check" of a FIFO in the bench's directory blocks the server in open(2) for ever; it answers no
// further request and, since it never returns, never removes its directory. checkBenchFile should
// open with O_NONBLOCK|O_NOFOLLOW and take regular files only (serve.go, SumFile).
func TestBenchHostileCheckFIFO(t *testing.T) {
	b, _ := benchEnv(t)
	fifo := filepath.Join(b.Dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	// Let a blocked server go at the end (a writer that closes at once: it reads EOF).
	defer func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}()
	b.s.Control().Send(xfer.Msg{T: xfer.KindCheck, Name: "fifo"})
	_, err := b.s.Control().Next(context.Background(), 3*time.Second)
	if errors.Is(err, session.ErrSilent) {
		t.Fatalf("DEFECT: check of a FIFO: no answer within 3 s, the bench server is stuck in open(2): %v", err)
	}
}

// TestBenchHostileSizes: "http" and "source" of no, negative, huge or impossible sizes are refused
// with the size in the message, no file is made, and the server stays.
func TestBenchHostileSizes(t *testing.T) {
	b, _ := benchEnv(t)
	for _, size := range []int64{0, -1, -1 << 62, maxHTTPSize + 1, 1<<63 - 1} {
		for _, req := range []xfer.Msg{{T: xfer.KindHTTP, Size: size}, {T: xfer.KindSource, Size: size}, {T: xfer.KindSource, Size: size, Sink: true}} {
			_, err := benchAsk(t, b, req, map[xfer.Kind]xfer.Kind{xfer.KindHTTP: xfer.KindListen, xfer.KindSource: xfer.KindMade}[req.T])
			if !IsRemote(err) || !strings.Contains(err.Error(), fmt.Sprint(size)) {
				t.Errorf("%s of %d bytes: %v", req.T, size, err)
			}
		}
	}
	// The largest size allowed, where it does not fit the disk: refused before a byte is written.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(b.Dir, &fs); err != nil || uint64(max(fs.Bavail, 0))*uint64(fs.Bsize) >= maxHTTPSize {
		t.Logf("not probing the disk bound (%v)", err)
	} else {
		for _, req := range []xfer.Msg{{T: xfer.KindHTTP, Size: maxHTTPSize}, {T: xfer.KindSource, Size: maxHTTPSize}} {
			if _, err := benchAsk(t, b, req, map[xfer.Kind]xfer.Kind{xfer.KindHTTP: xfer.KindListen, xfer.KindSource: xfer.KindMade}[req.T]); !IsRemote(err) || !strings.Contains(err.Error(), "does not fit") {
				t.Errorf("%s of 1 TiB on a smaller disk: %v", req.T, err)
			}
		}
	}
	if ents, _ := os.ReadDir(b.Dir); len(ents) != 0 {
		t.Errorf("the bench directory holds %s after refusals", ents[0].Name())
	}
	benchStillServes(t, b)
}

// TestBenchHostileTCPLimits: TCP tests beyond the limits, and congestion control names that are
// not names, are refused by the server with an escaped message; it stays for the next test. A tcp
// request without its test ends the session with a protocol error.
func TestBenchHostileTCPLimits(t *testing.T) {
	b, e := benchEnv(t)
	for _, tt := range []xfer.TCPTest{{Streams: 0, Seconds: 1}, {Streams: -1, Seconds: 1}, {Streams: tcpbench.MaxStreams + 1, Seconds: 1},
		{Streams: 1, Seconds: 0}, {Streams: 1, Seconds: -5}, {Streams: 1, Seconds: tcpbench.MaxSeconds + 1},
		{Streams: 1, Seconds: 1, PeerSends: true, CC: "../../etc/passwd"}, {Streams: 1, Seconds: 1, PeerSends: true, CC: "x\x1b[2J\r\n"},
		{Streams: 1, Seconds: 1, PeerSends: true, CC: strings.Repeat("a", 10000)}} {
		_, err := benchAsk(t, b, xfer.Msg{T: xfer.KindTCP, TCPTest: &tt}, xfer.KindListen)
		if !IsRemote(err) {
			t.Errorf("%.80s: %v", fmt.Sprintf("%+v", tt), err)
			continue
		}
		treetest.NoControl(t, err.Error())
		if len(err.Error()) > 2000 {
			t.Errorf("a %d-byte error for %.40q", len(err.Error()), tt.CC)
		}
	}
	benchStillServes(t, b)
	_, err := benchAsk(t, b, xfer.Msg{T: xfer.KindTCP}, xfer.KindListen)
	if err == nil || xfer.CodeOf(err) != xfer.CodeSSH && xfer.CodeOf(err) != xfer.CodeProtocol {
		t.Fatalf("a tcp request without its test: %v", err)
	}
	r := e.Remote(0)
	select {
	case <-r.Done():
		if !errors.Is(r.Err(), xfer.ErrProtocol) {
			t.Errorf("the server ended with %v", r.Err())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the server did not end after a malformed request")
	}
}

// TestBenchHostileTCPListener: the server's listener closes a stream that brings a wrong token and
// does not count it, counts exactly what the right stream sent, and is closed after the test. A
// client that asks the server to send and then never reads gets tcp-done within the test's time.
func TestBenchHostileTCPListener(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux")
	}
	b, _ := benchEnv(t)
	ctx := context.Background()
	m, err := benchAsk(t, b, xfer.Msg{T: xfer.KindTCP, TCPTest: &xfer.TCPTest{Streams: 1, Seconds: 1}}, xfer.KindListen)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", m.Port)
	bad, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	bad.Write(make([]byte, tcpbench.TokenLen))
	bad.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := bad.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a stream with a wrong token: read %d, %v (want it closed)", n, err)
	}
	bad.Close()
	token, _ := hex.DecodeString(m.Token)
	conns, err := tcpbench.Dial(ctx, addr, 1, "", token)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	tcpbench.Send(ctx, conns, time.Second, &sent)
	tcpbench.Close(conns)
	done, err := b.s.Control().Expect(ctx, xfer.KindTCPDone, 10*time.Second)
	if err != nil || done.TCPResult == nil || done.TCPResult.Bytes != sent.Load() || done.TCPResult.Streams != 1 {
		t.Fatalf("tcp-done %+v for %d bytes sent: %v", done.TCPResult, sent.Load(), err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the test's listener %s still accepts after the test", addr)
	}

	// The server sends; this end never reads.
	m, err = benchAsk(t, b, xfer.Msg{T: xfer.KindTCP, TCPTest: &xfer.TCPTest{Streams: 2, Seconds: 1, PeerSends: true}}, xfer.KindListen)
	if err != nil {
		t.Fatal(err)
	}
	token, _ = hex.DecodeString(m.Token)
	conns, err = tcpbench.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", m.Port), 2, "", token)
	if err != nil {
		t.Fatal(err)
	}
	defer tcpbench.Close(conns)
	start := time.Now()
	if _, err := b.s.Control().Expect(ctx, xfer.KindTCPDone, 10*time.Second); err != nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a 1 s test whose receiver never reads: tcp-done after %s: %v", time.Since(start), err)
	}
}

// TestBenchHostileHTTPServer: the server's HTTP row serves only its random path, the file it
// announced, and stops listening at http-stop.
func TestBenchHostileHTTPServer(t *testing.T) {
	b, _ := benchEnv(t)
	m, err := benchAsk(t, b, xfer.Msg{T: xfer.KindHTTP, Size: 300_000}, xfer.KindListen)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d/", m.Port)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for _, p := range []string{"", "source", "../source", m.Token + "x", strings.ToUpper(m.Token)} {
		resp, err := c.Get(base + p)
		if err != nil {
			t.Errorf("GET /%s: %v", p, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /%s: %s", p, resp.Status)
		}
	}
	resp, err := c.Get(base + m.Token)
	if err != nil {
		t.Fatal(err)
	}
	h := blake3.New()
	n, _ := io.Copy(h, resp.Body)
	resp.Body.Close()
	if n != 300_000 || hex.EncodeToString(h.Sum(nil)) != m.Sum {
		t.Errorf("GET brought %d bytes, digest matches: %v", n, hex.EncodeToString(h.Sum(nil)) == m.Sum)
	}
	// One GET per request: the row is a single stream, and the server serves nothing more.
	if resp, err := c.Get(base + m.Token); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("a second GET: %s, want 404", resp.Status)
		}
	}
	if _, err := benchAsk(t, b, xfer.Msg{T: xfer.KindHTTPStop}, xfer.KindHTTPStopped); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port), time.Second); err == nil {
		conn.Close()
		t.Errorf("the HTTP listener still accepts after http-stop")
	}
}

// TestBenchHostileStaleDirs: a link named like a dead bench's directory is removed by the next
// bench; what it points at stays.
func TestBenchHostileStaleDirs(t *testing.T) {
	base, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	base = filepath.Join(base, "farwing")
	os.MkdirAll(base, 0o700)
	target := t.TempDir()
	os.WriteFile(filepath.Join(target, "precious"), []byte("x"), 0o600)
	link := filepath.Join(base, "bench-999999999-link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(link)
	benchEnv(t)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the dead bench's entry is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(target, "precious")); err != nil {
		t.Fatalf("what the link pointed at: %v", err)
	}
}

// ---- the hostile server: a double of Serve ----

// hostileBench is a bench server that announces itself at 127.0.0.1 (a real key, no lanes), reads
// the client's hello, sends first (unless its type is empty) and then gives every request to
// answer until the client leaves.
func hostileBench(first xfer.Msg, answer func(ctl *xfer.Control, m xfer.Msg) error) func(context.Context, io.Reader, io.Writer, string, xfer.ServeOptions) error {
	return func(ctx context.Context, r io.Reader, w io.Writer, _ string, _ xfer.ServeOptions) error {
		ctl := xfer.NewControl(r, w, nil)
		ctl.Start(nil)
		ready, err := xfertest.Ready("127.0.0.1")
		if err != nil {
			return err
		}
		ctl.Send(ready)
		hello, err := ctl.Expect(ctx, xfer.KindHello, 5*time.Second)
		if err != nil || hello.Role != xfer.RoleBench {
			return fmt.Errorf("hello %+v: %v", hello, err)
		}
		if first.T != "" {
			ctl.Send(first)
		}
		for { // no timer: this double is silent for as long as the client stays
			m, err := ctl.Next(ctx, 0)
			if err != nil && !IsRemote(err) {
				return nil
			}
			if m.T == xfer.KindBye {
				continue
			}
			if answer != nil {
				if err := answer(ctl, m); err != nil {
					return err
				}
			}
		}
	}
}

var goodFacts = xfer.Msg{T: xfer.KindFacts, Facts: &hostinfo.Facts{Hostname: "hostile", OS: "linux", Cores: 1}, Dest: "/nowhere/farwing-bench"}

func openHostile(t *testing.T, first xfer.Msg, answer func(ctl *xfer.Control, m xfer.Msg) error) (*Peer, error) {
	e := xfertest.New(t, lanetest.Link{}, 1)
	e.Serve = hostileBench(first, answer)
	b, err := Open(context.Background(), e.Options(), "bench-host")
	if err == nil {
		t.Cleanup(b.Close)
	}
	return b, err
}

// TestBenchHostileFacts: a first message without facts, or with a directory that is not a clean
// absolute path, is refused with the protocol code and an escaped message; facts with huge
// strings and lists are cut to their bounds.
func TestBenchHostileFacts(t *testing.T) {
	for _, first := range []xfer.Msg{
		{T: xfer.KindFacts, Dest: "/tmp/x"},
		{T: xfer.KindMade, Facts: goodFacts.Facts, Dest: "/tmp/x"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "relative"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "/"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "//tmp"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "/tmp/../etc"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "/tmp/x\x1b]0;owned\x07"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "/tmp/x\nfarwing: ok"},
		{T: xfer.KindFacts, Facts: goodFacts.Facts, Dest: "/" + strings.Repeat("a", 1<<20)},
	} {
		t.Run(fmt.Sprintf("%.30q", first.Dest), func(t *testing.T) {
			_, err := openHostile(t, first, nil)
			if err == nil || xfer.CodeOf(err) != xfer.CodeProtocol {
				t.Fatalf("first message %.60q: %v", first.Dest, err)
			}
			treetest.NoControl(t, err.Error())
			if len(err.Error()) > 1000 {
				t.Fatalf("a %d-byte error", len(err.Error()))
			}
		})
	}
	// Facts of 16 MB are refused before they are decoded: a "facts" message may take 64 KiB
	// (control.go, checkLine).
	big := strings.Repeat("\xffé", 1<<16)
	bf := hostinfo.Facts{Hostname: big, CPU: big, Kernel: big, OpenSSH: big, TCP: hostinfo.TCP{Default: big, Available: make([]string, 5000)}}
	for i := range bf.TCP.Available {
		bf.TCP.Available[i] = big[:1000]
	}
	if _, err := openHostile(t, xfer.Msg{T: xfer.KindFacts, Facts: &bf, Dest: "/tmp/x"}, nil); xfer.CodeOf(err) != xfer.CodeProtocol || !strings.Contains(err.Error(), `a "facts" message of`) {
		t.Fatalf("facts of 16 MB: %v", err)
	}
	huge := strings.Repeat("\xffé", 300) // within the 64 KiB of one message, all together
	f := hostinfo.Facts{Hostname: huge, CPU: huge, Kernel: huge, OpenSSH: huge, TCP: hostinfo.TCP{Default: huge, Available: make([]string, 40)}}
	for i := range f.TCP.Available {
		f.TCP.Available[i] = huge[:300]
	}
	answer := func(ctl *xfer.Control, m xfer.Msg) error { return ctl.Send(xfer.Msg{T: xfer.KindFacts, Facts: &f}) }
	b, err := openHostile(t, xfer.Msg{T: xfer.KindFacts, Facts: &f, Dest: "/tmp/x"}, answer)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.HostFacts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []hostinfo.Facts{b.Facts, again} {
		if len(got.TCP.Available) > 32 {
			t.Errorf("%d congestion controls kept", len(got.TCP.Available))
		}
		for _, s := range append([]string{got.Hostname, got.CPU, got.Kernel, got.OpenSSH, got.TCP.Default}, got.TCP.Available...) {
			if len(s) > hostinfo.MaxText {
				t.Fatalf("a %d-byte fact kept", len(s))
			}
		}
	}
}

// fakeTCP plays the server's side of one TCP test on 127.0.0.1: listen, take the streams, count
// or send a little, then report done (whatever it was told to report).
func fakeTCP(ctl *xfer.Control, m xfer.Msg, done *tcpbench.Result) error {
	if m.TCPTest == nil {
		return errors.New("no test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	token := tcpbench.NewToken()
	ctl.Send(xfer.Msg{T: xfer.KindListen, Port: ln.Addr().(*net.TCPAddr).Port, Token: hex.EncodeToString(token)})
	conns, err := tcpbench.Accept(context.Background(), ln.(*net.TCPListener), m.TCPTest.Streams, token, 5*time.Second)
	if err != nil {
		return ctl.Send(xfer.Msg{T: xfer.KindError, Err: err.Error()})
	}
	defer tcpbench.Close(conns)
	if m.TCPTest.PeerSends {
		for _, c := range conns {
			c.Write(make([]byte, 64<<10))
			c.CloseWrite()
		}
	} else {
		tcpbench.Receive(context.Background(), conns, time.Now().Add(time.Duration(m.TCPTest.Seconds)*time.Second+5*time.Second), nil)
	}
	return ctl.Send(xfer.Msg{T: xfer.KindTCPDone, TCPResult: done})
}

// TestBenchHostileListen: a listen answer with a port out of range or a token that is not 16 bytes
// of hex, for a TCP test or the HTTP row, is refused before this end dials; the HTTP row writes
// nothing.
func TestBenchHostileListen(t *testing.T) {
	tok, sum := strings.Repeat("ab", tcpbench.TokenLen), strings.Repeat("cd", 32)
	bad := []xfer.Msg{
		{T: xfer.KindListen, Port: 0, Token: tok, Sum: sum},
		{T: xfer.KindListen, Port: -1, Token: tok, Sum: sum},
		{T: xfer.KindListen, Port: 70000, Token: tok, Sum: sum},
		{T: xfer.KindListen, Port: 9, Token: "", Sum: sum},
		{T: xfer.KindListen, Port: 9, Token: "abcd", Sum: sum},
		{T: xfer.KindListen, Port: 9, Token: tok + "ab", Sum: sum},
		{T: xfer.KindListen, Port: 9, Token: strings.Repeat("zz", tcpbench.TokenLen), Sum: sum},
		{T: xfer.KindListen, Port: 9, Token: strings.Repeat("a", 2*tcpbench.TokenLen-1) + "/", Sum: sum},
		{T: xfer.KindListen, Port: 9, Token: "../../../../etc/passwd/xxxxxxxxx", Sum: sum},
	}
	badHTTP := append(bad[:len(bad):len(bad)], xfer.Msg{T: xfer.KindListen, Port: 9, Token: tok, Sum: "short"},
		xfer.Msg{T: xfer.KindListen, Port: 9, Token: tok, Sum: strings.Repeat("\x1b", 64)}, xfer.Msg{T: xfer.KindListen, Port: 9, Token: tok})
	var next atomic.Int32
	b, err := openHostile(t, goodFacts, func(ctl *xfer.Control, m xfer.Msg) error {
		if m.T == xfer.KindTCP || m.T == xfer.KindHTTP {
			l := badHTTP[int(next.Add(1)-1)%len(badHTTP)]
			return ctl.Send(l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range bad {
		_, err := b.TCP(ctx, xfer.TCPTest{Streams: 1, Seconds: 1}, nil)
		if !errors.Is(err, xfer.ErrProtocol) {
			t.Errorf("tcp listen %+v: %v", bad[i], err)
		}
		treetest.NoControl(t, err.Error())
	}
	next.Store(0)
	dir := t.TempDir()
	for i := range badHTTP {
		_, _, err := b.HTTP(ctx, 1000, filepath.Join(dir, "http"), time.Second)
		if !errors.Is(err, xfer.ErrProtocol) {
			t.Errorf("http listen %.80q: %v", fmt.Sprint(badHTTP[i]), err)
		}
		treetest.NoControl(t, err.Error())
	}
	treetest.Empty(t, dir)
}

// TestBenchHostileTCPDone: a tcp-done with another stream count, negative bytes or seconds, more
// seconds than the test could last, or more congestion controls than streams is refused; the
// sending sockets' names reach the result escaped.
func TestBenchHostileTCPDone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux")
	}
	escCC := "cubic\x1b]0;owned\x07\r\nfarwing: 9000 Mbit/s"
	cases := []struct {
		what string
		t    xfer.TCPTest
		done *tcpbench.Result
		ok   bool
	}{
		{"no result", xfer.TCPTest{Streams: 1, Seconds: 1}, nil, false},
		{"other streams", xfer.TCPTest{Streams: 1, Seconds: 1}, &tcpbench.Result{Streams: 2, Bytes: 1000, Seconds: 0.5}, false},
		{"negative bytes", xfer.TCPTest{Streams: 1, Seconds: 1}, &tcpbench.Result{Streams: 1, Bytes: -1, Seconds: 0.5}, false},
		{"negative seconds", xfer.TCPTest{Streams: 1, Seconds: 1}, &tcpbench.Result{Streams: 1, Bytes: 1, Seconds: -1}, false},
		{"impossible seconds", xfer.TCPTest{Streams: 1, Seconds: 1}, &tcpbench.Result{Streams: 1, Bytes: 1, Seconds: 1e9}, false},
		{"too many cc", xfer.TCPTest{Streams: 1, Seconds: 1, PeerSends: true}, &tcpbench.Result{Streams: 1, CC: make([]string, 1000)}, false},
		{"escapes in cc", xfer.TCPTest{Streams: 2, Seconds: 1, PeerSends: true}, &tcpbench.Result{Streams: 2, CC: []string{escCC, strings.Repeat("é", 1000)}}, true},
	}
	var next atomic.Int32
	b, err := openHostile(t, goodFacts, func(ctl *xfer.Control, m xfer.Msg) error {
		if m.T != xfer.KindTCP {
			return nil
		}
		return fakeTCP(ctl, m, cases[next.Add(1)-1].done)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		r, err := b.TCP(context.Background(), c.t, nil)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
			}
			for _, s := range r.CC {
				treetest.NoControl(t, s)
				if len(s) > 4*hostinfo.MaxText {
					t.Errorf("%s: a %d-byte name kept", c.what, len(s))
				}
			}
			continue
		}
		if !errors.Is(err, xfer.ErrProtocol) {
			t.Errorf("%s: %+v, %v", c.what, r, err)
		}
	}
}

// TestBenchHostileTCPDoneInflatedBytes covers a defect, fixed: in a test where this end sends, the
// client takes the server's byte count as the result as long as it is not negative. A server that
// received a few MB in 1 s can report 2^62 bytes, and the bench reports tens of petabits per
// second, a figure nobody measured. client.go (Peer.TCP, the !PeerSends check): count what
// this end's tcpbench.Send wrote and refuse r.Bytes above it (and bytes in zero seconds).
func TestBenchHostileTCPDoneInflatedBytes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux")
	}
	b, err := openHostile(t, goodFacts, func(ctl *xfer.Control, m xfer.Msg) error {
		if m.T != xfer.KindTCP {
			return nil
		}
		return fakeTCP(ctl, m, &tcpbench.Result{Streams: 1, Bytes: 1 << 62, Seconds: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	r, err := b.TCP(context.Background(), xfer.TCPTest{Streams: 1, Seconds: 1}, &sent)
	if err == nil {
		t.Fatalf("DEFECT: this end sent %d bytes, the server claimed %d; the result is %+v, %.0f Mbit/s", sent.Load(), r.Bytes, r, r.Mbps())
	}
}

// hostileHTTP serves h on 127.0.0.1 and answers the bench's http request with its port.
func hostileHTTP(t *testing.T, h http.HandlerFunc, sum string) func(ctl *xfer.Control, m xfer.Msg) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tok := hex.EncodeToString(tcpbench.NewToken())
	return func(ctl *xfer.Control, m xfer.Msg) error {
		switch m.T {
		case xfer.KindHTTP:
			return ctl.Send(xfer.Msg{T: xfer.KindListen, Port: ln.Addr().(*net.TCPAddr).Port, Token: tok, Sum: sum})
		case xfer.KindHTTPStop:
			return ctl.Send(xfer.Msg{T: xfer.KindHTTPStopped})
		}
		return nil
	}
}

func randomBytes(n int) ([]byte, string) {
	b := make([]byte, n)
	rand.Read(b)
	s := blake3.Sum256(b)
	return b, hex.EncodeToString(s[:])
}

// TestBenchHostileHTTPBody: an HTTP server that sends more than the size (its digest that of what
// it sent, or of the size's first bytes), fewer bytes, the right bytes with another digest, a
// redirect loop, an error status, or that starts and never finishes: each is an error within the
// row's limit, and nothing is left at the destination.
func TestBenchHostileHTTPBody(t *testing.T) {
	const size = 200_000
	data, sum := randomBytes(size + 5000)
	first := blake3.Sum256(data[:size])
	sumFirst := hex.EncodeToString(first[:])
	for _, c := range []struct {
		what  string
		sum   string
		h     http.HandlerFunc
		stall bool
	}{
		{"more bytes, their digest", sum, func(w http.ResponseWriter, r *http.Request) { w.Write(data) }, false},
		{"more bytes, the digest of the size", sumFirst, func(w http.ResponseWriter, r *http.Request) { w.Write(data) }, false},
		{"fewer bytes", sumFirst, func(w http.ResponseWriter, r *http.Request) { w.Write(data[:size-1]) }, false},
		{"another digest", sum, func(w http.ResponseWriter, r *http.Request) { w.Write(data[:size]) }, false},
		{"endless", sumFirst, func(w http.ResponseWriter, r *http.Request) {
			for r.Context().Err() == nil {
				if _, err := w.Write(data[:1000]); err != nil {
					return
				}
			}
		}, false},
		{"error status", sumFirst, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "\x1b[2Jno", http.StatusTeapot) }, false},
		{"redirect loop", sumFirst, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, r.URL.Path, http.StatusFound) }, false},
		{"half, then silence", sumFirst, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.Write(data[:size/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, true},
		{"headers never", sumFirst, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, true},
	} {
		t.Run(c.what, func(t *testing.T) {
			b, err := openHostile(t, goodFacts, hostileHTTP(t, c.h, c.sum))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			start := time.Now()
			_, _, err = b.HTTP(context.Background(), size, filepath.Join(dir, "http"), 2*time.Second)
			if err == nil {
				t.Fatal("accepted")
			}
			if c.stall && !errors.Is(err, ErrOverLimit) {
				t.Errorf("a stalled GET: %v", err)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("the row took %s with a 2 s limit", el)
			}
			treetest.NoControl(t, err.Error())
			treetest.Empty(t, dir)
		})
	}
}

// TestBenchHostileHTTPRedirect covers a defect, fixed: getChecked's http.Client follows redirects,
// so the peer's HTTP server can send this end's GET anywhere (here another port of 127.0.0.1; as
// well a service on this end's own loopback or network), and a file that came from elsewhere is
// timed as the HTTP row to the host. client.go (getChecked): set the client's CheckRedirect to
// return http.ErrUseLastResponse (a 3xx then fails the row as a status other than 200).
func TestBenchHostileHTTPRedirect(t *testing.T) {
	const size = 100_000
	data, sum := randomBytes(size)
	var elsewhere atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write(data)
	})}
	go other.Serve(ln)
	defer other.Close()
	to := fmt.Sprintf("http://%s/elsewhere", ln.Addr())
	b, err := openHostile(t, goodFacts, hostileHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to, http.StatusFound)
	}, sum))
	if err != nil {
		t.Fatal(err)
	}
	el, _, err := b.HTTP(context.Background(), size, filepath.Join(t.TempDir(), "http"), 5*time.Second)
	if err == nil || elsewhere.Load() != 0 {
		t.Fatalf("DEFECT: the GET was redirected to %s (%d requests there) and the row reported %s, error %v", to, elsewhere.Load(), el, err)
	}
}

// TestBenchHostileSourceAndCheckAnswers: a made answer with another name or no digest, and a
// checked answer whose digest is not 64 hex digits, are refused.
func TestBenchHostileSourceAndCheckAnswers(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	answers := map[xfer.Kind][]xfer.Msg{
		xfer.KindSource: {{T: xfer.KindMade, Name: "../source", Sum: sum}, {T: xfer.KindMade, Name: "/etc/passwd", Sum: sum}, {T: xfer.KindMade, Name: "stream", Sum: sum},
			{T: xfer.KindMade, Name: "source"}, {T: xfer.KindMade, Name: "source", Sum: sum[:63]}, {T: xfer.KindMade, Name: "source\x1b[2J", Sum: sum}, {T: xfer.KindChecked, Name: "source", Sum: sum}},
		xfer.KindCheck: {{T: xfer.KindChecked}, {T: xfer.KindChecked, Sum: sum[:63]}, {T: xfer.KindChecked, Sum: sum + "ab"}, {T: xfer.KindChecked, Sum: strings.Repeat("zz", 32)},
			{T: xfer.KindChecked, Sum: strings.Repeat("\x1b", 64)}, {T: xfer.KindMade, Sum: sum}},
	}
	var next atomic.Int32
	b, err := openHostile(t, goodFacts, func(ctl *xfer.Control, m xfer.Msg) error {
		if a, ok := answers[m.T]; ok {
			return ctl.Send(a[int(next.Add(1)-1)%len(a)])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range answers[xfer.KindSource] {
		name, s, err := b.Source(ctx, 1000, false)
		if !errors.Is(err, xfer.ErrProtocol) {
			t.Errorf("source: %q %q %v", name, s, err)
		} else {
			treetest.NoControl(t, err.Error())
		}
	}
	next.Store(0)
	for range answers[xfer.KindCheck] {
		s, err := b.Check(ctx, "copy-farwing", 1<<20)
		if !errors.Is(err, xfer.ErrProtocol) {
			t.Errorf("check: %q %v", s, err)
		} else {
			treetest.NoControl(t, err.Error())
		}
	}
}

// TestBenchHostileSourceDigest covers a defect, fixed: Source checks only the length of the digest
// the server reports for the random source, not that it is hex (Check does). 64 bytes of terminal
// escapes pass, and reach the terminal raw: bench/run.go prints the first 16 bytes of r.sum in the
// "the copy's BLAKE3 is …, the source's …" line, and the ledger keeps it. client.go (Peer.Source):
// refuse a digest that hex.DecodeString does not take as 32 bytes.
func TestBenchHostileSourceDigest(t *testing.T) {
	evil := "\x1b]0;owned\x07\x1b[2J\x1b[H" + strings.Repeat("\x1b[31m", 8)
	evil += strings.Repeat("a", 64-len(evil))
	b, err := openHostile(t, goodFacts, func(ctl *xfer.Control, m xfer.Msg) error {
		if m.T == xfer.KindSource {
			return ctl.Send(xfer.Msg{T: xfer.KindMade, Name: "source", Sum: evil})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, sum, err := b.Source(context.Background(), 1000, false)
	if err == nil {
		t.Fatalf("DEFECT: the source's digest %q was taken as is", sum)
	}
}

// ---- a server that never answers: fake time (synctest), no network ----

// silentWithin opens a bench against a server that sends first and then never answers (call it
// in a bubble), runs call, and reports whether it returned within bound and with what.
func silentWithin(t *testing.T, first xfer.Msg, bound time.Duration, call func(ctx context.Context, b *Peer) error) (error, bool) {
	e := xfertest.New(t, lanetest.Link{}, 1)
	e.Serve = hostileBench(first, nil)
	ctx, cancel := context.WithCancel(context.Background()) // never ends in the bound: no deadline
	defer cancel()
	peer, done := make(chan *Peer, 1), make(chan error, 1)
	go func() {
		b, err := Open(ctx, e.Options(), "bench-host")
		peer <- b
		if err != nil || call == nil {
			done <- err
			return
		}
		done <- call(ctx, b)
	}()
	time.Sleep(bound)
	var b *Peer
	select {
	case b = <-peer:
	default:
	}
	select {
	case err := <-done:
		if b != nil {
			b.Close()
		}
		return err, true
	default:
		if b != nil {
			b.Close() // lets the call go: the channel ends
		} else {
			cancel()
		}
		<-done
		return nil, false
	}
}

// TestBenchHostileSilentServer: against a server that stops answering, every bench call returns
// a silence error within PeerIdle (and what its size adds), on fake time.
func TestBenchHostileSilentServer(t *testing.T) {
	bound := xfer.PeerIdle + 5*time.Second
	for _, c := range []struct {
		what  string
		first xfer.Msg
		call  func(ctx context.Context, b *Peer) error
	}{
		{"no facts", xfer.Msg{}, nil},
		{"facts", goodFacts, func(ctx context.Context, b *Peer) error { _, err := b.HostFacts(ctx); return err }},
		{"tcp", goodFacts, func(ctx context.Context, b *Peer) error {
			_, err := b.TCP(ctx, xfer.TCPTest{Streams: 1, Seconds: 1}, nil)
			return err
		}},
		{"http", goodFacts, func(ctx context.Context, b *Peer) error {
			_, _, err := b.HTTP(ctx, 1000, filepath.Join(t.TempDir(), "http"), time.Second)
			return err
		}},
		{"source", goodFacts, func(ctx context.Context, b *Peer) error { _, _, err := b.Source(ctx, 1000, false); return err }},
		{"uncache", goodFacts, func(ctx context.Context, b *Peer) error { return b.Uncache(ctx) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				err, returned := silentWithin(t, c.first, bound, c.call)
				if !returned || !errors.Is(err, session.ErrSilent) {
					t.Fatalf("a silent server: returned within %s: %v, %v", bound, returned, err)
				}
			})
		})
	}
}

// TestBenchHostileSilentCheck covers a defect, fixed: Check waits for its answer with no bound
// (Expect(ctx, xfer.KindChecked, 0)), so a server that never answers a check holds the bench for ever:
// bench/run.go calls it with the bench's own context, which has no deadline. client.go
// (Peer.Check): wait PeerIdle (plus the time to hash the file at disk speed).
func TestBenchHostileSilentCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bound := time.Hour
		err, returned := silentWithin(t, goodFacts, bound, func(ctx context.Context, b *Peer) error {
			_, err := b.Check(ctx, "copy-farwing", 1<<20)
			return err
		})
		if !returned {
			t.Fatalf("DEFECT: Check against a silent server had not returned after %s", bound)
		}
		if !errors.Is(err, session.ErrSilent) {
			t.Fatalf("Check against a silent server: %v", err)
		}
	})
}

// TestBenchHostileNoReady covers a defect, fixed the bench inherits from start (client.go, start:
// Expect(c.ctx, xfer.KindReady, 0)): a remote that never sends ready holds Open for ever. The peer
// sends ready as its first message once it runs (after any upload), so PeerIdle would do.
func TestBenchHostileNoReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := xfertest.New(t, lanetest.Link{}, 1)
		e.Serve = func(ctx context.Context, r io.Reader, w io.Writer, _ string, _ xfer.ServeOptions) error {
			ctl := xfer.NewControl(r, w, nil)
			ctl.Start(nil)
			for {
				if _, err := ctl.Next(ctx, 0); err != nil && !IsRemote(err) {
					return nil
				}
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			b, err := Open(ctx, e.Options(), "bench-host")
			if err == nil {
				b.Close()
			}
			done <- err
		}()
		time.Sleep(time.Hour)
		select {
		case err := <-done:
			cancel()
			if err == nil {
				t.Fatal("Open against a server that never said ready succeeded")
			}
		default:
			cancel()
			<-done
			t.Fatal("DEFECT: Open against a server that never sends ready had not returned after an hour")
		}
	})
}

package tcpbench

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// run streams n connections over loopback for d with congestion control cc, the way the bench
// does: the listener checks tokens, the receiver counts.
func run(t *testing.T, n int, cc string, d time.Duration) (sent, got Result) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	token := NewToken()
	ctx := context.Background()
	accepted := make(chan []*net.TCPConn, 1)
	go func() {
		conns, err := Accept(ctx, ln, n, token, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		accepted <- conns
	}()
	// Someone else's connection first: wrong token, never counted, never holds a slot.
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Write([]byte(strings.Repeat("x", TokenLen)))
		defer c.Close()
	}
	conns, err := Dial(ctx, ln.Addr().String(), n, cc, token)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(conns)
	server := <-accepted
	defer Close(server)
	if len(server) != n {
		t.Fatalf("accepted %d streams, want %d", len(server), n)
	}
	recv := make(chan Result, 1)
	go func() {
		r, err := Receive(ctx, server, time.Now().Add(d+10*time.Second), nil)
		if err != nil {
			t.Error(err)
		}
		recv <- r
	}()
	var written atomic.Int64
	sent, err = Send(ctx, conns, d, &written)
	if written.Load() <= 0 {
		t.Errorf("Send counted %d bytes", written.Load())
	}
	if err != nil {
		t.Fatal(err)
	}
	return sent, <-recv
}

// TestStreamsUseTheirCongestionControl: every sending socket really used the congestion control
// the row names, read back from the kernel, and the receiver counted the streams' bytes.
func TestStreamsUseTheirCongestionControl(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("congestion control choice is Linux only")
	}
	for _, cc := range []string{"cubic", "bbr", ""} {
		if err := CheckCC(cc); err != nil {
			t.Logf("%s: %v", cc, err)
			continue
		}
		sent, got := run(t, 2, cc, 300*time.Millisecond)
		want := cc
		if want == "" {
			want = Default()
		}
		if len(sent.CC) != 2 || slices.ContainsFunc(sent.CC, func(s string) bool { return s != want }) {
			t.Errorf("asked for %q: sockets used %v, want %s", cc, sent.CC, want)
		}
		if got.Streams != 2 || got.Bytes <= 0 || got.Seconds <= 0 || got.Mbps() <= 0 {
			t.Errorf("%s: receiver counted %+v", cc, got)
		}
	}
}

func TestCheckCC(t *testing.T) {
	if err := CheckCC("no_such_cc"); err == nil || !strings.Contains(err.Error(), "lacks tcp_no_such_cc") && !strings.Contains(err.Error(), "lists no") {
		t.Errorf("missing algorithm: %v", err)
	}
	if err := CheckCC("bbr; rm -rf"); err == nil || !strings.Contains(err.Error(), "not a TCP congestion control name") {
		t.Errorf("bad name: %v", err)
	}
	if err := CheckCC(""); err != nil {
		t.Errorf("default: %v", err)
	}
}

// A listener that gets only strangers gives up at its deadline and says how many came.
func TestAcceptTimesOut(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Write(make([]byte, TokenLen))
		defer c.Close()
	}
	_, err = Accept(context.Background(), ln, 1, NewToken(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "0 of 1 bench streams") {
		t.Errorf("got %v", err)
	}
}

// TestAcceptIdleStrangers: strangers that connect first and say nothing (or half a token) do not
// use up the listener's window: the rightful streams, which connect after them and send their
// token at once, are taken, and the strangers are closed, not counted. More strangers than may
// wait at once (maxPending) only close the ones that have waited longest.
func TestAcceptIdleStrangers(t *testing.T) {
	for _, strangers := range []int{3, maxPending + 8} {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		var idle []net.Conn
		for i := range strangers {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 1 {
				c.Write(make([]byte, TokenLen/2)) // half a token, then nothing
			}
			idle = append(idle, c)
		}
		token := NewToken()
		type accepted struct {
			conns []*net.TCPConn
			err   error
		}
		got := make(chan accepted, 1)
		go func() {
			// Before the fix a stranger's token was read for min(5 s, the window): the first
			// idle one used all of it.
			conns, err := Accept(context.Background(), ln, 2, token, 5*time.Second)
			got <- accepted{conns, err}
		}()
		conns, err := Dial(context.Background(), ln.Addr().String(), 2, "", token)
		if err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.err != nil || len(a.conns) != 2 {
			t.Fatalf("%d idle strangers first: %d streams accepted, %v; want the 2 rightful ones", strangers, len(a.conns), a.err)
		}
		// The strangers are closed (their reads end, not time out), and the rightful streams
		// carry bytes.
		for i, c := range idle {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("stranger %d of %d: %v, want its connection closed", i, strangers, err)
			}
			c.Close()
		}
		// Streams are taken in the order their tokens are read, not dialled: each end writes
		// first, then each accepted stream must bring one of the bytes, each once.
		for i, c := range conns {
			c.Write([]byte{byte(i)})
		}
		seen := map[byte]bool{}
		for i, c := range a.conns {
			b := make([]byte, 1)
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.ReadFull(c, b); err != nil || seen[b[0]] || int(b[0]) >= len(conns) {
				t.Fatalf("accepted stream %d: byte %d, %v", i, b[0], err)
			}
			seen[b[0]] = true
		}
		Close(conns)
		Close(a.conns)
	}
}

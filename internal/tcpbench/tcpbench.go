// Package tcpbench measures TCP between the bench's two ends: streams with a chosen congestion
// control, timed and counted at the receiver, with what the kernel actually used read back from
// each sending socket. The listener side accepts only connections that present the token agreed
// over the control channel, so nobody else's bytes are counted and nobody else holds a stream.
package tcpbench

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TokenLen is the length of the token each connection sends first.
const TokenLen = 16

// Limits on what a peer may ask for.
const (
	MaxStreams = 16
	MaxSeconds = 300
)

// Result is one test as its receiving end measured it, with the sending end's socket facts.
type Result struct {
	Streams int     `json:"streams"`
	Bytes   int64   `json:"bytes"`   // received, all streams together (Send: written)
	Seconds float64 `json:"seconds"` // the receiver's first byte to its last
	// Sending sockets, read back from the kernel: the congestion control each one used and
	// their TCP_INFO retransmissions, summed.
	CC          []string `json:"cc,omitempty"`
	Retransmits uint64   `json:"retransmits"`
}

// Mbps is the receiver's goodput.
func (r Result) Mbps() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Bytes) * 8 / r.Seconds / 1e6
}

// NewToken returns a fresh random token.
func NewToken() []byte {
	t := make([]byte, TokenLen)
	rand.Read(t)
	return t
}

var ccName = regexp.MustCompile(`^[a-z0-9_]{1,15}$`)

// Unavailable starts the message of every error CheckCC returns: the bench shows such a row as
// unavailable, with the reason, rather than failed.
const Unavailable = "congestion control unavailable: "

// CheckCC reports whether name is a congestion control this process may use (an empty name is
// the default), with the reason when not: a missing module, a name no kernel has, or one the
// kernel allows only root (net.ipv4.tcp_allowed_congestion_control).
func CheckCC(name string) error {
	if name == "" {
		return nil
	}
	if !ccName.MatchString(name) {
		return fmt.Errorf(Unavailable+"%q is not a TCP congestion control name", name)
	}
	avail := Available()
	if len(avail) == 0 {
		return fmt.Errorf(Unavailable + "this kernel lists no TCP congestion controls")
	}
	if !slices.Contains(avail, name) {
		return fmt.Errorf(Unavailable+"the kernel lacks tcp_%s (available: %s)", name, strings.Join(avail, " "))
	}
	if allowed := strings.Fields(readProc("net/ipv4/tcp_allowed_congestion_control")); os.Geteuid() != 0 && !slices.Contains(allowed, name) {
		return fmt.Errorf(Unavailable+"%s is for root only here (net.ipv4.tcp_allowed_congestion_control is %q)", name, strings.Join(allowed, " "))
	}
	return nil
}

// Available lists the kernel's available congestion controls (a module not loaded yet is
// loaded when a socket asks for it by a root process, so a root sender may still get one that
// is not listed: CheckCC is the unprivileged view).
func Available() []string {
	return strings.Fields(readProc("net/ipv4/tcp_available_congestion_control"))
}

// Default is the kernel's default congestion control.
func Default() string { return strings.TrimSpace(readProc("net/ipv4/tcp_congestion_control")) }

func readProc(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return string(b)
}

// Dial opens n streams to addr, each with congestion control cc (empty: the default) set before
// it connects, and sends the token on each.
func Dial(ctx context.Context, addr string, n int, cc string, token []byte) ([]*net.TCPConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc rawConn) error { return setCC(rc, cc) }}
	var conns []*net.TCPConn
	for range n {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			Close(conns)
			return nil, err
		}
		tc := c.(*net.TCPConn)
		conns = append(conns, tc)
		if _, err := tc.Write(token); err != nil {
			Close(conns)
			return nil, err
		}
	}
	return conns, nil
}

// Close closes every connection.
func Close(conns []*net.TCPConn) {
	for _, c := range conns {
		c.Close()
	}
}

// Limits on the connections Accept has not yet taken: each has tokenWait to send its token, and
// at most maxPending wait at once (beyond that the one that has waited longest is closed: a
// rightful stream sends its token as it connects, so only an idle stranger waits long).
const (
	tokenWait  = 5 * time.Second
	maxPending = 64
)

// Accept takes n connections from ln that each send token first, within the given time; others
// are closed and not counted. Tokens are read concurrently, each connection's within tokenWait,
// so strangers that connect and say nothing hold no one up. It closes ln when done.
func Accept(ctx context.Context, ln *net.TCPListener, n int, token []byte, within time.Duration) ([]*net.TCPConn, error) {
	defer ln.Close()
	deadline := time.Now().Add(within)
	ln.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.SetDeadline(time.Now()) })
	defer stop()

	// The accepting goroutine hands each connection over; acceptErr is set before incoming is
	// closed.
	incoming := make(chan *net.TCPConn)
	var acceptErr error
	go func() {
		defer close(incoming)
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				acceptErr = err
				return
			}
			incoming <- c
		}
	}()
	// Each pending connection's token is read by a goroutine of its own, which reports here.
	type read struct {
		c  *net.TCPConn
		ok bool
	}
	reads := make(chan read)
	var (
		conns   []*net.TCPConn
		pending []*net.TCPConn // oldest first
		live    int            // token readers that have not reported
	)
	drop := func(c *net.TCPConn) bool {
		if i := slices.Index(pending, c); i >= 0 {
			pending = slices.Delete(pending, i, i+1)
			return true
		}
		return false
	}
	done, quit := ctx.Done(), false
	for in := incoming; in != nil || live > 0; {
		if len(conns) == n || quit {
			// Enough, or given up: no more connections, and the pending ones are closed.
			ln.SetDeadline(time.Now())
			for _, c := range pending {
				c.Close()
			}
			pending = nil
		}
		select {
		case c, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			if len(conns) == n || quit {
				c.Close()
				continue
			}
			if len(pending) == maxPending {
				pending[0].Close() // its reader reports it, not ok
				pending = pending[1:]
			}
			pending = append(pending, c)
			live++
			go func() {
				got := make([]byte, TokenLen)
				c.SetReadDeadline(time.Now().Add(min(tokenWait, time.Until(deadline))))
				_, err := io.ReadFull(c, got)
				reads <- read{c, err == nil && subtle.ConstantTimeCompare(got, token) == 1}
			}()
		case r := <-reads:
			live--
			if !drop(r.c) || !r.ok || len(conns) == n || quit {
				r.c.Close() // not the bench's (a port scan, another user), or closed already
				continue
			}
			r.c.SetReadDeadline(time.Time{})
			conns = append(conns, r.c)
		case <-done:
			done, quit = nil, true
		}
	}
	if len(conns) == n && ctx.Err() == nil {
		return conns, nil
	}
	Close(conns)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%d of %d bench streams connected within %s: %w", len(conns), n, within, acceptErr)
}

// Receive reads every stream to its end, or until the deadline, and returns the bytes and the
// times of the first and last byte. count, when not nil, is kept at the bytes so far.
func Receive(ctx context.Context, conns []*net.TCPConn, deadline time.Time, count *atomic.Int64) (Result, error) {
	var (
		total       atomic.Int64
		mu          sync.Mutex
		first, last time.Time
		wg          sync.WaitGroup
		errs        = make([]error, len(conns))
	)
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.SetReadDeadline(time.Now())
		}
	})
	defer stop()
	for i, c := range conns {
		c.SetReadDeadline(deadline)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					now := time.Now()
					total.Add(int64(n))
					if count != nil {
						count.Add(int64(n))
					}
					mu.Lock()
					if first.IsZero() {
						first = now
					}
					if now.After(last) {
						last = now
					}
					mu.Unlock()
				}
				if err != nil {
					if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
						errs[i] = err
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	r := Result{Streams: len(conns), Bytes: total.Load()}
	if !first.IsZero() {
		r.Seconds = last.Sub(first).Seconds()
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, errors.Join(errs...)
}

// Send writes to every stream for d, then reads back each socket's congestion control and
// retransmissions and shuts the streams' sending side, so the receiver sees their end. count,
// when not nil, is kept at the bytes written so far.
func Send(ctx context.Context, conns []*net.TCPConn, d time.Duration, count *atomic.Int64) (Result, error) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var written atomic.Int64
	errs := make([]error, len(conns))
	for i, c := range conns {
		c.SetWriteDeadline(end)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for ctx.Err() == nil {
				n, err := c.Write(buf)
				written.Add(int64(n))
				if count != nil {
					count.Add(int64(n))
				}
				if err != nil {
					if !errors.Is(err, os.ErrDeadlineExceeded) {
						errs[i] = err
					}
					return
				}
			}
		}()
	}
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.SetWriteDeadline(time.Now())
		}
	})
	wg.Wait()
	stop()
	r := Result{Streams: len(conns), Bytes: written.Load()}
	for _, c := range conns {
		cc, retrans, err := socketFacts(c)
		if err != nil {
			errs = append(errs, err)
		}
		r.CC = append(r.CC, cc)
		r.Retransmits += retrans
		c.CloseWrite()
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, errors.Join(errs...)
}

// SetCC sets an accepted connection's congestion control (the sending end of a pull).
func SetCC(c *net.TCPConn, cc string) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return setCC(rc, cc)
}

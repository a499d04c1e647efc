package benchpeer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/farwing/farwing/internal/escape"
)

// The bench's HTTP row is one GET of one file over one TCP stream, between this end and the
// remote peer's own server. Both sides are written here on plain TCP, HTTP/1.1 as RFC 9112 has
// it for this one exchange: a request line and headers, a 200 answer with Content-Length and
// Connection: close, the body sent with sendfile. net/http would do the same and add some 3.3 MB
// to the binary (with crypto/tls and crypto/x509, which nothing else here uses) — about 1.4 MB
// more of gzip to upload at every first contact. The server answers only the GET of its one
// random path, once; the client takes only a 200 with the Content-Length it asked for (never a
// redirect, a chunked body or an answer of another length).

// maxHead bounds an HTTP request's or response's head (request or status line and headers).
const maxHead = 16 << 10

// httpHeadTimeout is how long the server waits for a request's head after the connection opens.
const httpHeadTimeout = 10 * time.Second

// maxHeadReaders bounds the server's connections still sending their request's head (anyone who
// can reach the port can open connections, each held up to httpHeadTimeout: some 16 KiB each): a
// new one beyond it closes the oldest, so that a flood must outrun the bench's own GET, whose
// head follows its connection at once, rather than only fill the slots first.
const maxHeadReaders = 64

// getServer serves one open file (size bytes) to one GET of "/"+token on ln; every other request
// gets 404. Close stops it: the listener and every connection it holds.
type getServer struct {
	ln    net.Listener
	f     *os.File
	size  int64
	token string
	done  chan struct{} // closed by Close

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	reading []net.Conn // those reading their head, oldest first (at most maxHeadReaders)
	served  bool       // the one GET is taken: the row is a single stream
	closed  bool
	wg      sync.WaitGroup
}

// serveGET serves the file name (opened now, so that its one GET cannot fail on it later) on ln.
func serveGET(ln net.Listener, name string, size int64, token string) (*getServer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	s := &getServer{ln: ln, f: f, size: size, token: token, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *getServer) accept() {
	defer s.wg.Done()
	var wait time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A passing shortage (descriptors, memory: a flood of connections goes within
			// httpHeadTimeout): wait and accept again, 5 ms doubling to 1 s, as net/http does.
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(wait):
				continue
			case <-s.done:
				return
			}
		}
		wait = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.reading) == maxHeadReaders {
			s.reading[0].Close() // its handler ends on the read error
			s.reading = s.reading[1:]
		}
		s.reading = append(s.reading, c)
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.handle(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// handle answers one request on c, then the connection closes.
func (s *getServer) handle(c net.Conn) {
	ok := s.readRequest(c)
	s.mu.Lock()
	if i := slices.Index(s.reading, c); i >= 0 {
		s.reading = slices.Delete(s.reading, i, i+1)
	}
	s.mu.Unlock()
	if !ok {
		writeStatus(c, "404 Not Found")
		return
	}
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
		strconv.FormatInt(s.size, 10) + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	// The one GET reads the file from its start; a *net.TCPConn copies a limited *os.File with
	// sendfile, as an HTTP server would (an io.SectionReader would go through a buffer).
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return
	}
	io.Copy(c, io.LimitReader(s.f, s.size))
}

// readRequest reads c's request head (within httpHeadTimeout and maxHead bytes) and reports
// whether it is the one GET of the token's path, which it then takes.
func (s *getServer) readRequest(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(httpHeadTimeout))
	defer c.SetReadDeadline(time.Time{})
	tp := textproto.NewReader(bufio.NewReader(io.LimitReader(c, maxHead)))
	line, err := tp.ReadLine()
	if err != nil {
		return false
	}
	if _, err := tp.ReadMIMEHeader(); err != nil {
		return false
	}
	method, rest, _ := strings.Cut(line, " ")
	target, proto, _ := strings.Cut(rest, " ")
	if method != "GET" || target != "/"+s.token || !strings.HasPrefix(proto, "HTTP/1.") {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := !s.served
	s.served = true
	return ok
}

func writeStatus(c net.Conn, status string) {
	io.WriteString(c, "HTTP/1.1 "+status+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

// Close stops the server: no more connections, those open are closed, and the file too. It may
// be called more than once.
func (s *getServer) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
	s.f.Close()
}

// httpGet sends GET target to addr (host:port) and returns the body of a 200 answer whose
// Content-Length is size, limited to size bytes; the caller closes it. Any other answer is an
// error that quotes the server's words escaped. ctx ends the exchange at any point (the connection
// is closed), and then the error is ctx's.
func httpGet(ctx context.Context, addr, target string, size int64) (io.ReadCloser, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	body, err := readAnswer(c, addr, target, size)
	if err != nil {
		stop()
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return &getBody{Reader: body, c: c, stop: stop}, nil
}

func readAnswer(c net.Conn, addr, target string, size int64) (io.Reader, error) {
	req := "GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: farwing-bench\r\n" +
		"Accept-Encoding: identity\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	head, err := readHead(br)
	if err != nil {
		return nil, err
	}
	status, hdr := head[0], head[1:]
	proto, code, _ := strings.Cut(status, " ")
	if !strings.HasPrefix(proto, "HTTP/1.") {
		return nil, fmt.Errorf("HTTP GET: the server's answer begins %s", said(status))
	}
	if !strings.HasPrefix(code, "200 ") && code != "200" {
		return nil, fmt.Errorf("HTTP GET: %s", said(code))
	}
	length := int64(-1)
	for _, h := range hdr {
		k, v, ok := strings.Cut(h, ":")
		if !ok || h[0] == ' ' || h[0] == '\t' || strings.TrimRight(k, " \t") != k {
			return nil, fmt.Errorf("HTTP GET: a malformed header line: %s", said(h))
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || strings.TrimLeft(v, "0123456789") != "" || length >= 0 && n != length {
				return nil, fmt.Errorf("HTTP GET: Content-Length %s", said(v))
			}
			length = n
		case "transfer-encoding":
			return nil, fmt.Errorf("HTTP GET: the server sent the body with Transfer-Encoding %s, not a Content-Length", said(v))
		}
	}
	switch {
	case length < 0:
		return nil, errors.New("HTTP GET: the answer has no Content-Length")
	case length != size:
		return nil, fmt.Errorf("HTTP GET: the server announced %d bytes of %d", length, size)
	}
	return io.LimitReader(br, size), nil
}

// readHead reads an HTTP head from br: lines ending in CRLF (or LF) up to an empty one, at most
// maxHead bytes in all and 100 lines. It returns the lines without their ends.
func readHead(br *bufio.Reader) ([]string, error) {
	var lines []string
	total := 0
	for {
		var line []byte
		for {
			frag, err := br.ReadSlice('\n')
			total += len(frag)
			if total > maxHead {
				return nil, fmt.Errorf("HTTP GET: the answer's head is over %d bytes", maxHead)
			}
			line = append(line, frag...)
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("HTTP GET: reading the answer: %w", err)
			}
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
		if s == "" {
			if len(lines) == 0 {
				return nil, errors.New("HTTP GET: the answer begins with an empty line")
			}
			return lines, nil
		}
		if len(lines) == 100 {
			return nil, errors.New("HTTP GET: the answer has over 100 header lines")
		}
		lines = append(lines, s)
	}
}

// said is the server's words for an error: at most 80 bytes, escaped.
func said(s string) string {
	return escape.Quote(s[:min(len(s), 80)])
}

// getBody is a GET's body; Close closes its connection.
type getBody struct {
	io.Reader
	c    net.Conn
	stop func() bool
}

func (b *getBody) Close() error {
	b.stop()
	return b.c.Close()
}

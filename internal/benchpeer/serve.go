package benchpeer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/internal/privdir"
	"github.com/farwing/farwing/internal/tcpbench"
	"github.com/farwing/farwing/internal/xfer"
)

// checkTest bounds a TCP test, as the client asks for it and as the peer takes it.
func checkTest(t xfer.TCPTest) error {
	if t.Streams < 1 || t.Streams > tcpbench.MaxStreams || t.Seconds < 1 || t.Seconds > tcpbench.MaxSeconds {
		return fmt.Errorf("%w: a TCP test of %d streams for %d s (at most %d streams, %d s)", xfer.ErrProtocol, t.Streams, t.Seconds, tcpbench.MaxStreams, tcpbench.MaxSeconds)
	}
	return nil
}

// benchIdle is how long a bench peer waits for the client's next request: the client asks for
// fresh facts before each run, and a copy row's run lasts at most its limit.
const benchIdle = 10 * time.Minute

// acceptWithin bounds how long a test's listener waits for its streams.
const acceptWithin = 15 * time.Second

// Serve is the remote peer of `farwing bench` (the xfer.Role of xfer.RoleBench): it reports its
// host's facts and takes part in TCP tests, one at a time, until the client says bye. Its
// listener exists only during a test, on an ephemeral port, and counts only streams that present
// the test's token.
func Serve(ctx context.Context, s *xfer.Served) error {
	s.Path.Close() // a bench peer needs no lanes: no UDP port stays open for the bench's length
	ctl := s.Control
	// Listen on the address the client reached this host's sshd at, nowhere else.
	client, server := s.Client, s.Server
	bind := "0.0.0.0:0"
	if server.IsValid() {
		bind = netip.AddrPortFrom(server, 0).String()
	}
	facts := func() *hostinfo.Facts {
		f := hostinfo.Gather(client, hostinfo.SSHD(), xfer.Version)
		return &f
	}
	// The copy rows' destination: a directory of its own next to the peer's cache (on a disk,
	// where /tmp may be memory), removed when the bench ends; one left by a killed bench is
	// removed by the next.
	dir, err := benchDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := ctl.Send(xfer.Msg{T: xfer.KindFacts, Facts: facts(), Dest: dir}); err != nil {
		return err
	}
	for {
		m, err := ctl.Next(ctx, benchIdle)
		if err != nil {
			return err
		}
		switch m.T {
		case xfer.KindBye:
			return nil
		case xfer.KindFacts:
			if err := ctl.Send(xfer.Msg{T: xfer.KindFacts, Facts: facts()}); err != nil {
				return err
			}
		case xfer.KindTCP:
			if m.TCPTest == nil {
				return fmt.Errorf("%w: a tcp request without its test", xfer.ErrProtocol)
			}
			r, err := serveTCP(ctx, ctl, bind, *m.TCPTest)
			if err != nil {
				// A test that failed here (no such congestion control, streams that never came) is
				// the client's to report; the peer stays for the next one.
				if err := ctl.SendError(err); err != nil {
					return err
				}
				continue
			}
			if err := ctl.Send(xfer.Msg{T: xfer.KindTCPDone, TCPResult: &r}); err != nil {
				return err
			}
		case xfer.KindCheck:
			// A copy row's file: its digest, then it goes. Only a plain name in the bench's own
			// directory; nothing else on this host is looked at.
			sum, err := checkBenchFile(dir, m.Name)
			if err != nil {
				if err := ctl.SendError(err); err != nil {
					return err
				}
				continue
			}
			if err := ctl.Send(xfer.Msg{T: xfer.KindChecked, Sum: sum}); err != nil {
				return err
			}
		case xfer.KindHTTP:
			if err := serveHTTP(ctx, ctl, bind, dir, m.Size); err != nil {
				var re *xfer.RemoteError
				if errors.As(err, &re) || ctx.Err() != nil {
					return err
				}
				if err := ctl.SendError(err); err != nil {
					return err
				}
			}
		case xfer.KindSource:
			// A file for the pull direction's rows: random (made once, digest returned) or sparse.
			name, sum, err := benchSource(ctx, dir, m.Size, m.Sink)
			if err != nil {
				if err := ctl.SendError(err); err != nil {
					return err
				}
				continue
			}
			if err := ctl.Send(xfer.Msg{T: xfer.KindMade, Name: name, Sum: sum}); err != nil {
				return err
			}
		case xfer.KindUncache:
			// The "first copy" row: this build leaves the remote cache, so the next copy installs
			// it again. The running peer keeps its (now unlinked) executable.
			if err := uncache(); err != nil {
				if err := ctl.SendError(err); err != nil {
					return err
				}
				continue
			}
			if err := ctl.Send(xfer.Msg{T: xfer.KindUncached}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: unexpected %s message in a bench", xfer.ErrProtocol, escape.Quote(string(m.T)))
		}
	}
}

func serveTCP(ctx context.Context, ctl *xfer.Control, bind string, t xfer.TCPTest) (tcpbench.Result, error) {
	if err := checkTest(t); err != nil {
		return tcpbench.Result{}, err
	}
	if t.PeerSends {
		if err := tcpbench.CheckCC(t.CC); err != nil {
			return tcpbench.Result{}, err
		}
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return tcpbench.Result{}, err
	}
	token := tcpbench.NewToken()
	if err := ctl.Send(xfer.Msg{T: xfer.KindListen, Port: ln.Addr().(*net.TCPAddr).Port, Token: hex.EncodeToString(token)}); err != nil {
		ln.Close()
		return tcpbench.Result{}, err
	}
	conns, err := tcpbench.Accept(ctx, ln.(*net.TCPListener), t.Streams, token, acceptWithin)
	if err != nil {
		return tcpbench.Result{}, err
	}
	defer tcpbench.Close(conns)
	d := time.Duration(t.Seconds) * time.Second
	if !t.PeerSends {
		return tcpbench.Receive(ctx, conns, time.Now().Add(d+acceptWithin), nil)
	}
	for _, c := range conns {
		if err := tcpbench.SetCC(c, t.CC); err != nil {
			return tcpbench.Result{}, err
		}
	}
	return tcpbench.Send(ctx, conns, d, nil)
}

// benchDir makes the bench's directory, ~/.cache/farwing/bench-PID-*, after removing those of
// benches whose process is gone.
func benchDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	base = filepath.Join(base, "farwing")
	if err := privdir.Make(base); err != nil { // where this peer runs from: this user's alone
		return "", err
	}
	old, _ := filepath.Glob(filepath.Join(base, "bench-*"))
	for _, d := range old {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), "bench-"), "-")
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && syscall.Kill(n, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
	return os.MkdirTemp(base, fmt.Sprintf("bench-%d-", os.Getpid()))
}

// checkBenchFile returns the BLAKE3 of dir/name (hex) and removes it.
func checkBenchFile(dir, name string) (string, error) {
	if err := fcopy.ValidName(name); err != nil || strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: the bench checks files of its own directory only, not %s", xfer.ErrProtocol, escape.Quote(name))
	}
	sum, err := SumFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("bench file %s: %w", escape.Quote(name), err)
	}
	return sum, nil
}

// SumFile returns the BLAKE3 (hex) of a bench file and removes it, whether or not it could be
// read. Only a regular file is read: not through a symbolic link, and never a FIFO or a device,
// whose open or read could block for ever.
func SumFile(p string) (string, error) {
	defer os.Remove(p)
	f, _, err := privdir.OpenRegular(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := blake3.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// RandomFile writes size random bytes to a new file at name (mode 0600) and returns their
// BLAKE3 (hex); a failed or cancelled write leaves no file.
func RandomFile(ctx context.Context, name string, size int64) (string, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	h := blake3.New()
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := int(min(left, int64(len(buf))))
		rand.Read(buf[:n])
		h.Write(buf[:n])
		_, err := f.Write(buf[:n])
		if err == nil {
			err = ctx.Err() // the client left: stop writing
		}
		if err != nil {
			f.Close()
			os.Remove(name)
			return "", err
		}
		left -= int64(n)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// uncache removes this executable when it is the bootstrap's cached copy.
func uncache() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(filepath.Join(cache, "farwing"), exe); err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("the remote farwing (%s) is not in the cache %s; a first copy cannot be measured", exe, filepath.Join(cache, "farwing"))
	}
	return os.Remove(exe)
}

// maxHTTPSize bounds the HTTP row's file.
const maxHTTPSize = 1 << 40

// serveHTTP serves the HTTP row's file (made once per bench: size random bytes in dir) to one
// GET of a random path on an ephemeral port of bind, until the client says http-stop.
func serveHTTP(ctx context.Context, ctl *xfer.Control, bind, dir string, size int64) error {
	if size < 1 || size > maxHTTPSize {
		return fmt.Errorf("%w: an HTTP file of %d bytes", xfer.ErrProtocol, size)
	}
	name := filepath.Join(dir, "source")
	sum, err := randomSource(ctx, name, size)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return err
	}
	token := hex.EncodeToString(tcpbench.NewToken())
	srv, err := serveGET(ln, name, size, token)
	if err != nil {
		ln.Close()
		return err
	}
	defer srv.Close()
	if err := ctl.Send(xfer.Msg{T: xfer.KindListen, Port: ln.Addr().(*net.TCPAddr).Port, Token: token, Sum: sum}); err != nil {
		return err
	}
	if _, err := ctl.Expect(ctx, xfer.KindHTTPStop, benchIdle); err != nil {
		return err
	}
	srv.Close()
	return ctl.Send(xfer.Msg{T: xfer.KindHTTPStopped})
}

// benchSource makes the pull rows' source in dir: size random bytes ("source", its BLAKE3
// returned), or a sparse file (sparse: "stream", read as zeros from memory).
func benchSource(ctx context.Context, dir string, size int64, sparse bool) (name, sum string, err error) {
	if size < 1 || size > maxHTTPSize {
		return "", "", fmt.Errorf("%w: a source of %d bytes", xfer.ErrProtocol, size)
	}
	if !sparse {
		sum, err := randomSource(ctx, filepath.Join(dir, "source"), size)
		return "source", sum, err
	}
	return "stream", "", MakeStream(ctx, filepath.Join(dir, "stream"), size)
}

// MakeStream makes a throughput row's source at p: a sparse file of size bytes (zeros), read
// through once so that its pages are in memory before the timed copy, as a memory-to-memory row
// needs. The first read of a fresh sparse file has the kernel allocate and zero a page-cache page
// for every 4 KiB, on the sending end, during the copy: in the lab (400 Mbit/s, 140 ms, AMD EPYC
// Zen 5) such copies took 9.9-10.4 CPU seconds against 6.9-7.7 for the same file read once
// before, and read BtlBw 428-436 Mbit/s with 9-13 congestion verdicts at 362-366 Mbit/s, against
// 415-430 with 4 at 374. Only the first half of the memory available is read through
// (streamWarm): a row at 10 Gbit/s for 20 s reads 25 GB, and reading beyond what memory holds
// would only push out the start, which the copy reads first.
func MakeStream(ctx context.Context, p string, size int64) error {
	if err := SparseFile(p, size); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	warm := streamWarm(size, hostinfo.MemAvailable())
	buf := make([]byte, 1<<20)
	for off := int64(0); off < warm; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.ReadAt(buf, off)
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// streamWarm is how much of a stream of size bytes MakeStream reads through, where avail bytes of
// memory are available (0: unknown): all of it, or the first half of avail where that is less.
func streamWarm(size, avail int64) int64 {
	if avail <= 0 {
		return size
	}
	return min(size, avail/2)
}

// SparseFile makes p a sparse file of size bytes (zeros), replacing what was there.
func SparseFile(p string, size int64) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// randomSource makes the file of size random bytes at name, unless it is there, and returns its
// BLAKE3 (hex).
func randomSource(ctx context.Context, name string, size int64) (string, error) {
	if st, err := os.Stat(name + ".sum"); err == nil && st.Size() == 64 {
		if fst, err := os.Stat(name); err == nil && fst.Size() == size {
			b, err := os.ReadFile(name + ".sum")
			return string(b), err
		}
	}
	var fs syscall.Statfs_t
	// The bench never fills a disk: what stays free is a tenth of it, at least 1 GiB.
	if err := syscall.Statfs(filepath.Dir(name), &fs); err == nil {
		free, keep := uint64(max(fs.Bavail, 0))*uint64(fs.Bsize), max(fs.Blocks*uint64(fs.Bsize)/10, 1<<30)
		if uint64(size)+keep > free {
			return "", fmt.Errorf("the bench's %d-byte source file does not fit on the host's disk (%d bytes free, %d kept free)", size, free, keep)
		}
	}
	sum, err := RandomFile(ctx, name, size)
	if err != nil {
		return "", err
	}
	return sum, os.WriteFile(name+".sum", []byte(sum), 0o600)
}

package xfer

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/farwing/farwing/lane/lanetest"
)

// slowReader delivers at most rate bytes a second (the ssh session's TCP on a lossy long path).
type slowReader struct {
	r     io.Reader
	rate  float64
	start time.Time
	n     int64
}

func (s *slowReader) Read(b []byte) (int, error) {
	if s.start.IsZero() {
		s.start = time.Now()
	}
	if len(b) > 16<<10 {
		b = b[:16<<10]
	}
	n, err := s.r.Read(b)
	s.n += int64(n)
	if due := s.start.Add(time.Duration(float64(s.n) / s.rate * 1e9)); time.Until(due) > 0 {
		time.Sleep(time.Until(due))
	}
	return n, err
}

type slowRemote struct {
	Remote
	rate float64
}

func (r slowRemote) Control() (io.Reader, io.WriteCloser) {
	out, in := r.Remote.Control()
	return &slowReader{r: out, rate: r.rate}, in
}

// TestBigListWAN (FARWING_BIGLIST=DIR, FARWING_CTLRATE=bytes/s): sink copies of 100,000 small
// files, push and pull, the control channel at that rate each way (0: unlimited), the time to the
// first data datagram and the whole copy.
func TestBigListWAN(t *testing.T) {
	base := os.Getenv("FARWING_BIGLIST")
	if base == "" {
		t.Skip("FARWING_BIGLIST=DIR")
	}
	rate, _ := strconv.ParseFloat(os.Getenv("FARWING_CTLRATE"), 64)
	nl := os.Getenv("FARWING_NAMES")
	if nl == "" {
		nl = "0"
	}
	src := filepath.Join(base, "n"+nl, "t")
	if s := os.Getenv("FARWING_SRC"); s != "" {
		src = s
	}
	delay, _ := time.ParseDuration(os.Getenv("FARWING_DELAY")) // one way
	if _, err := os.Stat(src); err != nil {
		t.Skip("make the tree with TestBigListStages first")
	}
	dirs := []string{"push", "pull"}
	if d := os.Getenv("FARWING_DIR"); d != "" {
		dirs = []string{d} // one per process: max RSS is the process's peak
	}
	for _, dir := range dirs {
		e := newEnv(t, lanetest.Link{Delay: delay}, 1)
		if rate > 0 {
			e.serve = func(ctx context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error {
				return Serve(ctx, &slowReader{r: r, rate: rate}, w, pub, so)
			}
		}
		o := e.options()
		if rate > 0 {
			start := o.Start
			o.Start = func(ctx context.Context, host string, args []string, preface []byte) (Remote, error) {
				r, err := start(ctx, host, args, preface)
				if err != nil {
					return nil, err
				}
				return slowRemote{r, rate}, nil
			}
		}
		o.Recursive, o.Sink = true, true
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Second)
		t0 := time.Now()
		var res *Result
		var err error
		if dir == "push" {
			res, err = Push(ctx, o, []string{src}, "host", t.TempDir())
		} else {
			res, err = Pull(ctx, o, "host", []string{src}, t.TempDir())
		}
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		t.Logf("names %s, delay %v each way, control channel %.0f B/s, %s sink: %d files, whole %v, to the first data %.2f s, data %.2f s, max RSS (both ends) %d MiB",
			nl, delay, rate, dir, len(res.Files), time.Since(t0).Round(time.Millisecond), res.Seconds-res.DataSeconds, res.DataSeconds, maxRSS()>>20)
	}
}

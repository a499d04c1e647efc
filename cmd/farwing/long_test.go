//go:build linux

package main

// Heavy measurements through the lab, run for the closing notes: they take minutes and need
// gigabytes of disk, so they run only when asked.
//
//	FARWING_LONG_RUN=20G   a --sink push of that size at 400 Mbit/s, 60 ms, 1 % loss: rate in 1 s
//	                       samples, resident memory of both ends over time
//	FARWING_MEMORY=1       peak resident memory of both ends for 256 MiB, 1 GiB and 4 GiB --sink
//	                       pushes at 1 Gbit/s (FARWING_MEMORY_RATE), 60 ms, 1 % loss

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/farwing/farwing/internal/units"
)

// bigFile writes a file of size bytes made of a 64 MiB random pattern repeated, and returns its
// path and BLAKE3 digest.
func bigFile(t *testing.T, dir string, size int64) (string, string) {
	t.Helper()
	pat := make([]byte, 64<<20)
	rand.Read(pat)
	p := filepath.Join(dir, "big.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	h := blake3.New()
	w := io.MultiWriter(f, h)
	for left := size; left > 0; left -= int64(len(pat)) {
		if _, err := w.Write(pat[:min(int64(len(pat)), left)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p, hexs(h.Sum(nil))
}

// vmRSS is a process's resident memory in bytes (0 if it is gone).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10
}

func mmm(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%.1f / %.1f / %.1f", s[0], s[len(s)/2], s[len(s)-1])
}

// TestLabLongRun: a long --sink push through 1 % loss keeps its rate and its memory: the digest
// is right, and neither end's resident memory in the last quarter of the run is above its peak in
// the first quarter by more than 16 MiB.
func TestLabLongRun(t *testing.T) {
	size, err := units.ParseSize(os.Getenv("FARWING_LONG_RUN"))
	if err != nil || size <= 0 {
		t.Skip("set FARWING_LONG_RUN=SIZE (e.g. 20G) to run the long --sink transfer")
	}
	e := startLab(t, 400e6, 60*time.Millisecond, 0.01)
	src, sum := bigFile(t, t.TempDir(), size)
	full := []string{"copy", "--json", "-q", "-F", e.srv.ConfigFile, "--sink", src, e.srv.Host + ":"}
	cmd := e.l.Command(e.l.NSA, e.bin, full...)
	stdout, _ := cmd.StdoutPipe()
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type sample struct {
		at       time.Duration
		bytes    float64
		rss, prs int64
	}
	var mu sync.Mutex
	var progress []sample // (arrival, bytes) of every progress event
	var mem []sample      // resident memory of both ends, every second
	var out strings.Builder
	done := make(chan struct{})
	go func() { // --json's events: {"schema":1,"event":"progress","bytes":110100480,...}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct {
				Event string
				Bytes float64
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "progress" {
				mu.Lock()
				progress = append(progress, sample{at: time.Since(start), bytes: ev.Bytes})
				mu.Unlock()
			}
			out.Write(sc.Bytes())
			out.WriteByte('\n')
		}
		close(done)
	}()
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
			var prs int64
			if ps := e.srv.Peers(); len(ps) > 0 {
				prs = vmRSS(ps[0])
			}
			mu.Lock()
			mem = append(mem, sample{at: time.Since(start), rss: vmRSS(cmd.Process.Pid), prs: prs})
			mu.Unlock()
		}
	}()
	<-done
	if err := cmd.Wait(); err != nil {
		t.Fatalf("long run: %v: %s", err, errb.String())
	}
	_, res := jsonEvents(t, out.String())
	if res["blake3"] != sum {
		t.Fatalf("long run: digest %v, want %s", res["blake3"], sum)
	}
	mu.Lock()
	defer mu.Unlock()
	// One-second rate samples while data flowed, from the progress events: the bytes acknowledged
	// between the event nearest each whole second and the one nearest the next.
	var rates []float64
	var first, last time.Duration
	for _, p := range progress {
		if p.bytes > 0 && first == 0 {
			first = p.at
		}
		if p.bytes < float64(size) {
			last = p.at
		}
	}
	at := func(d time.Duration) sample {
		best := progress[0]
		for _, p := range progress {
			if (p.at - d).Abs() < (best.at - d).Abs() {
				best = p
			}
		}
		return best
	}
	for d := first; d+time.Second <= last; d += time.Second {
		a, b := at(d), at(d+time.Second)
		if b.at > a.at {
			rates = append(rates, (b.bytes-a.bytes)*8/(b.at-a.at).Seconds()/1e6)
		}
	}
	var live []sample // memory samples while data flowed
	for _, m := range mem {
		if m.at >= first && m.at <= last {
			live = append(live, m)
		}
	}
	if len(live) < 8 {
		t.Fatalf("only %d memory samples while data flowed", len(live))
	}
	q := len(live) / 4
	peak := func(s []sample, peer bool) int64 {
		var m int64
		for _, x := range s {
			if peer {
				m = max(m, x.prs)
			} else {
				m = max(m, x.rss)
			}
		}
		return m
	}
	for _, peer := range []bool{false, true} {
		first, last := peak(live[:q], peer), peak(live[len(live)-q:], peer)
		who := map[bool]string{false: "client (sender)", true: "peer (receiver)"}[peer]
		t.Logf("%s: resident memory peak %d MiB in the first quarter, %d MiB in the last, %d MiB overall", who, first>>20, last>>20, peak(live, peer)>>20)
		if last > first+16<<20 {
			t.Errorf("%s: resident memory grew from %d to %d MiB", who, first>>20, last>>20)
		}
	}
	t.Logf("long run: %s in %.0f s (data %.0f s, %.1f Mbit/s), %d one-second rate samples min / median / max %s Mbit/s; max rss %v / %v bytes",
		units.Size(size), res["seconds"], res["data_seconds"], res["goodput_bps"].(float64)/1e6, len(rates), mmm(rates), res["max_rss_bytes"], res["peer_max_rss_bytes"])
}

// TestLabMemory: peak resident memory of both ends for --sink pushes of 256 MiB, 1 GiB and 4 GiB
// at 1 Gbit/s, 60 ms and 1 % loss does not grow with the file's size (the largest within 32 MiB
// of the smallest: it varies with the worst loss burst a run meets, which holds blocks for
// repairs) and stays within 128 MiB at each end.
func TestLabMemory(t *testing.T) {
	if os.Getenv("FARWING_MEMORY") == "" {
		t.Skip("set FARWING_MEMORY=1 to measure memory against file size")
	}
	rate := 1000e6
	if v := os.Getenv("FARWING_MEMORY_RATE"); v != "" {
		if r, err := units.ParseRate(v); err == nil {
			rate = r
		}
	}
	e := startLab(t, rate, 60*time.Millisecond, 0.01)
	dir := t.TempDir()
	var rss [2][]float64
	for _, size := range memorySizes() {
		src, sum := bigFile(t, dir, size)
		r := e.copy("--sink", src, e.srv.Host+":")
		if r.code != 0 || r.res["blake3"] != sum {
			t.Fatalf("%s: exit %d: %s", units.Size(size), r.code, r.stderr)
		}
		c, p := r.res["max_rss_bytes"].(float64), r.res["peer_max_rss_bytes"].(float64)
		rss[0], rss[1] = append(rss[0], c), append(rss[1], p)
		t.Logf("%s: client (sender) %.0f MiB, peer (receiver) %.0f MiB peak resident; %.1f Mbit/s", units.Size(size), c/(1<<20), p/(1<<20), r.res["goodput_bps"].(float64)/1e6)
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "memory ") { // FARWING_DEBUG=1: where it went
				t.Log(l)
			}
		}
		os.Remove(src)
	}
	for end, xs := range rss {
		if slices.Max(xs) > slices.Min(xs)+32<<20 || slices.Max(xs) > 128<<20 {
			t.Errorf("end %d: peak resident memory %v bytes over 256 MiB, 1 GiB, 4 GiB", end, xs)
		}
	}
}

// memorySizes are the transfer sizes TestLabMemory measures (FARWING_MEMORY_SIZES: a list).
func memorySizes() []int64 {
	v := os.Getenv("FARWING_MEMORY_SIZES")
	if v == "" {
		return []int64{256 << 20, 1 << 30, 4 << 30}
	}
	var sizes []int64
	for _, f := range strings.Split(v, ",") {
		if n, err := units.ParseSize(f); err == nil {
			sizes = append(sizes, n)
		}
	}
	return sizes
}

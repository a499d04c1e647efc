package xfer

// Measurements of a file list of 100,000 entries (docs/PERFORMANCE.md), behind environment
// variables: FARWING_BIGLIST=DIR (a tmpfs: the trees are made there once) runs them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/pipetest"
)

// bigTree makes dirs × per files of 0-2 KiB below root/t, names padded to nameLen bytes when
// nameLen > 0.
func bigTree(t testing.TB, root string, dirs, per, nameLen int) {
	buf := make([]byte, 2048)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for d := range dirs {
		dn := fmt.Sprintf("d%03d", d)
		if nameLen > 0 {
			dn += strings.Repeat("x", nameLen-len(dn))
		}
		dp := filepath.Join(root, "t", dn)
		os.MkdirAll(dp, 0o755)
		for f := range per {
			fn := fmt.Sprintf("f%05d", f)
			if nameLen > 0 {
				fn += strings.Repeat("y", nameLen-len(fn))
			}
			if err := os.WriteFile(filepath.Join(dp, fn), buf[:(d*per+f)%2049], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// peakHeap runs f and returns the highest heap of live and unswept objects seen while it ran
// (sampled every 200 µs), above the heap before it.
func peakHeap(f func()) uint64 {
	base := heapNow()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak - min(peak, base)
}

func bigTreeAt(t *testing.T, nameLen int) string {
	base := os.Getenv("FARWING_BIGLIST")
	if base == "" {
		t.Skip("FARWING_BIGLIST=DIR (a tmpfs) measures a list of 100,000 entries")
	}
	root := filepath.Join(base, fmt.Sprintf("n%d", nameLen))
	if _, err := os.Stat(filepath.Join(root, "t")); err != nil {
		bigTree(t, root, 100, 1000, nameLen)
	}
	return filepath.Join(root, "t")
}

// TestBigListStages: each stage of the list at both ends, its time and the heap it keeps.
func TestBigListStages(t *testing.T) {
	for _, nl := range []int{0, 200} {
		src := bigTreeAt(t, nl)
		h0 := heapNow()
		t0 := time.Now()
		sources, err := fcopy.Collect([]string{src}, fcopy.CollectOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		tCollect := time.Since(t0)
		n := len(sources.Files)
		h1 := heapNow()
		t0 = time.Now()
		if _, err := fcopy.NewPlan(sources.Files); err != nil {
			t.Fatal(err)
		}
		tPlan := time.Since(t0)
		// The former encoding: one JSON message of the whole list.
		old, _ := json.Marshal(sources.Files)
		results := make([]fcopy.FileResult, 0, n)
		for _, f := range sources.Files {
			if f.Regular() {
				results = append(results, fcopy.FileResult{Name: f.Name, Path: "/home/user/dest/" + f.Name, Size: f.Size, Sum: strings.Repeat("0f", 32)})
			}
		}
		oldVerdict, _ := json.Marshal(results)
		oldLen, verdictLen := len(old), len(oldVerdict)
		old, oldVerdict, results = nil, nil, nil
		pipe := pipetest.New()
		send := NewControl(nil, pipe, nil)
		t0 = time.Now()
		if err := sendFiles(send, Msg{T: KindFiles}, sources.Files); err != nil {
			t.Fatal(err)
		}
		tEnc := time.Since(t0)
		pipe.Close()
		wire := pipe.Len()
		h2 := heapNow()
		recv := NewControl(pipe, nil, nil)
		recv.Start(nil)
		t0 = time.Now()
		head, _ := recv.Expect(context.Background(), KindFiles, time.Second)
		files, err := recvList(context.Background(), recv, head.Entries)
		if err != nil {
			t.Fatal(err)
		}
		tDec := time.Since(t0)
		h3 := heapNow()
		// The peak heap of receiving the list: in chunks, and as the one message it was.
		pipe2 := pipetest.New()
		sendFiles(NewControl(nil, pipe2, nil), Msg{T: KindFiles}, sources.Files)
		pipe2.Close()
		peakNew := peakHeap(func() {
			r := NewControl(pipe2, nil, nil)
			r.Start(nil)
			head, _ := r.Expect(context.Background(), KindFiles, time.Second)
			if _, err := recvList(context.Background(), r, head.Entries); err != nil {
				t.Error(err)
			}
		})
		line, _ := json.Marshal(struct {
			T     string       `json:"t"`
			Files []fcopy.File `json:"files"`
		}{"hello", sources.Files})
		line = append(line, '\n')
		peakOld := peakHeap(func() {
			var m struct {
				Files []fcopy.File `json:"files"`
			}
			r := NewControl(bytes.NewReader(line), nil, nil)
			var l []byte
			for {
				frag, err := r.r.ReadSlice('\n')
				l = append(l, frag...)
				if err == nil {
					break
				}
			}
			if err := json.Unmarshal(l, &m); err != nil || len(m.Files) != n {
				t.Error(err)
			}
		})
		line = nil
		t.Logf("names %d: receiver's peak heap: %d MiB in chunks (%.0f B/entry), %d MiB as one message (%.0f B/entry)", nl, peakNew>>20, float64(peakNew)/float64(n), peakOld>>20, float64(peakOld)/float64(n))
		t0 = time.Now()
		if _, err := fcopy.NewPlan(files); err != nil {
			t.Fatal(err)
		}
		tCheck := time.Since(t0)
		t0 = time.Now()
		if _, err := fcopy.MatchRequest([]string{src}, fcopy.CollectOptions{Recursive: true}, files); err != nil {
			t.Fatal(err)
		}
		tMatch := time.Since(t0)
		dst := t.TempDir()
		t0 = time.Now()
		target, have, err := fcopy.ResolveTargetHave(dst, files, fcopy.QuickCheck)
		if err != nil {
			t.Fatal(err)
		}
		tHave := time.Since(t0)
		t0 = time.Now()
		parts := target.FindPartials(files, have, false)
		tParts := time.Since(t0)
		parts.Close(target)
		hKept := heapNow()
		runtime.KeepAlive(files)
		hFree := heapNow()
		hSrc := heapNow()
		runtime.KeepAlive(sources)
		hSrcFree := heapNow()
		t.Logf("names %d: %d entries; sender: collect %v (keeps %.0f B/entry, measured as freed: %.0f), plan %v, encode+send %v: %d bytes on the wire (%.1f B/entry; one JSON message was %d, %.0f B/entry; a verdict with paths %d)",
			nl, n, tCollect.Round(time.Millisecond), float64(h1-h0)/float64(n), (float64(hSrc)-float64(hSrcFree))/float64(n), tPlan.Round(time.Millisecond), tEnc.Round(time.Millisecond), wire, float64(wire)/float64(n), oldLen, float64(oldLen)/float64(n), verdictLen)
		t.Logf("names %d: receiver: receive+decode+check chunks %v (keeps %.0f B/entry, measured as freed: %.0f), plan %v, match %v, have %v, partials %v",
			nl, tDec.Round(time.Millisecond), (float64(h3)-float64(h2))/float64(n), (float64(hKept)-float64(hFree))/float64(n), tCheck.Round(time.Millisecond), tMatch.Round(time.Millisecond), tHave.Round(time.Millisecond), tParts.Round(time.Millisecond))
	}
}

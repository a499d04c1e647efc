package xfer

// Crash-safe resume, in process: a copy interrupted half way (its sender or its receiver gone)
// leaves its partial file and record; the next identical copy keeps the verified blocks, sends
// the rest, and the file is the source's. A changed source starts over; --no-resume starts over
// and leaves nothing; a peer's word on resuming is checked.

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/lane/lanetest"
)

const resumeSize = 24 << 20

// resumeCheckpoint is how often the writers of the resume tests checkpoint (Options and
// ServeOptions.CheckpointEvery): a file of resumeSize gets several checkpoints.
const resumeCheckpoint = 2 << 20

// resumeEnv is newEnv whose writers, at both ends, checkpoint every resumeCheckpoint.
func resumeEnv(t *testing.T, link lanetest.Link, seed uint64) *env {
	e := newEnv(t, link, seed)
	e.checkpoint = resumeCheckpoint
	return e
}

// partials lists the partial files and records in dir.
func partials(dir string) (parts, recs int) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		switch n := e.Name(); {
		case strings.Contains(n, ".farwing-") && strings.HasSuffix(n, ".part"):
			parts++
		case strings.Contains(n, ".farwing-") && strings.HasSuffix(n, ".rec"):
			recs++
		}
	}
	return parts, recs
}

// stopper ends one side of a copy once the client's progress reports at least a third of what
// travels (a changed file's kept blocks do not: TestInProcessDeltaResume sends three quarters of
// the file, and stopped at half the file's size it once finished first under load).
type stopper struct {
	once sync.Once
	stop func()
}

func (s *stopper) progress(p Progress) {
	if p.Total > 0 && p.Bytes >= p.Total/3 {
		s.once.Do(s.stop)
	}
}

// interruptedRun runs one copy (push or pull of big) that is stopped half way: killClient
// cancels the client's context, otherwise the server's. It waits for the server to end, and
// checks that the receiving side kept a partial file and its record.
func interruptedRun(t *testing.T, push, killClient bool, src, remote, local string) {
	t.Helper()
	e := resumeEnv(t, lanetest.Link{Loss: 0.01, Delay: 2 * time.Millisecond}, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serverCtx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	e.serve = func(_ context.Context, r io.Reader, w io.Writer, pub string, so ServeOptions) error {
		return Serve(serverCtx, r, w, pub, so)
	}
	cctx, stopClient := context.WithCancel(ctx)
	defer stopClient()
	s := &stopper{stop: stopServer}
	if killClient {
		s.stop = stopClient
	}
	o := e.options()
	o.Rate = 100e6
	o.Progress = s.progress
	var err error
	if push {
		_, err = Push(cctx, o, []string{filepath.Join(src, "big")}, "host", remote)
	} else {
		_, err = Pull(cctx, o, "host", []string{filepath.Join(remote, "big")}, local)
	}
	if err == nil {
		t.Fatal("the interrupted copy succeeded")
	}
	e.wait()
	dst := remote
	if !push {
		dst = local
	}
	if parts, recs := partials(dst); parts != 1 || recs != 1 {
		t.Fatalf("after the interrupted copy (%v): %d partial files and %d records at the receiver, want 1 and 1", err, parts, recs)
	}
}

// rerun runs the same copy again, to its end.
func rerun(t *testing.T, push bool, o Options, src, remote, local string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res *Result
	var err error
	if push {
		res, err = Push(ctx, o, []string{filepath.Join(src, "big")}, "host", remote)
	} else {
		res, err = Pull(ctx, o, "host", []string{filepath.Join(remote, "big")}, local)
	}
	if err != nil {
		t.Fatalf("re-run: %v", err)
	}
	return res
}

// TestInProcessResume: a push and a pull stopped half way, by the client's end and by the
// server's, are resumed by the next run: it keeps some of the file (whole blocks, as many as the
// last checkpoint counted), sends no more than the rest (payload bytes exactly the rest, wire bytes less than
// the file), and the file is the source's; nothing temporary is left.
func TestInProcessResume(t *testing.T) {
	for _, c := range []struct {
		name             string
		push, killClient bool
	}{
		{"push, sender killed", true, true},
		{"push, receiver killed", true, false},
		{"pull, receiver killed", false, true},
		{"pull, sender killed", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, remote, local := t.TempDir(), t.TempDir(), t.TempDir()
			if c.push {
				tree(t, src, map[string]int{"big": resumeSize})
			} else {
				tree(t, remote, map[string]int{"big": resumeSize})
			}
			interruptedRun(t, c.push, c.killClient, src, remote, local)
			e := resumeEnv(t, lanetest.Link{Loss: 0.01, Delay: 2 * time.Millisecond}, 8)
			res := rerun(t, c.push, e.options(), src, remote, local)
			if res.ResumedFiles != 1 || res.ResumedBytes <= 0 || res.ResumedBytes%fcopy.BlockSize != 0 || res.ResumedBytes >= resumeSize {
				t.Fatalf("resumed %d files, %d bytes", res.ResumedFiles, res.ResumedBytes)
			}
			if rest := resumeSize - res.ResumedBytes; res.Bytes != rest || res.WireBytes >= resumeSize || res.WireBytes < uint64(rest) {
				t.Fatalf("kept %d bytes, then sent %d bytes of payload, %d bytes on the wire; the rest is %d", res.ResumedBytes, res.Bytes, res.WireBytes, rest)
			}
			if c.push {
				sameBytes(t, filepath.Join(src, "big"), filepath.Join(remote, "big"))
			} else {
				sameBytes(t, filepath.Join(remote, "big"), filepath.Join(local, "big"))
			}
			for _, d := range []string{remote, local} {
				if parts, recs := partials(d); parts+recs != 0 {
					t.Errorf("%d partial files, %d records left", parts, recs)
				}
			}
			t.Logf("%s: kept %d of %d bytes, sent %d (wire %d)", c.name, res.ResumedBytes, resumeSize, res.Bytes, res.WireBytes)
		})
	}
}

// TestInProcessResumeStartsOver: after an interrupted push, a source whose time changed is sent
// whole (nothing spliced); so is one resumed with --no-resume, which also leaves no partial file
// when it is interrupted itself.
func TestInProcessResumeStartsOver(t *testing.T) {
	src, remote := t.TempDir(), t.TempDir()
	tree(t, src, map[string]int{"big": resumeSize})
	interruptedRun(t, true, true, src, remote, "")
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(src, "big"), later, later)
	e := resumeEnv(t, lanetest.Link{}, 9)
	res := rerun(t, true, e.options(), src, remote, "")
	if res.ResumedFiles != 0 || res.Bytes != resumeSize {
		t.Fatalf("changed source: resumed %d files, %d bytes; sent %d", res.ResumedFiles, res.ResumedBytes, res.Bytes)
	}
	sameBytes(t, filepath.Join(src, "big"), filepath.Join(remote, "big"))

	os.Remove(filepath.Join(remote, "big"))
	interruptedRun(t, true, true, src, remote, "")
	o := e.options()
	o.NoResume = true
	res = rerun(t, true, o, src, remote, "")
	if res.ResumedFiles != 0 || res.Bytes != resumeSize {
		t.Fatalf("--no-resume: resumed %d files; sent %d", res.ResumedFiles, res.Bytes)
	}
	if parts, recs := partials(remote); parts+recs != 0 {
		t.Fatalf("--no-resume left %d partial files, %d records", parts, recs)
	}
	sameBytes(t, filepath.Join(src, "big"), filepath.Join(remote, "big"))
}

// TestPushHostileResumeOffer: a receiving server that offers to resume what it cannot (a
// directory, more blocks than the file has, a file it says it has) is refused before any data
// with the protocol's exit code, and the destination gets nothing.
func TestPushHostileResumeOffer(t *testing.T) {
	src := t.TempDir()
	tree(t, src, skipTree)
	// The list: t, t/a.bin, t/empty, t/sub, t/sub/b.bin, t/sub/c.bin (name order).
	for _, c := range []struct {
		what   string
		offers []fcopy.Offer
		have   []int
		want   string
	}{
		{"a directory", []fcopy.Offer{{File: 3, Blocks: 1}}, nil, "not a regular file"},
		{"too many blocks", []fcopy.Offer{{File: 1, Blocks: 4}}, nil, "blocks offered"},
		{"beyond the list", []fcopy.Offer{{File: 9, Blocks: 1}}, nil, "not in the list"},
		{"had and resumed", []fcopy.Offer{{File: 1, Blocks: 1}}, []int{1}, "already there"},
	} {
		t.Run(c.what, func(t *testing.T) {
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = tamperServe(nil, func(m *Msg) {
				if m.T == KindHave {
					m.Have, m.Resume = c.have, c.offers
				}
			})
			dst := t.TempDir()
			o := e.options()
			o.Recursive = true
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := Push(ctx, o, []string{filepath.Join(src, "t")}, "host", dst)
			if err == nil || CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("push took the offer %+v: %v (exit %d)", c.offers, err, CodeOf(err))
			}
			if ents, _ := os.ReadDir(filepath.Join(dst, "t", "sub")); len(ents) != 0 {
				t.Errorf("the destination got %s", ents[0].Name())
			}
		})
	}
}

// TestPullHostileResumeSums: a sending server whose block digests for the pulling client's kept
// blocks do not match them makes it keep nothing (the whole file comes again, and is the
// source's); digests of the wrong length, or for a file not offered, are refused (exit 10).
func TestPullHostileResumeSums(t *testing.T) {
	for _, c := range []struct {
		what   string
		tamper func(m *Msg)
		want   string // "" : the copy succeeds, sending everything
	}{
		{"wrong digests", func(m *Msg) { m.Digests[5] ^= 1 }, ""},
		{"short", func(m *Msg) { m.Digests = m.Digests[:len(m.Digests)-32] }, "offered"},
		{"another file", func(m *Msg) { m.File = 2 }, "expected them for file 0"},
	} {
		t.Run(c.what, func(t *testing.T) {
			remote, local := t.TempDir(), t.TempDir()
			tree(t, remote, map[string]int{"big": resumeSize})
			interruptedRun(t, false, true, "", remote, local)
			e := resumeEnv(t, lanetest.Link{}, 2)
			e.serve = tamperServe(nil, func(m *Msg) {
				if m.T == KindSums {
					c.tamper(m)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := Pull(ctx, e.options(), "host", []string{filepath.Join(remote, "big")}, local)
			if c.want == "" {
				if err != nil || res.ResumedFiles != 0 || res.Bytes != resumeSize {
					t.Fatalf("pull with digests that do not match: %v, resumed %+v", err, res)
				}
				sameBytes(t, filepath.Join(remote, "big"), filepath.Join(local, "big"))
				return
			}
			if err == nil || CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("pull took the digests: %v (exit %d)", err, CodeOf(err))
			}
			if _, err := os.Stat(filepath.Join(local, "big")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the destination file exists after the refused pull")
			}
		})
	}
}

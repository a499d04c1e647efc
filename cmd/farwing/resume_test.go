//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// recordBlocks reads the blocks a resume record in dir says are kept (-1: no record).
func recordBlocks(dir string) int {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); strings.Contains(n, ".farwing-") && strings.HasSuffix(n, ".rec") {
			var r struct {
				Blocks int `json:"blocks"`
			}
			b, _ := os.ReadFile(filepath.Join(dir, n))
			if json.Unmarshal(b, &r) == nil {
				return r.Blocks
			}
		}
	}
	return -1
}

// TestLabResume kills (SIGKILL) the sending or the receiving farwing of a push and of a pull,
// or the ssh connection of a push, through the lab once the receiver has recorded at least 64 or
// 128 blocks as verified and durable, then runs the same copy again: it exits 0, the file is the source's, --json and the
// summary say one file was resumed with at least what was recorded before the kill, the payload
// sent is exactly the rest, the wire bytes are less than the file's and within 15 % of what was
// not yet verified, and no partial file or record is left. A source changed between the runs is
// sent whole.
func TestLabResume(t *testing.T) {
	e := startLab(t, 400e6, 10*time.Millisecond, 0.01)
	local := t.TempDir()
	const size = 256 << 20
	src, sum := randomFile(t, local, "src.bin", size)
	if c := e.copy(src, e.srv.Host+":src.bin"); c.code != 0 {
		t.Fatalf("seeding the remote: %s", c.stderr)
	}
	for _, c := range []struct {
		pull       bool
		kill       string // client, peer, or ssh (the connection dropped)
		atBlocks   int
		changeSrcs bool
	}{
		{false, "client", 64, false}, // push: the sender
		{false, "peer", 128, false},  // push: the receiver
		{true, "client", 128, false}, // pull: the receiver
		{true, "peer", 64, false},    // pull: the sender
		{false, "ssh", 64, false},    // push: the ssh connection
		{false, "client", 64, true},  // push, the source changed after the kill
	} {
		args := []string{"--rate", "300M", "--ssh-persist", "0", src, e.srv.Host + ":dst.bin"}
		recvDir, final := e.srv.Home, filepath.Join(e.srv.Home, "dst.bin")
		if c.pull {
			recvDir, final = local, filepath.Join(local, "pulled.bin")
			args = []string{"--rate", "300M", "--ssh-persist", "0", e.srv.Host + ":src.bin", final}
		}
		what := map[bool]string{false: "push", true: "pull"}[c.pull] + ", " + c.kill + " killed"
		if c.changeSrcs {
			what += ", source changed"
		}
		r := e.startCopy(args...)
		if !waitFor(60*time.Second, func() bool { return recordBlocks(recvDir) >= c.atBlocks }) {
			t.Fatalf("%s: the receiver never recorded %d blocks: %s", what, c.atBlocks, r.errb.String())
		}
		kept := recordBlocks(recvDir)
		victim := r.cmd.Process.Pid
		switch c.kill {
		case "peer":
			if ps := e.srv.Peers(); len(ps) > 0 {
				victim = ps[0]
			}
		case "ssh":
			victim = 0
			if ps := childPids(r.cmd.Process.Pid, "ssh"); len(ps) > 0 {
				victim = ps[0]
			}
		}
		if victim == 0 {
			t.Fatalf("%s: no process to kill", what)
		}
		syscall.Kill(victim, syscall.SIGKILL)
		code := r.wait(40 * time.Second)
		waitFor(30*time.Second, func() bool { return len(e.srv.Peers()) == 0 })
		if code == 0 {
			t.Fatalf("%s: the killed copy exited 0", what)
		}
		if recordBlocks(recvDir) < kept || len(partials(recvDir)) != 1 {
			t.Fatalf("%s: after the kill the receiver holds %d partial files, record of %d blocks (had %d)", what, len(partials(recvDir)), recordBlocks(recvDir), kept)
		}
		wantSum := sum
		if c.changeSrcs {
			later := time.Now().Add(time.Hour)
			os.Chtimes(src, later, later)
			if c := e.copy(src, e.srv.Host+":src.bin"); c.code != 0 { // the pull tests' source too
				t.Fatalf("re-seeding the remote: %s", c.stderr)
			}
		}
		again := e.copy(args...)
		if again.code != 0 || fileSum(t, final) != wantSum {
			t.Fatalf("%s: the copy after the kill: exit %d: %s", what, again.code, again.stderr)
		}
		resumedBytes, _ := again.res["resumed_bytes"].(float64)
		bytes, _ := again.res["bytes"].(float64)
		wire, _ := again.res["wire_bytes"].(float64)
		t.Logf("%s at %d recorded blocks: the re-run kept %.0f MiB, sent %.0f MiB (wire %.1f MiB) in %.2f s: %s", what, kept,
			resumedBytes/(1<<20), bytes/(1<<20), wire/(1<<20), again.elapsed.Seconds(), lastLineOf(again.stderr))
		if c.changeSrcs {
			if again.res["resumed_files"] != float64(0) || bytes != size {
				t.Fatalf("%s: resumed %v files, sent %v bytes of a changed source", what, again.res["resumed_files"], bytes)
			}
		} else {
			rest := float64(size - kept<<20)
			if again.res["resumed_files"] != float64(1) || resumedBytes < float64(kept<<20) || bytes != size-resumedBytes ||
				wire >= size || wire > 1.15*rest {
				t.Fatalf("%s: resumed %v files, %v bytes (recorded before the kill: %d MiB); sent %v bytes, %v on the wire",
					what, again.res["resumed_files"], resumedBytes, kept, bytes, wire)
			}
			if !strings.Contains(again.stderr, "resumed 1 file(s)") {
				t.Errorf("%s: the summary does not say what was resumed: %s", what, again.stderr)
			}
		}
		if ps := append(partials(e.srv.Home), partials(local)...); len(ps) > 0 || recordBlocks(recvDir) >= 0 {
			t.Errorf("%s: partial files or records left: %v", what, ps)
		}
		os.Remove(final)
	}
}

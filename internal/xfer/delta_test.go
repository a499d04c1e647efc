package xfer

// Changed files, in process: a destination file of another size or time is compared block by
// block, and only the blocks that differ travel (plus the tail of a file that grew); the file is
// then the source's. --whole-file sends everything; what stands at the name that is not a plain
// file of one link is not compared; a peer that lies in the comparison gets a copy that fails
// its verification, and the old file is left as it was.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/lane/lanetest"
)

const bs = fcopy.BlockSize

// randomBytes returns n random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// writeAged writes b to p with a modification time an hour ago, so that a source written now
// differs from it by its time.
func writeAged(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
}

// deltaCopy copies the file name from the sending side's dir to the receiving side's, by a push
// or a pull, and returns the result.
func deltaCopy(t *testing.T, e *env, o Options, push bool, src, dst, name string) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if push {
		return Push(ctx, o, []string{filepath.Join(src, name)}, "host", dst)
	}
	return Pull(ctx, o, "host", []string{filepath.Join(src, name)}, dst)
}

// fileIs checks that the file at p holds want, and that nothing temporary is left beside it.
func fileIs(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes (%v), want the %d bytes expected", p, len(got), err, len(want))
	}
	if parts, recs := partials(filepath.Dir(p)); parts != 0 || recs != 0 {
		t.Errorf("%d partial files and %d records left beside %s", parts, recs, p)
	}
}

func directions() []struct {
	name string
	push bool
} {
	return []struct {
		name string
		push bool
	}{{"push", true}, {"pull", false}}
}

// TestInProcessDeltaChanged: a file of 100 blocks with one block changed (1 %), a log that grew by
// some 10 % from a partial last block, and a file cut short in the middle of a block, each at
// the destination in its old version with an older time: only the changed block, only the tail
// from the old file's partial block on, and only the short last block (never compared: its
// digest would be that of a prefix the sender chose) travel; the destination is then the source's,
// byte for byte, and the result counts the kept and sent blocks.
func TestInProcessDeltaChanged(t *testing.T) {
	grownOld := 10*bs + 300<<10
	cases := []struct {
		name       string
		old        []byte
		new        func(old []byte) []byte
		kept, sent int64
		bytes      int64
	}{
		{"one block of 100 changed", randomBytes(100 * bs), func(old []byte) []byte {
			b := bytes.Clone(old)
			copy(b[37*bs+4096:], randomBytes(10))
			return b
		}, 99, 1, bs},
		{"grew by 10 %", randomBytes(grownOld), func(old []byte) []byte {
			return append(bytes.Clone(old), randomBytes(grownOld/10)...)
		}, 10, 2, int64(grownOld + grownOld/10 - 10*bs)},
		{"shrank", randomBytes(12*bs + 77), func(old []byte) []byte {
			return bytes.Clone(old[:8*bs+bs/2])
		}, 8, 1, bs / 2},
	}
	for _, d := range directions() {
		for _, c := range cases {
			t.Run(d.name+", "+c.name, func(t *testing.T) {
				src, dst := t.TempDir(), t.TempDir()
				e := newEnv(t, lanetest.Link{Loss: 0.01, Delay: time.Millisecond}, 5)
				newer := c.new(c.old)
				if err := os.WriteFile(filepath.Join(src, "f"), newer, 0o644); err != nil {
					t.Fatal(err)
				}
				writeAged(t, filepath.Join(dst, "f"), c.old)
				res, err := deltaCopy(t, e, e.options(), d.push, src, dst, "f")
				if err != nil {
					t.Fatal(err)
				}
				if res.DeltaFiles != 1 || res.KeptBlocks != c.kept || res.SentBlocks != c.sent || res.Bytes != c.bytes ||
					res.KeptBytes != int64(len(newer))-c.bytes {
					t.Errorf("compared %d files: kept %d blocks (%d bytes), sent %d blocks, %d bytes; want 1 file, %d kept, %d sent, %d bytes",
						res.DeltaFiles, res.KeptBlocks, res.KeptBytes, res.SentBlocks, res.Bytes, c.kept, c.sent, c.bytes)
				}
				// What crossed the wire (the sender's count): the blocks sent, with their framing,
				// parity and the datagrams lost at 1 %, and nothing of the blocks kept.
				if res.WireBytes < uint64(c.bytes) || res.WireBytes > uint64(c.bytes)*5/4+64<<10 {
					t.Errorf("%d bytes on the wire for %d bytes of blocks sent", res.WireBytes, c.bytes)
				}
				if len(res.Files) != 1 || res.Files[0].Size != int64(len(newer)) {
					t.Errorf("results %+v", res.Files)
				}
				fileIs(t, filepath.Join(dst, "f"), newer)
			})
		}
	}
}

// TestInProcessWholeFile: with --whole-file a changed file is sent whole, every block.
func TestInProcessWholeFile(t *testing.T) {
	for _, d := range directions() {
		t.Run(d.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			e := newEnv(t, lanetest.Link{}, 6)
			old := randomBytes(8*bs + 5)
			newer := bytes.Clone(old)
			newer[3*bs] ^= 1
			os.WriteFile(filepath.Join(src, "f"), newer, 0o644)
			writeAged(t, filepath.Join(dst, "f"), old)
			o := e.options()
			o.WholeFile = true
			res, err := deltaCopy(t, e, o, d.push, src, dst, "f")
			if err != nil {
				t.Fatal(err)
			}
			if res.DeltaFiles != 0 || res.KeptBlocks != 0 || res.Bytes != int64(len(newer)) {
				t.Errorf("--whole-file: compared %d files, kept %d blocks, sent %d bytes of %d", res.DeltaFiles, res.KeptBlocks, res.Bytes, len(newer))
			}
			fileIs(t, filepath.Join(dst, "f"), newer)
		})
	}
}

// TestInProcessDeltaNotPlainFile: what stands at the destination's name and is not a regular file
// of one link is not compared: a symbolic link to a file that holds the source's blocks is
// replaced by the file sent whole (the file it points to untouched), a file with a second name is
// sent whole and replaced at this name only (the other keeps its bytes), and a directory is
// refused as before.
func TestInProcessDeltaNotPlainFile(t *testing.T) {
	for _, d := range directions() {
		t.Run(d.name, func(t *testing.T) {
			src, dst, aside := t.TempDir(), t.TempDir(), t.TempDir()
			e := newEnv(t, lanetest.Link{}, 7)
			old := randomBytes(4 * bs)
			newer := append(bytes.Clone(old), 1, 2, 3)
			for _, n := range []string{"link", "hard", "dir"} {
				os.WriteFile(filepath.Join(src, n), newer, 0o644)
			}
			target := filepath.Join(aside, "target")
			writeAged(t, target, old)
			os.Symlink(target, filepath.Join(dst, "link"))
			writeAged(t, filepath.Join(aside, "other"), old)
			os.Link(filepath.Join(aside, "other"), filepath.Join(dst, "hard"))
			os.Mkdir(filepath.Join(dst, "dir"), 0o755)

			for _, n := range []string{"link", "hard"} {
				res, err := deltaCopy(t, e, e.options(), d.push, src, dst, n)
				if err != nil {
					t.Fatalf("%s: %v", n, err)
				}
				if res.DeltaFiles != 0 || res.Bytes != int64(len(newer)) {
					t.Errorf("%s: compared %d files, sent %d bytes of %d", n, res.DeltaFiles, res.Bytes, len(newer))
				}
				if st, err := os.Lstat(filepath.Join(dst, n)); err != nil || !st.Mode().IsRegular() {
					t.Errorf("%s: the destination is not a regular file: %v", n, err)
				}
				fileIs(t, filepath.Join(dst, n), newer)
			}
			for _, p := range []string{target, filepath.Join(aside, "other")} {
				if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, old) {
					t.Errorf("%s changed (%v)", p, err)
				}
			}
			_, err := deltaCopy(t, e, e.options(), d.push, src, dst, "dir")
			if err == nil || CodeOf(err) != CodeDest || !strings.Contains(err.Error(), "directory") {
				t.Errorf("onto a directory: %v (code %d)", err, CodeOf(err))
			}
		})
	}
}

// blockDigests is the transfer's digest of each block of b (as a file of its own).
func blockDigests(t *testing.T, b []byte) []byte {
	t.Helper()
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: int64(len(b))}})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for k := uint32(0); int64(k)*bs < int64(len(b)); k++ {
		s := plan.Sum(k, b[int64(k)*bs:min(int64(k+1)*bs, int64(len(b)))])
		d := s.Digest()
		out = append(out, d[:]...)
	}
	return out
}

// TestInProcessDeltaLies: a receiver whose digests claim it has the source's blocks (a push's
// server, its "hashes" rewritten to the source's) makes the sender send nothing, and its own
// whole-file check fails: the push fails as unverified, and the old file is as it was, nothing
// temporary left. A sender that answers "keep every block" (a pull's server, its "changed"
// rewritten) fails the pull the same way.
func TestInProcessDeltaLies(t *testing.T) {
	for _, d := range directions() {
		t.Run(d.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			e := newEnv(t, lanetest.Link{}, 8)
			old := randomBytes(6*bs + 1000)
			newer := bytes.Clone(old)
			newer[2*bs+9] ^= 0xff
			newer[5*bs] ^= 0xff
			os.WriteFile(filepath.Join(src, "f"), newer, 0o644)
			writeAged(t, filepath.Join(dst, "f"), old)
			lied := false
			e.filterServer(func(line []byte) []byte {
				var m Msg
				if err := json.Unmarshal(line, &m); err != nil {
					return line
				}
				switch {
				case d.push && m.T == KindHashes:
					m.Digests = blockDigests(t, newer)[:len(m.Digests)]
				case !d.push && m.T == KindChanged:
					m.Send = make([]byte, len(m.Send))
				default:
					return line
				}
				lied = true
				return msgLine(t, m)
			})
			res, err := deltaCopy(t, e, e.options(), d.push, src, dst, "f")
			if err == nil || CodeOf(err) != CodeVerify || !strings.Contains(err.Error(), "whole-file digest") {
				t.Errorf("a copy with lying digests: %v (code %d), %+v", err, CodeOf(err), res)
			}
			if !lied {
				t.Error("no comparison took place")
			}
			e.wait()
			fileIs(t, filepath.Join(dst, "f"), old)
		})
	}
}

// TestInProcessDeltaHostileAnswers: a peer's word in the comparison is checked: an answer for
// another file, of another length, or digests of another length end the copy as a protocol
// violation, before any data moves; the destination is untouched.
func TestInProcessDeltaHostileAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		push bool
		kind Kind
		lie  func(m *Msg)
		want string
	}{
		{"digests of another length", true, KindHashes, func(m *Msg) { m.Digests = m.Digests[:len(m.Digests)-32] }, "bytes of block digests"},
		{"digests of another file", true, KindHashes, func(m *Msg) { m.File++ }, "bytes of block digests"},
		{"an offer past the file", true, KindHave, func(m *Msg) { m.Delta[0].Blocks += 5 }, "blocks offered"},
		{"an offer of a file it has", true, KindHave, func(m *Msg) { m.Have = []int{m.Delta[0].File} }, "already there"},
		{"an answer of another length", false, KindChanged, func(m *Msg) { m.Send = append(m.Send, 0) }, "bytes of blocks to send"},
		{"an answer beyond the offer", false, KindChanged, func(m *Msg) { m.Send[len(m.Send)-1] |= 0x80 }, "beyond the"},
		{"an answer for another file", false, KindChanged, func(m *Msg) { m.File++ }, "expected those of file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			e := newEnv(t, lanetest.Link{}, 9)
			old := randomBytes(3*bs + 5)
			newer := append(bytes.Clone(old), 7)
			os.WriteFile(filepath.Join(src, "f"), newer, 0o644)
			writeAged(t, filepath.Join(dst, "f"), old)
			e.filterServer(func(line []byte) []byte {
				var m Msg
				if json.Unmarshal(line, &m) != nil || m.T != c.kind {
					return line
				}
				c.lie(&m)
				return msgLine(t, m)
			})
			_, err := deltaCopy(t, e, e.options(), c.push, src, dst, "f")
			if err == nil || CodeOf(err) != CodeProtocol || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v (code %d), want a protocol violation saying %q", err, CodeOf(err), c.want)
			}
			e.wait()
			fileIs(t, filepath.Join(dst, "f"), old)
		})
	}
}

// TestInProcessDeltaResume: a compared file's copy stopped half way leaves its partial file,
// kept and received blocks alike counted by its record; the next run resumes it and compares the
// rest: it keeps the blocks the record counts, then the unchanged blocks past them, sends only
// the changed ones, and the file is the source's.
func TestInProcessDeltaResume(t *testing.T) {
	src, remote := t.TempDir(), t.TempDir()
	old := randomBytes(resumeSize)
	newer := bytes.Clone(old)
	for k := 0; k < resumeSize/bs; k++ {
		if k%4 != 0 {
			newer[k*bs] ^= 1 // three blocks of four changed: the copy is stopped after two of them
		}
	}
	os.WriteFile(filepath.Join(src, "big"), newer, 0o644)
	writeAged(t, filepath.Join(remote, "big"), old)
	interruptedRun(t, true, true, src, remote, "")
	e := resumeEnv(t, lanetest.Link{}, 10)
	res := rerun(t, true, e.options(), src, remote, "")
	prefix := int(res.ResumedBytes / bs)
	var kept, sent int64
	for k := prefix; k < resumeSize/bs; k++ {
		if k%4 == 0 {
			kept++
		} else {
			sent++
		}
	}
	if res.ResumedFiles != 1 || prefix <= 0 || res.DeltaFiles != 1 || res.KeptBlocks != kept || res.SentBlocks != sent || res.Bytes != sent*bs {
		t.Errorf("resumed %d files (%d blocks), compared %d: kept %d blocks, sent %d (%d bytes); want %d kept, %d sent",
			res.ResumedFiles, prefix, res.DeltaFiles, res.KeptBlocks, res.SentBlocks, res.Bytes, kept, sent)
	}
	fileIs(t, filepath.Join(remote, "big"), newer)
}

// TestInProcessDeltaDestChanged: a destination file changed behind its size and time after it was
// compared (a pull's client, its old file rewritten as the sender's answer comes) fails the copy
// when its kept block is copied: exit 4, naming it; nothing temporary is left.
func TestInProcessDeltaDestChanged(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	e := newEnv(t, lanetest.Link{}, 11)
	old := randomBytes(4*bs + 3)
	newer := append(bytes.Clone(old), 9)
	os.WriteFile(filepath.Join(src, "f"), newer, 0o644)
	p := filepath.Join(dst, "f")
	writeAged(t, p, old)
	st, _ := os.Stat(p)
	spoilt := bytes.Clone(old)
	spoilt[bs+1] ^= 1
	e.filterServer(func(line []byte) []byte {
		var m Msg
		if json.Unmarshal(line, &m) == nil && m.T == KindChanged {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				f.WriteAt(spoilt[bs+1:bs+2], bs+1)
				f.Close()
				os.Chtimes(p, st.ModTime(), st.ModTime())
			}
		}
		return line
	})
	_, err := deltaCopy(t, e, e.options(), false, src, dst, "f")
	if err == nil || CodeOf(err) != CodeDest || !strings.Contains(err.Error(), "changed during the copy (its block 1") {
		t.Errorf("got %v (code %d), want the destination named as changed", err, CodeOf(err))
	}
	e.wait()
	fileIs(t, p, spoilt)
}

// TestInProcessDeltaNoChosenPrefix: the sender's size decides the length of a file's last block,
// so a receiver that hashed its old file's bytes at that length would hand a hostile sender the
// digest of any prefix it names (a file listed with 1 byte: the digest of the old file's first
// byte, 256 guesses; one more byte each run), not the digests of the old file's own blocks. A
// short last block is offered only where the old file has the source's size, so that it is the
// old file's own last block: a source shorter than the old file offers its whole blocks only
// (none for one shorter than a block), and its last block travels; the copy is the source's.
func TestInProcessDeltaNoChosenPrefix(t *testing.T) {
	for _, d := range directions() {
		for _, c := range []struct {
			name          string
			oldLen, size  int
			offered, kept int64
		}{
			{"a byte", 4096, 1, 0, 0},
			{"a block and a byte", 3 * bs, bs + 1, 1, 1},
			{"a block", 3 * bs, bs, 1, 1},
			{"the same size", 3*bs + 7, 3*bs + 7, 4, 4},
		} {
			t.Run(d.name+", "+c.name, func(t *testing.T) {
				src, dst := t.TempDir(), t.TempDir()
				e := newEnv(t, lanetest.Link{}, 12)
				old := randomBytes(c.oldLen)
				newer := bytes.Clone(old[:c.size])
				os.WriteFile(filepath.Join(src, "f"), newer, 0o644)
				writeAged(t, filepath.Join(dst, "f"), old)
				var offered int64 = -1
				var hashed []byte
				watch := func(line []byte) []byte {
					var m Msg
					if json.Unmarshal(line, &m) == nil {
						switch m.T {
						case KindHave, KindAccept:
							offered = 0
							for _, o := range m.Delta {
								offered += int64(o.Blocks)
							}
						case KindHashes:
							hashed = append(hashed, m.Digests...)
						}
					}
					return line
				}
				o := e.options()
				if d.push {
					e.filterServer(watch)
				} else {
					o.Start = e.filterClient(watch)
				}
				res, err := deltaCopy(t, e, o, d.push, src, dst, "f")
				if err != nil {
					t.Fatal(err)
				}
				if offered != c.offered || int64(len(hashed)) != 32*c.offered || res.KeptBlocks != c.kept {
					t.Errorf("old file of %d bytes, source of %d: offered %d blocks, sent %d bytes of digests, kept %d; want %d offered, %d kept",
						c.oldLen, c.size, offered, len(hashed), res.KeptBlocks, c.offered, c.kept)
				}
				// No digest sent is that of a prefix the sender chose: each is one of the old
				// file's own whole blocks (or its own last block), as the transfer digests it.
				prefixes := blockDigests(t, old[:c.size])
				for k := 0; k+32 <= len(hashed) && k+32 <= len(prefixes); k += 32 {
					short := min(c.size, (k/32+1)*bs) < min(c.oldLen, (k/32+1)*bs)
					if short && bytes.Equal(hashed[k:k+32], prefixes[k:k+32]) {
						t.Errorf("block %d's digest is that of the first %d bytes of the old file's block", k/32, c.size-k/32*bs)
					}
				}
				fileIs(t, filepath.Join(dst, "f"), newer)
			})
		}
	}
}

// TestInProcessDeltaNoWiderMode: a hostile sender that answers "keep every block" and names, as
// the file's digest, that of the old file's own blocks (which the receiver's digests give it)
// makes the receiver build the new file from its old bytes, under the mode the sender names
// with -p: a private file (0600) would come back readable by all (0644), its bytes never sent.
// A file whose new mode would grant what the old one does not is not compared: it is sent
// whole, and the lie then fails the copy; the old bytes never stand under the wider mode.
func TestInProcessDeltaNoWiderMode(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	e := newEnv(t, lanetest.Link{}, 13)
	old := randomBytes(3*bs + 10)
	p := filepath.Join(dst, "f")
	writeAged(t, p, old)
	os.Chmod(p, 0o600)
	os.WriteFile(filepath.Join(src, "f"), randomBytes(len(old)), 0o644)
	oldSum, err := fcopy.HashFile(bytes.NewReader(old), int64(len(old)))
	if err != nil {
		t.Fatal(err)
	}
	compared := false
	e.filterServer(func(line []byte) []byte {
		var m Msg
		if json.Unmarshal(line, &m) != nil {
			return line
		}
		switch m.T {
		case KindChanged:
			compared = true
			m.Send = make([]byte, len(m.Send))
		case KindDigest:
			m.Sum = hex.EncodeToString(oldSum[:])
		default:
			return line
		}
		return msgLine(t, m)
	})
	o := e.options()
	o.Preserve = true
	_, err = deltaCopy(t, e, o, false, src, dst, "f")
	e.wait()
	st, serr := os.Stat(p)
	got, _ := os.ReadFile(p)
	if serr == nil && bytes.Equal(got, old) && st.Mode().Perm()&^0o600 != 0 {
		t.Errorf("the old file's bytes stand at %s with mode %v (was 0600); copy: %v", p, st.Mode().Perm(), err)
	}
	if compared {
		t.Error("a file whose new mode grants more than the old one's was compared")
	}
	if err == nil || CodeOf(err) != CodeVerify {
		t.Errorf("the lie: %v (code %d), want a failed verification", err, CodeOf(err))
	}
}

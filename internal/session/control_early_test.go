package session

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/wire"
)

// copiesHeard collects, for wait, the control copies the bare client socket receives: each
// message number with its bytes, once all its parts came.
func (e *earlyTrainEnv) copiesHeard(t *testing.T, wait time.Duration) map[uint32][]byte {
	t.Helper()
	parts := map[uint32][][]byte{}
	for end := time.Now().Add(wait); time.Now().Before(end); {
		e.client.Recv(time.Now().Add(20*time.Millisecond), func(b []byte, _ netip.AddrPort) {
			h, pt, err := e.cc.Open(b)
			if err != nil || h.Type != wire.TypeControl {
				return
			}
			if len(pt) < controlHead || pt[4] >= pt[5] {
				t.Errorf("a malformed copy: %x", pt)
				return
			}
			seq, k, n := binary.BigEndian.Uint32(pt), int(pt[4]), int(pt[5])
			if parts[seq] == nil {
				parts[seq] = make([][]byte, n)
			}
			if len(parts[seq]) != n {
				t.Errorf("message %d in %d and %d parts", seq, len(parts[seq]), n)
				return
			}
			if prev := parts[seq][k]; prev != nil && !bytes.Equal(prev, pt[controlHead:]) {
				t.Errorf("two copies of message %d differ", seq)
			}
			parts[seq][k] = append([]byte(nil), pt[controlHead:]...)
		})
	}
	got := map[uint32][]byte{}
	for seq, ps := range parts {
		if !slices.ContainsFunc(ps, func(p []byte) bool { return p == nil }) {
			got[seq] = bytes.Join(ps, nil)
		}
	}
	return got
}

// TestControlEarly: before its lanes are proven, a server copies its control messages to the
// address an authentic hello came from only where that is ssh's client (SendControlEarly, the
// early train's rule): messages sent before the first hello are kept and sent when it comes, those
// sent after it go at once; from another address, with no ssh client known, or on a forged hello,
// nothing goes out. What is kept, and what goes to an unproven address, is bounded (maxEarlyCopies,
// maxEarlyCopyBytes); a lane's second hello does not bring the kept copies again, and once the
// engine starts (EndControlEarly) nothing more goes.
func TestControlEarly(t *testing.T) {
	ca := netip.MustParseAddr("198.18.0.1")
	msg := func(seq int) []byte { return []byte(`{"t":"have","n":` + string(rune('0'+seq%10)) + "}\n") }
	for _, c := range []struct {
		name      string
		sshClient netip.Addr
		forged    bool
		before    int // messages sent before the hello
		after     int // ... and after it
		want      int // copies the client hears
	}{
		{"ssh client, kept for the hello", ca, false, 2, 0, 2},
		{"ssh client, after the hello", ca, false, 0, 2, 2},
		{"ssh client, both", ca, false, 1, 1, 2},
		{"ssh client as IPv4-mapped IPv6", netip.AddrFrom16(ca.As16()), false, 1, 1, 2},
		{"at most maxEarlyCopies kept", ca, false, maxEarlyCopies + 3, 0, maxEarlyCopies},
		{"another address", netip.MustParseAddr("198.18.0.9"), false, 1, 1, 0},
		{"no ssh client known", netip.Addr{}, false, 1, 1, 0},
		{"forged hello from the ssh client", ca, true, 1, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEarlyTrainEnv(t, ca)
			e.server.SetSSHClient(c.sshClient)
			seq := 0
			for range c.before {
				e.server.SendControlEarly(uint32(seq), msg(seq))
				seq++
			}
			e.hello(c.forged)
			time.Sleep(50 * time.Millisecond) // heard, unproven
			for range c.after {
				e.server.SendControlEarly(uint32(seq), msg(seq))
				seq++
			}
			got := e.copiesHeard(t, 300*time.Millisecond) // 60 round trips of this network
			if len(got) != c.want {
				t.Errorf("%d messages copied, want %d", len(got), c.want)
			}
			for s, b := range got {
				if int(s) >= seq || !bytes.Equal(b, msg(int(s))) {
					t.Errorf("copy of message %d: %q", s, b)
				}
			}
			if e.server.proven[0].Load() {
				t.Errorf("a cookie-less hello proved the lane")
			}
			if c.forged {
				return // the next authentic hello is the lane's first
			}
			e.hello(false)
			if again := e.copiesHeard(t, 300*time.Millisecond); len(again) != 0 {
				t.Errorf("a second hello brought %d copies again", len(again))
			}
		})
	}
	t.Run("unproven lane's budget", func(t *testing.T) {
		e := newEarlyTrainEnv(t, ca)
		e.server.SetSSHClient(ca)
		e.hello(false)
		time.Sleep(50 * time.Millisecond) // heard, unproven
		big := bytes.Repeat([]byte("y"), 10*ControlPart)
		for seq := range 3 * maxEarlyCopies {
			e.server.SendControlEarly(uint32(seq), big)
		}
		if got, want := len(e.copiesHeard(t, 300*time.Millisecond)), maxEarlyCopyBytes/len(big); got != want {
			t.Errorf("%d messages of %d bytes went to an unproven address, want %d", got, len(big), want)
		}
	})
	t.Run("ended", func(t *testing.T) {
		e := newEarlyTrainEnv(t, ca)
		e.server.SetSSHClient(ca)
		e.server.SendControlEarly(0, msg(0))
		e.server.EndControlEarly()
		e.server.SendControlEarly(1, msg(1))
		e.hello(false)
		if got := e.copiesHeard(t, 300*time.Millisecond); len(got) != 0 {
			t.Errorf("%d copies after the data phase began", len(got))
		}
	})
	t.Run("bytes bounded", func(t *testing.T) {
		e := newEarlyTrainEnv(t, ca)
		e.server.SetSSHClient(ca)
		big := bytes.Repeat([]byte("x"), 10*ControlPart) // ten parts each
		for seq := range maxEarlyCopies {
			e.server.SendControlEarly(uint32(seq), big)
		}
		e.hello(false)
		got := e.copiesHeard(t, 300*time.Millisecond)
		if want := maxEarlyCopyBytes / len(big); len(got) != want {
			t.Errorf("%d messages of %d bytes copied after the hello, want %d", len(got), len(big), want)
		}
		for s, b := range got {
			if !bytes.Equal(b, big) {
				t.Errorf("copy of message %d: %d bytes", s, len(b))
			}
		}
	})
}

// TestFeedbackEarly: a server's receiver may acknowledge data before the client has proven its
// lanes (data before the proof), but only once authentic data has come, only to a lane's first
// authentic hello's source, only where that is ssh's client, and within maxEarlyFeedback bytes;
// everything else it sends (data: a pull's sender) still waits for the proof.
func TestFeedbackEarly(t *testing.T) {
	ca := netip.MustParseAddr("198.18.0.1")
	pt := bytes.Repeat([]byte{7}, 1000)
	feedbackHeard := func(e *earlyTrainEnv, wait time.Duration) (n int) {
		for end := time.Now().Add(wait); time.Now().Before(end); {
			e.client.Recv(time.Now().Add(20*time.Millisecond), func(b []byte, _ netip.AddrPort) {
				if h, _, err := e.cc.Open(b); err == nil && h.Type == wire.TypeFeedback {
					n++
				}
			})
		}
		return n
	}
	// data sends an authentic data datagram on lane 0 (held: the server has no engine here).
	data := func(e *earlyTrainEnv) {
		e.seq++
		pkt := e.cc.Seal(make([]byte, 0, wire.HeaderLen+len(pt)+wire.TagLen), wire.Header{Type: wire.TypeData, Lane: 0, Seq: e.seq}, pt)
		e.client.Send(e.dst, [][]byte{pkt})
	}
	for _, c := range []struct {
		name        string
		sshClient   netip.Addr
		hello, data bool
		want        int
	}{
		{"ssh client's hello, then data", ca, true, true, 3},
		{"ssh client's hello, no data yet", ca, true, false, 0},
		{"no hello yet", ca, false, true, 0},
		{"hello from another address", netip.MustParseAddr("198.18.0.9"), true, true, 0},
		{"no ssh client known", netip.Addr{}, true, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEarlyTrainEnv(t, ca)
			e.server.SetSSHClient(c.sshClient)
			if c.hello {
				e.hello(false)
			}
			if c.data {
				data(e)
			}
			time.Sleep(50 * time.Millisecond) // heard, unproven
			sent := 0
			for range 3 {
				if e.server.SendOne(0, wire.TypeFeedback, pt) == nil {
					sent++
				}
			}
			if sent != c.want {
				t.Errorf("%d feedback datagrams sent, want %d", sent, c.want)
			}
			if got := feedbackHeard(e, 200*time.Millisecond); got != c.want {
				t.Errorf("the client heard %d feedback datagrams, want %d", got, c.want)
			}
			if e.server.SendOne(0, wire.TypeData, pt) == nil {
				t.Errorf("a data datagram went to an unproven lane")
			}
			if e.server.proven[0].Load() {
				t.Errorf("a cookie-less hello proved the lane")
			}
		})
	}
	t.Run("budget", func(t *testing.T) {
		e := newEarlyTrainEnv(t, ca)
		e.server.SetSSHClient(ca)
		e.hello(false)
		data(e)
		time.Sleep(50 * time.Millisecond)
		sent := 0
		for range 2 * maxEarlyFeedback / len(pt) {
			if e.server.SendOne(0, wire.TypeFeedback, pt) == nil {
				sent++
			}
		}
		pkt := wire.HeaderLen + len(pt) + wire.TagLen
		if want := maxEarlyFeedback / pkt; sent != want {
			t.Errorf("%d feedback datagrams of %d bytes went to an unproven address, want %d", sent, pkt, want)
		}
	})
}

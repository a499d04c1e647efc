package xfer

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/farwing/farwing/internal/hostinfo"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestBenchHostileFlood covers a defect, fixed: the control channel bounds one message (64 MiB) but
// not how many wait unread, up to 1024 of them (Control.in). While the bench client is not reading
// (a TCP test of up to 300 s, or between rows) a hostile server can make it hold up to 64 GiB. Here
// 40 messages of 4 MiB wait unread and the client holds them all. control.go (Control.read/Start):
// count the bytes of the messages queued and end the channel (ErrProtocol) above a total bound
// such as 2×maxMessage, or queue far fewer messages. (The client is a session of the bench's role,
// as internal/benchpeer's Open starts it, against a double that floods on the cue.)
func TestBenchHostileFlood(t *testing.T) {
	const n, each = 40, 4 << 20
	flood, sent := make(chan struct{}), make(chan struct{})
	e := newEnv(t, lanetest.Link{}, 1)
	e.serve = hostileServer(func(ctl *Control, _ Msg) error {
		defer close(sent)
		ctl.Send(Msg{T: KindFacts, Facts: &hostinfo.Facts{Hostname: "hostile", OS: "linux", Cores: 1}, Dest: "/nowhere/farwing-bench"})
		if _, err := ctl.Expect(context.Background(), KindFacts, 10*time.Second); err != nil { // the cue: flood
			return err
		}
		<-flood
		big := strings.Repeat("x", each)
		for range n {
			if err := ctl.Send(Msg{T: "noise", Err: big}); err != nil {
				break
			}
		}
		return nil
	}, nil)
	s, err := StartSession(context.Background(), e.options(), "bench-host", RoleBench)
	if err != nil {
		t.Fatal(err)
	}
	c := s.c
	defer func() {
		c.ctl.Send(Msg{T: KindBye})
		c.close(time.Second)
	}()
	if _, err := c.ctl.Expect(c.ctx, KindFacts, PeerIdle); err != nil {
		t.Fatal(err)
	}
	c.ctl.Send(Msg{T: KindFacts})
	close(flood)
	<-sent
	// Wait for this end's reader to take in what was sent (or to end the channel).
	for end := time.Now().Add(20 * time.Second); len(c.ctl.in) < n && c.ctx.Err() == nil && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	queued := 0
	for drained := false; !drained; {
		select {
		case _, ok := <-c.ctl.in:
			if !ok {
				drained = true
			} else {
				queued++
			}
		default:
			drained = true
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(before.HeapAlloc) - int64(after.HeapAlloc)
	if held > 2*maxMessage {
		t.Fatalf("DEFECT: %d unread messages held %d MiB (bound: %d queued × %d MiB = %d GiB)", queued, held>>20, cap(c.ctl.in), maxMessage>>20, cap(c.ctl.in)*maxMessage>>30)
	}
}

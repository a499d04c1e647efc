package session

import (
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/wire"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestHeldDataBeforeFeedback: data that comes before the engine is held, and a ping after it on
// the same lane is marked received at once (its number above theirs). Until the lane hands the
// held data over, the receiver sends no feedback, which would report them missing below the
// ping's number (Path.Holding); the lane hands them over, in order, soon after the engine's
// attach although nothing more arrives on it (it read with a 200 ms deadline before).
func TestHeldDataBeforeFeedback(t *testing.T) {
	client, server, _ := memPair(t, lanetest.Link{Delay: time.Millisecond}, 51, false)
	var want []uint64
	for range 5 {
		seq := client.NextSeq(0)
		want = append(want, seq)
		var buf [64]byte
		if err := client.Send(0, [][]byte{client.Seal(buf[:0], wire.TypeData, 0, seq, []byte("not yet an engine's"))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.SendOne(0, wire.TypePing, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		rx := &server.rx[0]
		rx.mu.Lock()
		largest, ok := rx.win.Largest()
		rx.mu.Unlock()
		if server.Holding() && ok && largest > want[len(want)-1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("holding %v, largest marked %d (%v); want the data held and the ping marked", server.Holding(), largest, ok)
		}
		time.Sleep(time.Millisecond)
	}
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReceiver(server, plan, nil, 8)
	r.sendFeedback(time.Now())
	if n := r.feedback.Load(); n != 0 {
		t.Fatalf("%d feedback datagrams sent while the lane holds data below a marked number", n)
	}
	rec := &countHandler{seen: map[[2]uint64]uint32{}}
	attached := time.Now()
	server.SetHandler(rec)
	for server.Holding() {
		if time.Since(attached) > 150*time.Millisecond {
			t.Fatalf("the lane still holds its early data %s after the engine's attach", time.Since(attached))
		}
		time.Sleep(time.Millisecond)
	}
	if got := rec.seqs(); len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("handed over %v, want %v", got, want)
	}
	r.sendFeedback(time.Now())
	if n := r.feedback.Load(); n == 0 {
		t.Fatal("no feedback once the held data were handed over")
	}
}

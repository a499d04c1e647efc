package bootstrap

import (
	"sync"
	"testing"
	"time"
)

// TestAnotherConnection: an extra connection is judged to cost what the main session's start did
// where that session made its own connection, and a whole handshake (muxedHandshake times the
// shared session's start) where it rode the shared one: a shared session that answered in 0.35 s
// does not make extra connections look cheap.
func TestAnotherConnection(t *testing.T) {
	for _, c := range []struct {
		setup time.Duration
		muxed bool
		want  time.Duration
	}{
		{1950 * time.Millisecond, false, 1950 * time.Millisecond},
		{350 * time.Millisecond, true, 2100 * time.Millisecond},
		{0, true, 0},
	} {
		if got := anotherConnection(c.setup, c.muxed); got != c.want {
			t.Errorf("anotherConnection(%s, muxed %v) = %s, want %s", c.setup, c.muxed, got, c.want)
		}
	}
	// The main session rode the shared connection (answered in 0.35 s) and delivered 1 MB of
	// 2.9 MB in its first 2 s: 3.8 s to go is within slow plus a handshake, so no extra connection.
	u := &uploader{s: &session{}, t: defaultUpload, data: make([]byte, 2_900_000), acked: 1_000_000, t0: time.Now().Add(-2 * time.Second),
		setup: anotherConnection(350*time.Millisecond, true)}
	u.segs = []*seg{{end: len(u.data), own: true, next: 1_200_000}}
	u.maybeSplit(t.Context(), "dir", "h16", "id", make(chan helperDone, 8), new(sync.WaitGroup))
	if u.extras != 0 || !u.judged {
		t.Errorf("over a shared connection: %d extra connections, judged %v", u.extras, u.judged)
	}
}

package xfer

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/farwing/farwing/internal/treetest"
	"github.com/farwing/farwing/lane/lanetest"
)

// TestDigestNeverSent: a pushing client whose data all arrives and that keeps the lanes alive
// (its sender pings while it waits for the verdict) but never sends a file's whole-file digest.
// The server's receiver has the file's data and waits for the digest; it gives up within
// digestWait of the data, as silent (exit 6), and the push ends with its error, not never. In
// fake time (synctest): the bound is the protocol's 20 s, the test takes what the copy takes.
func TestDigestNeverSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, lanetest.Link{}, 1)
		src, remote := t.TempDir(), t.TempDir()
		tree(t, src, map[string]int{"f": 3<<20 + 5})
		dropped := 0
		o := e.options()
		o.Start = e.filterClient(func(line []byte) []byte {
			var m Msg
			if json.Unmarshal(line, &m) == nil && m.T == KindDigest {
				dropped++
				return nil
			}
			return line
		})
		ctx, cancel := context.WithCancel(context.Background()) // no deadline: the bound is the copy's own
		defer cancel()
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := Push(ctx, o, []string{filepath.Join(src, "f")}, "host", remote)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Minute):
			cancel()
			<-done
			t.Fatalf("a push whose digest never comes still runs after 10 minutes (%d digests held back)", dropped)
		}
		took := time.Since(start)
		var re *RemoteError
		if dropped != 1 || !errors.As(err, &re) || re.Code != CodeUDP || !strings.Contains(err.Error(), "digest of file 0 did not come within 20s") {
			t.Fatalf("a push whose digest never comes: %v (exit %d, %d digests held back)", err, CodeOf(err), dropped)
		}
		if took < digestWait || took > digestWait+PeerIdle {
			t.Fatalf("the receiver gave up after %s, want %s after the data", took, digestWait)
		}
		t.Logf("given up after %s (fake time): %v", took, err)
		treetest.Empty(t, remote)
	})
}

package xfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A push's short file list travels in the preface, after the hello, as the list messages the
// peer reads (so it answers "have" as it starts); a longer one does not, and comes once the peer
// is ready.
func TestPrefaceList(t *testing.T) {
	for _, n := range []int{1, 40, prefaceEntries + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			var srcs, names []string
			for i := range n {
				name := fmt.Sprintf("file-%03d", i)
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
					t.Fatal(err)
				}
				srcs, names = append(srcs, p), append(names, name)
			}
			var preface []byte
			stop := errors.New("stop here")
			o := Options{Start: func(ctx context.Context, host string, serveArgs []string, pre []byte) (Remote, error) {
				preface = bytes.Clone(pre)
				return nil, stop
			}}
			if _, err := Push(context.Background(), o, srcs, "h", "dst/"); !errors.Is(err, stop) {
				t.Fatalf("push: %v", err)
			}
			hello, rest, ok := bytes.Cut(preface, []byte("\n"))
			var h Msg
			if !ok || json.Unmarshal(hello, &h) != nil || h.T != KindHello || h.Entries != n || len(h.Files) != 0 {
				t.Fatalf("preface's first line %q", hello)
			}
			if n > prefaceEntries {
				if len(rest) != 0 {
					t.Fatalf("a list of %d entries in the preface: %d bytes after the hello", n, len(rest))
				}
				return
			}
			if len(rest) == 0 || len(rest) > prefaceListBytes {
				t.Fatalf("a list of %d entries: %d bytes of it in the preface", n, len(rest))
			}
			ctl := NewControl(bytes.NewReader(rest), io.Discard, nil)
			ctl.Start(func(error) {})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			files, err := recvList(ctx, ctl, n)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Name)
			}
			if !slices.Equal(got, names) {
				t.Fatalf("the preface's list: %q, want %q", got, names)
			}
			if m, err := ctl.Next(ctx, 100*time.Millisecond); err == nil {
				t.Fatalf("after the list, the preface holds a %q message", m.T)
			}
		})
	}
}

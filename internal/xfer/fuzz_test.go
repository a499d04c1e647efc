package xfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzControl: any bytes on the control channel are read without panicking, one message per
// line; what is read re-encodes to a message that reads back the same, and what is refused is a
// protocol violation or the end of the channel.
func FuzzControl(f *testing.F) {
	f.Add([]byte(`{"t":"ready","proto":7,"ports":[1,2,3,4],"pub":"x"}` + "\n" + `{"t":"files","files":[{"name":"a","size":3}]}` + "\n"))
	f.Add([]byte(`{"t":"error","err":"\u001b[2Jboom","code":77}` + "\n{\n"))
	f.Add([]byte(`{"t":"digest","file":-1,"sum":"zz"}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := NewControl(bytes.NewReader(in), &bytes.Buffer{}, nil)
		for range 64 {
			m, n, err := c.read()
			if err == nil && (n <= 0 || n > maxMessage) {
				t.Fatalf("a message of %d bytes read", n)
			}
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrPeerGone) {
					t.Fatalf("read: %v", err)
				}
				return
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("re-encode %+v: %v", m, err)
			}
			var again Msg
			if err := json.Unmarshal(b, &again); err != nil || again.T != m.T || len(again.Files) != len(m.Files) || again.Err != m.Err {
				t.Fatalf("round trip: %+v → %s → %+v (%v)", m, b, again, err)
			}
			if m.T == "error" {
				re := remoteError(m)
				for _, r := range re.Msg {
					if r < 0x20 || r == 0x7f {
						t.Fatalf("remote error %q keeps a control character", re.Msg)
					}
				}
			}
		}
	})
}

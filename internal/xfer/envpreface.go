package xfer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrPrefaceMismatch is the control channel's end where standard input does not begin with the
// preface the environment gave (bootstrap.EnvPreface): one of the two was not the client's.
var ErrPrefaceMismatch = fmt.Errorf("%w: the control channel's first messages differ from the copy in the environment (%s)", ErrProtocol, "LC_FARWING_PREFACE")

// EnvPrefaced is the peer's control channel when the environment carried a copy of the preface
// (bootstrap.EnvPreface): the messages are read from that copy at once, and standard input must
// then begin with the same bytes, which are dropped; the rest of it follows. Anything else on
// standard input ends the channel with ErrPrefaceMismatch before a byte of it is used.
func EnvPrefaced(in io.Reader, preface []byte) io.Reader {
	return io.MultiReader(bytes.NewReader(preface), &prefaceMatch{r: in, want: preface})
}

type prefaceMatch struct {
	r    io.Reader
	want []byte // what standard input must still begin with
	err  error
}

func (m *prefaceMatch) Read(b []byte) (int, error) {
	for len(m.want) > 0 && m.err == nil {
		var buf [4096]byte
		n, err := m.r.Read(buf[:min(len(buf), len(m.want))])
		if !bytes.Equal(buf[:n], m.want[:n]) {
			m.err = ErrPrefaceMismatch
			break
		}
		m.want = m.want[n:]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the channel ended inside its preface
			}
			m.err = err
		}
	}
	if m.err != nil {
		return 0, m.err
	}
	return m.r.Read(b)
}

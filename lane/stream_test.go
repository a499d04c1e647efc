package lane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// tcpPair is two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-got
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// recvRecords reads records from s until n have come or 5 s pass.
func recvRecords(t *testing.T, s *Stream, n int) [][]byte {
	t.Helper()
	var got [][]byte
	for end := time.Now().Add(5 * time.Second); len(got) < n && time.Now().Before(end); {
		_, err := s.Recv(time.Now().Add(100*time.Millisecond), func(b []byte, from netip.AddrPort) {
			if from != s.RemoteAddr() {
				t.Errorf("record from %s, want the stream's peer %s", from, s.RemoteAddr())
			}
			got = append(got, append([]byte(nil), b...))
		})
		if err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
	}
	return got
}

// TestStreamRecords: datagrams of every size up to MaxRecord cross as records, in order and
// intact, also when the pending bytes are a first record read before the stream was made and
// when a record arrives a byte at a time.
func TestStreamRecords(t *testing.T) {
	a, b := tcpPair(t)
	first := AppendRecord(nil, []byte("first"))
	sa, sb := NewStream(a, nil), NewStream(b, first)
	var want [][]byte
	want = append(want, []byte("first"))
	var batch [][]byte
	for _, n := range []int{1, 2, 100, 1452, 8238, MaxRecord} {
		p := bytes.Repeat([]byte{byte(n)}, n)
		batch = append(batch, p)
		want = append(want, p)
	}
	if err := sa.Send(netip.AddrPort{}, batch); err != nil {
		t.Fatal(err)
	}
	// One more, dribbled: the reader must keep a partial record across reads.
	last := AppendRecord(nil, []byte("dribbled"))
	for _, c := range last {
		a.Write([]byte{c})
		time.Sleep(time.Millisecond)
	}
	want = append(want, []byte("dribbled"))
	got := recvRecords(t, sb, len(want))
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("record %d: %d bytes differ from the %d sent", i, len(got[i]), len(want[i]))
		}
	}
	if st := sb.Stats(); st.RecvDatagrams != uint64(len(want)) {
		t.Errorf("stats count %d records, want %d", st.RecvDatagrams, len(want))
	}
	if err := sa.Send(netip.AddrPort{}, [][]byte{make([]byte, MaxRecord+1)}); err == nil {
		t.Error("Send took a datagram longer than a record")
	}
}

// TestStreamBadLength: a length of 0 or above MaxRecord is refused before anything is read
// after it, and the stream is closed; the records before it still come.
func TestStreamBadLength(t *testing.T) {
	for _, n := range []uint16{0, MaxRecord + 1, 0xffff} {
		a, b := tcpPair(t)
		s := NewStream(b, nil)
		msg := AppendRecord(nil, []byte("ok"))
		msg = binary.BigEndian.AppendUint16(msg, n)
		msg = append(msg, make([]byte, 64)...)
		a.Write(msg)
		got := 0
		var err error
		for end := time.Now().Add(5 * time.Second); err == nil || errors.Is(err, ErrTimeout); {
			if time.Now().After(end) {
				t.Fatalf("length %d: no error", n)
			}
			_, err = s.Recv(time.Now().Add(100*time.Millisecond), func([]byte, netip.AddrPort) { got++ })
		}
		if !errors.Is(err, ErrBadRecord) || got != 1 || s.BadRecords.Load() != 1 {
			t.Errorf("length %d: %v after %d records (bad %d), want ErrBadRecord after 1", n, err, got, s.BadRecords.Load())
		}
		if _, err := s.Recv(time.Now().Add(100*time.Millisecond), func([]byte, netip.AddrPort) {}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("length %d: the stream still reads (%v)", n, err)
		}
		if _, err := ReadRecord(bytes.NewReader(msg[len("ok")+RecordHeader:])); !errors.Is(err, ErrBadRecord) {
			t.Errorf("length %d: ReadRecord: %v, want ErrBadRecord", n, err)
		}
	}
}

// FuzzStreamRecords: whatever bytes a stream brings, Recv hands over only records of 1 to
// MaxRecord bytes, exactly as framed in them, in order, and stops at the first length out of
// bounds (ErrBadRecord) or at the end (net.ErrClosed); ReadRecord agrees on the first record.
func FuzzStreamRecords(f *testing.F) {
	f.Add(AppendRecord(AppendRecord(nil, []byte("ab")), []byte{1, 2, 3}))
	f.Add([]byte{0, 0, 1})
	f.Add([]byte{0xff, 0xff, 1, 2})
	f.Add(AppendRecord(nil, bytes.Repeat([]byte{7}, MaxRecord)))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		a.Close()
		s := NewStream(b, data)
		var got [][]byte
		var err error
		for err == nil {
			_, err = s.Recv(time.Now().Add(time.Second), func(r []byte, _ netip.AddrPort) { got = append(got, append([]byte(nil), r...)) })
		}
		// The records as the framing says, up to the first bad length or an incomplete tail.
		var want [][]byte
		bad := false
		for rest := data; len(rest) >= RecordHeader; {
			n := int(binary.BigEndian.Uint16(rest))
			if n == 0 || n > MaxRecord {
				bad = true
				break
			}
			if len(rest) < RecordHeader+n {
				break
			}
			want = append(want, rest[RecordHeader:RecordHeader+n])
			rest = rest[RecordHeader+n:]
		}
		if len(got) != len(want) {
			t.Fatalf("%d records, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
		if bad != errors.Is(err, ErrBadRecord) || !bad && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ended with %v (a bad length: %v)", err, bad)
		}
		if rec, rerr := ReadRecord(bytes.NewReader(data)); rerr == nil && (len(want) == 0 || !bytes.Equal(rec[RecordHeader:], want[0])) {
			t.Fatalf("ReadRecord took a record Recv did not")
		}
	})
}

// TestStreamClosedReadsNoMore: a stream closed while its records are handed over (the session
// closes one whose record failed authentication) hands over none of the records behind it that
// came in the same read.
func TestStreamClosedReadsNoMore(t *testing.T) {
	_, b := tcpPair(t)
	var recs []byte
	for _, r := range []string{"forged", "after", "more"} {
		recs = AppendRecord(recs, []byte(r))
	}
	s := NewStream(b, recs)
	var got []string
	n, err := s.Recv(time.Now().Add(time.Second), func(rec []byte, _ netip.AddrPort) {
		got = append(got, string(rec))
		s.Close()
	})
	if n != 1 || len(got) != 1 || got[0] != "forged" {
		t.Errorf("handed over %q (%d, %v), want only the record before the close", got, n, err)
	}
}

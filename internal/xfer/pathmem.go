package xfer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/farwing/farwing/internal/privdir"
	"github.com/farwing/farwing/internal/session"
)

// A client remembers, per path, the rate its last long push sustained and the path's round trip,
// so that the next push on that path sends data as soon as the peer has answered over ssh,
// before the UDP handshake's round trip (docs/PROTOCOL.md, "Data before the proof"): at the
// remembered rate, at most one round trip of it in flight, until the packet train's estimate of
// this path replaces it (cc.Controller.ResumeBandwidth). It is TCP's cached metrics and QUIC's
// careful resume in one: a starting point, measured again at once. A path is the ssh host, the
// UDP destination and the local address the kernel sends to it from (another network, another
// record); a record whose round trip the handshake contradicts, whose packet train read under
// half its rate, or whose path gave no UDP is forgotten.
//
// The record is a small JSON file per path under Options.PathMemory (farwing copy's:
// ~/.cache/farwing/paths), mode 0600, in a directory this user owns and only this user may write;
// a record that is not a regular file of this user's is ignored. Deleting it only makes the next
// push start as a first one.
type pathRecord struct {
	At       int64   `json:"at"`       // unix seconds of the copy it comes from
	RateBps  float64 `json:"rate_bps"` // the data phase's wire bytes (UDP payload) over its seconds, in bits/s
	MinRTTus int64   `json:"min_rtt_us"`
}

const (
	pathMemoryAge  = 24 * time.Hour // an older record is not used
	pathMemoryData = time.Second    // a copy whose data phase was shorter is not remembered
	maxPathRecord  = 4096
)

// pathKey names host's path to addr: the ssh host, the UDP destination and the local address
// this host sends to it from ("" for an invalid addr: no record is kept).
func pathKey(host string, addr netip.Addr) string {
	if !addr.IsValid() {
		return ""
	}
	src := ""                                                                                                // no route to addr: the copy will say so
	if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 9))); err == nil { // connect only: nothing is sent
		src = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap().String()
		c.Close()
	}
	h := sha256.Sum256([]byte(host + "\x00" + addr.String() + "\x00" + src))
	return hex.EncodeToString(h[:8])
}

// recallPath reads the record of path key; it is usable when it is recent, plausible and agrees
// with this session's ssh start (sshTook: at least two round trips, so not shorter than 1.5 of
// the remembered round trip: a path whose round trip shrank is not the one remembered).
func recallPath(dir, key string, now time.Time, sshTook time.Duration) (pathRecord, bool) {
	var r pathRecord
	if !readRecord(dir, key, &r) {
		return pathRecord{}, false
	}
	age := now.Sub(time.Unix(r.At, 0))
	rtt := r.rtt()
	ok := age >= 0 && age <= pathMemoryAge && r.RateBps >= 1e6 && r.RateBps <= 400e9 &&
		rtt >= 100*time.Microsecond && rtt <= 5*time.Second && sshTook >= rtt*3/2
	return r, ok
}

func (r pathRecord) rtt() time.Duration { return time.Duration(r.MinRTTus) * time.Microsecond }

// readRecord reads the JSON record name of dir into v: false where there is none, or it is not a
// regular file of this user's in a private directory, or not a small JSON object.
func readRecord(dir, name string, v any) bool {
	if dir == "" || name == "" || privdir.Check(dir) != nil {
		return false
	}
	f, fi, err := privdir.OpenRegular(filepath.Join(dir, name))
	if err != nil {
		return false
	}
	defer f.Close()
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPathRecord+1))
	return err == nil && len(b) <= maxPathRecord && json.Unmarshal(b, v) == nil
}

// rememberPath writes path key's record.
func rememberPath(dir, key string, r pathRecord) error { return writeRecord(dir, key, r) }

// writeRecord writes v as the JSON record name of dir (atomically: a temporary file renamed into
// place), and removes temporary files an interrupted write left over an hour ago.
func writeRecord(dir, name string, v any) error {
	if dir == "" || name == "" {
		return nil
	}
	if err := privdir.Make(dir); err != nil {
		return err
	}
	if old, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(old) > 0 {
		for _, o := range old {
			if fi, err := os.Lstat(o); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(o)
			}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

// A path whose UDP got no answer, and whose copy then went over streams, is remembered too, in a
// second record (key + noUDPSuffix: when it happened), so that the next copies on it do not each
// wait the whole handshake timeout before they fall back: they give UDP a shorter chance
// (noUDPWait) and, where it still gets no answer, go over streams. A handshake that is answered
// removes the record; it is not used after pathMemoryAge. Like the rate's record, it is only a
// starting point: --udp-only ignores it.
const noUDPSuffix = ".noudp"

type noUDPRecord struct {
	At int64 `json:"at"` // unix seconds of the copy that fell back
}

// recallNoUDP reports when path key last gave no UDP (false where it did not, or over
// pathMemoryAge ago).
func recallNoUDP(dir, key string, now time.Time) (time.Time, bool) {
	var r noUDPRecord
	if key == "" || !readRecord(dir, key+noUDPSuffix, &r) {
		return time.Time{}, false
	}
	at := time.Unix(r.At, 0)
	age := now.Sub(at)
	return at, age >= 0 && age <= pathMemoryAge
}

// rememberNoUDP records that path key gave no UDP now.
func rememberNoUDP(dir, key string, now time.Time) error {
	if key == "" {
		return nil
	}
	return writeRecord(dir, key+noUDPSuffix, noUDPRecord{At: now.Unix()})
}

// noUDPWait is how long a handshake on a path remembered without UDP waits for an answer: the ssh
// session's start (at least two round trips), at least a second (ten hellos), at most the usual
// timeout.
func noUDPWait(sshTook time.Duration) time.Duration {
	return min(session.HandshakeTimeout, max(time.Second, sshTook))
}

// forgetPath removes path key's record: the path it describes is not this one.
func forgetPath(dir, key string) { forgetRecord(dir, key) }

// forgetRecord removes the record name of dir.
func forgetRecord(dir, name string) {
	if dir == "" || name == "" || privdir.Check(dir) != nil {
		return
	}
	os.Remove(filepath.Join(dir, name))
}

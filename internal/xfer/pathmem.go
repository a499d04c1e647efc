package xfer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// A client remembers, per host, the rate its last long push sustained and the path's round trip,
// so that the next push to that host sends data as soon as the peer has answered over ssh,
// before the UDP handshake's round trip (docs/PROTOCOL.md, "Data before the proof"): at the
// remembered rate, at most one round trip of it in flight, until the packet train's estimate of
// this path replaces it (cc.Controller.ResumeBandwidth). It is TCP's cached metrics and QUIC's
// careful resume in one: a starting point, measured again at once.
//
// The record is a small JSON file per host under Options.PathMemory (farwing copy's:
// ~/.cache/farwing/paths), mode 0600; deleting it only makes the next push start as a first one.
type pathRecord struct {
	At       int64   `json:"at"`       // unix seconds of the copy it comes from
	RateBps  float64 `json:"rate_bps"` // the data phase's wire bytes (UDP payload) over its seconds, in bits/s
	MinRTTus int64   `json:"min_rtt_us"`
}

const (
	pathMemoryAge  = 24 * time.Hour // an older record is not used
	pathMemoryData = time.Second    // a copy whose data phase was shorter is not remembered
)

// pathFile is host's record under dir; hostName is what ssh connects to for it (ssh -G).
func pathFile(dir, host, hostName string) string {
	h := sha256.Sum256([]byte(host + "\x00" + hostName))
	return filepath.Join(dir, hex.EncodeToString(h[:8]))
}

// recallPath reads host's record; it is usable when it is recent, plausible and agrees with
// this session's ssh start (sshTook: at least two round trips, so not shorter than 1.5 of the
// remembered round trip: a path whose round trip shrank is not the one remembered).
func recallPath(dir, host, hostName string, now time.Time, sshTook time.Duration) (pathRecord, bool) {
	if dir == "" {
		return pathRecord{}, false
	}
	b, err := os.ReadFile(pathFile(dir, host, hostName))
	if err != nil || len(b) > 4096 {
		return pathRecord{}, false
	}
	var r pathRecord
	if json.Unmarshal(b, &r) != nil {
		return pathRecord{}, false
	}
	age := now.Sub(time.Unix(r.At, 0))
	rtt := time.Duration(r.MinRTTus) * time.Microsecond
	ok := age >= 0 && age <= pathMemoryAge && r.RateBps >= 1e6 && r.RateBps <= 400e9 &&
		rtt >= 100*time.Microsecond && rtt <= 5*time.Second && sshTook >= rtt*3/2
	return r, ok
}

// rememberPath writes host's record (atomically: a temporary file renamed into place).
func rememberPath(dir, host, hostName string, r pathRecord) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(r)
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
		werr = os.Rename(f.Name(), pathFile(dir, host, hostName))
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

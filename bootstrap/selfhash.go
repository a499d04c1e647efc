package bootstrap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/farwing/farwing/internal/peers"
)

// selfHash is hashFile(exe), remembered in this user's cache under the file's identity: device,
// inode, size, and modification and change times to the nanosecond. Writing or replacing the
// file moves its change time, which its owner cannot set back, so a record is only ever read for
// the bytes it was made from. Hashing a 7 MB build took 20 ms of CPU at every copy's start, where
// it competed with ssh's own start for the two cores (AMD EPYC Zen 5: the command 8 ms sooner,
// median of 15 copies of 1 KiB over the lab's 140 ms). A record that cannot be read or written
// only means hashing, as before; one for a file that changed is replaced.
//
// The record only names the build: an install hashes the executable again before it sends any of
// it (first contact), and removes a record that was wrong (forgetSelf).
func selfHash(exe string) (string, error) { return selfHashIn(localPeerDir("self"), exe, hashFile) }

// selfHashIn is selfHash with the records in dir (peer/self, "" none: Start's session has it) and
// hash as the hashing (a test's hook).
func selfHashIn(dir, exe string, hash func(string) (string, error)) (string, error) {
	key, err := fileKey(exe)
	if err != nil {
		return hash(exe)
	}
	rec := selfRecord(dir, exe)
	if b, err := os.ReadFile(rec); rec != "" && err == nil {
		if k, h, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok && k == key && peers.IsHash(h) {
			return h, nil
		}
	}
	h, err := hash(exe)
	if err != nil {
		return "", err
	}
	// Remembered only if the file did not change while it was read.
	if after, err := fileKey(exe); err == nil && after == key && rec != "" {
		keepFile(rec, []byte(key+" "+h+"\n"))
	}
	return h, nil
}

// fileKey is the identity of the file at p that selfHash records its hash under.
func fileKey(p string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d:%d:%d.%09d:%d.%09d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}

// selfRecord is where the hash of the executable at exe is recorded in dir, this user's
// peer/self ("" without a cache, or where it is not private: localPeerDir): one record per path,
// so that builds run from different paths do not replace each other's; those untouched for
// pruneDays go as a record is written (keepFile).
func selfRecord(dir, exe string) string {
	if dir == "" {
		return ""
	}
	h := sha256.Sum256([]byte(exe))
	return filepath.Join(dir, "farwing-"+hex.EncodeToString(h[:8]))
}

// forgetSelf removes the record of the executable at exe from dir (selfRecord).
func forgetSelf(dir, exe string) {
	if rec := selfRecord(dir, exe); rec != "" {
		os.Remove(rec)
	}
}

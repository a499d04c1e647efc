package bootstrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/farwing/farwing/internal/privdir"
)

// Upload ahead: on what is most likely first contact, the client does not wait a round trip for
// the remote's "need" before the upload starts. Right after the preface it writes the start of
// the upload as the remote script would read it after need: the FARWING-UPLOAD line and a first
// part (aheadPart bytes of the build's compressed form: xz where the build is carried in that
// form, else gzip; build.aheadFormat), while the remote shell checks its cache. The script is told
// how many bytes that is (aheadLen) and their format:
//   - need, with that format's tool there: the bytes are the upload's beginning, read as usual;
//     the client goes on from the first part's end (one round trip of TCP's slow start earlier
//     than otherwise);
//   - need without that tool, or need from a remote whose platform's build is not the one guessed
//     (guess: the build this user last installed on the account, else this platform's): the
//     shell reads and drops them before it says need (the client then sends the build for the
//     remote, as it is or compressed, from the start);
//   - ok (the peer was there after all): `farwing serve --skip L:A` drops them after the L bytes
//     of the preface, so its control channel is unchanged; they cost only their bytes on the wire,
//     since the peer answers the preface that comes before them;
//   - nodir, nohash, unsafe: the shell exits without reading them.
//
// "Most likely first contact" is no record that this build was installed on the account ssh
// reaches (installedRecord). The bytes come from the build's carried form, or this user's cache of
// this executable's gzip form, or,
// where there is none (the build's first install anywhere), from compressing it while ssh
// connects (about 0.4 s for 10 MB, within the handshake): the upload line is padded with spaces to
// a fixed width (the shell's read drops them), so the script knows their length before the size
// is known. A record is a hint only: a wrong one costs a round trip (a record but no peer) or
// aheadPart bytes on the wire (no record but a peer).

// aheadPart is the size of the first part written ahead: about what TCP sends in the first round
// trip of a new connection's slow start (initial window of 10 segments, grown by the handshake),
// so that ok costs little, yet need finds the upload already under way.
const aheadPart = 64 << 10

// aheadMin is the smallest executable whose upload starts ahead when it has to be compressed
// first: its gzip form must be longer than aheadPart (a Go build is several MB).
const aheadMin = 1 << 20

// aheadMaxPreface is the longest preface an upload's start goes after: serve takes --skip L:A
// with each number at most 1 MiB (cmd/farwing's maxSkip), and refuses to start otherwise (a pull's
// hello names every source path given, so it may be longer).
const aheadMaxPreface = 1 << 20

// aheadHeader is the width of the upload line written ahead, without its newline: the longest
// "FARWING-UPLOAD FORMAT N ID" (gzip, the longer format; N of 10 digits, ID of 16).
const aheadHeader = len("FARWING-UPLOAD gzip 1234567890 0123456789abcdef")

// aheadLen is how many bytes go ahead: the padded upload line, the first part's line and bytes.
var aheadLen = aheadHeader + 1 + len("FARWING-PART 0 "+strconv.Itoa(aheadPart)+"\n") + aheadPart

// ahead is the start of an upload written before the remote answered.
type ahead struct {
	id     string        // the upload's ID
	done   chan struct{} // closed once data, valid and wire are set
	data   []byte        // the build's compressed form
	format string        // ... gzip or xz
	// valid: data is longer than aheadPart and, gzip, unpacks to this build (an xz form only the
	// remote unpacks: it checks the result's SHA-256 before anything runs). Where it is not, wire is
	// aheadLen bytes that no upload starts with (need: the client starts over without them).
	valid bool
	wire  []byte        // exactly aheadLen bytes
	wrote chan struct{} // closed once wire is known (the writer's wait: at once from the cache)
}

// newAhead starts the upload's start of build bd: its carried xz form, or its carried gzip form,
// or this executable's gzip form from the cache where that is there (checked meanwhile), else
// compressed now where the build is large enough; nil where none applies.
func newAhead(dir string, bd build) *ahead {
	var idb [8]byte
	rand.Read(idb[:])
	a := &ahead{id: hex.EncodeToString(idb[:]), done: make(chan struct{}), wrote: make(chan struct{}), format: bd.aheadFormat()}
	if a.format == "xz" { // the xz form is longer than aheadPart (aheadFormat)
		a.data, a.wire, a.valid = bd.xz, a.start(bd.xz), true
		close(a.wrote)
		close(a.done)
		return a
	}
	a.format = "gzip"
	if len(bd.gz) > aheadPart {
		a.data, a.wire = bd.gz, a.start(bd.gz)
		close(a.wrote)
		go func() {
			a.valid = gzipOf(bd.gz, bd.hash)
			close(a.done)
		}()
		return a
	}
	id := bd.identity()
	if bd.exe == "" {
		return nil
	}
	if c := packedCache(dir, bd); c != "" {
		if b, err := os.ReadFile(c); err == nil && len(b) > aheadPart {
			a.data, a.wire = b, a.start(b)
			close(a.wrote)
			go func() {
				a.valid = gzipOf(b, id.Hash)
				close(a.done)
			}()
			return a
		}
	}
	if st, err := os.Stat(id.Exe); err != nil || st.Size() < aheadMin {
		return nil
	}
	go func() {
		b, err := payload(dir, bd, "gzip")
		a.data, a.valid = b, err == nil && len(b) > aheadPart
		if a.valid {
			a.wire = a.start(b)
		} else {
			a.wire = aheadFiller()
		}
		close(a.wrote)
		close(a.done)
	}()
	return a
}

// aheadFiller is aheadLen bytes that no upload starts with and no line ends in: what goes ahead
// where the upload's start cannot (its build did not compress as expected, or the remote said ok
// before it was ready: serve drops them unread).
func aheadFiller() []byte { return bytes.Repeat([]byte{'-'}, aheadLen) }

// start is what goes ahead of b, the upload: its line padded to aheadHeader, the first part.
func (a *ahead) start(b []byte) []byte {
	w := fmt.Appendf(nil, "%-*s\nFARWING-PART 0 %d\n", aheadHeader, fmt.Sprintf("FARWING-UPLOAD %s %d %s", a.format, len(b), a.id), aheadPart)
	return append(w, b[:aheadPart]...)
}

// installRecords names this user's records of the builds installed on one account: the directory
// (checked once, with those above it: newSession, localPeerDir) and the account's key.
type installRecords struct{ dir, key string }

// installedRecords are the records in dir (peer/installed: newSession's installedDir,
// localPeerDir's; "" none) for the account ssh reaches for host: ssh's user, host name and port
// where `ssh -G` told them (cfg), else host as given.
func installedRecords(dir string, cfg map[string]string, host string) installRecords {
	key := "host\x00" + host
	if cfg["hostname"] != "" {
		key = strings.Join([]string{"ssh", cfg["user"], cfg["hostname"], cfg["port"]}, "\x00")
	}
	h := sha256.Sum256([]byte(key))
	return installRecords{dir: dir, key: hex.EncodeToString(h[:8])}
}

// of is the file whose presence says that this user installed the build of that hash (or found it
// installed) on the account; "" where there is no cache directory.
func (r installRecords) of(hash string) string {
	if r.dir == "" || len(hash) < 16 {
		return ""
	}
	return filepath.Join(r.dir, "farwing-"+hash[:16]+"-"+r.key)
}

// noteInstalled records that a build runs on an account (a failure to record only costs the next
// contact its guess); records made more than pruneDays ago go, as the remote's builds do. The
// record's directory is checked again right before the write (privdir.Check: the session found
// it private when the start began), and the record is made O_EXCL|O_NOFOLLOW: an empty file of
// its own, never through a link.
func noteInstalled(rec string) {
	if rec == "" {
		return
	}
	if _, err := os.Lstat(rec); err == nil {
		return
	}
	dir := filepath.Dir(rec)
	if privdir.Check(dir) != nil {
		return
	}
	if f, err := os.OpenFile(rec, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600); err == nil {
		f.Close()
	}
	tidyPacked(dir, rec)
}

// Forget removes the records that this build (id, or a build it carries) was installed on host's account, so that the next
// contact is treated as a first one (farwing bench's first-copy row, which removes the build from
// the remote's cache too).
func Forget(ctx context.Context, s SSH, host string, id Identity) error {
	cfg, _ := s.config(ctx, host) // as Start: without ssh's word the record is keyed by host
	recs := installedRecords(localPeerDir("installed"), cfg, host)
	for _, b := range newCatalog(id).builds {
		rec := recs.of(b.hash)
		if rec == "" {
			continue
		}
		if err := os.Remove(rec); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

package bootstrap

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/farwing/farwing/internal/escape"
	"github.com/farwing/farwing/internal/peers"
)

// build is one executable a remote may run as the peer: a build this executable carries for a
// platform (gz set, and xz where it carries that form too: internal/peers), or this executable
// itself (exe set), which serves remotes of its own platform where it carries no build for that
// one (a plain `go build` or `go install`).
type build struct {
	platform string // Go's OS/ARCH
	hash     string // SHA-256 of the executable, hex: its name in the remote's cache
	exe      string // this executable's path (its hash may come from this user's cache: selfHash)
	gz       []byte // the carried gzip form
	xz       []byte // the carried xz form (nil: none), which only the remote unpacks and checks
}

// format is how b travels to a remote that can unpack formats (its need line's, e.g.
// "xz,gzip,raw"): xz where b is carried in that form, the remote has xz and xz is not ruled out
// (noXz: the remote's xz failed to unpack it before), else gzip where it has gzip, else raw. The
// remote script drops an upload's start written ahead on the same rule (start.sh): a build's
// upload ahead is in the form it would be sent in to a remote that has xz and gzip.
func (b build) format(formats string, noXz bool) string {
	fs := strings.Split(formats, ",")
	switch {
	case b.xz != nil && !noXz && slices.Contains(fs, "xz"):
		return "xz"
	case slices.Contains(fs, "gzip"):
		return "gzip"
	}
	return "raw"
}

// aheadFormat is the form b's upload takes where it starts ahead of the remote's answer.
func (b build) aheadFormat() string {
	// The xz form goes ahead only where it is longer than the part sent ahead (newAhead).
	return b.format("xz,gzip,raw", len(b.xz) <= aheadPart)
}

// h16 is the build's name in the remote's cache without "farwing-".
func (b build) h16() string { return b.hash[:16] }

// identity is the build as selfHash, packedCache and readIdentity know one (exe builds).
func (b build) identity() Identity { return Identity{Exe: b.exe, Hash: b.hash} }

// carried is the builds this executable carries for other platforms (a test replaces it).
var carried = peers.Carried

// ownPlatform is this executable's platform (a test replaces it).
var ownPlatform = runtime.GOOS + "/" + runtime.GOARCH

// catalog is what this executable can install: the builds it carries, and itself for its own
// platform where it carries none for that; carriedErr says why the carried set is unusable (it is
// then left out).
type catalog struct {
	builds     []build
	carriedErr error
}

// newCatalog lists the builds; id is this executable (its Hash is filled in later where "").
func newCatalog(id Identity) catalog {
	var c catalog
	ps, err := carried()
	if err != nil {
		c.carriedErr = err
		ps = nil
	}
	own := false
	for _, p := range ps {
		c.builds = append(c.builds, build{platform: p.Platform(), hash: p.Hash, gz: p.Gzip, xz: p.Xz})
		own = own || p.Platform() == ownPlatform
	}
	if !own {
		c.builds = append([]build{{platform: ownPlatform, hash: id.Hash, exe: id.Exe}}, c.builds...)
	}
	return c
}

// self is the index of the build that is this executable, or -1 where it carries one for its own
// platform.
func (c catalog) self() int {
	for i, b := range c.builds {
		if b.exe != "" {
			return i
		}
	}
	return -1
}

// find is the index of the build for platform, or -1.
func (c catalog) find(platform string) int {
	for i, b := range c.builds {
		if b.platform == platform {
			return i
		}
	}
	return -1
}

// own is the index of the build for this executable's platform.
func (c catalog) own() int { return c.find(ownPlatform) }

// platforms lists the platforms the catalog serves, as "a, b and c".
func (c catalog) platforms() string {
	var ps []string
	for _, b := range c.builds {
		ps = append(ps, b.platform)
	}
	if len(ps) < 2 {
		return strings.Join(ps, "")
	}
	return strings.Join(ps[:len(ps)-1], ", ") + " and " + ps[len(ps)-1]
}

// unameMachines maps `uname -m` to Go's architectures, and unameSystems `uname -s` to Go's OS:
// those release builds carry peers for, and others a plain build of farwing may run on and so
// serve (the remote script's case has the same names).
var (
	unameSystems  = map[string]string{"Linux": "linux", "Darwin": "darwin", "FreeBSD": "freebsd", "OpenBSD": "openbsd", "NetBSD": "netbsd"}
	unameMachines = map[string][]string{"amd64": {"x86_64", "amd64"}, "arm64": {"aarch64", "arm64"}, "386": {"i386", "i686"},
		"arm": {"armv7l", "armv6l"}, "riscv64": {"riscv64"}, "ppc64le": {"ppc64le"}, "s390x": {"s390x"}}
)

// platformOf is Go's OS/ARCH for a remote's `uname -s` and `uname -m`, or "" for one no build is
// made for.
func platformOf(sys, machine string) string {
	goos := unameSystems[sys]
	for goarch, names := range unameMachines {
		if goos != "" && slices.Contains(names, machine) {
			return goos + "/" + goarch
		}
	}
	return ""
}

// noBuild is the error for a remote whose platform the catalog has no build for: which platform
// the remote is, which ones this build serves, and how to get one that serves it.
func (c catalog) noBuild(host, sys, machine string) error {
	remote := escape.Text(sys) + " " + escape.Text(machine)
	if p := platformOf(sys, machine); p != "" {
		remote += " (" + p + ")"
	}
	how := "install a release build of farwing (an archive from `make dist`, or `make build`), which carries peers for " +
		strings.Join(peers.Supported, ", ")
	if c.carriedErr != nil {
		how = fmt.Sprintf("this build's carried peers are unusable (%v); reinstall it", c.carriedErr)
	} else if !slices.Contains(peers.Supported, platformOf(sys, machine)) {
		how = "farwing's release builds have peers for " + strings.Join(peers.Supported, ", ") + " only"
	}
	return fmt.Errorf("%w: %s is %s, but this farwing carries a peer for %s only; %s",
		ErrPlatform, escape.Text(host), remote, c.platforms(), how)
}

// gunzipOf is the executable gz unpacks to, checked against hash.
func gunzipOf(gz []byte, hash string) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("carried peer damaged: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("carried peer damaged: %w", err)
	}
	if sha256Hex(raw) != hash {
		return nil, fmt.Errorf("carried peer damaged: its SHA-256 is not %s", hash)
	}
	return raw, nil
}

// sha256Hex is the SHA-256 of b in lower-case hex.
func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// unamePatterns is the remote script's case pattern for platform: its `uname -s`/`uname -m` pairs.
func unamePatterns(platform string) string {
	goos, goarch, _ := strings.Cut(platform, "/")
	var pats []string
	for sys, g := range unameSystems {
		if g != goos {
			continue
		}
		for _, m := range unameMachines[goarch] {
			pats = append(pats, sys+"/"+m)
		}
	}
	slices.Sort(pats) // the same script every time
	return strings.Join(pats, "|")
}

// PeerHash is the SHA-256 of the build this executable installs on a remote of platform (Go's
// OS/ARCH): the one it carries for it, or selfHash (this executable's) for its own platform where
// it carries none; "" where it has none for it.
func PeerHash(platform, selfHash string) string {
	c := newCatalog(Identity{Hash: selfHash})
	if i := c.find(platform); i >= 0 {
		return c.builds[i].hash
	}
	return ""
}

// payload is the peer as it travels in format: the executable as it is (raw), or compressed with
// gzip or (a carried build's, as carried) xz. A carried build is carried compressed; its gzip form
// is checked against its hash here, its xz form by the remote alone (which checks the SHA-256 of
// what it unpacked before anything runs: no Go xz decoder is compiled in). This executable's
// compressed form is kept in this user's cache, so only the first install of a build compresses
// it (about 0.4 s for 10 MB); a cached one is used only when it unpacks to this build.
func payload(dir string, b build, format string) ([]byte, error) {
	if format == "xz" {
		if b.xz == nil {
			return nil, fmt.Errorf("no xz form of the build for %s", b.platform)
		}
		return b.xz, nil
	}
	if b.gz != nil {
		if format != "gzip" {
			return gunzipOf(b.gz, b.hash)
		}
		if !gzipOf(b.gz, b.hash) {
			return nil, fmt.Errorf("carried peer damaged: it does not unpack to %s", b.hash)
		}
		return b.gz, nil
	}
	id := b.identity()
	if format != "gzip" {
		return readIdentity(id)
	}
	cache := packedCache(dir, b)
	if cache != "" {
		if b, err := os.ReadFile(cache); err == nil && gzipOf(b, id.Hash) {
			return b, nil
		}
	}
	raw, err := readIdentity(id)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw) // a bytes.Buffer does not fail
	zw.Close()
	if cache != "" {
		keepFile(cache, buf.Bytes())
	}
	return buf.Bytes(), nil
}

// packedPeer is a payload made while ssh connects.
type packedPeer struct {
	data []byte
	err  error
}

// packedCache is where this user's cache keeps the gzip form of this executable's build, in dir
// (peer/: newSession's peerDir, localPeerDir's) ("" when there is no cache, or for a carried
// build: it is carried compressed).
func packedCache(dir string, b build) string {
	if dir == "" || b.exe == "" || len(b.hash) < 16 {
		return ""
	}
	return filepath.Join(dir, "farwing-"+b.h16()+".gz")
}

// readIdentity reads the executable id names, checking that it is still that build.
func readIdentity(id Identity) ([]byte, error) {
	b, err := os.ReadFile(id.Exe)
	if err != nil {
		return nil, err
	}
	if sha256Hex(b) != id.Hash {
		return nil, fmt.Errorf("%s changed while running (its SHA-256 is no longer %s)", id.Exe, id.Hash)
	}
	return b, nil
}

// gzipOf reports whether b is a gzip stream of the bytes whose SHA-256 is hash.
func gzipOf(b []byte, hash string) bool {
	_, err := gunzipOf(b, hash)
	return err == nil
}

// Package peers holds the builds of farwing for other platforms that a release build carries
// inside itself, so that first contact can install the peer on a remote of any supported
// platform without a Go toolchain or network access on either end.
//
// A plain `go build` or `go install` carries none: bootstrap then uploads the running executable
// itself, which serves remotes of its own platform only. A release build (`make build`, `make
// dist`: scripts/peers.sh) is built with the tag farwing_peers and an -overlay that places the
// peers' compressed forms and their manifest at carried/, which peers_embed.go embeds. The peers
// themselves are peer builds (cmd/farwing's tag farwing_peer: `farwing serve` and nothing only a
// client needs), each carried gzip-compressed and, where the build machine had xz, also
// xz-compressed (smaller by a quarter: first contact sends that form to a remote that has xz).
package peers

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Peer is one carried build.
type Peer struct {
	OS, Arch string // Go's names: linux, darwin; amd64, arm64
	Hash     string // SHA-256 of the executable, lower-case hex: its name in the remote's cache
	Size     int64  // the executable's size in bytes
	Gzip     []byte // the executable, gzip-compressed (checked against Hash where it is used)
	Xz       []byte // the executable, xz-compressed (nil: not carried); the remote checks Hash of what it unpacks
}

// Platform is "OS/ARCH".
func (p Peer) Platform() string { return p.OS + "/" + p.Arch }

// Supported is every platform a release build carries a peer for, in the order it lists them.
var Supported = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// Manifest is the name of the carried manifest: one line per peer and form, "OS/ARCH SHA256 SIZE
// FILE", FILE its gzip form (farwing-OS-ARCH.gz) and, on a second line for the same platform with
// the same SHA256 and SIZE, its xz form where it has one (farwing-OS-ARCH.xz).
const Manifest = "MANIFEST"

// maxPeers bounds the manifest (it is this build's own, but a malformed one must not go far).
const maxPeers = 16

var (
	loadOnce sync.Once
	loaded   []Peer
	loadErr  error
)

// Carried is the builds this executable carries (none for a plain build), or why the carried set
// is unusable (a damaged release build: it is then treated as carrying none, and the error says so).
func Carried() ([]Peer, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

// Parse reads a manifest, taking each peer's compressed forms from open(FILE). Every line must
// name a supported platform, a SHA-256, a size and a file that open finds, in gzip or xz form
// (by its first bytes); each platform has one gzip form, and at most one xz form on a line that
// agrees with it.
func Parse(manifest []byte, open func(name string) ([]byte, error)) ([]Peer, error) {
	var ps []Peer
	at := map[string]int{} // platform: index in ps
	for i, line := range strings.Split(strings.TrimRight(string(manifest), "\n"), "\n") {
		if line == "" && i == 0 {
			break
		}
		f := strings.Fields(line)
		if len(f) != 4 || i == 2*maxPeers {
			return nil, fmt.Errorf("carried peers: manifest line %d malformed", i+1)
		}
		goos, goarch, ok := strings.Cut(f[0], "/")
		size, err := strconv.ParseInt(f[2], 10, 64)
		switch {
		case !ok || !supported(f[0]):
			return nil, fmt.Errorf("carried peers: manifest line %d: platform %q unsupported", i+1, f[0])
		case !IsHash(f[1]):
			return nil, fmt.Errorf("carried peers: manifest line %d: %q is not a SHA-256", i+1, f[1])
		case err != nil || size <= 0:
			return nil, fmt.Errorf("carried peers: manifest line %d: bad size %q", i+1, f[2])
		case strings.ContainsAny(f[3], "/\\") || strings.HasPrefix(f[3], "."):
			return nil, fmt.Errorf("carried peers: manifest line %d: bad file name %q", i+1, f[3])
		}
		b, err := open(f[3])
		if err != nil {
			return nil, fmt.Errorf("carried peers: %s: %w", f[3], err)
		}
		j, seen := at[f[0]]
		switch {
		case seen && (ps[j].Hash != f[1] || ps[j].Size != size):
			return nil, fmt.Errorf("carried peers: manifest line %d: %s named twice, as two builds", i+1, f[0])
		case bytes.HasPrefix(b, gzipMagic):
			if seen && ps[j].Gzip != nil {
				return nil, fmt.Errorf("carried peers: manifest line %d: platform %q repeated", i+1, f[0])
			}
		case bytes.HasPrefix(b, xzMagic):
			if seen && ps[j].Xz != nil {
				return nil, fmt.Errorf("carried peers: manifest line %d: platform %q repeated", i+1, f[0])
			}
		default:
			return nil, fmt.Errorf("carried peers: %s is neither gzip nor xz", f[3])
		}
		if !seen {
			j = len(ps)
			at[f[0]] = j
			ps = append(ps, Peer{OS: goos, Arch: goarch, Hash: f[1], Size: size})
		}
		if bytes.HasPrefix(b, gzipMagic) {
			ps[j].Gzip = b
		} else {
			ps[j].Xz = b
		}
	}
	if len(ps) == 0 {
		return nil, errors.New("carried peers: the manifest names none")
	}
	for _, p := range ps {
		if p.Gzip == nil {
			return nil, fmt.Errorf("carried peers: %s has no gzip form", p.Platform())
		}
	}
	return ps, nil
}

// The first bytes of a gzip stream and of an xz one.
var (
	gzipMagic = []byte{0x1f, 0x8b}
	xzMagic   = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
)

func supported(platform string) bool {
	for _, s := range Supported {
		if s == platform {
			return true
		}
	}
	return false
}

// IsHash reports whether h is a SHA-256 in lower-case hex.
func IsHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

package peers

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// TestReleasePeers: what scripts/peers.sh makes for this platform is a manifest that Parse takes,
// whose peer is the peer build (it refuses `copy`), carried in gzip form and, where xz is installed,
// in xz form too (smaller), each of which unpacks to the executable of the manifest's SHA-256 and
// size.
func TestReleasePeers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a peer")
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if !supported(platform) {
		t.Skipf("no peer is made for %s", platform)
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "peers.sh"), dir, platform)
	cmd.Env = append(os.Environ(), "VERSION=test-peers")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/peers.sh: %v\n%s", err, out)
	}
	m, err := os.ReadFile(filepath.Join(dir, Manifest))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := Parse(m, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) })
	if err != nil || len(ps) != 1 || ps[0].Platform() != platform {
		t.Fatalf("manifest %q: %+v, %v", m, ps, err)
	}
	p := ps[0]
	check := func(form string, raw []byte) {
		t.Helper()
		sum := sha256.Sum256(raw)
		if hex.EncodeToString(sum[:]) != p.Hash || int64(len(raw)) != p.Size {
			t.Fatalf("the %s form unpacks to %d bytes of SHA-256 %x, not the manifest's %d bytes of %s", form, len(raw), sum, p.Size, p.Hash)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(p.Gzip))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	check("gzip", raw)
	exe := filepath.Join(dir, "peer")
	if err := os.WriteFile(exe, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, "copy", "a", "h:b").CombinedOutput(); err == nil || !bytes.Contains(out, []byte("peer build")) {
		t.Fatalf("the carried peer is not the peer build: `copy` said %q (%v)", out, err)
	}
	if _, err := exec.LookPath("xz"); err != nil {
		t.Logf("xz not installed: the gzip form alone is carried")
		return
	}
	if p.Xz == nil || len(p.Xz) >= len(p.Gzip) {
		t.Fatalf("xz form of %d bytes, gzip %d", len(p.Xz), len(p.Gzip))
	}
	xz := exec.Command("xz", "-dc")
	xz.Stdin = bytes.NewReader(p.Xz)
	out, err := xz.Output()
	if err != nil {
		t.Fatalf("xz -dc: %v", err)
	}
	check("xz", out)
	t.Logf("%s: %d bytes, gzip %d, xz %d (%s%%)", platform, p.Size, len(p.Gzip), len(p.Xz), strconv.Itoa(100*len(p.Xz)/len(p.Gzip)))
}

package peers

import (
	"errors"
	"strings"
	"testing"
)

const (
	h1 = "5f840eedd8a2b6732da1f1691824075f3b4e25e8b86a323988be2b0eaa4074fa"
	h2 = "6f840eedd8a2b6732da1f1691824075f3b4e25e8b86a323988be2b0eaa4074fa"
)

func files(name string) ([]byte, error) {
	if name == "missing.gz" {
		return nil, errors.New("not there")
	}
	if name == "plain" {
		return []byte("not gzip"), nil
	}
	if strings.HasSuffix(name, ".xz") {
		return []byte{0xfd, '7', 'z', 'X', 'Z', 0, 0, 4}, nil
	}
	return []byte{0x1f, 0x8b, 8, 0}, nil
}

// TestParse: a release build's manifest gives each supported platform once, with its hash, size
// and gzip form, and its xz form where a second line agrees; anything else is refused with what
// is wrong.
func TestParse(t *testing.T) {
	ps, err := Parse([]byte("linux/amd64 "+h1+" 7561342 farwing-linux-amd64.gz\ndarwin/arm64 "+h1+" 10 farwing-darwin-arm64.gz\n"), files)
	if err != nil || len(ps) != 2 || ps[0].Platform() != "linux/amd64" || ps[1].OS != "darwin" || ps[1].Arch != "arm64" ||
		ps[0].Hash != h1 || ps[0].Size != 7561342 || len(ps[1].Gzip) != 4 || ps[0].Xz != nil {
		t.Fatalf("Parse: %+v, %v", ps, err)
	}
	ps, err = Parse([]byte("linux/amd64 "+h1+" 7561342 farwing-linux-amd64.gz\nlinux/amd64 "+h1+" 7561342 farwing-linux-amd64.xz\n"), files)
	if err != nil || len(ps) != 1 || len(ps[0].Gzip) != 4 || len(ps[0].Xz) != 8 {
		t.Fatalf("Parse with an xz form: %+v, %v", ps, err)
	}
	for _, c := range []struct{ manifest, why string }{
		{"", "names none"},
		{"linux/amd64 " + h1 + " 7 a.gz\nlinux/amd64 " + h1 + " 7 b.gz", "repeated"},
		{"linux/amd64 " + h1 + " 7 a.gz\nlinux/amd64 " + h1 + " 7 a.xz\nlinux/amd64 " + h1 + " 7 b.xz", "repeated"},
		{"linux/amd64 " + h1 + " 7 a.gz\nlinux/amd64 " + h1 + " 8 a.xz", "as two builds"},
		{"linux/amd64 " + h1 + " 7 a.gz\nlinux/amd64 " + h2 + " 7 a.xz", "as two builds"},
		{"linux/amd64 " + h1 + " 7 a.xz", "no gzip form"},
		{"windows/amd64 " + h1 + " 7 a.gz", "unsupported"},
		{"linux/amd64 " + strings.ToUpper(h1) + " 7 a.gz", "not a SHA-256"},
		{"linux/amd64 " + h1[:63] + " 7 a.gz", "not a SHA-256"},
		{"linux/amd64 " + h1 + " -7 a.gz", "bad size"},
		{"linux/amd64 " + h1 + " 7 ../a.gz", "bad file name"},
		{"linux/amd64 " + h1 + " 7 .a.gz", "bad file name"},
		{"linux/amd64 " + h1 + " 7", "malformed"},
		{"linux/amd64 " + h1 + " 7 missing.gz", "not there"},
		{"linux/amd64 " + h1 + " 7 plain", "neither gzip nor xz"},
	} {
		if _, err := Parse([]byte(c.manifest), files); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Parse(%q): %v, want an error saying %q", c.manifest, err, c.why)
		}
	}
}

// TestPlainCarriesNone: a build without the tag carries no peers and says nothing is wrong.
func TestPlainCarriesNone(t *testing.T) {
	if ps, err := Carried(); len(ps) != 0 || err != nil {
		t.Fatalf("a plain build carries %d peers (%v)", len(ps), err)
	}
}

package main

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// TestSkipReader: --skip L:A passes the first L bytes, drops the next A and passes the rest,
// whatever sizes the reads come in; a stream that ends inside the dropped bytes ends the channel;
// malformed or oversized values are refused.
func TestSkipReader(t *testing.T) {
	in := []byte("PREFACE\nFARWING-UPLOAD gzip 9 0123456789abcdef\nxxxxxxxxxCONTROL\n")
	keep, drop := int64(len("PREFACE\n")), int64(len("FARWING-UPLOAD gzip 9 0123456789abcdef\nxxxxxxxxx"))
	for _, one := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(in)
		if one {
			r = iotest.OneByteReader(r)
		}
		got, err := io.ReadAll(&skipReader{r: r, keep: keep, drop: drop})
		if err != nil || string(got) != "PREFACE\nCONTROL\n" {
			t.Fatalf("one byte at a time %v: %q, %v", one, got, err)
		}
	}
	got, err := io.ReadAll(&skipReader{r: bytes.NewReader(in[:keep+5]), keep: keep, drop: drop})
	if string(got) != "PREFACE\n" || err != nil {
		t.Fatalf("cut inside the dropped bytes: %q, %v", got, err)
	}
	for v, ok := range map[string]bool{"17:65600": true, "0:0": true, "1048576:1048576": true, "": false, "17": false,
		"17:": false, ":5": false, "-1:5": false, "5:-1": false, "1048577:1": false, "1:1048577": false, "a:b": false, "1:2:3": false} {
		if _, _, err := parseSkip(v); (err == nil) != ok {
			t.Errorf("--skip %q: %v", v, err)
		}
	}
}

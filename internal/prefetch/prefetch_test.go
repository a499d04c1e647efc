package prefetch

import (
	"bytes"
	"testing"
)

// TestForWriteChangesNothing runs the hint over buffers of every alignment and length up to a
// few lines, and at the very end of an allocation, and checks that no byte changed.
func TestForWriteChangesNothing(t *testing.T) {
	buf := make([]byte, 1024)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	want := bytes.Clone(buf)
	for off := range 70 {
		for n := range 300 {
			ForWrite(buf[off : off+n])
		}
	}
	ForWrite(buf[1023:])
	ForWrite(nil)
	if !bytes.Equal(buf, want) {
		t.Fatal("ForWrite changed memory")
	}
}

func BenchmarkForWrite(b *testing.B) {
	buf := make([]byte, 1406)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		ForWrite(buf)
	}
}

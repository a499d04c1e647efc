package b3

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// TestChunks16 compares the kernel with the portable code, including counters that carry into
// the high word within one call.
func TestChunks16(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 on this machine: only the portable code runs")
	}
	r := rand.New(rand.NewPCG(1, 2))
	var buf [16 * ChunkSize]byte
	for _, counter := range []uint64{0, 1, 16, 1 << 20, 1<<32 - 5, 1<<32 - 16, 1 << 32, 1<<40 + 3} {
		fill(r, buf[:])
		var got, want [16][8]uint32
		Chunks16(&got, &buf, counter)
		chunksGeneric(&want, &buf, counter)
		if got != want {
			t.Fatalf("counter %d: kernel %x, portable %x", counter, got, want)
		}
	}
}

func TestParents16(t *testing.T) {
	if !Available {
		t.Skip("no AVX-512 on this machine: only the portable code runs")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		var in [32][8]uint32
		for i := range in {
			for j := range in[i] {
				in[i][j] = r.Uint32()
			}
		}
		var got, want [16][8]uint32
		Parents16(&got, &in, 16)
		parentsGeneric(&want, &in, 16)
		if got != want {
			t.Fatalf("kernel %x, portable %x", got, want)
		}
		// In place, as the tree merge uses it.
		inPlace := in
		Parents16((*[16][8]uint32)(inPlace[:16]), &inPlace, 16)
		if [16][8]uint32(inPlace[:16]) != want {
			t.Fatalf("in place: %x, want %x", inPlace[:16], want)
		}
	}
}

func BenchmarkChunks16(b *testing.B) {
	var buf [16 * ChunkSize]byte
	var cvs [16][8]uint32
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		Chunks16(&cvs, &buf, 7)
	}
}

func BenchmarkParents16(b *testing.B) {
	var in [32][8]uint32
	var out [16][8]uint32
	b.SetBytes(int64(len(in) * 32))
	b.ReportAllocs()
	for b.Loop() {
		Parents16(&out, &in, 16)
	}
}

// TestGenerated checks that b3_amd64.s is what gen_amd64.go writes.
func TestGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("short: not running the generator")
	}
	gen, err := exec.Command("go", "run", "gen_amd64.go").Output()
	if err != nil {
		t.Fatalf("go run gen_amd64.go: %v", err)
	}
	have, err := os.ReadFile("b3_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gen, have) {
		t.Fatal("b3_amd64.s differs from the output of gen_amd64.go: run go generate ./internal/b3")
	}
}

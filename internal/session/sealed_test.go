package session

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/wire"
)

// A chunk is decrypted straight into its block: a forged datagram for it (right session, lane and
// frame, wrong bytes) leaves the chunk unclaimed and unplaced, the authentic one then lands, and a
// replay of it is left to the path's replay check.
func TestSealedDataIntoBlock(t *testing.T) {
	client, server, r, b, file := sealedReceiver(t)
	seal := func(seq uint64, f wire.DataFrame, payload []byte) []byte {
		buf := make([]byte, wire.DataAADLen, wire.MaxDatagramV6)
		f.Put(buf[wire.HeaderLen:])
		return client.SealData(buf, wire.Header{Lane: 1, Seq: seq}, payload)
	}
	chunk1 := wire.DataFrame{Kind: wire.KindChunk, Block: 0, Chunk: 1}
	good := seal(5, chunk1, file[wire.ChunkSize:2*wire.ChunkSize])

	forged := append([]byte(nil), good...)
	rand.Read(forged[wire.DataAADLen:])
	h, err := server.Check(forged)
	if err != nil {
		t.Fatal(err)
	}
	if taken, ok := r.SealedData(1, h, forged, time.Now()); !taken || ok {
		t.Fatalf("forged chunk: taken %v authentic %v, want taken and rejected", taken, ok)
	}
	if b.isPlaced(1) || !b.claim(1) {
		t.Fatal("a forged chunk left its claim or was placed")
	}
	b.unclaim(1)

	h, _ = server.Check(good)
	if taken, ok := r.SealedData(1, h, good, time.Now()); !taken || !ok {
		t.Fatalf("authentic chunk: taken %v authentic %v", taken, ok)
	}
	if !b.isPlaced(1) || !bytes.Equal(b.data[wire.ChunkSize:2*wire.ChunkSize], file[wire.ChunkSize:2*wire.ChunkSize]) {
		t.Fatal("authentic chunk not placed intact")
	}
	if got := b.nHave.Load(); got != 1 {
		t.Fatalf("nHave %d, want 1", got)
	}
	// A second copy, and frames other than chunks, go the usual way (open in place, replay check).
	if taken, _ := r.SealedData(1, h, good, time.Now()); taken {
		t.Fatal("a duplicate chunk was taken")
	}
	hash := seal(6, wire.DataFrame{Kind: wire.KindHash, Block: 0, Chunk: 3}, make([]byte, 32))
	h, _ = server.Check(hash)
	if taken, _ := r.SealedData(1, h, hash, time.Now()); taken {
		t.Fatal("a hash frame was taken")
	}
}

// sealedReceiver is a receiver of one file of three chunks (random bytes: file) whose block 0 is
// in its window, on a path of server's keys; client seals what a sender would.
func sealedReceiver(t *testing.T) (client, server *wire.Crypto, r *Receiver, b *rxBlock, file []byte) {
	t.Helper()
	key := make([]byte, wire.KeyLen)
	rand.Read(key)
	client, _ = wire.NewCrypto(key, 7, wire.ClientToServer)
	server, _ = wire.NewCrypto(key, 7, wire.ServerToClient)
	plan, err := fcopy.NewPlan([]fcopy.File{{Name: "f", Size: 3 * wire.ChunkSize}})
	if err != nil {
		t.Fatal(err)
	}
	r = NewReceiver(&Path{crypto: server}, plan, nil, 4)
	b = newRxBlock(plan, 0, make([]byte, 3*wire.ChunkSize), wire.ChunkSize)
	r.ring[0].Store(b)
	file = make([]byte, 3*wire.ChunkSize)
	rand.Read(file)
	return client, server, r, b, file
}

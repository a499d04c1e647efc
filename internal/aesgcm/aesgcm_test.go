package aesgcm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	mrand "math/rand/v2"
	"testing"
)

func stdGCM(t testing.TB, key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func needVAES(t testing.TB) *vaesGCM {
	if !haveVAES {
		t.Skip("this CPU has no VAES/VPCLMULQDQ/AVX-512: New uses crypto/cipher's GCM")
	}
	key := make([]byte, KeyLen)
	rand.Read(key)
	g, err := newVAES(key)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRoundKeys checks the key expansion against crypto/aes through the tag of an empty
// message, which is E(K, J0).
func TestRoundKeys(t *testing.T) {
	needVAES(t)
	for range 20 {
		key := make([]byte, KeyLen)
		rand.Read(key)
		g, _ := newVAES(key)
		nonce := make([]byte, nonceSize)
		rand.Read(nonce)
		got := g.Seal(nil, nonce, nil, nil)
		var j0 [16]byte
		copy(j0[:], nonce)
		j0[15] = 1
		want := make([]byte, 16)
		block, _ := aes.NewCipher(key)
		block.Encrypt(want, j0[:])
		if !bytes.Equal(got, want) {
			t.Fatalf("E(K, J0) = %x, want %x", got, want)
		}
	}
}

// TestAgainstStdlib compares sealing and opening with crypto/cipher's GCM for every message
// length up to 700 bytes, every length around the switch from one reduction per message to
// Horner steps (maxAggregated blocks in all), then random ones up to 9000, with associated data
// of 0 to 300 bytes.
func TestAgainstStdlib(t *testing.T) {
	needVAES(t)
	rng := mrand.New(mrand.NewPCG(1, 2))
	edge := 16*(maxAggregated-2) - 40 // from here, with up to 32 bytes of aad, m crosses maxAggregated
	for i := range 2800 {
		key := make([]byte, KeyLen)
		rand.Read(key)
		g, _ := newVAES(key)
		ref := stdGCM(t, key)
		n := i
		switch {
		case i > 1000:
			n = rng.IntN(9000)
		case i > 700:
			n = edge + i - 700
		}
		aad := make([]byte, rng.IntN(4)*rng.IntN(100))
		switch {
		case i%7 == 0:
			aad = make([]byte, 24) // the data datagram's clear header
		case i > 700 && i <= 1000:
			aad = make([]byte, []int{0, 1, 16, 17, 24, 32}[i%6])
		}
		nonce := make([]byte, nonceSize)
		pt := make([]byte, n)
		rand.Read(aad)
		rand.Read(nonce)
		rand.Read(pt)
		want := ref.Seal(nil, nonce, pt, aad)
		got := g.Seal(nil, nonce, pt, aad)
		if !bytes.Equal(got, want) {
			t.Fatalf("seal of %d bytes with %d of aad differs from crypto/cipher at %d", n, len(aad), firstDiff(got, want))
		}
		back, err := g.Open(nil, nonce, want, aad)
		if err != nil || !bytes.Equal(back, pt) {
			t.Fatalf("open of %d bytes with %d of aad: %v", n, len(aad), err)
		}
		// In place, as the datagram code seals and opens.
		buf := append(make([]byte, 0, n+tagSize), pt...)
		sealed := g.Seal(buf[:0], nonce, buf, aad)
		if !bytes.Equal(sealed, want) {
			t.Fatalf("in-place seal of %d bytes differs", n)
		}
		opened, err := g.Open(sealed[:0], nonce, sealed, aad)
		if err != nil || !bytes.Equal(opened, pt) {
			t.Fatalf("in-place open of %d bytes: %v", n, err)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTamper checks that any changed bit of the ciphertext, tag, associated data or nonce is
// rejected, and that a rejected open leaves no plaintext behind.
func TestTamper(t *testing.T) {
	g := needVAES(t)
	nonce := make([]byte, nonceSize)
	aad := make([]byte, 24)
	pt := make([]byte, 1406)
	rand.Read(nonce)
	rand.Read(aad)
	rand.Read(pt)
	ct := g.Seal(nil, nonce, pt, aad)
	dst := make([]byte, len(pt))
	for i := range 8 * len(ct) {
		if i%13 != 0 && i < 8*(len(ct)-tagSize) {
			continue // every 13th bit of the body, every bit of the tag
		}
		bad := append([]byte(nil), ct...)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := g.Open(dst[:0], nonce, bad, aad); err == nil {
			t.Fatalf("flipped bit %d of the ciphertext was accepted", i)
		}
		if !bytes.Equal(dst, make([]byte, len(dst))) {
			t.Fatal("a rejected open left plaintext in dst")
		}
	}
	for i := range 8 * len(aad) {
		bad := append([]byte(nil), aad...)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := g.Open(nil, nonce, ct, bad); err == nil {
			t.Fatalf("flipped bit %d of the associated data was accepted", i)
		}
	}
	bad := append([]byte(nil), nonce...)
	bad[11] ^= 1
	if _, err := g.Open(nil, bad, ct, aad); err == nil {
		t.Fatal("another nonce was accepted")
	}
	if _, err := g.Open(nil, nonce, ct[:tagSize-1], aad); err == nil {
		t.Fatal("a message shorter than the tag was accepted")
	}
}

// TestNoWriteOutside checks that sealing and opening write exactly their output: the masked
// stores of the last group must not touch the bytes after it.
func TestNoWriteOutside(t *testing.T) {
	g := needVAES(t)
	nonce := make([]byte, nonceSize)
	for n := range 300 {
		pt := make([]byte, n)
		rand.Read(pt)
		buf := bytes.Repeat([]byte{0xa5}, n+tagSize+300)
		g.Seal(buf[:0], nonce, pt, nil)
		if !bytes.Equal(buf[n+tagSize:], bytes.Repeat([]byte{0xa5}, 300)) {
			t.Fatalf("seal of %d bytes wrote past its output", n)
		}
		ct := append([]byte(nil), buf[:n+tagSize]...)
		out := bytes.Repeat([]byte{0x5a}, n+300)
		if _, err := g.Open(out[:0], nonce, ct, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[:n], pt) || !bytes.Equal(out[n:], bytes.Repeat([]byte{0x5a}, 300)) {
			t.Fatalf("open of %d bytes wrote past its output or got the plaintext wrong", n)
		}
	}
}

// TestGFMul checks the field multiplication used for the powers of H: x·1 = x, commutativity,
// and H^a·H^b = H^(a+b).
func TestGFMul(t *testing.T) {
	oneH := uint64(1) << 63 // the element 1: coefficient of x^0 is the top bit
	for range 100 {
		xh, xl, yh, yl := mrand.Uint64(), mrand.Uint64(), mrand.Uint64(), mrand.Uint64()
		if h, l := gfMul(xh, xl, oneH, 0); h != xh || l != xl {
			t.Fatal("x·1 != x")
		}
		a1, a2 := gfMul(xh, xl, yh, yl)
		b1, b2 := gfMul(yh, yl, xh, xl)
		if a1 != b1 || a2 != b2 {
			t.Fatal("x·y != y·x")
		}
		h2, l2 := gfMul(xh, xl, xh, xl)
		h3, l3 := gfMul(h2, l2, xh, xl)
		h4a, l4a := gfMul(h3, l3, xh, xl)
		h4b, l4b := gfMul(h2, l2, h2, l2)
		if h4a != h4b || l4a != l4b {
			t.Fatal("x^3·x != x^2·x^2")
		}
	}
}

// TestNewFallback checks that New works whichever implementation it picks, and with VAES
// switched off (SetVAES(false): FARWING_VAES=0).
func TestNewFallback(t *testing.T) {
	key := make([]byte, KeyLen)
	rand.Read(key)
	nonce := make([]byte, nonceSize)
	want := stdGCM(t, key).Seal(nil, nonce, []byte("farwing"), []byte("aad"))
	defer SetVAES(true)
	for _, on := range []bool{true, false} {
		SetVAES(on)
		g, err := New(key)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Seal(nil, nonce, []byte("farwing"), []byte("aad")); !bytes.Equal(got, want) {
			t.Fatalf("VAES %v: seal differs", on)
		}
		_, isVAES := g.(*vaesGCM)
		if isVAES != (haveVAES && on) || Accelerated() != isVAES {
			t.Fatalf("VAES %v: VAES implementation %v (Accelerated %v), CPU has it %v", on, isVAES, Accelerated(), haveVAES)
		}
	}
	if _, err := New(key[:16]); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
}

// TestDatagram: Datagram seals and opens as crypto/cipher's GCM does, with VAES and without
// (SetVAES), in place too, and refuses an altered datagram; with VAES a nonce on the caller's
// stack costs no allocation.
func TestDatagram(t *testing.T) {
	defer SetVAES(true)
	rng := mrand.New(mrand.NewPCG(3, 4))
	for _, on := range []bool{true, false} {
		SetVAES(on)
		for i := range 200 {
			key := make([]byte, KeyLen)
			rand.Read(key)
			d, err := NewDatagram(key)
			if err != nil {
				t.Fatal(err)
			}
			if isVAES := d.v != nil; isVAES != Accelerated() {
				t.Fatalf("VAES %v: Datagram's AEAD is VAES %v", on, isVAES)
			}
			ref := stdGCM(t, key)
			var nonce [nonceSize]byte
			rand.Read(nonce[:])
			pt := make([]byte, rng.IntN(1500)+i%3)
			rand.Read(pt)
			aad := make([]byte, rng.IntN(40))
			rand.Read(aad)
			want := ref.Seal(nil, nonce[:], pt, aad)
			got := d.Seal(append([]byte(nil), aad...), &nonce, pt, aad)
			if !bytes.Equal(got[len(aad):], want) || !bytes.Equal(got[:len(aad)], aad) {
				t.Fatalf("VAES %v, %d bytes: seal differs", on, len(pt))
			}
			buf := append([]byte(nil), want...) // in place
			opened, err := d.Open(buf[:0], &nonce, buf, aad)
			if err != nil || !bytes.Equal(opened, pt) {
				t.Fatalf("VAES %v, %d bytes: open %v", on, len(pt), err)
			}
			bad := append([]byte(nil), want...)
			bad[rng.IntN(len(bad))] ^= 1
			if _, err := d.Open(nil, &nonce, bad, aad); err == nil {
				t.Fatalf("VAES %v: an altered datagram opened", on)
			}
		}
	}
	if _, err := NewDatagram(make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
	SetVAES(true)
	if !Accelerated() {
		return
	}
	d, _ := NewDatagram(make([]byte, KeyLen))
	pt, out := make([]byte, 1406), make([]byte, 0, 1406+tagSize)
	if n := testing.AllocsPerRun(100, func() {
		var nonce [nonceSize]byte
		nonce[11] = 7
		sealed := d.Seal(out, &nonce, pt, nil)
		if _, err := d.Open(pt[:0], &nonce, sealed, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per seal and open, want 0", n)
	}
}

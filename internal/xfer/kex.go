package xfer

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/farwing/farwing/internal/wire"
)

// The session key comes from an ephemeral X25519 exchange over the control channel. The client's
// public key travels on the remote command line (`farwing serve --pub KEY`: public, so it may show
// in a process list); the server answers with its own public key in its first message on the ssh
// session, which ssh authenticates and encrypts. The server can therefore open its UDP lanes and
// announce them at once, without waiting a round trip for the client's first message.

// kexInfo binds derived keys to this protocol's use.
const kexInfo = "farwing v2 session key"

// newKex makes an ephemeral key pair.
func newKex() (*ecdh.PrivateKey, error) { return ecdh.X25519().GenerateKey(rand.Reader) }

// encodePub and decodePub carry public keys as unpadded URL-safe base64 (shell-safe).
func encodePub(k *ecdh.PublicKey) string { return base64.RawURLEncoding.EncodeToString(k.Bytes()) }

func decodePub(s string) (*ecdh.PublicKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bad public key: %w", err)
	}
	return ecdh.X25519().NewPublicKey(b)
}

// sessionKey derives the AEAD key and connection id from the exchange; both ends compute the same
// from (their private key, the other's public key) and the two public keys in a fixed order.
func sessionKey(priv *ecdh.PrivateKey, peer *ecdh.PublicKey, clientPub, serverPub []byte) (key []byte, connID uint32, err error) {
	shared, err := priv.ECDH(peer)
	if err != nil {
		return nil, 0, err
	}
	salt := append(append([]byte(nil), clientPub...), serverPub...)
	out, err := hkdf.Key(sha256.New, shared, salt, kexInfo, wire.KeyLen+4)
	if err != nil {
		return nil, 0, err
	}
	return out[:wire.KeyLen], binary.BigEndian.Uint32(out[wire.KeyLen:]), nil
}

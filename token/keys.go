package token

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
)

// Key is an Ed25519 key pair (or, for a retired key kept only to verify, a
// public key) with its key ID: the RFC 7638 JWK thumbprint of the public key.
type Key struct {
	ID      string
	Public  ed25519.PublicKey
	Private ed25519.PrivateKey // nil for a verify-only key
}

// KeySet holds the signing key and every key that verifies. The first key
// signs; all of them verify, so a key is rotated by putting the new one first
// and keeping the old one until its tokens have expired.
type KeySet struct {
	signer Key
	byID   map[string]ed25519.PublicKey
	keys   []Key
}

// NewKeySet returns a set whose first key signs. It must hold a private key.
func NewKeySet(keys ...Key) (*KeySet, error) {
	if len(keys) == 0 || keys[0].Private == nil {
		return nil, fmt.Errorf("%w: the first key must be an Ed25519 private key", ErrKey)
	}
	ks := &KeySet{signer: keys[0], byID: make(map[string]ed25519.PublicKey, len(keys)), keys: keys}
	for _, k := range keys {
		ks.byID[k.ID] = k.Public
	}
	return ks, nil
}

// GenerateKey returns a new random Ed25519 key.
func GenerateKey() (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: Thumbprint(pub), Public: pub, Private: priv}, nil
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key: the
// base64url SHA-256 of {"crv":"Ed25519","kty":"OKP","x":"..."} (members in
// lexicographic order, no spaces).
func Thumbprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// MarshalPEM encodes the private key as a PKCS #8 "PRIVATE KEY" PEM block, or a
// verify-only key as a PKIX "PUBLIC KEY" block.
func (k Key) MarshalPEM() ([]byte, error) {
	if k.Private == nil {
		der, err := x509.MarshalPKIXPublicKey(k.Public)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKeyPEM reads an Ed25519 key from a "PRIVATE KEY" (PKCS #8) or "PUBLIC
// KEY" (PKIX) PEM block.
func ParseKeyPEM(data []byte) (Key, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return Key{}, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return Key{}, fmt.Errorf("%w: %w", ErrKey, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return Key{}, fmt.Errorf("%w: private key is %T, want Ed25519", ErrKey, k)
		}
		pub := priv.Public().(ed25519.PublicKey)
		return Key{ID: Thumbprint(pub), Public: pub, Private: priv}, nil
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return Key{}, fmt.Errorf("%w: %w", ErrKey, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return Key{}, fmt.Errorf("%w: public key is %T, want Ed25519", ErrKey, k)
		}
		return Key{ID: Thumbprint(pub), Public: pub}, nil
	default:
		return Key{}, fmt.Errorf("%w: PEM block %q, want PRIVATE KEY or PUBLIC KEY", ErrKey, block.Type)
	}
}

// LoadKeySet reads PEM files; the first signs and must hold a private key.
func LoadKeySet(paths ...string) (*KeySet, error) {
	keys := make([]Key, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKey, err)
		}
		k, err := ParseKeyPEM(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		keys = append(keys, k)
	}
	return NewKeySet(keys...)
}

// SigningKeyID returns the kid of the key that signs.
func (ks *KeySet) SigningKeyID() string { return ks.signer.ID }

// lookup returns the public key for kid.
func (ks *KeySet) lookup(kid string) (ed25519.PublicKey, bool) {
	k, ok := ks.byID[kid]
	return k, ok
}

// JWK is the public half of a key as RFC 8037 writes an Ed25519 key.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// JWKS is a JSON Web Key Set: public keys only.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWKS returns the public keys that verify, signing key first.
func (ks *KeySet) JWKS() JWKS {
	out := JWKS{Keys: make([]JWK, 0, len(ks.keys))}
	for _, k := range ks.keys {
		out.Keys = append(out.Keys, JWK{
			Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.Public),
			Kid: k.ID, Use: "sig", Alg: "EdDSA",
		})
	}
	return out
}

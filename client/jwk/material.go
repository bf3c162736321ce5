package jwk

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"math"
	"math/big"

	"filippo.io/edwards25519"
)

// material decodes the public key of m, whose kty and crv parse has
// checked are OKP Ed25519, EC P-256 or RSA.
func material(m members) (crypto.PublicKey, error) {
	switch *m.kty {
	case "OKP":
		return okp(m)
	case "EC":
		return ec(m)
	}
	return rsaKey(m)
}

// okp decodes an Ed25519 key: x, 32 bytes, a point on the curve not of
// small order (such a point "verifies" signatures made without a private
// key).
func okp(m members) (crypto.PublicKey, error) {
	if m.x == nil {
		return nil, refuse(ErrKey, "jwk member x is missing (kty, crv and x are required)")
	}
	if m.y != nil {
		return nil, refuse(ErrKey, "jwk member y is not part of an OKP key")
	}
	x, err := DecodeBase64URL(*m.x)
	if err != nil {
		return nil, refuse(ErrKey, "jwk member x is not base64url")
	}
	if len(x) != ed25519.PublicKeySize {
		return nil, refuse(ErrKey, "jwk member x is %d bytes, not %d", len(x), ed25519.PublicKeySize)
	}
	p, err := new(edwards25519.Point).SetBytes(x)
	if err != nil {
		return nil, refuse(ErrKey, "jwk member x is not a point on Ed25519")
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return nil, refuse(ErrKey, "jwk member x is a point of small order, which is no key")
	}
	return ed25519.PublicKey(x), nil
}

// ec decodes a P-256 key: x and y of 32 bytes each, a point on the curve.
func ec(m members) (crypto.PublicKey, error) {
	switch {
	case m.x == nil:
		return nil, refuse(ErrKey, "jwk member x is missing (kty, crv and x are required)")
	case m.y == nil:
		return nil, refuse(ErrKey, "jwk member y is missing (an EC key has one)")
	}
	x, err := DecodeBase64URL(*m.x)
	if err != nil {
		return nil, refuse(ErrKey, "jwk member x is not base64url")
	}
	y, err := DecodeBase64URL(*m.y)
	if err != nil {
		return nil, refuse(ErrKey, "jwk member y is not base64url")
	}
	if len(x) != 32 || len(y) != 32 {
		return nil, refuse(ErrKey, "jwk members x and y are %d and %d bytes, not 32", len(x), len(y))
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return nil, refuse(ErrKey, "jwk members x and y are not a point on P-256")
	}
	return pub, nil
}

// rsaKey decodes an RSA key: a modulus of MinRSABits to MaxRSABits, an odd
// exponent of 3 to 2³¹-1.
func rsaKey(m members) (crypto.PublicKey, error) {
	if m.n == nil || m.e == nil {
		return nil, refuse(ErrKey, "jwk members n and e are required of an RSA key")
	}
	n, err := DecodeBase64URL(*m.n)
	if err != nil {
		return nil, refuse(ErrKey, "jwk member n is not base64url")
	}
	e, err := DecodeBase64URL(*m.e)
	if err != nil {
		return nil, refuse(ErrKey, "jwk member e is not base64url")
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n)}
	if bits := pub.N.BitLen(); bits < MinRSABits || bits > MaxRSABits {
		return nil, refuse(ErrKey, "RSA key of %d bits: want %d to %d", bits, MinRSABits, MaxRSABits)
	}
	if pub.N.Bit(0) == 0 {
		return nil, refuse(ErrKey, "jwk member n is even, which is no RSA modulus")
	}
	ev := new(big.Int).SetBytes(e)
	if ev.BitLen() > 31 || ev.Int64() < 3 || ev.Bit(0) == 0 {
		return nil, refuse(ErrKey, "jwk member e: want an odd exponent of 3 to %d", math.MaxInt32)
	}
	pub.E = int(ev.Int64())
	return pub, nil
}

// checkX5C checks that chain, a key's x5c, starts with a certificate of
// pub (RFC 7517 §4.7). The chain is not verified: the key is trusted for
// where it was read from, not for its certificate.
func checkX5C(chain []string, pub crypto.PublicKey) error {
	if len(chain) == 0 {
		return refuse(ErrKey, "jwk member x5c is empty")
	}
	der, err := base64.StdEncoding.Strict().DecodeString(chain[0])
	if err != nil {
		return refuse(ErrKey, "jwk member x5c's first certificate is not base64")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return refuse(ErrKey, "jwk member x5c's first certificate does not parse")
	}
	if k, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(pub) {
		return refuse(ErrKey, "jwk member x5c's first certificate is of another key")
	}
	return nil
}

// errNotBase64URL is what DecodeBase64URL says of anything but canonical
// base64url without padding.
var errNotBase64URL = errors.New("not base64url")

// DecodeBase64URL decodes s, base64url without padding as JOSE writes its
// members and segments (RFC 7515 §2), refusing any other byte (the
// standard decoder would skip CR and LF) and non-canonical trailing bits,
// so that a value has one encoding.
func DecodeBase64URL(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, errNotBase64URL
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errNotBase64URL
	}
	return b, nil
}

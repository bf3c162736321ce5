package dpop

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snowtoken/snowtoken/client/jwk"
)

// Algorithms a proof may be signed with.
const (
	AlgEdDSA = jwk.EdDSA // Ed25519 (RFC 8037), key OKP/Ed25519
	AlgES256 = jwk.ES256 // ECDSA P-256 SHA-256 (RFC 7518 §3.4), key EC/P-256
)

// keyTypes maps each algorithm to the kty and crv of its keys.
var keyTypes = map[string]struct{ kty, crv string }{
	AlgEdDSA: {"OKP", "Ed25519"},
	AlgES256: {"EC", "P-256"},
}

// JWK is the public key of a proof (RFC 7517): an OKP key on Ed25519 or an
// EC key on P-256.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y,omitempty"` // EC only
	// Alg is the jwk's own alg member, if it has one; a proof's alg must
	// then be the same.
	Alg string `json:"alg,omitempty"`

	pub any // ed25519.PublicKey or *ecdsa.PublicKey, set by ParseJWK
}

// ParseJWK reads a proof's public key from its JSON with the rules of
// package jwk for a key sent alone (jwk.Parse), for EdDSA and ES256: an
// OKP key on Ed25519 or an EC key on P-256, of exact and never repeated
// member names, canonical base64url coordinates of a valid point (an
// Ed25519 point of small order, which can "sign" without a private key, is
// refused); optionally kid, use ("sig"), key_ops (["verify"]), ext (as
// WebCrypto exports a public key) and alg (EdDSA or ES256, matching kty).
// A private member (d, p, q, dp, dq, qi, oth, k) is ErrPrivateKey; any
// other member, or any other flaw, ErrJWK.
func ParseJWK(data []byte) (JWK, error) {
	k, err := jwk.Parse(data, AlgEdDSA, AlgES256)
	if err != nil {
		kind := ErrJWK
		if errors.Is(err, jwk.ErrPrivateKey) {
			kind = ErrPrivateKey
		}
		d, _ := jwk.Description(err)
		return JWK{}, refuse(kind, "%s", d)
	}
	return JWK{Kty: k.Type, Crv: k.Curve, X: k.X, Y: k.Y, Alg: k.Alg, pub: k.Public}, nil
}

// thumbprintMembers are the members of a thumbprint's input, in the
// lexicographic order RFC 7638 §3.2 asks for.
type thumbprintMembers struct {
	Crv string `json:"crv"`
	Kty string `json:"kty"`
	X   string `json:"x"`
	Y   string `json:"y,omitempty"`
}

// Thumbprint returns the key's RFC 7638 JWK SHA-256 thumbprint, in
// base64url: the hash of its required members in lexicographic order,
// without spaces: {"crv","kty","x"} for OKP, {"crv","kty","x","y"} for EC.
// It is the cnf.jkt of a token bound to the key (RFC 9449 §6.1).
func (k JWK) Thumbprint() string {
	data, err := jsonv2.Marshal(thumbprintMembers{Crv: k.Crv, Kty: k.Kty, X: k.X, Y: k.Y}, jsontext.AllowInvalidUTF8(true))
	if err != nil { // strings always marshal, invalid UTF-8 as U+FFFD
		panic(err)
	}
	sum := sha256.Sum256(data)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// verify checks the signature sig (base64url) of input made with alg.
func (k JWK) verify(alg, input, sig string) error {
	if kt := keyTypes[alg]; kt.kty != k.Kty || kt.crv != k.Crv {
		return refuse(ErrJWK, "the jwk, a %s %s key, cannot make %s signatures", k.Kty, k.Crv, alg)
	}
	if k.Alg != "" && k.Alg != alg {
		return refuse(ErrJWK, "jwk member alg is %s, not the proof's alg %s", k.Alg, alg)
	}
	s, err := jwk.DecodeBase64URL(sig)
	if err != nil {
		return refuse(ErrProof, "the signature is not base64url")
	}
	switch pub := k.pub.(type) {
	case ed25519.PublicKey:
		if len(s) == ed25519.SignatureSize && ed25519.Verify(pub, []byte(input), s) {
			return nil
		}
	case *ecdsa.PublicKey:
		h := sha256.Sum256([]byte(input))
		if len(s) == 64 && ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(s[:32]), new(big.Int).SetBytes(s[32:])) {
			return nil
		}
	default:
		return fmt.Errorf("%w: not from ParseJWK", ErrJWK)
	}
	return refuse(ErrSignature, "the signature does not verify with the jwk")
}

package dpop

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"

	"filippo.io/edwards25519"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Algorithms a proof may be signed with.
const (
	AlgEdDSA = "EdDSA" // Ed25519 (RFC 8037), key OKP/Ed25519
	AlgES256 = "ES256" // ECDSA P-256 SHA-256 (RFC 7518 §3.4), key EC/P-256
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

// jwkMembers are the members ParseJWK accepts, and the private members it
// names in its error (RFC 7518 §6.2.2, §6.3.2, §6.4.1); any other is refused.
type jwkMembers struct {
	Kty *string `json:"kty"`
	Crv *string `json:"crv"`
	X   *string `json:"x"`
	Y   *string `json:"y"`
	Alg *string `json:"alg"`
	Kid *string `json:"kid"`
	Use *string `json:"use"`
	// WebCrypto's exportKey("jwk") adds these to a public key.
	KeyOps []string `json:"key_ops"`
	Ext    *bool    `json:"ext"`

	D   jsontext.Value `json:"d"`
	P   jsontext.Value `json:"p"`
	Q   jsontext.Value `json:"q"`
	DP  jsontext.Value `json:"dp"`
	DQ  jsontext.Value `json:"dq"`
	QI  jsontext.Value `json:"qi"`
	Oth jsontext.Value `json:"oth"`
	K   jsontext.Value `json:"k"`
}

// ParseJWK reads a public key from its JSON: one object whose names are
// exact and never repeated; kty, crv, x (and y for EC) of the types above,
// x and y canonical base64url of a valid point's full-length coordinates (an
// Ed25519 point of small order, which can "sign" without a private key, is
// refused); optionally kid, use ("sig"), key_ops (["verify"]), ext (as
// WebCrypto exports a public key) and alg (EdDSA or ES256, matching kty). A private member (d, p, q, dp, dq, qi, oth, k) is ErrPrivateKey; any
// other member, or any other flaw, ErrJWK.
func ParseJWK(data []byte) (JWK, error) {
	var m jwkMembers
	if len(data) == 0 || data[0] != '{' {
		return JWK{}, refuse(ErrJWK, "%s is not a JSON object", partJWK.name)
	}
	if err := jsonv2.Unmarshal(data, &m, jsonv2.RejectUnknownMembers(true)); err != nil {
		return JWK{}, refuse(ErrJWK, "%s", jsonReason(partJWK, err))
	}
	for name, v := range map[string]jsontext.Value{"d": m.D, "p": m.P, "q": m.Q, "dp": m.DP, "dq": m.DQ, "qi": m.QI, "oth": m.Oth, "k": m.K} {
		if v != nil {
			return JWK{}, refuse(ErrPrivateKey, "the jwk holds the private key member %s: send the public key alone", name)
		}
	}
	for _, req := range [...]struct {
		name string
		v    *string
	}{{"kty", m.Kty}, {"crv", m.Crv}, {"x", m.X}} {
		if req.v == nil {
			return JWK{}, refuse(ErrJWK, "jwk member %s is missing (kty, crv and x are required)", req.name)
		}
	}
	k := JWK{Kty: *m.Kty, Crv: *m.Crv, X: *m.X}
	if m.Use != nil && *m.Use != "sig" {
		return JWK{}, refuse(ErrJWK, "jwk member use is %.16q, not sig", *m.Use)
	}
	for _, op := range m.KeyOps {
		if op != "verify" {
			return JWK{}, refuse(ErrJWK, "jwk member key_ops holds %.16q: verify alone is accepted", op)
		}
	}
	if m.Alg != nil {
		if kt, ok := keyTypes[*m.Alg]; !ok || kt.kty != k.Kty {
			return JWK{}, refuse(ErrJWK, "jwk member alg %.16q is not the alg of a %.16q key", *m.Alg, k.Kty)
		}
		k.Alg = *m.Alg
	}
	x, err := decodeBase64URL(k.X)
	if err != nil {
		return JWK{}, refuse(ErrJWK, "jwk member x is not base64url")
	}
	switch {
	case k.Kty == "OKP" && k.Crv == "Ed25519":
		if m.Y != nil {
			return JWK{}, refuse(ErrJWK, "jwk member y is not part of an OKP key")
		}
		if len(x) != ed25519.PublicKeySize {
			return JWK{}, refuse(ErrJWK, "jwk member x is %d bytes, not %d", len(x), ed25519.PublicKeySize)
		}
		p, err := new(edwards25519.Point).SetBytes(x)
		if err != nil {
			return JWK{}, refuse(ErrJWK, "jwk member x is not a point on Ed25519")
		}
		if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
			return JWK{}, refuse(ErrJWK, "jwk member x is a point of small order, which is no key")
		}
		k.pub = ed25519.PublicKey(x)
	case k.Kty == "EC" && k.Crv == "P-256":
		if m.Y == nil {
			return JWK{}, refuse(ErrJWK, "jwk member y is missing (an EC key has one)")
		}
		k.Y = *m.Y
		y, err := decodeBase64URL(k.Y)
		if err != nil {
			return JWK{}, refuse(ErrJWK, "jwk member y is not base64url")
		}
		if len(x) != 32 || len(y) != 32 {
			return JWK{}, refuse(ErrJWK, "jwk members x and y are %d and %d bytes, not 32", len(x), len(y))
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return JWK{}, refuse(ErrJWK, "jwk members x and y are not a point on P-256")
		}
		k.pub = pub
	default:
		return JWK{}, refuse(ErrJWK, "jwk kty %.16q and crv %.16q: the key must be OKP Ed25519 or EC P-256", k.Kty, k.Crv)
	}
	return k, nil
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
	s, err := decodeBase64URL(sig)
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

// errNotBase64URL is what decodeBase64URL says of anything but canonical
// base64url without padding.
var errNotBase64URL = errors.New("not base64url")

// decodeBase64URL decodes s, base64url without padding, refusing any other
// byte (the decoder would skip CR and LF) and non-canonical trailing bits,
// so that a value has one encoding.
func decodeBase64URL(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if !isBase64URL(s[i]) {
			return nil, errNotBase64URL
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errNotBase64URL
	}
	return b, nil
}

package clientauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"
	"slices"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Algorithms an assertion may be signed with: the asymmetric ones a client
// or a cluster signs with. Kubernetes signs service-account tokens with
// RS256 unless its key is an EC one. No "none", no HS*: a public key must
// never serve as an HMAC secret.
const (
	AlgEdDSA = "EdDSA" // Ed25519 (RFC 8037), key OKP/Ed25519
	AlgES256 = "ES256" // ECDSA P-256 SHA-256, key EC/P-256
	AlgRS256 = "RS256" // RSASSA-PKCS1-v1_5 SHA-256, key RSA ≥ MinRSABits
	AlgPS256 = "PS256" // RSASSA-PSS SHA-256, key RSA ≥ MinRSABits
)

// Algorithms lists the algorithms, for the discovery metadata
// (token_endpoint_auth_signing_alg_values_supported).
var Algorithms = []string{AlgEdDSA, AlgES256, AlgRS256, AlgPS256}

// Bounds of a key set.
const (
	MinRSABits = 2048 // smaller RSA keys are refused
	// MaxRSABits bounds the cost of one verification, which anyone may
	// ask for by sending an assertion in a client's name.
	MaxRSABits = 8192
	MaxKeys    = 64 // keys in one set
)

// privateMembers are the JWK members of private or symmetric key material
// (RFC 7518 §6.2.2, §6.3.2, §6.4.1; "priv" is ML-DSA's): a key set that
// holds one is refused whole, since its owner has published a secret.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"}

// usableTypes are the key types the algorithms use. A key of another
// public type (such as an ML-DSA "AKP" key) is skipped, so that an
// issuer's set may hold keys we cannot use; "oct" is a secret and refused.
var usableTypes = []string{"RSA", "EC", "OKP"}

// Key is one public key of a set.
type Key struct {
	ID  string // kid, may be empty
	Alg string // the JWK's alg, if it names one: an assertion's alg must then be the same
	Pub crypto.PublicKey
}

// KeySet is a parsed JSON Web Key Set (RFC 7517 §5) of public signing keys.
type KeySet struct {
	keys []Key
}

// Len is the number of usable keys in the set.
func (ks *KeySet) Len() int { return len(ks.keys) }

// ParseJWKS reads a key set: a JSON object whose "keys" is an array of at
// most MaxKeys JWKs (other top-level members are ignored, RFC 7517 §5).
// A key set with a private or symmetric key, member names that differ only
// in case, a key that does not parse, an RSA key outside MinRSABits to
// MaxRSABits, an alg that is not one of Algorithms or does not fit its key,
// or two keys of one kid is refused whole (ErrJWKS, ErrPrivateKey): a set is a
// configuration, and a flaw in it is the operator's to fix, not to skip
// silently. A key whose "use" is "enc", or whose kty is a public one we do
// not verify with (not RSA, EC or OKP), is skipped. A set with no usable
// key is refused.
//
// Each key's members are read first with encoding/json/v2 semantics (exact
// names, none repeated), so that a private member is found under its exact
// name; then github.com/go-jose/go-jose/v4 decodes the key material. Go-jose
// is the JOSE library Kubernetes itself serves its service-account JWKS
// with, kept by the go-jose maintainers, and checks what a hand-written
// decoder would have to: an EC point on its curve, RSA n and e, Ed25519
// lengths, x5c matching the key. Signatures are verified with
// golang-jwt/jwt/v5 (WithValidMethods), which the rest of the issuer uses.
func ParseJWKS(data []byte) (*KeySet, error) {
	var doc struct {
		Keys []jsontext.Value `json:"keys"`
	}
	if err := jsonv2.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: not a key set object: %w", ErrJWKS, err)
	}
	if doc.Keys == nil {
		return nil, refusal.New(ErrJWKS, "no \"keys\" array")
	}
	if len(doc.Keys) > MaxKeys {
		return nil, refusal.New(ErrJWKS, "%d keys, more than %d", len(doc.Keys), MaxKeys)
	}
	ks := &KeySet{}
	for i, raw := range doc.Keys {
		k, ok, err := parseJWK(raw)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if !ok {
			continue
		}
		if k.ID != "" && slices.ContainsFunc(ks.keys, func(o Key) bool { return o.ID == k.ID }) {
			return nil, refusal.New(ErrJWKS, "key %d: kid %.64q given twice", i, k.ID)
		}
		ks.keys = append(ks.keys, k)
	}
	if len(ks.keys) == 0 {
		return nil, refusal.New(ErrJWKS, "no usable signing key (RSA, EC P-256 or Ed25519)")
	}
	return ks, nil
}

// parseJWK reads one key; ok is false for a key to skip.
func parseJWK(raw jsontext.Value) (Key, bool, error) {
	var members map[string]jsontext.Value
	if err := jsonv2.Unmarshal(raw, &members); err != nil {
		return Key{}, false, fmt.Errorf("%w: not an object with distinct member names: %w", ErrJWKS, err)
	}
	// go-jose matches member names regardless of case, as encoding/json
	// does: names that differ only in case ("d" and "D", "kty" and "KTY")
	// would mean one thing to it and another here.
	folded := make(map[string]bool, len(members))
	for name := range members {
		lower := strings.ToLower(name)
		switch {
		case slices.Contains(privateMembers, lower):
			return Key{}, false, refusal.New(ErrPrivateKey, "member %.16q", name)
		case folded[lower]:
			return Key{}, false, refusal.New(ErrJWKS, "member names that differ only in case (%.16q)", name)
		}
		folded[lower] = true
	}
	var head struct {
		Kty string `json:"kty"`
		Use string `json:"use"`
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := jsonv2.Unmarshal(raw, &head); err != nil {
		return Key{}, false, fmt.Errorf("%w: kty, use, alg and kid must be strings: %w", ErrJWKS, err)
	}
	switch {
	case head.Kty == "oct":
		return Key{}, false, refusal.New(ErrPrivateKey, "kty \"oct\" is a shared secret")
	case head.Kty == "":
		return Key{}, false, refusal.New(ErrJWKS, "no kty")
	case head.Use == "enc", !slices.Contains(usableTypes, head.Kty):
		return Key{}, false, nil
	case head.Use != "" && head.Use != "sig":
		return Key{}, false, refusal.New(ErrJWKS, "use %.16q: want \"sig\"", head.Use)
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return Key{}, false, fmt.Errorf("%w: kid %.64q: %w", ErrJWKS, head.Kid, err)
	}
	if !jwk.Valid() || !jwk.IsPublic() {
		return Key{}, false, refusal.New(ErrJWKS, "kid %.64q: not a valid public key", head.Kid)
	}
	k := Key{ID: head.Kid, Alg: head.Alg, Pub: jwk.Key}
	switch pub := jwk.Key.(type) {
	case *rsa.PublicKey:
		if n := pub.N.BitLen(); n < MinRSABits || n > MaxRSABits {
			return Key{}, false, refusal.New(ErrJWKS, "kid %.64q: RSA key of %d bits: want %d to %d", head.Kid, n, MinRSABits, MaxRSABits)
		}
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return Key{}, false, nil // P-384, P-521: no algorithm of ours; skipped
		}
	case ed25519.PublicKey:
	default:
		return Key{}, false, nil
	}
	if k.Alg != "" {
		if !slices.Contains(Algorithms, k.Alg) {
			return Key{}, false, refusal.New(ErrJWKS, "kid %.64q: alg %.16q: want one of %v", head.Kid, k.Alg, Algorithms)
		}
		if !keyFits(k.Alg, k.Pub) {
			return Key{}, false, refusal.New(ErrJWKS, "kid %.64q: alg %s does not fit a %s key", head.Kid, k.Alg, head.Kty)
		}
	}
	return k, true, nil
}

// keyFits reports whether pub is a key of alg's type.
func keyFits(alg string, pub crypto.PublicKey) bool {
	switch pub.(type) {
	case *rsa.PublicKey:
		return alg == AlgRS256 || alg == AlgPS256
	case *ecdsa.PublicKey:
		return alg == AlgES256
	case ed25519.PublicKey:
		return alg == AlgEdDSA
	}
	return false
}

// find returns the key that verifies an assertion signed with alg under
// kid: the key of that kid, or without a kid the one key of alg's type in
// the set (ErrUnknownKey when there are none or several). The key's type
// must fit alg, and its own alg, if any, must be alg.
func (ks *KeySet) find(kid, alg string) (crypto.PublicKey, error) {
	var found *Key
	for i := range ks.keys {
		k := &ks.keys[i]
		if kid != "" {
			if k.ID == kid {
				found = k
				break
			}
			continue
		}
		if keyFits(alg, k.Pub) && (k.Alg == "" || k.Alg == alg) {
			if found != nil {
				return nil, refusal.New(ErrUnknownKey, "the assertion has no kid, and the client's key set holds several %s keys", alg)
			}
			found = k
		}
	}
	switch {
	case found == nil && kid != "":
		return nil, refusal.New(ErrUnknownKey, "the client's key set has no kid %.64q", kid)
	case found == nil:
		return nil, refusal.New(ErrUnknownKey, "the client's key set has no %s key", alg)
	case !keyFits(alg, found.Pub) || found.Alg != "" && found.Alg != alg:
		return nil, refusal.New(ErrWrongKey, "the key of kid %.64q is not a %s key", kid, alg)
	}
	return found.Pub, nil
}

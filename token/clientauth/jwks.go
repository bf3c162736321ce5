package clientauth

import (
	"crypto"
	"errors"
	"fmt"

	"github.com/snowtoken/snowtoken/client/jwk"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Algorithms an assertion may be signed with: the asymmetric ones a client
// or a cluster signs with. Kubernetes signs service-account tokens with
// RS256 unless its key is an EC one. No "none", no HS*: a public key must
// never serve as an HMAC secret.
const (
	AlgEdDSA = jwk.EdDSA // Ed25519 (RFC 8037), key OKP/Ed25519
	AlgES256 = jwk.ES256 // ECDSA P-256 SHA-256, key EC/P-256
	AlgRS256 = jwk.RS256 // RSASSA-PKCS1-v1_5 SHA-256, key RSA ≥ MinRSABits
	AlgPS256 = jwk.PS256 // RSASSA-PSS SHA-256, key RSA ≥ MinRSABits
)

// Algorithms lists the algorithms, for the discovery metadata
// (token_endpoint_auth_signing_alg_values_supported).
var Algorithms = []string{AlgEdDSA, AlgES256, AlgRS256, AlgPS256}

// Bounds of a key set: those of package jwk.
const (
	MinRSABits = jwk.MinRSABits
	MaxRSABits = jwk.MaxRSABits
	MaxKeys    = jwk.MaxKeys
)

// KeySet is a parsed JSON Web Key Set (RFC 7517 §5) of public signing keys.
type KeySet struct {
	keys []jwk.Key
}

// Len is the number of usable keys in the set.
func (ks *KeySet) Len() int { return len(ks.keys) }

// ParseJWKS reads a client's key set with the rules of package jwk
// (jwk.ParseSet) for Algorithms: a flawed key refuses the set whole
// (ErrJWKS, ErrPrivateKey), a key for encryption or of a type, curve or alg
// we do not verify with is skipped, and a set with no usable key is
// refused. What was wrong is the error's description, the jwk package's.
func ParseJWKS(data []byte) (*KeySet, error) {
	s, err := jwk.ParseSet(data, Algorithms...)
	if err != nil {
		return nil, setError(err)
	}
	return &KeySet{keys: s.Keys()}, nil
}

// setError is err, an error of jwk.ParseSet, as this package's:
// ErrPrivateKey or ErrJWKS, with jwk's description.
func setError(err error) error {
	kind := ErrJWKS
	if errors.Is(err, jwk.ErrPrivateKey) {
		kind = ErrPrivateKey
	}
	d, _ := jwk.Description(err)
	return refusal.Describe(fmt.Errorf("%w: %w", kind, err), d)
}

// find returns the key that verifies a JWT signed with alg under kid: the
// key of that kid, or without a kid the one key of alg's type in the set
// (ErrUnknownKey when there are none or several). The key's type
// must fit alg, and its own alg, if any, must be alg.
func (ks *KeySet) find(kid, alg string) (crypto.PublicKey, error) {
	var found *jwk.Key
	for i := range ks.keys {
		k := &ks.keys[i]
		if kid != "" {
			if k.ID == kid {
				found = k
				break
			}
			continue
		}
		if k.Fits(alg) {
			if found != nil {
				return nil, refusal.New(ErrUnknownKey, "no kid, and the key set holds several %s keys", alg)
			}
			found = k
		}
	}
	switch {
	case found == nil && kid != "":
		return nil, refusal.New(ErrUnknownKey, "the key set has no kid %.64q", kid)
	case found == nil:
		return nil, refusal.New(ErrUnknownKey, "the key set has no %s key", alg)
	case !found.Fits(alg):
		return nil, refusal.New(ErrWrongKey, "the key of kid %.64q is not a %s key", kid, alg)
	}
	return found.Public, nil
}

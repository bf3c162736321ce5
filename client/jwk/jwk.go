// Package jwk reads JSON Web Keys (RFC 7517) and key sets into public
// signing keys, with one rule set for every reader of a key: the issuer
// reading a client's key set (private_key_jwt), a consuming service reading
// the issuer's key set (client.Local), and a DPoP proof's header key
// (client/dpop). It also fetches and caches key sets (Cache).
//
// The layout of the package:
//
//	jwk.go     Key, Parse: one key, alone (a DPoP proof's) or in a set
//	members.go the JSON members of a key, read in order, and their types
//	material.go the key material: RSA, EC P-256, OKP Ed25519, x5c
//	set.go     Set, ParseSet: a key set, its bounds and its kids
//	cache.go   Cache: key sets by source, with TTL, refresh and staleness
//	get.go     Get: one bounded HTTP GET of a key set, and its max-age
//
// The rules, the same for every caller:
//
//   - A key is a JSON object with exact member names, none repeated nor
//     differing from another only in case; kty, crv, x, y, n, e, kid, use
//     and alg are strings, key_ops an array of strings, ext a boolean.
//   - A private or secret member (d, p, q, dp, dq, qi, oth, k, priv, in any
//     case) or kty "oct" is ErrPrivateKey: its owner has published a
//     secret.
//   - use, if present, is "sig" (a set skips an "enc" key); key_ops, if
//     present, holds "verify" alone.
//   - The key types are OKP Ed25519 (a valid point, not of small order), EC
//     P-256 (a point on the curve, coordinates of 32 bytes) and RSA (a
//     modulus of MinRSABits to MaxRSABits, an odd exponent of 3 to 2³¹-1);
//     every base64url member is canonical and unpadded.
//   - alg, if present, is one of Algorithms and fits the key's type.
//   - x5c, if present in a set's key, starts with a certificate of the
//     same public key.
//
// What differs between callers is which algorithms they verify with (the
// algs argument), and whether a key comes alone or in a set. A key alone
// (Parse) is one a peer chose to send: any member not of the accepted key
// types is refused, and a key of another type is an error. A key of a set
// (ParseSet) sits among keys for others (RFC 7517 §5: unknown members are
// ignored): a key of a type or curve the caller does not verify with, or
// for encryption, is skipped, while a flawed key refuses the whole set.
package jwk

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
)

// Algorithms a key may be used with.
const (
	EdDSA = "EdDSA" // Ed25519 (RFC 8037), key OKP/Ed25519
	ES256 = "ES256" // ECDSA P-256 SHA-256 (RFC 7518 §3.4), key EC/P-256
	RS256 = "RS256" // RSASSA-PKCS1-v1_5 SHA-256, key RSA
	PS256 = "PS256" // RSASSA-PSS SHA-256, key RSA
)

// Algorithms lists every algorithm a key may name in its alg.
var Algorithms = []string{EdDSA, ES256, RS256, PS256}

// Bounds of a key and a set.
const (
	MinRSABits = 2048 // smaller RSA keys are refused
	// MaxRSABits bounds the cost of one verification, which whoever sends
	// a token or an assertion may ask for.
	MaxRSABits = 8192
	MaxKeys    = 64 // keys in one set
)

// Errors. Each carries, as Description, what was wrong in words for the
// party that sent the key, never a library's.
var (
	ErrKey        = errors.New("jwk: bad key")
	ErrSet        = errors.New("jwk: bad key set")
	ErrPrivateKey = errors.New("jwk: private or secret key material")
	ErrOptions    = errors.New("jwk: bad options")
	ErrFetch      = errors.New("jwk: key set cannot be fetched")
)

// Key is one public signing key.
type Key struct {
	Type  string // kty: OKP, EC or RSA
	Curve string // crv: Ed25519, P-256; empty for RSA
	ID    string // kid, may be empty
	// Alg is the key's own alg, if it names one: a signature's alg must
	// then be the same.
	Alg string
	// X and Y are the key's x and y as sent (OKP: x only); N and E an RSA
	// key's n and e: the members of its RFC 7638 thumbprint.
	X, Y, N, E string
	// Public is an ed25519.PublicKey, an *ecdsa.PublicKey on P-256 or an
	// *rsa.PublicKey.
	Public crypto.PublicKey
}

// Fits reports whether k verifies signatures made with alg: alg's key type,
// and k's own alg, if any, alg.
func (k Key) Fits(alg string) bool {
	if k.Alg != "" && k.Alg != alg {
		return false
	}
	return typeFits(alg, k.Public)
}

// typeFits reports whether pub is a key of alg's type.
func typeFits(alg string, pub crypto.PublicKey) bool {
	switch pub.(type) {
	case *rsa.PublicKey:
		return alg == RS256 || alg == PS256
	case *ecdsa.PublicKey:
		return alg == ES256
	case ed25519.PublicKey:
		return alg == EdDSA
	}
	return false
}

// Parse reads one key that a peer sent alone, such as a DPoP proof's jwk,
// to verify signatures made with one of algs (nil: Algorithms): any flaw,
// any member that no key of algs' types has (ErrKey), or private material
// (ErrPrivateKey), refuses it.
func Parse(data []byte, algs ...string) (Key, error) {
	if algs == nil {
		algs = Algorithms
	}
	k, skip, err := parse(data, algs, true)
	if err == nil && skip != "" {
		err = refuse(ErrKey, "%s", skip)
	}
	return k, err
}

// parse reads one key. alone says it came alone (Parse) rather than in a
// set: then members not of algs' key types are refused. skip, if not
// empty, says why a set skips the key.
func parse(data []byte, algs []string, alone bool) (k Key, skip string, err error) {
	m, err := readMembers(data, algs, alone)
	if err != nil {
		return Key{}, "", err
	}
	switch {
	case m.kty == nil:
		return Key{}, "", refuse(ErrKey, "jwk member kty is missing")
	case *m.kty == "oct":
		return Key{}, "", refuse(ErrPrivateKey, "jwk kty oct is a shared secret, not a public key")
	}
	k = Key{Type: *m.kty, Curve: str(m.crv), ID: str(m.kid), X: str(m.x), Y: str(m.y), N: str(m.n), E: str(m.e)}
	if m.use != nil && *m.use != "sig" {
		if *m.use == "enc" && !alone {
			return Key{}, "the key is for encryption", nil
		}
		return Key{}, "", refuse(ErrKey, "jwk member use is %.16q, not sig", *m.use)
	}
	for _, op := range m.keyOps {
		if op != "verify" {
			return Key{}, "", refuse(ErrKey, "jwk member key_ops holds %.16q: verify alone is accepted", op)
		}
	}
	if !slices.Contains(keyTypes, k.Type) {
		return Key{}, fmt.Sprintf("jwk kty %.16q: the key must be %s", k.Type, typesOf(algs)), nil
	}
	if m.alg != nil {
		switch a := *m.alg; {
		case a == "none", strings.HasPrefix(a, "HS"):
			return Key{}, "", refuse(ErrKey, "jwk member alg %.16q is not a public key's", a)
		case !slices.Contains(Algorithms, a):
			return Key{}, fmt.Sprintf("jwk member alg %.16q: want one of %v", a, algs), nil
		case !slices.Contains(algTypes[a], k.Type):
			return Key{}, "", refuse(ErrKey, "jwk member alg %.16q is not the alg of a %.16q key", a, k.Type)
		}
		k.Alg = *m.alg
	}
	if !slices.ContainsFunc(algs, func(alg string) bool { return slices.Contains(algTypes[alg], k.Type) && curveFits(alg, k.Curve) }) {
		return Key{}, fmt.Sprintf("jwk kty %.16q and crv %.16q: the key must be %s", k.Type, k.Curve, typesOf(algs)), nil
	}
	if k.Alg != "" && !slices.Contains(algs, k.Alg) {
		return Key{}, fmt.Sprintf("jwk member alg %s is not accepted here: want one of %v", k.Alg, algs), nil
	}
	if k.Public, err = material(m); err != nil {
		return Key{}, "", err
	}
	if m.x5c != nil {
		if err := checkX5C(m.x5c, k.Public); err != nil {
			return Key{}, "", err
		}
	}
	return k, "", nil
}

// keyTypes are the key types of Algorithms.
var keyTypes = []string{"OKP", "EC", "RSA"}

// algTypes maps each algorithm to its key types.
var algTypes = map[string][]string{EdDSA: {"OKP"}, ES256: {"EC"}, RS256: {"RSA"}, PS256: {"RSA"}}

// curveFits reports whether crv is the curve of alg's keys (none for RSA).
func curveFits(alg, crv string) bool {
	switch alg {
	case EdDSA:
		return crv == "Ed25519"
	case ES256:
		return crv == "P-256"
	}
	return true
}

// typesOf names the key types of algs, as "OKP Ed25519 or EC P-256".
func typesOf(algs []string) string {
	var names []string
	for _, n := range []struct{ alg, name string }{{EdDSA, "OKP Ed25519"}, {ES256, "EC P-256"}, {RS256, "RSA"}, {PS256, "RSA"}} {
		if slices.Contains(algs, n.alg) && !slices.Contains(names, n.name) {
			names = append(names, n.name)
		}
	}
	switch len(names) {
	case 0:
		return "of no type"
	case 1:
		return names[0]
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + " or " + names[len(names)-1]
}

// str is *p, or "" for nil.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// refuse returns an error of kind whose description is format with args.
func refuse(kind error, format string, args ...any) error {
	return refusal.New(kind, format, args...)
}

// Description returns what err, or the first error of its chain that
// carries one (a method Description() string), tells the sender of a key,
// and whether one does.
func Description(err error) (string, bool) { return refusal.Description(err) }

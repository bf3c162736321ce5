// Package keyset is the issuer's signing keys: a Set of Ed25519 keys, the
// one that signs and those that verify, each in a state of its rotation,
// read from a plain list of PEM files (Load) or from a keys directory and
// its manifest (LoadDir), and published as a JWKS. A Set is never
// modified: a reload makes a new one (token.Service.WithKeys). What a key
// signs and how a token is verified with it are package token's.
//
//	keyset.go  Key (PEM, the RFC 7638 Thumbprint, Generate), State, Member,
//	           Set (New, FromMembers, Load, Lookup, Secret, JWKS), ErrKey
//	dir.go     a keys directory: its manifest (Manifest, Entry, tombstones),
//	           LoadDir, Current, and the times of a rotation
package keyset

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/edverify"
)

// ErrKey is returned for a key or a key set that cannot be used; details
// are wrapped with %w. Package token exports it under the same name.
var ErrKey = errors.New("token: bad signing key")

// Key is an Ed25519 key pair (or, for a retired key kept only to verify, a
// public key) with its key ID: the RFC 7638 JWK thumbprint of the public key.
type Key struct {
	ID      string
	Public  ed25519.PublicKey
	Private ed25519.PrivateKey // nil for a verify-only key
}

// State is where a key is in its rotation (Keycloak's active and passive
// keys, with the passive ones told apart by which way they go):
//
//	next ──(published PublishDelay)──▶ active ──(replaced)──▶ retired ──(its tokens expired)──▶ dropped
//
// Every state is published in the JWKS and verifies; only the active key signs.
type State string

// The states of a key.
const (
	// Next is published and verifies, so that consumers know it before
	// it signs; it does not sign yet.
	Next State = "next"
	// Active signs; a set has exactly one.
	Active State = "active"
	// Retired signs no more, and verifies until every token it signed
	// has expired (Service drops it then), or, with no retired time (a
	// plain list of key files), for as long as it is in the set.
	Retired State = "retired"
)

// Set holds the signing key and every key that verifies: the active key,
// the next and the retired ones. A set is never modified: a reload makes a
// new one (Service.WithKeys).
type Set struct {
	signer  Key
	byID    map[string]*Member
	keys    []*Member // active first, then next, then retired
	version string
	// dropped holds the tombstones of a keys directory's manifest: the
	// kids of keys dropped once all their tokens had expired.
	dropped map[string]bool
	// dir is the keys directory the set was read from, sum its manifest's
	// SHA-256 (Current); dir is empty for a list or a set made in memory.
	dir string
	sum [sha256.Size]byte
}

// Member is a key of a set, with where it is in its rotation. A set's
// members are shared by everything that reads the set: read them, never
// change them.
type Member struct {
	Key
	State State
	// Retired is when the key stopped signing; zero for a key that is not
	// retired, or that verifies as long as it is listed (a plain list).
	Retired time.Time
	// Published and Activated are the manifest's times (Entry); zero for a
	// plain list.
	Published, Activated time.Time
	// verifier is Public decoded once, for Verify.
	verifier *edverify.Key
}

// Verify reports whether sig is the member's signature of msg.
func (m *Member) Verify(msg, sig []byte) bool { return m.verifier.Verify(msg, sig) }

// New returns a set whose first key signs and the others verify, as a
// plain list of key files (SNOWTOKEN_SIGNING_KEYS=a.pem,b.pem) means it: the
// others are retired with no time, kept until they leave the list. The
// first must hold a private key.
func New(keys ...Key) (*Set, error) {
	if len(keys) == 0 || keys[0].Private == nil {
		return nil, fmt.Errorf("%w: the first key must be an Ed25519 private key", ErrKey)
	}
	set := make([]*Member, len(keys))
	for i, k := range keys {
		set[i] = &Member{Key: k, State: Retired}
	}
	set[0].State = Active
	return fromMembers(set)
}

// FromMembers returns the set of members, of which exactly one is active
// with a private key: a set whose states and times are given rather than
// read from a keys directory (LoadDir).
func FromMembers(members ...Member) (*Set, error) {
	keys := make([]*Member, len(members))
	for i := range members {
		m := members[i]
		keys[i] = &m
	}
	return fromMembers(keys)
}

// fromMembers indexes keys, of which exactly one is active with a private key,
// putting the active key first and the next ones before the retired ones.
func fromMembers(keys []*Member) (*Set, error) {
	ks := &Set{byID: make(map[string]*Member, len(keys))}
	active := 0
	for _, k := range keys {
		if _, dup := ks.byID[k.ID]; dup {
			return nil, fmt.Errorf("%w: key %s listed twice", ErrKey, k.ID)
		}
		var err error
		if k.verifier, err = edverify.NewKey(k.Public); err != nil {
			return nil, fmt.Errorf("%w: key %s: %w", ErrKey, k.ID, err)
		}
		ks.byID[k.ID] = k
		if k.State == Active {
			active++
			ks.signer = k.Key
		}
	}
	if active != 1 {
		return nil, fmt.Errorf("%w: %d active keys, want exactly one", ErrKey, active)
	}
	if ks.signer.Private == nil {
		return nil, fmt.Errorf("%w: the active key %s must be an Ed25519 private key", ErrKey, ks.signer.ID)
	}
	order := map[State]int{Active: 0, Next: 1, Retired: 2}
	ks.keys = slices.Clone(keys)
	slices.SortStableFunc(ks.keys, func(a, b *Member) int { return order[a.State] - order[b.State] })
	return ks, nil
}

// Generate returns a new random Ed25519 key.
func Generate() (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: Thumbprint(pub), Public: pub, Private: priv}, nil
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key,
// the key's ID: dpop.JWK.Thumbprint, the one thumbprint of the issuer and
// the client module (a DPoP key's, cnf.jkt), of the key's JWK
// {"crv":"Ed25519","kty":"OKP","x":"..."}.
func Thumbprint(pub ed25519.PublicKey) string {
	j, _ := dpop.PublicJWK(pub) // an Ed25519 key always has a JWK
	return j.Thumbprint()
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

// ParsePEM reads an Ed25519 key from a "PRIVATE KEY" (PKCS #8) or "PUBLIC
// KEY" (PKIX) PEM block.
func ParsePEM(data []byte) (Key, error) {
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

// Load reads PEM files; the first signs and must hold a private key,
// the others verify (New). Its Version is the short SHA-256 of the
// files, in order.
func Load(paths ...string) (*Set, error) {
	keys := make([]Key, 0, len(paths))
	sum := sha256.New()
	for _, p := range paths {
		k, data, err := readKeyFile(p)
		if err != nil {
			return nil, err
		}
		sum.Write(data)
		keys = append(keys, k)
	}
	ks, err := New(keys...)
	if err != nil {
		return nil, err
	}
	ks.version = shortSum(sum.Sum(nil))
	return ks, nil
}

// readKeyFile reads and parses one PEM key file; the error names the file.
func readKeyFile(path string) (Key, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	k, err := ParsePEM(data)
	if err != nil {
		return Key{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, data, nil
}

// shortSum is the first 12 hex digits of a SHA-256 sum: a file's version
// as /readyz and snowtoken_config_info show it (`sha256sum F | cut -c1-12`).
func shortSum(sum []byte) string { return hex.EncodeToString(sum)[:12] }

// SigningKeyID returns the kid of the key that signs.
func (ks *Set) SigningKeyID() string { return ks.signer.ID }

// Secret returns 32 bytes derived for label from the signing key's private
// key (HKDF-SHA256): a secret that every replica with the same signing key
// shares without one more file to distribute, such as the key of the DPoP
// nonces. It changes when the signing key does.
func (ks *Set) Secret(label string) []byte {
	b, err := hkdf.Key(sha256.New, ks.signer.Private.Seed(), nil, "snowtoken "+label, 32)
	if err != nil { // only for a length HKDF-SHA256 cannot give
		panic(err)
	}
	return b
}

// Version is the short SHA-256 of the files the set was read from: of
// keys.json for a keys directory (which names every key by its kid), of
// the PEM files in order for a list. It is empty for a set made in memory.
func (ks *Set) Version() string { return ks.version }

// Signer is the key that signs: the active one.
func (ks *Set) Signer() Key { return ks.signer }

// Lookup returns the member whose kid is kid.
func (ks *Set) Lookup(kid string) (*Member, bool) {
	k, ok := ks.byID[kid]
	return k, ok
}

// Dropped reports whether kid is the tombstone of a key dropped from the
// set's keys directory (Manifest.Dropped).
func (ks *Set) Dropped(kid string) bool { return ks.dropped[kid] }

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

// JWKS returns the public keys of the set, signing key first, then the
// next keys, then the retired ones; token.Service.JWKS leaves out the
// retired keys whose tokens have all expired (JWKSOf).
func (ks *Set) JWKS() JWKS { return ks.JWKSOf(func(*Member) bool { return true }) }

// Members returns the members of the set in JWKS order, to be read only.
func (ks *Set) Members() []*Member { return slices.Clone(ks.keys) }

// Info describes a key of a set: its kid, state and, from a keys
// directory's manifest, when it was published, activated and retired (zero
// where the manifest has no time, and for every key of a plain list).
type Info struct {
	Kid                           string
	State                         State
	Published, Activated, Retired time.Time
}

// Keys describes every key of the set, in JWKS order.
func (ks *Set) Keys() []Info {
	out := make([]Info, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = Info{Kid: k.ID, State: k.State, Published: k.Published, Activated: k.Activated, Retired: k.Retired}
	}
	return out
}

// JWKSOf is JWKS with only the members keep keeps.
func (ks *Set) JWKSOf(keep func(*Member) bool) JWKS {
	out := JWKS{Keys: make([]JWK, 0, len(ks.keys))}
	for _, k := range ks.keys {
		if !keep(k) {
			continue
		}
		out.Keys = append(out.Keys, JWK{
			Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.Public),
			Kid: k.ID, Use: "sig", Alg: "EdDSA",
		})
	}
	return out
}

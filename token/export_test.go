package token

import (
	"context"
	"crypto/sha256"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/internal/filetest"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// What the external tests (package token_test, which run the Service on a
// redisstore.Store, a package that imports this one) read of the
// package's insides.

// MaxNameLen is syntax.MaxNameLen.
const MaxNameLen = syntax.MaxNameLen

// OpaqueSecretLen is opaqueSecretLen.
const OpaqueSecretLen = opaqueSecretLen

// ParseOpaque and FormatOpaqueToken are parseOpaque and formatOpaque.
var (
	ParseOpaque       = parseOpaque
	FormatOpaqueToken = formatOpaque
)

// NewRetiredKeySet is a set whose active key is cur and whose old key was
// retired at retired.
func NewRetiredKeySet(cur, old keyset.Key, retired time.Time) (*keyset.Set, error) {
	return keyset.FromMembers(keyset.Member{Key: cur, State: keyset.Active}, keyset.Member{Key: old, State: keyset.Retired, Retired: retired})
}

// KeyFor is keyFor.
func (s *Service) KeyFor(t *jwt.Token) (any, error) { return s.keyFor(t) }

// HasCache reports whether the service has a verified-token cache.
func (s *Service) HasCache() bool { return s.cache != nil }

// CacheLen is how many tokens the verified-token cache holds.
func (s *Service) CacheLen() int { return s.cache.len() }

// Cached is the cache's entry under sum at now, or nil.
func (s *Service) Cached(sum *[sha256.Size]byte, now time.Time) *Verified {
	return s.cache.get(sum, now)
}

// EmptyCache drops every entry of the verified-token cache at once.
func (s *Service) EmptyCache() {
	s.cache.c.InvalidateAll()
	s.cache.c.CleanUp()
}

// Validate is validate: the token alone, without its client's standing,
// for the tests of the steps beneath Verdict. Only this package's tests
// can call it.
func (s *Service) Validate(ctx context.Context, raw string) (*Verified, error) {
	return s.validate(ctx, raw)
}

// CheckClient is checkClient.
func (s *Service) CheckClient(cs *clients.Registry, v *Verified) error { return s.checkClient(cs, v) }

// WriteFile and SHA256Hex are filetest's.
var (
	WriteFile = filetest.Write
	SHA256Hex = filetest.SHA256Hex
)

// MustKey and PublicOnly are keysettest's.
var (
	MustKey    = keysettest.MustKey
	PublicOnly = keysettest.PublicOnly
)

// IssueWithChain issues a token of c for sub, lasting ttl, whose claims
// carry chain as it is (JSON members such as `"may_act":{…}`), as
// Exchange's grants carry act and parents: for a test of claims no
// request of a client makes.
func (s *Service) IssueWithChain(ctx context.Context, c *clients.Client, sub, chain string, ttl time.Duration) (Issued, error) {
	return s.mint(ctx, c, &grant{sub: sub, client: c.ID, scope: strings.Join(c.Scopes, " "), chain: chain}, ttl, time.Time{})
}

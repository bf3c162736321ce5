package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/jwk"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/client/revocation"
)

// verifyLocal checks raw's signature against the issuer's keys and its
// claims, with no network call unless the keys must be (re)fetched.
func (v *Validator) verifyLocal(ctx context.Context, raw string) (*Claims, error) {
	var cl jwtpolicy.Claims
	_, err := v.parser.ParseWithClaims(raw, &cl, func(t *jwt.Token) (any, error) {
		// Checked before the key, so a wrong typ never causes a fetch.
		if err := jwtpolicy.CheckType(t); err != nil {
			return nil, err
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("no kid")
		}
		return v.keys.key(ctx, kid)
	})
	switch {
	case errors.Is(err, ErrUnavailable):
		return nil, err
	// Claims are checked after the signature: cl is the issuer's word here.
	case errors.Is(err, jwt.ErrTokenInvalidClaims) && v.opts.Audience != "" && !slices.Contains(cl.Audience, v.opts.Audience):
		return nil, audienceMismatch(cl.Audience, v.opts.Audience)
	case errors.Is(err, jwt.ErrTokenInvalidClaims) && cl.Issuer != v.opts.Issuer:
		return nil, issuerMismatch(cl.Issuer, v.opts.Issuer)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if cl.Subject == "" || cl.ClientID == "" || cl.IssuedAt == nil {
		return nil, refusal.New(ErrInvalidToken, "sub, client_id and iat are required")
	}
	id, err := bitsalloc.ParseID(cl.ID)
	if err != nil {
		return nil, refusal.Describe(fmt.Errorf("%w: jti: %w", ErrInvalidToken, err), "jti")
	}
	_, worker, _, _ := v.opts.IDLayout.Decompose(id) // fails only for a negative id, which ParseID never returns
	return &Claims{
		Subject: cl.Subject, ClientID: cl.ClientID, Scopes: strings.Fields(cl.Scope),
		Issuer: cl.Issuer, Audience: cl.Audience,
		IssuedAt: cl.IssuedAt.Time, ExpiresAt: cl.ExpiresAt.Time,
		JTI: cl.ID, WorkerID: worker, JKT: cl.Confirmation.JKT, Act: cl.Act,
		parents: parentsOf(cl.Parents),
	}, nil
}

// parentsOf is an exchanged token's parents as the revocation rule judges
// them: each with its iat, in Unix ms (DecideFeed takes it to the second).
// jwtpolicy checked their shape; nil for none.
func parentsOf(ps []jwtpolicy.Parent) []revocation.Parent {
	if len(ps) == 0 {
		return nil
	}
	out := make([]revocation.Parent, len(ps))
	for i, p := range ps {
		out[i] = revocation.Parent{JTI: p.ID, Client: p.ClientID, Issued: p.IssuedAt * 1000}
	}
	return out
}

// errUnknownKid is a kid the issuer's JWKS does not hold.
var errUnknownKid = errors.New("unknown kid")

// maxJWKSBytes bounds what is read of a JWKS.
const maxJWKSBytes = 1 << 20

// keyCache holds the issuer's public keys, read by package jwk's rules for
// EdDSA and cached by a jwk.Cache: fetched when it has none, when asked for
// an unknown kid and when older than JWKSMaxAge (by default the max-age of
// the issuer's answer), but at most once per JWKSMinInterval;
// concurrent callers share a fetch. A set once fetched serves as long as
// fetching it again fails (jwk.Forever): the issuer being away does not
// stop Local mode.
type keyCache struct {
	url   string
	cache *jwk.Cache[string]
}

// newKeyCache returns the key cache of v, fetching url with v's client.
func newKeyCache(v *Validator, url string) (*keyCache, error) {
	c, err := jwk.NewCache(jwk.CacheOptions{
		Timeout: v.opts.Timeout, TTL: v.opts.JWKSMaxAge, MinRefresh: v.opts.JWKSMinInterval, MaxStale: jwk.Forever, Now: v.opts.Now,
		Failed: func(err error) {
			v.opts.Logger.Warn("snowtoken client: cannot fetch the issuer's JWKS; keeping the keys already known", "url", url, "err", err)
		},
	}, func(ctx context.Context, url string) (*jwk.Set, time.Duration, error) {
		return fetchJWKS(ctx, v.http, url)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	return &keyCache{url: url, cache: c}, nil
}

// key returns the public key for kid. An unknown kid is an error wrapping
// ErrUnavailable when the keys could not be fetched, so the token cannot be
// judged; otherwise it is errUnknownKid.
func (k *keyCache) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	s, err := k.cache.Keys(ctx, k.url)
	if err != nil {
		return nil, unavailable(err)
	}
	if pub, ok := edKey(s, kid); ok {
		return pub, nil
	}
	if s, err = k.cache.Refresh(ctx, k.url); err != nil {
		return nil, unavailable(err)
	}
	if pub, ok := edKey(s, kid); ok {
		return pub, nil
	}
	if err := k.cache.Err(k.url); err != nil {
		return nil, unavailable(err)
	}
	return nil, errUnknownKid
}

// edKey returns the Ed25519 key of kid in s.
func edKey(s *jwk.Set, kid string) (ed25519.PublicKey, bool) {
	k, ok := s.ByID(kid)
	pub, isEd := k.Public.(ed25519.PublicKey)
	return pub, ok && isEd
}

// unavailable is err, a failure to get the issuer's keys, as ErrUnavailable.
func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// fetchJWKS reads the issuer's JWKS at url with c, by package jwk's rules
// for EdDSA: a set with a flawed key or with no Ed25519 signing key is an
// error (ErrUnavailable).
func fetchJWKS(ctx context.Context, c *http.Client, url string) (*jwk.Set, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	body, maxAge, err := jwk.Get(c, req, maxJWKSBytes)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s, err := jwk.ParseSet(body, jwk.EdDSA)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: the issuer's JWKS: %w", ErrUnavailable, err)
	}
	return s, maxAge, nil
}

package client

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
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
		return nil, fmt.Errorf("%w: sub, client_id and iat are required", ErrInvalidToken)
	}
	id, err := bitsalloc.ParseID(cl.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: jti: %w", ErrInvalidToken, err)
	}
	_, worker, _, _ := v.opts.IDLayout.Decompose(id) // fails only for a negative id, which ParseID never returns
	return &Claims{
		Subject: cl.Subject, ClientID: cl.ClientID, Scopes: strings.Fields(cl.Scope),
		Issuer: cl.Issuer, Audience: cl.Audience,
		IssuedAt: cl.IssuedAt.Time, ExpiresAt: cl.ExpiresAt.Time,
		JTI: cl.ID, WorkerID: worker, JKT: cl.Confirmation.JKT,
	}, nil
}

// errUnknownKid is a kid the issuer's JWKS does not hold.
var errUnknownKid = errors.New("unknown kid")

// maxJWKSBytes bounds what is read of a JWKS.
const maxJWKSBytes = 1 << 20

// keyCache holds the issuer's public keys by kid. It fetches them when it has
// none, when asked for an unknown kid and when they are older than
// JWKSMaxAge, but starts at most one fetch per JWKSMinInterval; concurrent
// callers share a fetch.
type keyCache struct {
	v   *Validator
	url string

	mu       sync.Mutex
	keys     map[string]ed25519.PublicKey
	loaded   time.Time     // when the keys were fetched
	tried    time.Time     // when the last fetch started
	lastErr  error         // of the last fetch
	fetching chan struct{} // closed when the fetch under way ends; nil when none
}

// key returns the public key for kid. An unknown kid is an error wrapping
// ErrUnavailable when the keys could not be fetched, so the token cannot be
// judged; otherwise it is errUnknownKid.
func (k *keyCache) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	k.mu.Lock()
	pub, known := k.keys[kid]
	if wait := k.fetching; wait != nil {
		k.mu.Unlock()
		if known {
			return pub, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for the JWKS: %w", ErrUnavailable, ctx.Err())
		}
		k.mu.Lock()
		pub, known = k.keys[kid]
		err := k.lastErr
		k.mu.Unlock()
		return pickKey(pub, known, err)
	}
	now := k.v.opts.Now()
	due := k.tried.IsZero() || now.Sub(k.tried) >= k.v.opts.JWKSMinInterval
	if !due || known && now.Sub(k.loaded) < k.v.opts.JWKSMaxAge {
		err := k.lastErr
		k.mu.Unlock()
		return pickKey(pub, known, err)
	}
	done := make(chan struct{})
	k.fetching, k.tried = done, now
	k.mu.Unlock()

	keys, err := k.fetch(ctx)

	k.mu.Lock()
	if err == nil {
		k.keys, k.loaded = keys, now
	}
	k.lastErr, k.fetching = err, nil
	pub, known = k.keys[kid]
	k.mu.Unlock()
	close(done)
	if err != nil {
		k.v.opts.Logger.Warn("snowtoken client: cannot fetch the issuer's JWKS; keeping the keys already known", "url", k.url, "err", err)
	}
	return pickKey(pub, known, err)
}

// pickKey: a known key is used even when the last fetch failed; an unknown
// one is unavailable when the keys could not be fetched, else unknown.
func pickKey(pub ed25519.PublicKey, known bool, fetchErr error) (ed25519.PublicKey, error) {
	switch {
	case known:
		return pub, nil
	case fetchErr != nil:
		return nil, fetchErr
	default:
		return nil, errUnknownKid
	}
}

// jwk is one key of a JWKS, as RFC 8037 writes an Ed25519 key.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// fetch reads the issuer's JWKS and keeps its Ed25519 signing keys. A set
// with none is an error. The fetch is not cut short when the request that
// started it ends, since others may be waiting for it.
func (k *keyCache) fetch(ctx context.Context) (map[string]ed25519.PublicKey, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.v.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.v.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET /.well-known/jwks.json answered %d", ErrUnavailable, resp.StatusCode)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(&set); err != nil {
		return nil, fmt.Errorf("%w: unreadable JWKS: %w", ErrUnavailable, err)
	}
	keys := make(map[string]ed25519.PublicKey, len(set.Keys))
	for _, j := range set.Keys {
		if j.Kty != "OKP" || j.Crv != "Ed25519" || j.Kid == "" ||
			(j.Use != "" && j.Use != "sig") || (j.Alg != "" && j.Alg != "EdDSA") {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		keys[j.Kid] = ed25519.PublicKey(x)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: the JWKS holds no Ed25519 signing key", ErrUnavailable)
	}
	return keys, nil
}

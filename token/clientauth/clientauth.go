// Package clientauth checks client assertions: JWTs a client sends as
// client_assertion (client_assertion_type AssertionType, RFC 7523 §2.2) to
// authenticate at the token endpoint without a shared secret. A client is
// registered (Registration) for one of two kinds:
//
//	private_key_jwt    (RFC 7523, OIDC Core §9) the client signs the assertion with a key
//	                   of its own, published inline (jwks) or at a URL (jwks_uri):
//	                   iss = sub = client ID, aud = ours, exp ≤ now + MaxLifetime,
//	                   jti single-use (ReplayCache, shared by every replica)
//	workload identity  an issuer the operator trusts signed the assertion for the workload,
//	                   such as a Kubernetes projected service-account token: iss and sub
//	                   are the ones registered, aud = ours, exp − iat ≤ MaxWorkloadLifetime,
//	                   keys from the issuer's jwks_uri or its OIDC discovery document;
//	                   the jti is not single-use (see WorkloadIdentity)
//
// Verify checks, in this order, each failure refusing the assertion:
//
//	size ≤ MaxAssertionBytes → header: alg in Algorithms, kid a string → the key:
//	the kid's, of alg's type (Fetcher for a URL: cached; an unknown kid refreshes
//	the set, at most once per Options.Fetch.MinRefresh) → signature → iss, sub,
//	aud, exp (required), nbf, iat (with Leeway) → lifetime bound → jti (replay)
//
// The keys of a URL are cached by the Fetcher, which the caller keeps across
// reloads of its clients: a set whose URL is unchanged is not fetched again,
// unless the reload changed the client (the caller drops its set with
// Verifier.Forget). A fetch connects only where the address rules allow
// (address.go): a URL the operator wrote, or one a discovery document names.
// A set's life, per Source (URL, issuer, CA file, token file):
//
//	first use ──fetch──▶ fresh for TTL (the answer's max-age, 10 s to 5 min; 5 min
//	                     if it gives none) ──▶ the next use fetches again
//	   fetch fails: the old set serves until TTL + MaxStale (1 h) after it was fetched,
//	                then assertions are refused (ErrFetch) until a fetch succeeds
//	   unknown kid: fetch again now, unless a fetch began less than MinRefresh (10 s) ago
//
// The same checks, keys and cache verify a JWT of an issuer the operator
// trusts that a client exchanges as a subject token (VerifySubjectToken,
// subject.go): the issuer one of the client's TrustedIssuer, aud naming
// the client.
//
// The record of used jti (private_key_jwt) is the caller's ReplayCache:
// redisstore.Replays keeps it in Redis for every replica, st:assertion:<id>
// until the assertion's exp, id the SHA-256 of the client ID and the jti.
package clientauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// AssertionType is the client_assertion_type of a JWT assertion (RFC 7523 §2.2).
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// MaxAssertionBytes bounds an assertion, checked before it is parsed. A
// Kubernetes service-account token is about 1 KiB (its claims name the
// pod and node), an RS256 one with a 4096-bit key 1.5 KiB.
const MaxAssertionBytes = 8 << 10

// Errors. Every one but ErrUnavailable and ErrFetch (the service's, and
// the key server's) refuses the client (invalid_client), or its subject
// token (invalid_request); their texts name claims and kids, never key
// material.
var (
	ErrTooLarge     = errors.New("clientauth: client assertion too large")
	ErrMalformed    = errors.New("clientauth: malformed client assertion")
	ErrAlgorithm    = errors.New("clientauth: signing algorithm not accepted")
	ErrUnknownKey   = errors.New("clientauth: no key for the client assertion")
	ErrWrongKey     = errors.New("clientauth: key does not fit the algorithm")
	ErrSignature    = errors.New("clientauth: client assertion signature invalid")
	ErrClaims       = errors.New("clientauth: client assertion claims refused")
	ErrReplayed     = errors.New("clientauth: client assertion already used")
	ErrJWKS         = errors.New("clientauth: bad key set")
	ErrPrivateKey   = errors.New("clientauth: key set holds private or secret key material")
	ErrFetch        = errors.New("clientauth: key set cannot be fetched")
	ErrAddress      = errors.New("clientauth: key server address refused") // with ErrFetch when fetching; see address.go
	ErrUnavailable  = errors.New("clientauth: replay record unavailable")
	ErrRegistration = errors.New("clientauth: bad registration")
)

// ReplayCache records the jti of accepted assertions: package client/dpop's
// ReplayCache shape, which redisstore.Replays (shared by every replica) and
// dpop.MemoryReplay (one process, tests) implement. Seen records id until
// until and reports whether it was recorded already, as one atomic step.
type ReplayCache interface {
	Seen(ctx context.Context, id string, now, until time.Time) (bool, error)
}

// Options configure a Verifier. Audiences and Replay are required.
type Options struct {
	// Audiences are the aud values a workload identity token may name, one
	// of which it must: the issuer, first, and the token endpoint's URL. A
	// private_key_jwt assertion's aud must be the first, the issuer, alone
	// (checkPrivateKeyJWT).
	Audiences []string
	// Replay records the jti of private_key_jwt assertions.
	Replay ReplayCache
	// MaxLifetime bounds how far ahead of now a private_key_jwt
	// assertion's exp may be. Zero means 5 min; more than MaxMaxLifetime
	// is refused by New.
	MaxLifetime time.Duration
	// MaxWorkloadLifetime bounds a workload identity token's lifetime
	// (exp − iat, and exp − now). Zero means 24 h; more than 7 days is
	// refused by New.
	MaxWorkloadLifetime time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat. Zero means 30 s.
	Leeway time.Duration
	// Fetch configures the Fetcher of key sets at a URL.
	Fetch FetchOptions
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Bounds of the lifetimes.
const (
	MaxMaxLifetime         = time.Hour
	MaxMaxWorkloadLifetime = 7 * 24 * time.Hour
)

// Registration is how one client authenticates with an assertion: Keys
// (inline jwks) or JWKSURI for private_key_jwt, or Workload; and the
// issuers whose JWTs it may exchange (VerifySubjectToken), whose keys are
// fetched too.
type Registration struct {
	ClientID            string
	Keys                *KeySet
	JWKSURI             string
	Workload            *WorkloadIdentity
	SubjectTokenIssuers []TrustedIssuer
}

// Verifier checks client assertions. It is safe for concurrent use, and
// outlives reloads of the clients (its Fetcher's cache).
type Verifier struct {
	opts    Options
	fetcher *Fetcher
}

// New returns a Verifier.
func New(opts Options) (*Verifier, error) {
	if len(opts.Audiences) == 0 || opts.Replay == nil {
		return nil, errors.New("clientauth: Audiences and Replay are required")
	}
	if opts.MaxLifetime == 0 {
		opts.MaxLifetime = 5 * time.Minute
	}
	if opts.MaxWorkloadLifetime == 0 {
		opts.MaxWorkloadLifetime = 24 * time.Hour
	}
	if opts.Leeway == 0 {
		opts.Leeway = 30 * time.Second
	}
	switch {
	case opts.MaxLifetime < 0 || opts.MaxLifetime > MaxMaxLifetime:
		return nil, fmt.Errorf("clientauth: MaxLifetime %v: want at most %v", opts.MaxLifetime, MaxMaxLifetime)
	case opts.MaxWorkloadLifetime < 0 || opts.MaxWorkloadLifetime > MaxMaxWorkloadLifetime:
		return nil, fmt.Errorf("clientauth: MaxWorkloadLifetime %v: want at most %v", opts.MaxWorkloadLifetime, MaxMaxWorkloadLifetime)
	case opts.Leeway < 0 || opts.Leeway > 5*time.Minute:
		return nil, fmt.Errorf("clientauth: Leeway %v: want at most 5m", opts.Leeway)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Fetch.Now == nil {
		opts.Fetch.Now = opts.Now
	}
	f, err := NewFetcher(opts.Fetch)
	if err != nil {
		return nil, err
	}
	return &Verifier{opts: opts, fetcher: f}, nil
}

// Fetcher is the Verifier's cache of key sets at URLs.
func (v *Verifier) Fetcher() *Fetcher { return v.fetcher }

// Forget drops the key sets fetched for reg, its own if they are fetched
// and its subject token issuers': the next assertion or subject token
// fetches them again (Fetcher.Forget).
func (v *Verifier) Forget(reg Registration) {
	if src, err := reg.source(); err == nil {
		v.fetcher.Forget(src)
	}
	for i := range reg.SubjectTokenIssuers {
		v.fetcher.Forget(reg.SubjectTokenIssuers[i].source())
	}
}

// Subject returns the sub of an assertion, unverified: the client ID of a
// private_key_jwt assertion sent without client_id, to find its
// registration, which Verify then checks it against.
func Subject(assertion string) (string, error) {
	if len(assertion) > MaxAssertionBytes {
		return "", refusal.New(ErrTooLarge, "the assertion is longer than %d bytes", MaxAssertionBytes)
	}
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(assertion, &claims); err != nil {
		return "", refusal.New(ErrMalformed, "the assertion is not a JWT with a JSON claims set")
	}
	if claims.Subject == "" {
		return "", refusal.New(ErrClaims, "the assertion has no sub, and there is no client_id")
	}
	return claims.Subject, nil
}

// Verify checks assertion for the client reg (see the package doc).
func (v *Verifier) Verify(ctx context.Context, reg Registration, assertion string) error {
	if len(assertion) > MaxAssertionBytes {
		return refusal.New(ErrTooLarge, "the assertion is longer than %d bytes", MaxAssertionBytes)
	}
	now := v.opts.Now()
	iss, sub := reg.ClientID, reg.ClientID
	if reg.Workload != nil {
		iss, sub = reg.Workload.Issuer, reg.Workload.Subject
	}
	var claims jwt.RegisteredClaims
	err := v.parse(assertion, jwtNames{"the assertion", "this issuer or its token endpoint"}, now, &claims, func(kid, alg string) (any, error) {
		return v.key(ctx, reg, kid, alg)
	}, jwt.WithIssuer(iss), jwt.WithSubject(sub), jwt.WithAudience(v.opts.Audiences...))
	if err != nil {
		return err
	}
	if reg.Workload != nil {
		return v.checkWorkload(claims, now)
	}
	return v.checkPrivateKeyJWT(ctx, reg.ClientID, claims, now)
}

// checkPrivateKeyJWT bounds a private_key_jwt assertion's exp and records
// its jti, refusing a jti recorded already.
//
// Its aud must be the issuer identifier alone, not the token endpoint's URL
// nor a list (RFC 10070, November 2026, which updates RFC 7523 after the
// 2025 "audience injection" disclosure): a client that also talks to another
// authorization server, which names our token endpoint as its own, would
// otherwise sign for it an assertion that works here.
func (v *Verifier) checkPrivateKeyJWT(ctx context.Context, clientID string, claims jwt.RegisteredClaims, now time.Time) error {
	if len(claims.Audience) != 1 || claims.Audience[0] != v.opts.Audiences[0] {
		return refusal.New(ErrClaims, "the assertion's aud must be the issuer alone, %q (RFC 10070)", v.opts.Audiences[0])
	}
	exp := claims.ExpiresAt.Time
	if exp.Sub(now) > v.opts.MaxLifetime+v.opts.Leeway {
		return refusal.New(ErrClaims, "the assertion's exp is more than %v ahead", v.opts.MaxLifetime)
	}
	if claims.ID == "" {
		return refusal.New(ErrClaims, "the assertion has no jti")
	}
	// The record's ID is the hash of the client and the jti: bounded in
	// length, and one client's jti never spends another's.
	sum := sha256.Sum256([]byte(clientID + "\x00" + claims.ID))
	seen, err := v.opts.Replay.Seen(ctx, hex.EncodeToString(sum[:]), now, exp.Add(v.opts.Leeway))
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case seen:
		return refusal.New(ErrReplayed, "the assertion's jti %.64q was used before", claims.ID)
	}
	return nil
}

// checkWorkload bounds a workload identity token's lifetime. Its jti is
// not recorded: see WorkloadIdentity.
func (v *Verifier) checkWorkload(claims jwt.RegisteredClaims, now time.Time) error {
	max := v.opts.MaxWorkloadLifetime
	exp := claims.ExpiresAt.Time
	if exp.Sub(now) > max+v.opts.Leeway {
		return refusal.New(ErrClaims, "the token's exp is more than %v ahead", max)
	}
	if claims.IssuedAt != nil && exp.Sub(claims.IssuedAt.Time) > max {
		return refusal.New(ErrClaims, "the token lives longer (exp − iat) than %v", max)
	}
	return nil
}

// key returns the key that verifies an assertion for reg signed with alg
// under kid. A URL's set is refreshed once when it has no such key.
func (v *Verifier) key(ctx context.Context, reg Registration, kid, alg string) (any, error) {
	if reg.Keys != nil {
		return reg.Keys.find(kid, alg)
	}
	src, err := reg.source()
	if err != nil {
		return nil, err
	}
	return v.fetchedKey(ctx, src, kid, alg)
}

// fetchedKey returns the key of src's set that verifies a JWT signed with
// alg under kid. The set is refreshed once when it has no such key.
func (v *Verifier) fetchedKey(ctx context.Context, src Source, kid, alg string) (any, error) {
	ks, err := v.fetcher.Keys(ctx, src)
	if err != nil {
		return nil, err
	}
	key, err := ks.find(kid, alg)
	if !errors.Is(err, ErrUnknownKey) {
		return key, err
	}
	// A key the set did not have when fetched: the issuer may have
	// rotated. Refresh says when it may not fetch yet.
	if ks, ferr := v.fetcher.Refresh(ctx, src); ferr == nil {
		return ks.find(kid, alg)
	}
	return nil, err
}

// source is where reg's keys are fetched from.
func (reg Registration) source() (Source, error) {
	switch {
	case reg.Workload != nil:
		return reg.Workload.source(), nil
	case reg.JWKSURI != "":
		return Source{URL: reg.JWKSURI}, nil
	}
	return Source{}, fmt.Errorf("%w: client %q has no keys", ErrRegistration, reg.ClientID)
}

// jwtNames are what parse's refusals call the JWT (such as "the
// assertion"), and what its aud must name.
type jwtNames struct{ what, aud string }

// parse verifies raw, a JWT called n.what, into claims: its alg one of
// Algorithms, its kid, if any, a string, its key the one key returns for
// them, its signature, then its claims, exp required and iat and nbf
// checked at now with Leeway, and those opts ask for. A refusal is ours
// (parseError), or key's own.
func (v *Verifier) parse(raw string, n jwtNames, now time.Time, claims jwt.Claims, key func(kid, alg string) (any, error), opts ...jwt.ParserOption) error {
	var keyErr error
	keyed := false // the keyfunc ran: the alg was one of Algorithms
	p := jwt.NewParser(append([]jwt.ParserOption{jwt.WithValidMethods(Algorithms), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithLeeway(v.opts.Leeway), jwt.WithTimeFunc(func() time.Time { return now })}, opts...)...)
	_, err := p.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		keyed = true
		kid, ok := t.Header["kid"].(string)
		if !ok && t.Header["kid"] != nil {
			keyErr = refusal.New(ErrMalformed, "%s's kid is not a string", n.what)
			return nil, keyErr
		}
		var k any
		k, keyErr = key(kid, t.Method.Alg())
		return k, keyErr
	})
	switch {
	case keyErr != nil:
		return keyErr
	case err != nil:
		return parseError(err, keyed, claims, n)
	}
	return nil
}

// parseError turns golang-jwt's error into one of ours (keyed: the
// keyfunc ran), with a text of our own naming the JWT as n says: a
// library's text would tell the client of internals.
func parseError(err error, keyed bool, claims jwt.Claims, n jwtNames) error {
	what := n.what
	iss, _ := claims.GetIssuer()
	sub, _ := claims.GetSubject()
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refusal.New(ErrMalformed, "%s is not a signed JWT (three base64url parts, JSON header and claims)", what)
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenSignatureInvalid) && !keyed:
		// An alg golang-jwt does not know, or one not in Algorithms
		// (none, HS256): refused before any key is looked up.
		return refusal.New(ErrAlgorithm, "%s's alg must be one of %v", what, Algorithms)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refusal.New(ErrSignature, "%s's signature is invalid", what)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return refusal.New(ErrClaims, "%s needs exp, iss, sub and aud", what)
	case errors.Is(err, jwt.ErrTokenExpired):
		return refusal.New(ErrClaims, "%s has expired", what)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refusal.New(ErrClaims, "%s's nbf is in the future", what)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return refusal.New(ErrClaims, "%s's iat is in the future", what)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return refusal.New(ErrClaims, "%s's iss %.64q is not the one registered for the client", what, iss)
	case errors.Is(err, jwt.ErrTokenInvalidSubject):
		return refusal.New(ErrClaims, "%s's sub %.64q is not the one registered for the client", what, sub)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return refusal.New(ErrClaims, "%s's aud must name %s", what, n.aud)
	case errors.Is(err, jwtpolicy.ErrNoIAT):
		return refusal.New(ErrClaims, "%s needs iat", what)
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return refusal.New(ErrClaims, "a claim of %s has the wrong type", what)
	}
	return refusal.New(ErrMalformed, "%s is not accepted", what)
}

// Package client lets a service accept snowtoken access tokens: a Validator
// checks a bearer or DPoP-bound token, and its net/http middleware answers
// 401, 403 or 503 on its own and hands the token's claims to the next
// handler. Routers that take no http.Handler middleware, such as gin, call
// Authenticate and WriteError (see Authenticate for the gin wiring).
//
// It is a module of its own that needs the standard library, golang-jwt
// and, for DPoP (package dpop), go-json-experiment and edwards25519 only; a
// service adds it with
//
//	go get github.com/snowtoken/snowtoken/client
//
// A Validator works in one of two modes, whose trade-off is revocation
// visibility against latency:
//
//   - Local with RevocationCheck Skip verifies everything itself: the
//     signature against the issuer's JWKS (EdDSA only), typ at+jwt, iss, aud,
//     exp and iat, and the requested scopes. No request reaches the issuer
//     per token (the JWKS is fetched at the first token, on an unknown kid
//     and every JWKSMaxAge), so it costs an Ed25519 verification and keeps
//     working while the issuer is down. But revocation lives only in the
//     issuer's Redis: A REVOKED TOKEN IS ACCEPTED UNTIL IT EXPIRES; see Skip.
//   - Remote (the default) asks the issuer about every token:
//     GET {IssuerURL}/token/validate with the same Authorization header, the
//     scopes and the Audience. The issuer checks signature, claims and its
//     Redis session record, so a revoked token is rejected at once, for a
//     round trip per request (per token and CacheTTL with a cache).
//
// Local with RevocationCheck Check (its default) is between the two: forged,
// tampered, expired and foreign tokens are rejected without a network call
// and the issuer is never made to check them; a token that passes is then
// still sent to /token/validate, so revocation is seen at once.
//
// Local with RevocationCheck Follow verifies locally and sees revocation
// too, with no call per token: the Validator follows the issuer's
// revocation feed (GET /revocations/events, Server-Sent Events of signed
// SETs and heartbeats, verified with the JWKS) and keeps what is revoked in
// memory. While the feed is not fresh (no heartbeat for FeedThreshold,
// 150 ms by default) or cannot tell, it fails closed (ErrUnavailable, 503)
// or, with WhenStale FallbackRemote, asks the issuer. It starts at the
// first token or with Start, and Close stops it.
//
// Opaque tokens (the issuer's token_format "opaque", OpaquePrefix and random
// characters) carry nothing to verify: only the issuer can say what they
// are. Remote mode checks them like a JWT; Local mode refuses them with
// ErrInvalidToken, saying so.
//
// Staleness. With CacheTTL zero (the default) every token is checked with
// the issuer on every request, and revocation takes effect at once. With
// CacheTTL above zero an answer of the issuer is reused for up to CacheTTL,
// and never past the token's exp: a token revoked at the issuer may still be
// accepted for at most CacheTTL. Rejections are remembered for at most
// CacheTTL too, and failures to reach the issuer never.
//
// Failing closed. When the issuer cannot be reached, times out (Timeout, 2 s
// by default), or answers 5xx or anything unexpected, Validate returns an
// error wrapping ErrUnavailable and the middleware answers 503 with
// Retry-After and {"error":"temporarily_unavailable"}: never a pass.
//
// DPoP (RFC 9449). A token whose cnf.jkt binds it to a client's key counts
// only when presented as Authorization: DPoP <token> with one DPoP header:
// a proof signed by that key for this request. Options.DPoP.PublicURL
// turns it on; without it every bound token is refused. What each mode
// does with such a request, in order:
//
//  1. the proof: dpop.Checker.Check here, in every mode, for the method,
//     htu = PublicURL + the request's escaped path (never its Host or
//     X-Forwarded-* headers), ath of the token; the replay record is
//     Options.DPoP.Replay (a MemoryReplay of this Validator by default:
//     one replica's, see DPoP.Replay)
//  2. the token: Local verifies it (its cnf comes with the JWT); a call
//     to the issuer (Remote, Local with Check, FallbackRemote) sends
//     Authorization: DPoP, the proof and the request as X-Forwarded-Method,
//     -Proto, -Host and -Uri, skips the answer cache (each proof is checked
//     by the issuer, against its record shared by every replica, so its
//     answer is per request), and reads cnf from the answer
//  3. the binding: the token's cnf.jkt is the proof key's thumbprint
//
// The issuer believes X-Forwarded-* only from SNOWTOKEN_DPOP_FORWARDERS: a
// service that asks it about DPoP requests must be listed there (or use
// Local mode with Skip or Follow), and not in SNOWTOKEN_TRUSTED_PROXIES,
// which is for the proxies that name clients' addresses; otherwise the
// issuer checks the proof against its own URL and refuses it (401
// invalid_dpop_proof). A token with a cnf presented as Bearer is refused,
// in every mode (RFC 9449 §7.2), and so is one without a cnf presented as
// DPoP (see checkBinding).
// A client makes proofs with dpop.Prover and dpop.Transport.
//
// Transaction Tokens (draft-ietf-oauth-transaction-tokens-10, package
// txntoken) have a verifier of their own, TxnVerifier: its middleware
// verifies the Txn-Token header locally with the JWKS, TxnFrom reads it and
// TxnTransport forwards it unchanged on outgoing calls.
//
// Tokens are never logged, and never part of an error.
package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/client/revocation"
)

// Errors returned by this package, wrapped with detail; match them with
// errors.Is. The middleware answers ErrNoToken and ErrInvalidToken with 401,
// ErrInvalidRequest with 400, ErrInsufficientScope with 403 and
// ErrUnavailable with 503.
var (
	ErrNoToken      = errors.New("client: no bearer token")
	ErrInvalidToken = errors.New("client: invalid token")
	// ErrInvalidRequest is a malformed request: more than one
	// Authorization header (jwtpolicy.ErrAuthorizations), which the issuer
	// refuses alike: 400 invalid_request (RFC 6750 §3.1).
	ErrInvalidRequest    = errors.New("client: invalid request")
	ErrInsufficientScope = errors.New("client: insufficient scope")
	ErrUnavailable       = errors.New("client: token issuer unavailable")
	ErrBadScope          = errors.New("client: malformed required scope")
	ErrOptions           = errors.New("client: bad options")
	// ErrInvalidProof is a DPoP proof refused (missing, malformed, for
	// another request, replayed...), or the issuer's use_dpop_nonce: 401
	// with a DPoP challenge, error="invalid_dpop_proof" (RFC 9449 §7.1).
	ErrInvalidProof = errors.New("client: invalid DPoP proof")
	// ErrTokenBound is a DPoP-bound token presented without its proof: as
	// a bearer token, or to Validate. It is an ErrInvalidToken.
	ErrTokenBound = fmt.Errorf("%w: %w", ErrInvalidToken, jwtpolicy.ErrBound)
	// ErrDPoPOff is Authorization: DPoP at a Validator without
	// Options.DPoP.PublicURL, which cannot check a proof. It is an
	// ErrInvalidToken.
	ErrDPoPOff = fmt.Errorf("%w: this service does not accept DPoP tokens (its Options.DPoP.PublicURL is not set)", ErrInvalidToken)
)

// Validator checks snowtoken access tokens. It is safe for concurrent use.
type Validator struct {
	opts        Options
	validateURL string
	http        *http.Client
	cache       *answerCache // nil when CacheTTL is zero
	keys        *keyCache    // Local mode only
	feed        *feed        // RevocationCheck Follow only
	parser      *jwt.Parser  // Local mode only
	dpop        *dpopSetup   // nil when DPoP is off (no DPoP.PublicURL)
}

// New returns a Validator configured by opts. It does no I/O: Local mode
// fetches the JWKS when the first token arrives.
func New(opts Options) (*Validator, error) {
	base, err := jwtpolicy.Issuer(opts.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: IssuerURL %.100q must be an http(s) base URL such as http://issuer:8080", ErrOptions, opts.IssuerURL)
	}
	if opts.Issuer != "" {
		if opts.Issuer, err = jwtpolicy.Issuer(opts.Issuer); err != nil {
			return nil, fmt.Errorf("%w: Issuer: %w", ErrOptions, err)
		}
	}
	switch {
	case opts.Mode != Remote && opts.Mode != Local:
		return nil, fmt.Errorf("%w: unknown Mode %d", ErrOptions, opts.Mode)
	case opts.RevocationCheck != Check && opts.RevocationCheck != Skip && opts.RevocationCheck != Follow:
		return nil, fmt.Errorf("%w: unknown RevocationCheck %d", ErrOptions, opts.RevocationCheck)
	case opts.RevocationCheck == Follow && opts.Mode != Local:
		return nil, fmt.Errorf("%w: RevocationCheck Follow is for Local mode", ErrOptions)
	case opts.RevocationCheck == Follow && (opts.FeedClientID == "" || opts.FeedClientSecret == ""):
		return nil, fmt.Errorf("%w: RevocationCheck Follow needs FeedClientID and FeedClientSecret", ErrOptions)
	case opts.WhenStale != FailClosed && opts.WhenStale != FallbackRemote:
		return nil, fmt.Errorf("%w: unknown WhenStale %d", ErrOptions, opts.WhenStale)
	case opts.Leeway < 0 && opts.Leeway != NoLeeway:
		return nil, fmt.Errorf("%w: Leeway %v: zero means DefaultLeeway, NoLeeway none; any other negative is an error", ErrOptions, opts.Leeway)
	case opts.Timeout < 0, opts.CacheTTL < 0, opts.CacheSize < 0, opts.JWKSMaxAge < 0, opts.JWKSMinInterval < 0, opts.FeedThreshold < 0, opts.FeedRetention < 0,
		opts.MaxClockSkew < 0:
		return nil, fmt.Errorf("%w: durations and sizes must not be negative", ErrOptions)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	opts.Leeway = max(opts.Leeway, 0)
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.JWKSMinInterval == 0 {
		opts.JWKSMinInterval = DefaultJWKSMinInterval
	}
	if opts.IDLayout == nil {
		opts.IDLayout = bitsalloc.Default()
	}
	if opts.Realm == "" {
		opts.Realm = DefaultRealm
	}
	if opts.FeedThreshold == 0 {
		opts.FeedThreshold = DefaultFeedThreshold
	}
	if opts.FeedRetention == 0 {
		opts.FeedRetention = DefaultFeedRetention
	}
	if opts.MaxClockSkew == 0 {
		opts.MaxClockSkew = opts.Leeway
	}
	if strings.ContainsAny(opts.Realm, "\"\\\r\n") {
		return nil, fmt.Errorf("%w: Realm must not hold quotes, backslashes or line breaks", ErrOptions)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Issuer == "" && opts.Mode == Local {
		opts.Issuer = base
	}
	d, err := newDPoPSetup(opts.DPoP)
	if err != nil {
		return nil, err
	}
	v := &Validator{opts: opts, validateURL: base + "/token/validate", http: opts.HTTPClient, dpop: d}
	if v.http == nil {
		v.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.CacheTTL > 0 {
		v.cache = newAnswerCache(opts.CacheSize)
	}
	if opts.Mode == Local {
		if v.keys, err = newKeyCache(v, base+"/.well-known/jwks.json"); err != nil {
			return nil, err
		}
		v.parser = jwt.NewParser(jwtpolicy.ParserOptions(opts.Issuer, opts.Audience, opts.Leeway, opts.Now)...)
		if opts.RevocationCheck == Follow {
			v.feed = newFeed(v, base)
		}
	}
	return v, nil
}

// Validate checks a raw bearer token (without "Bearer ") and that it
// carries every one of requiredScopes. It returns the token's claims, or an
// error wrapping ErrInvalidToken, ErrInsufficientScope, ErrUnavailable or
// ErrBadScope. A DPoP-bound token is refused (ErrTokenBound): only
// Authenticate, which sees the request and its proof, accepts one.
func (v *Validator) Validate(ctx context.Context, raw string, requiredScopes ...string) (*Claims, error) {
	return v.validateAs(ctx, raw, requiredScopes, nil)
}

// validateAs is Validate of a token presented as p says (nil: as a bearer
// token).
func (v *Validator) validateAs(ctx context.Context, raw string, requiredScopes []string, p *presentation) (*Claims, error) {
	c, err := v.validate(ctx, raw, requiredScopes, p)
	if errors.Is(err, ErrInsufficientScope) {
		return nil, &scopeError{err: err, required: requiredScopes}
	}
	return c, err
}

// scopeError is ErrInsufficientScope with the scopes that were required,
// which WriteError names in its challenge.
type scopeError struct {
	err      error
	required []string
}

func (e *scopeError) Error() string { return e.err.Error() }

func (e *scopeError) Unwrap() error { return e.err }

// validate checks raw as presented by p (nil: as a bearer token). A DPoP
// proof is checked first, here in every mode, so that a refused one costs
// no call to the issuer; then the token, locally or by the issuer; then
// that the token is bound to the proof's key, or to none without a proof;
// the proof is recorded against replay before the issuer is asked in
// Remote mode (a replayed proof costs no call), and in Local mode once the
// token has passed, so that no one without a good token fills the record;
// then the scopes.
func (v *Validator) validate(ctx context.Context, raw string, requiredScopes []string, p *presentation) (*Claims, error) {
	if err := checkScopes(requiredScopes); err != nil {
		return nil, err
	}
	opaque, err := checkSyntax(raw)
	if err != nil {
		return nil, err
	}
	if opaque && v.opts.Mode == Local {
		// Nothing in it to verify: its claims live only in the issuer's Redis.
		return nil, refusal.Describe(fmt.Errorf("%w: an opaque token: Local mode cannot verify it, use Remote mode (or a JWT client)", ErrInvalidToken), "an opaque token")
	}
	var proof *dpop.Proof
	if p != nil {
		if proof, err = v.verifyProof(raw, p); err != nil {
			return nil, err
		}
		if v.opts.Mode == Remote {
			if err := v.recordProof(ctx, proof); err != nil {
				return nil, err
			}
		}
	}
	c, err := v.claims(ctx, raw, requiredScopes, p)
	if err != nil {
		return nil, err
	}
	if err := checkBinding(c, proof); err != nil {
		return nil, err
	}
	if proof != nil && v.opts.Mode != Remote {
		if err := v.recordProof(ctx, proof); err != nil {
			return nil, err
		}
	}
	return c, requireScopes(c, requiredScopes)
}

// claims returns the claims of raw: verified locally, and asked of the
// issuer when the mode says so.
func (v *Validator) claims(ctx context.Context, raw string, scopes []string, p *presentation) (*Claims, error) {
	if v.opts.Mode == Local {
		c, err := v.verifyLocal(ctx, raw)
		if err != nil {
			return nil, err
		}
		switch v.opts.RevocationCheck {
		case Skip:
			return c, nil
		case Follow:
			v.feed.start()
			switch v.feed.decide(c) {
			case revocation.Revoked:
				return nil, refusal.New(ErrInvalidToken, "revoked (revocation feed)")
			case revocation.Live:
				return c, nil
			}
			if v.opts.WhenStale == FailClosed {
				return nil, fmt.Errorf("%w: the revocation feed cannot tell whether the token is revoked (not fresh, or too close to a revocation)", ErrUnavailable)
			}
		}
	}
	return v.ask(ctx, raw, scopes, p)
}

// ask returns the issuer's answer about raw, from the cache when it holds
// one. A DPoP request (p not nil) always goes to the issuer, with its
// proof, and its answer is not kept: the cache is keyed by token, and the
// issuer checks each proof against its record shared by every replica.
func (v *Validator) ask(ctx context.Context, raw string, scopes []string, p *presentation) (*Claims, error) {
	if p != nil {
		return v.callIssuer(ctx, raw, scopes, p)
	}
	var key [sha256.Size]byte
	now := v.opts.Now()
	if v.cache != nil {
		key = sha256.Sum256([]byte(raw))
		if c, err, ok := v.cache.get(&key, now); ok {
			return c, err
		}
	}
	c, err := v.callIssuer(ctx, raw, scopes, nil)
	if v.cache != nil {
		// The answer is as old as the moment before the call; it is kept for
		// CacheTTL from then, and a positive one never past the token's exp.
		until := now.Add(v.opts.CacheTTL)
		switch {
		case err == nil:
			if c.ExpiresAt.Before(until) {
				until = c.ExpiresAt
			}
			v.cache.put(&key, answer{claims: c.clone(), until: until}, now)
		case errors.Is(err, ErrInvalidToken):
			v.cache.put(&key, answer{err: err, until: until}, now)
		}
	}
	return c, err
}

// OpaquePrefix starts every opaque token (the issuer's token_format
// "opaque"): OpaquePrefix and 32 base64url characters, no dot. Only the
// issuer can check one: Remote mode sends it there, Local mode refuses it.
const OpaquePrefix = jwtpolicy.OpaquePrefix

// checkSyntax rejects, without a network call, anything that is shaped
// neither like a compact JWS (three non-empty base64url segments) nor like
// an opaque token, which it reports: jwtpolicy.CheckSyntax, the issuer's
// own check, so a token with a line break or any byte outside base64url
// and its dots is refused here as there.
func checkSyntax(raw string) (opaque bool, err error) {
	if len(raw) > MaxTokenLen {
		return false, refusal.New(ErrInvalidToken, "longer than %d bytes", MaxTokenLen)
	}
	if err := jwtpolicy.CheckSyntax(raw); err != nil {
		return false, refusal.Describe(fmt.Errorf("%w: not a JWT: %w", ErrInvalidToken, err), "not a JWT")
	}
	return strings.HasPrefix(raw, OpaquePrefix), nil
}

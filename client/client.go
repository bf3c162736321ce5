// Package client lets a service accept snowtoken access tokens: a Validator
// checks a bearer token, and its net/http middleware answers 401, 403 or 503
// on its own and hands the token's claims to the next handler. Routers that
// take no http.Handler middleware, such as gin, call Authenticate and
// WriteError (see Authenticate for the gin wiring).
//
// It is a module of its own that needs the standard library and golang-jwt
// only; a service adds it with
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
// Tokens are never logged, and never part of an error.
package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// Errors returned by this package, wrapped with detail; match them with
// errors.Is. The middleware answers ErrNoToken and ErrInvalidToken with 401,
// ErrInsufficientScope with 403 and ErrUnavailable with 503.
var (
	ErrNoToken           = errors.New("client: no bearer token")
	ErrInvalidToken      = errors.New("client: invalid token")
	ErrInsufficientScope = errors.New("client: insufficient scope")
	ErrUnavailable       = errors.New("client: token issuer unavailable")
	ErrBadScope          = errors.New("client: malformed required scope")
	ErrOptions           = errors.New("client: bad options")
)

// Defaults of Options.
const (
	DefaultTimeout         = 2 * time.Second
	DefaultLeeway          = 5 * time.Second
	DefaultCacheSize       = 10_000
	DefaultJWKSMaxAge      = 5 * time.Minute
	DefaultJWKSMinInterval = 10 * time.Second
	DefaultRealm           = "snowtoken"
	DefaultFeedThreshold   = 150 * time.Millisecond
	// MaxTokenLen bounds the tokens looked at; the issuer refuses longer ones too.
	MaxTokenLen = 4096
)

// Mode chooses who verifies a token's signature.
type Mode int

const (
	// Remote asks the issuer about every token (GET /token/validate). It is
	// the zero value.
	Remote Mode = iota
	// Local verifies signatures and claims against the issuer's JWKS, then
	// checks revocation as RevocationCheck says.
	Local
)

// RevocationCheck says whether Local mode asks the issuer if a token whose
// signature and claims check out has been revoked.
type RevocationCheck int

const (
	// Check asks the issuer (GET /token/validate) about every token that
	// passed the local checks, through the cache when CacheTTL is set. It is
	// the zero value, so a revoked token is rejected as in Remote mode; Local
	// mode still spares the issuer every forged, expired or malformed token.
	Check RevocationCheck = iota
	// Skip trusts a valid signature alone and never asks the issuer.
	//
	// WARNING: the issuer's revocation (POST /token/revoke, DELETE
	// /subjects/{sub}/tokens) is then NOT SEEN: a revoked token, or every
	// token of a subject whose tokens were all revoked, is accepted until its
	// own exp, up to the issuer's maximum token lifetime (24 h by default).
	// Choose it only for tokens with short lifetimes, or where accepting a
	// revoked token that long is acceptable.
	Skip
	// Follow follows the issuer's revocation feed (GET
	// {IssuerURL}/revocations/events, as FeedClientID, a client with
	// revocation_feed) and decides from what it holds in memory, with no
	// call per token: a token revoked at the issuer is refused here within
	// about a heartbeat (25 ms) and a round trip. The feed's every event and
	// heartbeat is verified with the JWKS. While the followed state is not
	// fresh (no heartbeat for FeedThreshold: the issuer or the feed is
	// down, or the issuer's own state is stale), or when it cannot tell
	// (a token issued within Leeway of a subject's or client's revocation,
	// or before the log's horizon), WhenStale decides: FailClosed (the
	// default: ErrUnavailable, 503) or FallbackRemote. See Start and Close.
	Follow
)

// WhenStale says what RevocationCheck Follow does with a token the followed
// state cannot decide: it is not fresh, or the token is too close to a
// revocation of its subject or client to tell.
type WhenStale int

const (
	// FailClosed refuses the token with ErrUnavailable (the middleware's
	// 503 with Retry-After). It is the zero value.
	FailClosed WhenStale = iota
	// FallbackRemote asks the issuer (GET /token/validate), as Check does,
	// through the cache when CacheTTL is set.
	FallbackRemote
)

// Options configures a Validator. Zero values mean the documented defaults;
// only IssuerURL is required.
type Options struct {
	// IssuerURL is the issuer's base URL as this service reaches it, such as
	// "http://issuer:8080". Required; http or https, no query. A trailing
	// slash makes no difference.
	IssuerURL string

	// Mode is Remote (zero) or Local.
	Mode Mode

	// RevocationCheck applies to Local mode: Check (zero), Skip or Follow.
	// Read Skip before choosing it.
	RevocationCheck RevocationCheck

	// FeedClientID and FeedClientSecret authenticate the Validator to the
	// revocation feed (Follow): a client of the issuer with
	// "revocation_feed": true in its clients file. Required with Follow.
	// The stream is one long request: an HTTPClient with a Timeout of its
	// own ends it every Timeout (it reconnects, resuming); leave it zero.
	FeedClientID, FeedClientSecret string

	// FeedThreshold is how long after a heartbeat was signed, less the age
	// of the issuer's state it reports, the followed state counts as fresh.
	// Zero means DefaultFeedThreshold. It bounds how long a revocation may
	// go unseen here: a heartbeat comes every 25 ms while the issuer is
	// fresh, and the issuer's state may be up to 100 ms old. The time a
	// heartbeat was signed is read on this clock by the stream's first JWT,
	// which the issuer signs with this connection's nonce after the request
	// arrived: network time, and a proxy that holds the stream back, count
	// against the threshold, never on top of it.
	FeedThreshold time.Duration

	// MaxClockSkew is how far this clock may be from the issuer's: a
	// heartbeat, stream JWT or snapshot signed more than FeedThreshold +
	// MaxClockSkew ago, or more than MaxClockSkew ahead, by this clock, is
	// ignored (a recording, or a clock out of step). Zero means Leeway.
	MaxClockSkew time.Duration

	// WhenStale is what Follow does with a token the feed cannot decide:
	// FailClosed (zero) or FallbackRemote.
	WhenStale WhenStale

	// Issuer is the iss a token must carry: the issuer's SNOWTOKEN_ISSUER.
	// Empty means IssuerURL in Local mode; in Remote mode it means no check
	// here (the issuer accepts only its own iss). Like IssuerURL it is taken
	// in its canonical form (jwtpolicy.Issuer: no trailing slash, scheme and
	// host in lower case), the form the issuer signs, so either spelling
	// matches.
	Issuer string

	// Audience, if set, names this service: it must be one of the token's aud
	// values, in both modes. Local mode checks it itself; Remote mode sends it
	// (GET /token/validate?audience=...) for the issuer to check, and checks
	// the answer's aud too. A token for another audience is ErrInvalidToken,
	// "audience mismatch". Empty means no check.
	Audience string

	// Leeway allows for clock skew on exp and iat in Local mode. Zero means
	// DefaultLeeway; negative means none.
	Leeway time.Duration

	// Timeout bounds each call to the issuer. Zero means DefaultTimeout.
	Timeout time.Duration

	// CacheTTL is how long an answer of the issuer is reused, keyed by the
	// SHA-256 of the token. Zero (the default) means no cache: revocation
	// takes effect at once. Above zero, a revoked token may be accepted for at
	// most CacheTTL after its revocation, and never past its exp; rejections
	// are kept for at most CacheTTL; failures are never kept.
	CacheTTL time.Duration

	// CacheSize bounds the cache's entries. Zero means DefaultCacheSize.
	CacheSize int

	// JWKSMaxAge is how old the keys of Local mode may grow before they are
	// fetched again. Zero means DefaultJWKSMaxAge. When a fetch fails the keys
	// already known stay in use.
	JWKSMaxAge time.Duration

	// JWKSMinInterval is the least time between two JWKS fetches, so a flood
	// of tokens with unknown kids costs the issuer at most one fetch per
	// interval. Zero means DefaultJWKSMinInterval. A key is therefore best
	// published in the JWKS (as a verify-only key of the issuer's key set)
	// before it starts signing; otherwise a token signed by it may be refused
	// for up to this long after a fetch.
	JWKSMinInterval time.Duration

	// IDLayout is the layout of the Snowflake IDs in jti, used to find the
	// issuing worker in Local mode with Skip (otherwise the issuer says which).
	// Nil means bitsalloc.Default() (41/10/12).
	IDLayout *bitsalloc.BitsAllocator

	// Realm names the protection space in WWW-Authenticate challenges. Empty
	// means DefaultRealm.
	Realm string

	// HTTPClient calls the issuer. Nil means a client of its own that does not
	// follow redirects. Timeout applies either way.
	HTTPClient *http.Client

	// Logger receives failures to reach the issuer; never a token. Nil means
	// slog.Default().
	Logger *slog.Logger

	// Now reads the clock. Nil means time.Now. Tests inject a fake clock.
	Now func() time.Time
}

// Validator checks snowtoken access tokens. It is safe for concurrent use.
type Validator struct {
	opts        Options
	validateURL string
	http        *http.Client
	cache       *answerCache // nil when CacheTTL is zero
	keys        *keyCache    // Local mode only
	feed        *feed        // RevocationCheck Follow only
	parser      *jwt.Parser  // Local mode only
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
	case opts.Timeout < 0, opts.CacheTTL < 0, opts.CacheSize < 0, opts.JWKSMaxAge < 0, opts.JWKSMinInterval < 0, opts.FeedThreshold < 0,
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
	if opts.JWKSMaxAge == 0 {
		opts.JWKSMaxAge = DefaultJWKSMaxAge
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
	v := &Validator{opts: opts, validateURL: base + "/token/validate", http: opts.HTTPClient}
	if v.http == nil {
		v.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.CacheTTL > 0 {
		v.cache = newAnswerCache(opts.CacheSize)
	}
	if opts.Mode == Local {
		v.keys = &keyCache{v: v, url: base + "/.well-known/jwks.json"}
		v.parser = jwt.NewParser(jwtpolicy.ParserOptions(opts.Issuer, opts.Audience, opts.Leeway, opts.Now)...)
		if opts.RevocationCheck == Follow {
			v.feed = newFeed(v, base)
		}
	}
	return v, nil
}

// Validate checks a raw token (without "Bearer ") and that it carries every
// one of requiredScopes. It returns the token's claims, or an error wrapping
// ErrInvalidToken, ErrInsufficientScope, ErrUnavailable or ErrBadScope.
func (v *Validator) Validate(ctx context.Context, raw string, requiredScopes ...string) (*Claims, error) {
	c, err := v.validate(ctx, raw, requiredScopes)
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

func (v *Validator) validate(ctx context.Context, raw string, requiredScopes []string) (*Claims, error) {
	if err := checkScopes(requiredScopes); err != nil {
		return nil, err
	}
	opaque, err := checkSyntax(raw)
	if err != nil {
		return nil, err
	}
	if opaque && v.opts.Mode == Local {
		// Nothing in it to verify: its claims live only in the issuer's Redis.
		return nil, fmt.Errorf("%w: an opaque token: Local mode cannot verify it, use Remote mode (or a JWT client)", ErrInvalidToken)
	}
	if v.opts.Mode == Local {
		c, err := v.verifyLocal(ctx, raw)
		if err != nil {
			return nil, err
		}
		switch v.opts.RevocationCheck {
		case Skip:
			return c, requireScopes(c, requiredScopes)
		case Follow:
			v.feed.start()
			switch v.feed.decide(c) {
			case revoked:
				return nil, fmt.Errorf("%w: revoked (revocation feed)", ErrInvalidToken)
			case live:
				return c, requireScopes(c, requiredScopes)
			}
			if v.opts.WhenStale == FailClosed {
				return nil, fmt.Errorf("%w: the revocation feed cannot tell whether the token is revoked (not fresh, or too close to a revocation)", ErrUnavailable)
			}
		}
	}
	return v.ask(ctx, raw, requiredScopes)
}

// ask returns the issuer's answer about raw, from the cache when it holds
// one, and checks the scopes.
func (v *Validator) ask(ctx context.Context, raw string, scopes []string) (*Claims, error) {
	var key [sha256.Size]byte
	now := v.opts.Now()
	if v.cache != nil {
		key = sha256.Sum256([]byte(raw))
		if c, err, ok := v.cache.get(&key, now); ok {
			if err != nil {
				return nil, err
			}
			return c, requireScopes(c, scopes)
		}
	}
	c, err := v.callIssuer(ctx, raw, scopes)
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
	if err != nil {
		return nil, err
	}
	return c, requireScopes(c, scopes)
}

// Claims are what a valid token says.
type Claims struct {
	Subject   string
	ClientID  string
	Scopes    []string
	Issuer    string
	Audience  []string
	IssuedAt  time.Time
	ExpiresAt time.Time
	// JTI is the jti: the token's Snowflake ID in decimal.
	JTI string
	// WorkerID is the issuer worker that made JTI.
	WorkerID int64
}

// HasScope reports whether the token carries scope.
func (c *Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

func (c *Claims) clone() *Claims {
	d := *c
	d.Scopes = slices.Clone(c.Scopes)
	d.Audience = slices.Clone(c.Audience)
	return &d
}

// requireScopes returns nil when c carries every scope in want.
func requireScopes(c *Claims, want []string) error {
	for _, s := range want {
		if !c.HasScope(s) {
			return fmt.Errorf("%w: token lacks %q", ErrInsufficientScope, strings.Join(want, " "))
		}
	}
	return nil
}

// checkScopes accepts scopes as RFC 6749 §3.3 defines them: printable ASCII
// other than space, double quote and backslash.
func checkScopes(scopes []string) error {
	for _, s := range scopes {
		if s == "" || len(s) > 128 {
			return fmt.Errorf("%w: %.32q must be 1 to 128 characters", ErrBadScope, s)
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return fmt.Errorf("%w: %.32q: character %q not allowed", ErrBadScope, s, c)
			}
		}
	}
	return nil
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
		return false, fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, MaxTokenLen)
	}
	if err := jwtpolicy.CheckSyntax(raw); err != nil {
		return false, fmt.Errorf("%w: not a JWT: %w", ErrInvalidToken, err)
	}
	return strings.HasPrefix(raw, OpaquePrefix), nil
}

// claimsKey keys the claims in a context.Context.
type claimsKey struct{}

// GinKey is the key a gin handler stores the *Claims under with c.Set, so
// that ClaimsFrom finds them in a *gin.Context (see Authenticate).
const GinKey = "github.com/snowtoken/snowtoken/client.claims"

// NewContext returns a copy of ctx that carries c, as the middleware passes it
// on; handler tests use it too.
func NewContext(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFrom returns the claims the middleware put in ctx. A *gin.Context
// works too: it finds what was stored under GinKey.
func ClaimsFrom(ctx context.Context) (*Claims, bool) {
	if c, ok := ctx.Value(claimsKey{}).(*Claims); ok && c != nil {
		return c, true
	}
	c, ok := ctx.Value(GinKey).(*Claims)
	return c, ok && c != nil
}

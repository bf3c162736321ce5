package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/txntoken"
)

// TxnOptions configure a TxnVerifier. Zero values mean the defaults of
// Options; IssuerURL and TrustDomain are required.
type TxnOptions struct {
	// IssuerURL is the issuer's base URL, as in Options: its JWKS
	// (/.well-known/jwks.json) holds the keys Txn-Tokens are signed with.
	IssuerURL string
	// TrustDomain is the aud a Txn-Token must carry: the issuer's
	// SNOWTOKEN_TXN_TRUST_DOMAIN. Required.
	TrustDomain string
	// Leeway allows for clock skew on exp and iat: zero means
	// DefaultLeeway, NoLeeway none.
	Leeway time.Duration
	// Timeout, JWKSMaxAge, JWKSMinInterval, HTTPClient, Logger and Now are
	// as in Options, for the JWKS.
	Timeout, JWKSMaxAge, JWKSMinInterval time.Duration
	HTTPClient                           *http.Client
	Logger                               *slog.Logger
	Now                                  func() time.Time
	// Realm names the protection space in the answers' challenges. Empty
	// means DefaultRealm.
	Realm string
}

// TxnVerifier verifies Transaction Tokens (package txntoken) locally, with
// the issuer's JWKS: signature (EdDSA only), typ txntoken+jwt, aud the
// trust domain, exp and iat, the claims the draft requires. There is no
// call to the issuer per token and no revocation check: a Txn-Token lives
// for seconds and is no session. It is safe for concurrent use.
//
// A Txn-Token is not a credential: it says for whom and in what context a
// call is made, not who makes it. A workload that accepts one still
// authenticates its caller (mTLS, the caller's own access token in
// Authorization: a Validator), and a TxnVerifier ignores Authorization
// except to refuse a Txn-Token sent there.
type TxnVerifier struct {
	keys  *keyCache
	parse txntoken.ParseOptions
	opts  TxnOptions
}

// NewTxnVerifier returns a TxnVerifier configured by opts. It does no I/O:
// the JWKS is fetched when the first token arrives.
func NewTxnVerifier(opts TxnOptions) (*TxnVerifier, error) {
	if opts.TrustDomain == "" {
		return nil, fmt.Errorf("%w: TrustDomain is required (the issuer's SNOWTOKEN_TXN_TRUST_DOMAIN)", ErrOptions)
	}
	// A Local Validator holds the JWKS cache and applies Options' defaults
	// and checks; it validates no access token here.
	v, err := New(Options{IssuerURL: opts.IssuerURL, Mode: Local, RevocationCheck: Skip, Leeway: opts.Leeway,
		Timeout: opts.Timeout, JWKSMaxAge: opts.JWKSMaxAge, JWKSMinInterval: opts.JWKSMinInterval,
		HTTPClient: opts.HTTPClient, Logger: opts.Logger, Now: opts.Now, Realm: opts.Realm})
	if err != nil {
		return nil, err
	}
	opts.Logger, opts.Realm = v.opts.Logger, v.opts.Realm
	return &TxnVerifier{keys: v.keys, opts: opts,
		parse: txntoken.ParseOptions{TrustDomain: opts.TrustDomain, Leeway: v.opts.Leeway, Now: v.opts.Now}}, nil
}

// Verify checks raw as a Txn-Token and returns its claims, or an error
// wrapping ErrInvalidToken or ErrUnavailable (the JWKS cannot be fetched).
func (t *TxnVerifier) Verify(ctx context.Context, raw string) (*txntoken.Claims, error) {
	c, err := txntoken.Parse(raw, func(kid string) (ed25519.PublicKey, error) {
		k, err := t.keys.key(ctx, kid)
		if errors.Is(err, errUnknownKid) {
			return nil, fmt.Errorf("%w: %w", txntoken.ErrInvalid, err)
		}
		return k, err
	}, t.parse)
	switch {
	case errors.Is(err, ErrUnavailable):
		return nil, err
	case errors.Is(err, txntoken.ErrType):
		return nil, refusal.New(ErrInvalidToken, "not a Txn-Token (its typ is not %s)", txntoken.Type)
	case errors.Is(err, txntoken.ErrMalformed):
		return nil, refusal.Describe(fmt.Errorf("%w: %w", ErrInvalidToken, err), "malformed Txn-Token")
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err) // told by description
	}
	return c, nil
}

// Authenticate reads and verifies the Txn-Token of r: exactly one
// Txn-Token header (none: ErrNoToken; more: ErrInvalidRequest). A
// Txn-Token in Authorization is refused (ErrInvalidToken), whatever the
// Txn-Token header holds: the draft forbids it, and a service that took
// it there would take it for an access token.
func (t *TxnVerifier) Authenticate(r *http.Request) (*txntoken.Claims, string, error) {
	for _, a := range r.Header.Values("Authorization") {
		if _, cred, ok := strings.Cut(a, " "); ok && txntoken.CheckType(strings.TrimSpace(cred)) == nil {
			return nil, "", refusal.New(ErrInvalidToken, "a Txn-Token is not an access token: send it in the %s header, never in Authorization", txntoken.Header)
		}
	}
	switch vs := r.Header.Values(txntoken.Header); len(vs) {
	case 0:
		return nil, "", refusal.New(ErrNoToken, "send the %s header", txntoken.Header)
	case 1:
		c, err := t.Verify(r.Context(), vs[0])
		return c, vs[0], err
	default:
		return nil, "", refusal.New(ErrInvalidRequest, "more than one %s header", txntoken.Header)
	}
}

// Middleware returns a handler that lets a request through to next only
// with a valid Txn-Token, and puts it in the request's context (TxnFrom;
// TxnTransport forwards it). Otherwise it answers itself (WriteError):
//
//	no Txn-Token header             401  invalid_token
//	two Txn-Token headers           400  invalid_request
//	invalid, expired, wrong aud/typ 401  invalid_token
//	a Txn-Token in Authorization    401  invalid_token
//	JWKS unreachable                503  temporarily_unavailable, Retry-After
func (t *TxnVerifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, raw, err := t.Authenticate(r)
		if err != nil {
			t.WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewTxnContext(r.Context(), c, raw)))
	})
}

// WriteError answers r with err, an error of Authenticate or Verify, as
// Middleware does: OAuth 2.0 JSON with a challenge of the Txn-Token scheme
// on a 401; never the token.
func (t *TxnVerifier) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	h := w.Header()
	status, body := http.StatusUnauthorized, errorBody{Error: "invalid_token", Description: description(err)}
	switch {
	case errors.Is(err, ErrInvalidRequest):
		status, body.Error = http.StatusBadRequest, "invalid_request"
	case errors.Is(err, ErrUnavailable):
		status, body = http.StatusServiceUnavailable, errorBody{Error: "temporarily_unavailable", Description: "the issuer's keys cannot be fetched; retry later"}
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter(err).Seconds()))))
		t.opts.Logger.Warn("snowtoken client: cannot check a Txn-Token", "path", r.URL.Path, "err", err)
	case errors.Is(err, ErrInvalidToken), errors.Is(err, ErrNoToken):
		t.opts.Logger.Debug("snowtoken client: Txn-Token refused", "path", r.URL.Path, "err", err)
	default:
		status, body = http.StatusInternalServerError, errorBody{Error: "server_error", Description: "internal error"}
		t.opts.Logger.Error("snowtoken client: cannot check a Txn-Token", "path", r.URL.Path, "err", err)
	}
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", txntoken.Header+` realm="`+t.opts.Realm+`", error="`+body.Error+`"`)
	}
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// txnKey is the context key of a request's Txn-Token.
type txnKey struct{}

// txnValue is a verified Txn-Token: its claims and the token as it came,
// which TxnTransport forwards unchanged.
type txnValue struct {
	claims *txntoken.Claims
	raw    string
}

// NewTxnContext returns ctx holding the verified Txn-Token raw with its
// claims c, as Middleware puts it there.
func NewTxnContext(ctx context.Context, c *txntoken.Claims, raw string) context.Context {
	return context.WithValue(ctx, txnKey{}, txnValue{claims: c, raw: raw})
}

// TxnFrom returns the claims of the Txn-Token Middleware verified for the
// request ctx belongs to: txn, sub, scope, req_wl, tctx and rctx. Read
// them, never change them.
func TxnFrom(ctx context.Context) (*txntoken.Claims, bool) {
	v, ok := ctx.Value(txnKey{}).(txnValue)
	return v.claims, ok
}

// TxnTransport is an http.RoundTripper that forwards the Txn-Token of the
// request's context (Middleware's) unchanged, in the Txn-Token header, on
// the calls a workload makes for that request: use it with
// http.NewRequestWithContext(r.Context(), ...). A request that has a
// Txn-Token header of its own (a replacement the workload obtained) or
// whose context holds none is sent as it is. It does not authenticate the
// workload: add its own credentials (credentials.Transport, mTLS) too.
type TxnTransport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip sends req with its context's Txn-Token (see TxnTransport). It
// does not modify req: it sends a copy.
func (t TxnTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	v, ok := req.Context().Value(txnKey{}).(txnValue)
	if !ok || req.Header.Values(txntoken.Header) != nil {
		return base.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	out.Header[txntoken.Header] = []string{v.raw}
	return base.RoundTrip(out)
}

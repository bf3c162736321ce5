// Package credentials gets access tokens for a service that calls others:
// the OAuth2 client credentials grant (RFC 6749 §4.4) against a snowtoken
// issuer, with the client authenticated by a secret or, with no secret at
// all, by a client assertion (RFC 7523 §2.2):
//
//   - KeyAssertion: private_key_jwt, a short JWT the client signs with its
//     own private key (iss = sub = the client ID, aud = the issuer alone,
//     a fresh jti, exp a minute ahead), whose public key the clients file
//     lists (jwks or jwks_uri);
//   - FileAssertion: a token another issuer the snowtoken issuer trusts
//     gave the workload, read from a file at each request: a Kubernetes
//     projected service-account token whose audience is the issuer, which
//     the kubelet renews in place.
//
// A Source caches the token until shortly before it expires and asks again
// then; Transport sends requests with it. Sent through a dpop.Transport
// (HTTPClient), the token is DPoP-bound and the requests carry proofs:
//
//	p, _ := dpop.GenerateProver()
//	hc := &http.Client{Transport: &dpop.Transport{Prover: p}}
//	src, _ := credentials.New(credentials.Options{
//		TokenURL: "https://auth.example.com/token", ClientID: "orders-caller",
//		Assertion: credentials.FileAssertion("/var/run/secrets/snowtoken/token"),
//		HTTPClient: hc})
//	api := &http.Client{Transport: &credentials.Transport{Source: src, Base: hc.Transport}}
//
// golang.org/x/oauth2's clientcredentials does the same for a secret (and,
// with a dpop.Transport, for DPoP); it has no client assertions, whose jti
// must be fresh at every request, which is why this package exists.
package credentials

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// AssertionType is the client_assertion_type of a JWT assertion (RFC 7523 §2.2).
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// Errors of the package; details are wrapped with %w.
var (
	ErrOptions = errors.New("credentials: bad options")
	ErrToken   = errors.New("credentials: no token")
	ErrKey     = errors.New("credentials: key type not supported")
)

// Defaults of Options.
const (
	// DefaultEarly is how long before its expiry a token is renewed.
	DefaultEarly = 30 * time.Second
	// DefaultTimeout bounds one token request.
	DefaultTimeout = 10 * time.Second
	// assertionLifetime is the exp of a KeyAssertion after its iat.
	assertionLifetime = time.Minute
	// maxAnswer bounds what is read of the token endpoint's answer.
	maxAnswer = 64 << 10
)

// Options configure a Source. TokenURL, ClientID and one of Secret and
// Assertion are required; every other zero value means its default.
type Options struct {
	// TokenURL is the issuer's token endpoint, such as
	// "https://auth.example.com/token".
	TokenURL string
	// ClientID is the client's ID in the issuer's clients file.
	ClientID string
	// Secret authenticates the client with HTTP Basic (client_secret_basic).
	Secret string
	// Assertion, instead of Secret, returns the client_assertion of one
	// token request (KeyAssertion, FileAssertion).
	Assertion func(ctx context.Context, now time.Time) (string, error)
	// Scope is what to ask for, space-separated; empty means all of the
	// client's scopes.
	Scope string
	// HTTPClient sends the token requests; nil means one with
	// DefaultTimeout. A dpop.Transport in it makes the tokens DPoP-bound.
	HTTPClient *http.Client
	// Early is how long before its expiry a token is renewed; zero means
	// DefaultEarly; a negative one is an error.
	Early time.Duration
	// Now reads the clock; nil means time.Now.
	Now func() time.Time
}

// Token is an access token and what to send it with.
type Token struct {
	AccessToken string
	// Type is the token_type: "Bearer", or "DPoP" for a bound token,
	// which is sent as Authorization: DPoP with a proof.
	Type   string
	Expiry time.Time
}

// Source gets tokens and caches the current one. It is safe for
// concurrent use; concurrent callers of an expired token wait for one
// request.
type Source struct {
	opts Options
	mu   sync.Mutex
	tok  Token
}

// New returns a Source, or ErrOptions.
func New(opts Options) (*Source, error) {
	switch {
	case opts.TokenURL == "" || opts.ClientID == "":
		return nil, fmt.Errorf("%w: TokenURL and ClientID are required", ErrOptions)
	case (opts.Secret == "") == (opts.Assertion == nil):
		return nil, fmt.Errorf("%w: set one of Secret and Assertion", ErrOptions)
	}
	if u, err := url.Parse(opts.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: TokenURL %q is not an http(s) URL", ErrOptions, opts.TokenURL)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: DefaultTimeout}
	}
	switch {
	case opts.Early < 0:
		return nil, fmt.Errorf("%w: Early %v is negative: zero means DefaultEarly", ErrOptions, opts.Early)
	case opts.Early == 0:
		opts.Early = DefaultEarly
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Source{opts: opts}, nil
}

// Token returns the current token, asking the issuer for a new one when
// there is none or it expires within Options.Early.
func (s *Source) Token(ctx context.Context) (Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	if s.tok.AccessToken != "" && now.Add(s.opts.Early).Before(s.tok.Expiry) {
		return s.tok, nil
	}
	tok, err := s.fetch(ctx, now)
	if err != nil {
		return Token{}, err
	}
	s.tok = tok
	return tok, nil
}

// fetch asks the token endpoint for a token.
func (s *Source) fetch(ctx context.Context, now time.Time) (Token, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.opts.Scope != "" {
		form.Set("scope", s.opts.Scope)
	}
	if s.opts.Assertion != nil {
		a, err := s.opts.Assertion(ctx, now)
		if err != nil {
			return Token{}, fmt.Errorf("%w: client assertion: %w", ErrToken, err)
		}
		form.Set("client_id", s.opts.ClientID)
		form.Set("client_assertion_type", AssertionType)
		form.Set("client_assertion", a)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if s.opts.Secret != "" {
		req.SetBasicAuth(url.QueryEscape(s.opts.ClientID), url.QueryEscape(s.opts.Secret))
	}
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Token{}, fmt.Errorf("%w: reading the answer: %w", ErrToken, err)
	}
	var a struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return Token{}, fmt.Errorf("%w: %s answered %d, not JSON", ErrToken, s.opts.TokenURL, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK || a.AccessToken == "" || a.ExpiresIn <= 0 {
		return Token{}, fmt.Errorf("%w: %s answered %d %.64q: %.256q", ErrToken, s.opts.TokenURL, resp.StatusCode, a.Error, a.Description)
	}
	return Token{AccessToken: a.AccessToken, Type: a.TokenType, Expiry: now.Add(time.Duration(a.ExpiresIn) * time.Second)}, nil
}

// Transport is an http.RoundTripper that sends each request with the
// Source's token in Authorization (its type as the scheme: Bearer or DPoP).
// Put a dpop.Transport in Base for DPoP-bound tokens, so that each request
// carries a proof with the token's hash.
type Transport struct {
	Source *Source
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper; the caller's request is not changed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.Source.Token(req.Context())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	scheme := "Bearer"
	if strings.EqualFold(tok.Type, "DPoP") {
		scheme = "DPoP"
	}
	r.Header.Set("Authorization", scheme+" "+tok.AccessToken)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// KeyAssertion returns an Assertion for private_key_jwt: a JWT of clientID
// (iss and sub) for audience, which must be the issuer's identifier
// (SNOWTOKEN_ISSUER) alone: snowtoken refuses the token endpoint's URL or a
// list (RFC 10070),
// with a fresh jti, iat now and exp a minute later, signed with key: an
// ed25519.PrivateKey (EdDSA), an *ecdsa.PrivateKey on P-256 (ES256) or an
// *rsa.PrivateKey of 2048 bits or more (RS256). kid, if set, names the key
// in the client's JWKS.
func KeyAssertion(clientID, audience string, key crypto.PrivateKey, kid string) (func(context.Context, time.Time) (string, error), error) {
	var method jwt.SigningMethod
	switch k := key.(type) {
	case ed25519.PrivateKey:
		method = jwt.SigningMethodEdDSA
	case *ecdsa.PrivateKey:
		if k.Curve.Params().Name != "P-256" {
			return nil, fmt.Errorf("%w: ECDSA on %s, want P-256", ErrKey, k.Curve.Params().Name)
		}
		method = jwt.SigningMethodES256
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("%w: RSA of %d bits, want 2048 or more", ErrKey, k.N.BitLen())
		}
		method = jwt.SigningMethodRS256
	default:
		return nil, fmt.Errorf("%w: %T", ErrKey, key)
	}
	return func(_ context.Context, now time.Time) (string, error) {
		t := jwt.NewWithClaims(method, jwt.RegisteredClaims{
			Issuer: clientID, Subject: clientID, Audience: jwt.ClaimStrings{audience}, ID: rand.Text(),
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(assertionLifetime)),
		})
		if kid != "" {
			t.Header["kid"] = kid
		}
		return t.SignedString(key)
	}, nil
}

// FileAssertion returns an Assertion that reads the file at path at each
// request, trailing white space dropped: a Kubernetes projected
// service-account token (or another issuer's token) that is renewed in
// place. The file is read whole up to 64 KiB.
func FileAssertion(path string) func(context.Context, time.Time) (string, error) {
	return func(context.Context, time.Time) (string, error) {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxAnswer+1))
		if err != nil {
			return "", err
		}
		if len(b) > maxAnswer {
			return "", fmt.Errorf("%s: longer than %d bytes", path, maxAnswer)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s: empty", path)
		}
		return s, nil
	}
}

package client_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/internal/jwttest"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// fakeJWKS is an issuer as far as Local mode with Skip sees one: its JWKS
// at /.well-known/jwks.json and tokens signed with its key. Every other path
// answers 404, and every request is counted by path. The real issuer's tests
// are in the root module's e2e folder.
type fakeJWKS struct {
	URL string
	key ed25519.PrivateKey
	kid string

	mu   sync.Mutex
	hits map[string]int
}

func newFakeJWKS(tb testing.TB) *fakeJWKS {
	tb.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeJWKS{key: key, kid: "k1", hits: make(map[string]int)}
	jwks := `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"sig","alg":"EdDSA","kid":"k1","x":"` +
		base64.RawURLEncoding.EncodeToString(pub) + `"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		f.mu.Unlock()
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(jwks))
	}))
	tb.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// claims are those of a token of f issued at now for an hour, as the issuer
// writes them.
func (f *fakeJWKS) claims(now time.Time, scope string, aud ...string) jwtpolicy.Claims {
	return jwtpolicy.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.URL, Subject: "alice", Audience: aud, ID: "4198400", // 1<<22 | 1<<12: worker 1 of 41/10/12
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		ClientID: "orders-app", Scope: scope,
	}
}

func (f *fakeJWKS) sign(tb testing.TB, c jwtpolicy.Claims) string {
	tb.Helper()
	return jwttest.Sign(tb, jwt.SigningMethodEdDSA, f.key, map[string]any{"kid": f.kid, "typ": "at+jwt"}, c)
}

func (f *fakeJWKS) requests() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return map[string]int{"jwks": f.hits["/.well-known/jwks.json"], "all": len(f.hits)}
}

// localValidator is a Local Validator on f with a fixed clock.
func localValidator(tb testing.TB, f *fakeJWKS, now time.Time, opts client.Options) *client.Validator {
	tb.Helper()
	opts.IssuerURL, opts.Mode, opts.RevocationCheck = f.URL, client.Local, client.Skip
	opts.Now, opts.Logger = func() time.Time { return now }, slog.New(slog.DiscardHandler)
	v, err := client.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestLocalSkipChecksEverythingWithoutCalls: signature, claims and the
// requested scopes are checked with the keys fetched once, and no request
// reaches the issuer per token.
func TestLocalSkipChecksEverythingWithoutCalls(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{})
	tok := f.sign(t, f.claims(now, "orders:read orders:write"))
	for range 100 {
		c, err := v.Validate(t.Context(), tok, "orders:read")
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject != "alice" || c.ClientID != "orders-app" || c.JTI != "4198400" || c.WorkerID != 1 || !c.HasScope("orders:write") {
			t.Fatalf("claims: got %+v", c)
		}
	}
	if _, err := v.Validate(t.Context(), tok, "admin"); !errors.Is(err, client.ErrInsufficientScope) {
		t.Errorf("missing scope: got %v, want ErrInsufficientScope", err)
	}
	expired := f.claims(now.Add(-2*time.Hour), "orders:read")
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	forged := jwttest.Sign(t, jwt.SigningMethodEdDSA, other, nil, f.claims(now, "admin"))
	for name, bad := range map[string]string{"expired": f.sign(t, expired), "other key": forged} {
		if _, err := v.Validate(t.Context(), bad); !errors.Is(err, client.ErrInvalidToken) {
			t.Errorf("%s: got %v, want ErrInvalidToken", name, err)
		}
	}
	if got := f.requests(); got["jwks"] != 1 || got["all"] != 1 {
		t.Errorf("requests to the issuer: got %v, want the JWKS once and nothing else", got)
	}
}

func TestLocalAudience(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{Audience: "billing"})
	for _, tc := range []struct {
		name string
		aud  []string
		ok   bool
	}{
		{"its own audience", []string{"billing"}, true},
		{"one of several", []string{"orders", "billing"}, true},
		{"another audience", []string{"orders"}, false},
		{"no audience", nil, false},
	} {
		_, err := v.Validate(t.Context(), f.sign(t, f.claims(now, "", tc.aud...)))
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && (!errors.Is(err, client.ErrInvalidToken) || !strings.Contains(err.Error(), "audience mismatch")) {
			t.Errorf("%s: got %v, want ErrInvalidToken saying audience mismatch", tc.name, err)
		}
	}
}

func TestLocalIssuerMismatch(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{})
	c := f.claims(now, "")
	c.Issuer = "http://127.0.0.1:1"
	_, err := v.Validate(t.Context(), f.sign(t, c))
	if !errors.Is(err, client.ErrInvalidToken) || !strings.Contains(err.Error(), "issuer mismatch") {
		t.Errorf("got %v, want ErrInvalidToken saying issuer mismatch", err)
	}
}

// FuzzValidateLocal feeds Local mode arbitrary tokens: none may panic, and
// none but the one the issuer signed may pass.
func FuzzValidateLocal(f *testing.F) {
	now := time.Now() // fixed: no token expires, no key refetch
	is := newFakeJWKS(f)
	v := localValidator(f, is, now, client.Options{})
	valid := is.sign(f, is.claims(now, "orders:read"))
	parts := strings.Split(valid, ".")
	for _, s := range []string{valid, "", "a.b.c", parts[0] + "." + parts[1] + ".", parts[0] + ".." + parts[2],
		parts[1] + "." + parts[0] + "." + parts[2], valid + "A", strings.ToUpper(valid)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := v.Validate(t.Context(), raw)
		switch {
		case err == nil && raw != valid:
			t.Fatalf("accepted a token the issuer did not sign: %q", raw)
		case err != nil && raw == valid:
			t.Fatalf("rejected the valid token: %v", err)
		case err != nil && !errors.Is(err, client.ErrInvalidToken):
			t.Fatalf("got %v, want ErrInvalidToken", err)
		}
	})
}

// TestLocalIssuerSpellings: the iss the issuer signs has no trailing slash
// (jwtpolicy.Issuer), and a service may write its IssuerURL or Issuer with
// one or without: each spelling accepts the token, none accepts another
// issuer's.
func TestLocalIssuerSpellings(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	tok := f.sign(t, f.claims(now, "orders:read"))
	for _, opts := range []client.Options{
		{IssuerURL: f.URL + "/"},
		{IssuerURL: f.URL, Issuer: f.URL + "/"},
		{IssuerURL: f.URL + "/", Issuer: strings.ToUpper(f.URL[:4]) + f.URL[4:] + "//"},
	} {
		opts.Mode, opts.RevocationCheck = client.Local, client.Skip
		opts.Now, opts.Logger = func() time.Time { return now }, slog.New(slog.DiscardHandler)
		v, err := client.New(opts)
		if err != nil {
			t.Fatalf("New(IssuerURL %q, Issuer %q): %v", opts.IssuerURL, opts.Issuer, err)
		}
		if _, err := v.Validate(t.Context(), tok); err != nil {
			t.Errorf("IssuerURL %q, Issuer %q: %v, want the token valid", opts.IssuerURL, opts.Issuer, err)
		}
		other := f.claims(now, "orders:read")
		other.Issuer += "/tenant"
		if _, err := v.Validate(t.Context(), f.sign(t, other)); !errors.Is(err, client.ErrInvalidToken) {
			t.Errorf("IssuerURL %q, Issuer %q, a token of %s: %v, want ErrInvalidToken", opts.IssuerURL, opts.Issuer, other.Issuer, err)
		}
	}
}

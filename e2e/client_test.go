package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
	"github.com/snowtoken/snowtoken/clienttest"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// modes are the three ways a Validator can run.
var modes = []struct {
	name string
	opts client.Options
}{
	{"remote", client.Options{Mode: client.Remote}},
	{"local-check", client.Options{Mode: client.Local}},
	{"local-skip", client.Options{Mode: client.Local, RevocationCheck: client.Skip}},
}

// setup starts an issuer (worker 7) and a Validator on it, sharing clk.
func setup(tb testing.TB, clk *clocktest.Clock, opts client.Options) (*clienttest.Issuer, *client.Validator) {
	tb.Helper()
	is := clienttest.New(tb, clienttest.Config{WorkerID: 7, Now: clk.Now})
	opts.IssuerURL, opts.Now = is.URL, clk.Now
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	v, err := client.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return is, v
}

func issue(tb testing.TB, is *clienttest.Issuer, scope string) string {
	tb.Helper()
	tok, err := is.Token(tb.Context(), scope)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New(time.Now())
			is, v := setup(t, clk, m.opts)
			h := v.Middleware(middlewaretest.Echo, "orders:read")
			tok := issue(t, is, "orders:read orders:write")
			writeOnly := issue(t, is, "orders:write")

			rec := middlewaretest.Get(h, middlewaretest.Bearer(tok))
			if rec.Code != http.StatusOK {
				t.Fatalf("valid token: got %d %s, want 200", rec.Code, rec.Body)
			}
			var c client.Claims
			if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
				t.Fatal(err)
			}
			now := clk.Now().Truncate(time.Second)
			if c.Subject != is.ClientID || c.ClientID != is.ClientID || c.Issuer != is.URL ||
				!c.HasScope("orders:read") || !c.HasScope("orders:write") || c.HasScope("admin") ||
				c.WorkerID != 7 || c.JTI == "" || !c.IssuedAt.Equal(now) || !c.ExpiresAt.Equal(now.Add(time.Hour)) {
				t.Errorf("claims: got %+v", c)
			}

			before := is.Requests("/token/validate")
			for _, tc := range []struct {
				name, authorization string
				status              int
				challenge           string
			}{
				{"no token", "", 401, `Bearer realm="snowtoken"`},
				{"basic", "Basic b3JkZXJzOnNlY3JldA==", 401, `Bearer realm="snowtoken"`},
				{"empty bearer", "Bearer ", 401, `Bearer realm="snowtoken"`},
				{"not a jwt", "Bearer abc", 401, `Bearer realm="snowtoken", error="invalid_token"`},
				{"bad characters", "Bearer a.b.c+d", 401, `Bearer realm="snowtoken", error="invalid_token"`},
				{"too long", "Bearer " + strings.Repeat("a", 2100) + "." + strings.Repeat("b", 2100) + ".c", 401, `Bearer realm="snowtoken", error="invalid_token"`},
			} {
				rec := middlewaretest.Get(h, tc.authorization)
				if rec.Code != tc.status || rec.Header().Get("WWW-Authenticate") != tc.challenge || middlewaretest.ErrorCode(t, rec) != "invalid_token" {
					t.Errorf("%s: got %d %q %s, want %d %q", tc.name, rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, tc.status, tc.challenge)
				}
			}
			if got := is.Requests("/token/validate"); got != before {
				t.Errorf("malformed requests reached the issuer: %d calls, want none", got-before)
			}

			rec = middlewaretest.Get(h, middlewaretest.Bearer(writeOnly))
			if want := `Bearer realm="snowtoken", error="insufficient_scope", scope="orders:read"`; rec.Code != http.StatusForbidden ||
				rec.Header().Get("WWW-Authenticate") != want || middlewaretest.ErrorCode(t, rec) != "insufficient_scope" {
				t.Errorf("missing scope: got %d %q %s, want 403 %q", rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, want)
			}
			if rec := middlewaretest.Get(v.Middleware(middlewaretest.Echo), middlewaretest.Bearer(writeOnly)); rec.Code != http.StatusOK {
				t.Errorf("no scope required: got %d %s, want 200", rec.Code, rec.Body)
			}
			// Two Authorization headers: TestAuthorizationOneRule.
		})
	}
}

func TestRevoked(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			is, v := setup(t, clocktest.New(time.Now()), m.opts)
			h := v.Middleware(middlewaretest.Echo)
			tok := issue(t, is, "")
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK {
				t.Fatalf("before revoking: got %d %s, want 200", rec.Code, rec.Body)
			}
			if err := is.Revoke(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
			calls := is.Requests("/token/validate")
			rec := middlewaretest.Get(h, middlewaretest.Bearer(tok))
			if m.opts.RevocationCheck == client.Skip {
				// Documented: Skip never sees revocation, and never calls.
				if rec.Code != http.StatusOK || is.Requests("/token/validate") != calls {
					t.Errorf("revoked, Skip: got %d and %d calls, want 200 and none", rec.Code, is.Requests("/token/validate")-calls)
				}
				return
			}
			if rec.Code != http.StatusUnauthorized || middlewaretest.ErrorCode(t, rec) != "invalid_token" ||
				rec.Header().Get("WWW-Authenticate") != `Bearer realm="snowtoken", error="invalid_token"` {
				t.Errorf("revoked: got %d %q %s, want 401 invalid_token", rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body)
			}
			if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrInvalidToken) {
				t.Errorf("Validate of a revoked token: got %v, want ErrInvalidToken", err)
			}
		})
	}
}

// forge signs claims with key under kid.
func forge(tb testing.TB, claims jwt.Claims, kid string, key ed25519.PrivateKey) string {
	tb.Helper()
	return jwttest.Sign(tb, jwt.SigningMethodEdDSA, key, map[string]any{"kid": kid, "typ": "at+jwt"}, claims)
}

func TestLocalRejectsWithoutCallingTheIssuer(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	// Keys that never grow stale, so the expired token below meets no
	// periodic refetch.
	is, v := setup(t, clk, client.Options{Mode: client.Local, JWKSMaxAge: 48 * time.Hour})
	h := v.Middleware(middlewaretest.Echo)
	tok := issue(t, is, "")
	if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK { // loads the JWKS
		t.Fatalf("valid token: got %d %s, want 200", rec.Code, rec.Body)
	}

	var real token.Claims
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, &real)
	if err != nil {
		t.Fatal(err)
	}
	kid := parsed.Header["kid"].(string)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	otherKid := keyset.Thumbprint(other.Public().(ed25519.PublicKey))
	escalated := real
	escalated.Scope, escalated.Subject = "admin", "root"
	hsTok := jwttest.Sign(t, jwt.SigningMethodHS256, []byte(kid), map[string]any{"kid": kid, "typ": "at+jwt"}, real)
	noneTok := jwttest.Sign(t, jwt.SigningMethodNone, nil, map[string]any{"kid": kid, "typ": "at+jwt"}, real)
	parts := strings.Split(tok, ".")
	otherTypTok := jwttest.Sign(t, jwt.SigningMethodEdDSA, other, map[string]any{"kid": kid, "typ": "JWT"}, real)

	forged := map[string]string{
		"other key, real kid":     forge(t, escalated, kid, other),
		"other key, its own kid":  forge(t, escalated, otherKid, other),
		"HS256 keyed by the kid":  hsTok,
		"alg none":                noneTok,
		"typ JWT":                 otherTypTok,
		"claims swapped":          parts[0] + "." + strings.Split(forge(t, escalated, kid, other), ".")[1] + "." + parts[2],
		"signature cut":           parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4],
		"valid token, wrong part": parts[1] + "." + parts[0] + "." + parts[2],
	}
	before := is.Requests("/token/validate") + is.Requests("/.well-known/jwks.json")
	for name, f := range forged {
		if rec := middlewaretest.Get(h, middlewaretest.Bearer(f)); rec.Code != http.StatusUnauthorized || middlewaretest.ErrorCode(t, rec) != "invalid_token" {
			t.Errorf("%s: got %d %s, want 401 invalid_token", name, rec.Code, rec.Body)
		}
	}
	clk.Add(time.Hour + client.DefaultLeeway + time.Second)
	if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusUnauthorized {
		t.Errorf("expired: got %d %s, want 401", rec.Code, rec.Body)
	}
	if after := is.Requests("/token/validate") + is.Requests("/.well-known/jwks.json"); after != before {
		t.Errorf("forged and expired tokens cost the issuer %d requests, want none", after-before)
	}
}

func TestLocalChecksIssuerAndAudience(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts client.Options
		says string // in the error
	}{
		{"local, other issuer", client.Options{Mode: client.Local, Issuer: "https://elsewhere.example"}, "issuer mismatch"},
		{"local, audience", client.Options{Mode: client.Local, Audience: "billing"}, "audience mismatch"},
		{"remote, other issuer", client.Options{Issuer: "https://elsewhere.example"}, "issuer mismatch"},
		{"remote, audience", client.Options{Audience: "billing"}, "audience mismatch"}, // the issuer checks ?audience= and says so
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is, v := setup(t, clocktest.New(time.Now()), tc.opts)
			_, err := v.Validate(t.Context(), issue(t, is, ""))
			if !errors.Is(err, client.ErrInvalidToken) || !strings.Contains(fmt.Sprint(err), tc.says) {
				t.Errorf("got %v, want ErrInvalidToken saying %q", err, tc.says)
			}
		})
	}
}

// TestAudience: a token for this service's audience passes in every mode,
// the remote ones asking the issuer with ?audience=.
func TestAudience(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			is := clienttest.New(t, clienttest.Config{Audiences: []string{"billing"}})
			opts := m.opts
			opts.IssuerURL, opts.Audience, opts.Logger = is.URL, "billing", slog.New(slog.DiscardHandler)
			v, err := client.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Validate(t.Context(), issue(t, is, ""), "orders:read")
			if err != nil || !slices.Equal(c.Audience, []string{"billing"}) {
				t.Errorf("a token for billing: got %+v, %v; want its claims with aud billing", c, err)
			}
		})
	}
}

// TestOpaque: Remote mode checks an opaque token with the issuer like a JWT;
// Local mode refuses it without a call, saying why.
func TestOpaque(t *testing.T) {
	t.Parallel()
	is := clienttest.New(t, clienttest.Config{TokenFormat: "opaque"})
	tok := issue(t, is, "")
	if !strings.HasPrefix(tok, client.OpaquePrefix) {
		t.Fatalf("token %.10q…, want an opaque one", tok)
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			opts := m.opts
			opts.IssuerURL, opts.Logger = is.URL, slog.New(slog.DiscardHandler)
			v, err := client.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Validate(t.Context(), tok, "orders:read")
			if opts.Mode == client.Local {
				if !errors.Is(err, client.ErrInvalidToken) || !strings.Contains(err.Error(), "opaque token") {
					t.Errorf("Local: got %+v, %v; want ErrInvalidToken naming the opaque token", c, err)
				}
				return
			}
			if err != nil || c.ClientID != "orders-app" || c.JTI == "" {
				t.Errorf("Remote: got %+v, %v; want the token's claims", c, err)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New(time.Now())
			is, v := setup(t, clk, m.opts)
			h := v.Middleware(middlewaretest.Echo)
			const jwks = "/.well-known/jwks.json"
			oldTok := issue(t, is, "")
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(oldTok)); rec.Code != http.StatusOK || is.Requests(jwks) != 1 {
				t.Fatalf("first token: got %d and %d JWKS fetches, want 200 and 1", rec.Code, is.Requests(jwks))
			}
			if _, err := is.RotateKey(); err != nil {
				t.Fatal(err)
			}
			newTok := issue(t, is, "")

			// Within JWKSMinInterval of the last fetch the unknown kid is refused
			// without a fetch.
			clk.Add(client.DefaultJWKSMinInterval - time.Second)
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(newTok)); rec.Code != http.StatusUnauthorized || is.Requests(jwks) != 1 {
				t.Errorf("new kid, rate-limited: got %d and %d fetches, want 401 and 1", rec.Code, is.Requests(jwks))
			}
			clk.Add(time.Second)
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(newTok)); rec.Code != http.StatusOK || is.Requests(jwks) != 2 {
				t.Errorf("new kid: got %d %s and %d fetches, want 200 and 2", rec.Code, rec.Body, is.Requests(jwks))
			}
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(oldTok)); rec.Code != http.StatusOK || is.Requests(jwks) != 2 {
				t.Errorf("old kid after rotation: got %d and %d fetches, want 200 and 2", rec.Code, is.Requests(jwks))
			}
			// Keys older than JWKSMaxAge are fetched again.
			clk.Add(client.DefaultJWKSMaxAge)
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(issue(t, is, ""))); rec.Code != http.StatusOK || is.Requests(jwks) != 3 {
				t.Errorf("stale keys: got %d and %d fetches, want 200 and 3", rec.Code, is.Requests(jwks))
			}
		})
	}
}

func TestUnknownKidFetchesOnce(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	is, v := setup(t, clk, client.Options{Mode: client.Local, RevocationCheck: client.Skip})
	tok := issue(t, is, "")
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	if _, err := is.RotateKey(); err != nil {
		t.Fatal(err)
	}
	newTok := issue(t, is, "")
	clk.Add(client.DefaultJWKSMinInterval)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := v.Validate(t.Context(), newTok); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := is.Requests("/.well-known/jwks.json"); got != 2 {
		t.Errorf("50 concurrent requests with a new kid: %d JWKS fetches, want 2 (first load and one refetch)", got)
	}
}

func TestIssuerDown(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			var logMu sync.Mutex
			opts := m.opts
			opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
			is, v := setup(t, clocktest.New(time.Now()), opts)
			h := v.Middleware(middlewaretest.Echo)
			tok := issue(t, is, "")
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK {
				t.Fatalf("issuer up: got %d %s, want 200", rec.Code, rec.Body)
			}
			is.Close()

			rec := middlewaretest.Get(h, middlewaretest.Bearer(tok))
			if m.opts.RevocationCheck == client.Skip {
				// Documented: Skip works with the keys it has.
				if rec.Code != http.StatusOK {
					t.Errorf("issuer down, Skip, keys known: got %d, want 200", rec.Code)
				}
				fresh, err := client.New(client.Options{IssuerURL: is.URL, Mode: client.Local, RevocationCheck: client.Skip, Logger: opts.Logger})
				if err != nil {
					t.Fatal(err)
				}
				rec = middlewaretest.Get(fresh.Middleware(middlewaretest.Echo), middlewaretest.Bearer(tok))
			}
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || middlewaretest.ErrorCode(t, rec) != "temporarily_unavailable" {
				t.Errorf("issuer down: got %d Retry-After %q %s, want 503, 1, temporarily_unavailable", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			}
			if _, err := v.Validate(t.Context(), tok); m.opts.RevocationCheck != client.Skip && !errors.Is(err, client.ErrUnavailable) {
				t.Errorf("Validate: got %v, want ErrUnavailable", err)
			}
			logMu.Lock()
			defer logMu.Unlock()
			if logs.Len() == 0 || strings.Contains(logs.String(), tok) || strings.Contains(logs.String(), strings.Split(tok, ".")[2]) {
				t.Errorf("logs: want the failure logged without the token; got %q", logs.String())
			}
		})
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestCacheStaleness(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New(time.Now())
			opts := m.opts
			opts.CacheTTL = ttl
			is, v := setup(t, clk, opts)
			h := v.Middleware(middlewaretest.Echo, "orders:read")
			tok := issue(t, is, "")
			calls := func() int { return is.Requests("/token/validate") }

			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK || calls() != 1 {
				t.Fatalf("first: got %d and %d calls, want 200 and 1", rec.Code, calls())
			}
			if err := is.Revoke(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
			// The documented bound: accepted from the cache for up to CacheTTL.
			clk.Add(ttl - time.Second)
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK || calls() != 1 {
				t.Errorf("revoked, within CacheTTL: got %d and %d calls, want 200 from the cache", rec.Code, calls())
			}
			if rec := middlewaretest.Get(v.Middleware(middlewaretest.Echo, "admin"), middlewaretest.Bearer(tok)); rec.Code != http.StatusForbidden || calls() != 1 {
				t.Errorf("cached, other scope: got %d and %d calls, want 403 from the cache", rec.Code, calls())
			}
			clk.Add(time.Second)
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusUnauthorized || calls() != 2 {
				t.Errorf("revoked, CacheTTL passed: got %d and %d calls, want 401 and 2", rec.Code, calls())
			}
			// Rejections are kept for CacheTTL, then asked again.
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusUnauthorized || calls() != 2 {
				t.Errorf("rejection cached: got %d and %d calls, want 401 and 2", rec.Code, calls())
			}
			clk.Add(ttl)
			if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusUnauthorized || calls() != 3 {
				t.Errorf("rejection after CacheTTL: got %d and %d calls, want 401 and 3", rec.Code, calls())
			}
		})
	}
}

func TestCacheNeverPastExp(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	is, v := setup(t, clk, client.Options{CacheTTL: 2 * time.Hour})
	h := v.Middleware(middlewaretest.Echo)
	tok := issue(t, is, "") // lives 1 h
	if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK {
		t.Fatalf("got %d, want 200", rec.Code)
	}
	clk.Add(59 * time.Minute)
	if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusOK || is.Requests("/token/validate") != 1 {
		t.Errorf("before exp: got %d and %d calls, want 200 from the cache", rec.Code, is.Requests("/token/validate"))
	}
	// At exp the issuer is asked again (it still accepts for its leeway)...
	clk.Add(time.Minute)
	if middlewaretest.Get(h, middlewaretest.Bearer(tok)); is.Requests("/token/validate") != 2 {
		t.Errorf("at exp: %d calls, want the issuer asked again", is.Requests("/token/validate"))
	}
	// ...and an answer is never kept past exp.
	clk.Add(token.DefaultLeeway + time.Second)
	if rec := middlewaretest.Get(h, middlewaretest.Bearer(tok)); rec.Code != http.StatusUnauthorized || is.Requests("/token/validate") != 3 {
		t.Errorf("past exp: got %d and %d calls, want 401 from the issuer", rec.Code, is.Requests("/token/validate"))
	}
}

// requireToken is the gin wiring that Authenticate's doc shows.
func requireToken(v *client.Validator, scopes ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		claims, err := v.Authenticate(c.Request, scopes...)
		if err != nil {
			v.WriteError(c.Writer, c.Request, err)
			c.Abort()
			return
		}
		c.Set(client.GinKey, claims)
		c.Request = c.Request.WithContext(client.NewContext(c.Request.Context(), claims))
		c.Next()
	}
}

func TestGin(t *testing.T) {
	t.Parallel()
	is, v := setup(t, clocktest.New(time.Now()), client.Options{})
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/orders", requireToken(v, "orders:read"), func(c *gin.Context) {
		a, okA := client.ClaimsFrom(c)
		b, okB := client.ClaimsFrom(c.Request.Context())
		x, okC := c.Get(client.GinKey)
		if !okA || !okB || !okC || a != b || a != x.(*client.Claims) {
			c.String(http.StatusInternalServerError, "claims not passed on")
			return
		}
		c.String(http.StatusOK, a.Subject)
	})
	r.GET("/after", requireToken(v), func(c *gin.Context) { c.String(http.StatusTeapot, "ran") })

	if rec := middlewaretest.Get(r, ""); rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") != `Bearer realm="snowtoken"` {
		t.Errorf("no token: got %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	if rec := middlewaretest.Get(r, middlewaretest.Bearer(issue(t, is, "orders:write"))); rec.Code != http.StatusForbidden ||
		rec.Header().Get("WWW-Authenticate") != `Bearer realm="snowtoken", error="insufficient_scope", scope="orders:read"` {
		t.Errorf("missing scope: got %d %q, want 403 naming orders:read", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	if rec := middlewaretest.Get(r, middlewaretest.Bearer(issue(t, is, ""))); rec.Code != http.StatusOK || rec.Body.String() != is.ClientID {
		t.Errorf("valid: got %d %q, want 200 %q", rec.Code, rec.Body, is.ClientID)
	}
	req := httptest.NewRequest(http.MethodGet, "/after", nil)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "ran") {
		t.Errorf("after a refusal the handler ran: %d %q", rec.Code, rec.Body)
	}
}

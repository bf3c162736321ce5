package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
)

// fakeIssuer answers /token/validate with answer, counting calls.
func fakeIssuer(tb testing.TB, answer http.HandlerFunc) (*httptest.Server, *client.Validator) {
	tb.Helper()
	srv := httptest.NewServer(answer)
	tb.Cleanup(srv.Close)
	v, err := client.New(client.Options{IssuerURL: srv.URL, Timeout: 200 * time.Millisecond, CacheTTL: time.Minute,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return srv, v
}

// someJWT is shaped like a token; only a fake issuer sees it.
const someJWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln"

func TestIssuerFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		answer     http.HandlerFunc
		status     int
		retryAfter string
	}{
		{"500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, 503, "1"},
		{"503 with Retry-After", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(503)
		}, 503, "7"},
		{"timeout", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, 503, "1"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, 503, "1"},
		{"404", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) }, 503, "1"},
		{"200 not JSON", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }, 503, "1"},
		{"200 without claims", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"active":true}`)) }, 503, "1"},
		{"200 inactive", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"active":false}`)) }, 401, ""},
		{"401 other code", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":"invalid_token","error_description":"revoked"}`))
		}, 401, ""},
		{"401 hostile code", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":"x\"\r\nSet-Cookie: a=b"}`))
		}, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			var mu sync.Mutex
			_, v := fakeIssuer(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				mu.Unlock()
				tc.answer(w, r)
			})
			h := v.Middleware(middlewaretest.Echo)
			for range 2 {
				rec := middlewaretest.Get(h, middlewaretest.Bearer(someJWT))
				if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.retryAfter {
					t.Errorf("got %d Retry-After %q %s, want %d %q", rec.Code, rec.Header().Get("Retry-After"), rec.Body, tc.status, tc.retryAfter)
				}
				if tc.status == 401 && rec.Header().Get("WWW-Authenticate") != `Bearer realm="snowtoken", error="invalid_token"` {
					t.Errorf("challenge %q", rec.Header().Get("WWW-Authenticate"))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if want := map[int]int{503: 2, 401: 1}[tc.status]; calls != want {
				t.Errorf("%d calls, want %d (failures are never cached, rejections are)", calls, want)
			}
		})
	}
}

func TestRemoteRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var path, scope, authorization string
	_, v := fakeIssuer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		path, scope, authorization = r.URL.Path, r.URL.Query().Get("scope"), r.Header.Get("Authorization")
		mu.Unlock()
		_, _ = w.Write([]byte(`{"active":true,"sub":"s","client_id":"c","scope":"a:b c","iss":"i","iat":1,"exp":4102444800,"jti":"42","worker_id":3}`))
	})
	c, err := v.Validate(t.Context(), someJWT, "a:b", "c")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if path != "/token/validate" || scope != "a:b c" || authorization != "Bearer "+someJWT {
		t.Errorf("request: got %s scope=%q %q", path, scope, authorization)
	}
	mu.Unlock()
	if c.Subject != "s" || c.ClientID != "c" || c.JTI != "42" || c.WorkerID != 3 || !c.HasScope("a:b") || c.ExpiresAt.Unix() != 4102444800 {
		t.Errorf("claims: got %+v", c)
	}
	c.Scopes[0] = "changed" // a caller's change must not reach the cache
	if c2, err := v.Validate(t.Context(), someJWT, "a:b"); err != nil || c2.Scopes[0] != "a:b" {
		t.Errorf("cached claims: got %+v, %v", c2, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []client.Options{
		{},
		{IssuerURL: "issuer:8080"},
		{IssuerURL: "ftp://issuer"},
		{IssuerURL: "http://issuer?x=1"},
		{IssuerURL: "http://issuer", Mode: 7},
		{IssuerURL: "http://issuer", RevocationCheck: 7},
		{IssuerURL: "http://issuer", CacheTTL: -time.Second},
		{IssuerURL: "http://issuer", Timeout: -time.Second},
		{IssuerURL: "http://issuer", Leeway: -time.Second}, // none is NoLeeway
		{IssuerURL: "http://issuer", Realm: `a"b`},
		{IssuerURL: "http://issuer#top"},
		{IssuerURL: "http://admin@issuer"},
		{IssuerURL: "http://issuer", Issuer: "issuer"},
		{IssuerURL: "http://issuer", Issuer: "https://auth.example.com/?tenant=1"},
	} {
		if _, err := client.New(o); !errors.Is(err, client.ErrOptions) {
			t.Errorf("New(%+v): got %v, want ErrOptions", o, err)
		}
	}
	if _, err := client.New(client.Options{IssuerURL: "https://issuer.example", Mode: client.Local, Leeway: client.NoLeeway}); err != nil {
		t.Errorf("New with NoLeeway: %v", err)
	}
	if _, err := client.New(client.Options{IssuerURL: "https://issuer.example/base/"}); err != nil {
		t.Errorf("a valid URL: %v", err)
	}
}

func TestBadRequiredScope(t *testing.T) {
	t.Parallel()
	v, err := client.New(client.Options{IssuerURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(context.Background(), someJWT, "two words"); !errors.Is(err, client.ErrBadScope) {
		t.Errorf("Validate: got %v, want ErrBadScope", err)
	}
	defer func() {
		if p := recover(); p == nil {
			t.Error("Middleware with a malformed scope did not panic")
		}
	}()
	v.Middleware(middlewaretest.Echo, `a"b`)
}

func TestClaimsFromEmptyContext(t *testing.T) {
	t.Parallel()
	if c, ok := client.ClaimsFrom(context.Background()); ok || c != nil {
		t.Errorf("got %v, %v; want nil, false", c, ok)
	}
	want := &client.Claims{Subject: "s"}
	if c, ok := client.ClaimsFrom(client.NewContext(context.Background(), want)); !ok || c != want {
		t.Errorf("got %v, %v; want %v, true", c, ok, want)
	}
}

func TestAuthenticateAndWriteError(t *testing.T) {
	t.Parallel()
	_, v := fakeIssuer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"active":true,"sub":"s","client_id":"c","scope":"a","iss":"i","iat":1,"exp":4102444800,"jti":"42"}`))
	})
	req := httptest.NewRequest(http.MethodGet, "/orders", nil)
	if _, err := v.Authenticate(req); !errors.Is(err, client.ErrNoToken) {
		t.Errorf("no Authorization: got %v, want ErrNoToken", err)
	}
	req.Header.Set("Authorization", middlewaretest.Bearer(someJWT))
	if c, err := v.Authenticate(req, "a"); err != nil || c.Subject != "s" {
		t.Errorf("scope a: got %+v, %v; want the claims", c, err)
	}
	_, err := v.Authenticate(req, "a", "b")
	if !errors.Is(err, client.ErrInsufficientScope) {
		t.Fatalf("scopes a b: got %v, want ErrInsufficientScope", err)
	}
	for _, tc := range []struct {
		err       error
		challenge string
	}{
		{err, `Bearer realm="snowtoken", error="insufficient_scope", scope="a b"`},
		{client.ErrInsufficientScope, `Bearer realm="snowtoken", error="insufficient_scope"`}, // made by the caller: no scopes to name
	} {
		rec := httptest.NewRecorder()
		v.WriteError(rec, req, tc.err)
		if rec.Code != http.StatusForbidden || rec.Header().Get("WWW-Authenticate") != tc.challenge || middlewaretest.ErrorCode(t, rec) != "insufficient_scope" {
			t.Errorf("WriteError(%v): got %d %q %s, want 403 %q", tc.err, rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, tc.challenge)
		}
	}
}

// TestRemoteAudience: Remote mode sends Options.Audience to the issuer, and
// refuses an answer whose aud lacks it.
func TestRemoteAudience(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	srv, _ := fakeIssuer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.URL.RawQuery)
		mu.Unlock()
		aud := map[string]string{"a1.b.c": `"billing"`, "a2.b.c": `["orders"]`}[r.Header.Get("Authorization")[len("Bearer "):]]
		_, _ = w.Write([]byte(`{"active":true,"sub":"s","client_id":"c","scope":"a b","iss":"i","aud":[` + strings.Trim(aud, "[]") + `],"iat":1,"exp":4102444800,"jti":"42"}`))
	})
	v, err := client.New(client.Options{IssuerURL: srv.URL, Audience: "billing", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(t.Context(), "a1.b.c", "a", "b"); err != nil {
		t.Errorf("a token for billing: %v", err)
	}
	if _, err := v.Validate(t.Context(), "a2.b.c"); !errors.Is(err, client.ErrInvalidToken) || !strings.Contains(err.Error(), "audience mismatch") {
		t.Errorf("a token for orders: got %v, want ErrInvalidToken saying audience mismatch", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"audience=billing&scope=a+b", "audience=billing"}; strings.Join(sent, " ") != strings.Join(want, " ") {
		t.Errorf("queries sent: got %q, want %q", sent, want)
	}
}

package credentials_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/credentials"
	"github.com/snowtoken/snowtoken/client/dpop"
)

// tokenEndpoint is a stand-in of the issuer's POST /token: it answers a
// token of ttl per request, and keeps the last form and headers.
type tokenEndpoint struct {
	ttl      int64
	typ      string
	requests atomic.Int32
	form     atomic.Pointer[map[string][]string]
	header   atomic.Pointer[http.Header]
}

func (e *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := e.requests.Add(1)
	_ = r.ParseForm()
	f := map[string][]string(r.PostForm)
	e.form.Store(&f)
	h := r.Header.Clone()
	e.header.Store(&h)
	if r.PostForm.Get("grant_type") != "client_credentials" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"unsupported_grant_type","error_description":"no"}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok" + string(rune('0'+n)), "token_type": e.typ, "expires_in": e.ttl})
}

func TestSourceCachesAndRenews(t *testing.T) {
	ep := &tokenEndpoint{ttl: 120, typ: "Bearer"}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	now := time.Unix(1_800_000_000, 0)
	src, err := credentials.New(credentials.Options{TokenURL: srv.URL + "/token", ClientID: "svc", Secret: "s3cret", Scope: "orders:read",
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	first, err := src.Token(t.Context())
	if err != nil || first.AccessToken != "tok1" || !first.Expiry.Equal(now.Add(120*time.Second)) {
		t.Fatalf("first token %+v, %v", first, err)
	}
	if u, p, ok := (&http.Request{Header: *ep.header.Load()}).BasicAuth(); !ok || u != "svc" || p != "s3cret" {
		t.Errorf("Basic credentials %q %q %v", u, p, ok)
	}
	if f := *ep.form.Load(); f["scope"][0] != "orders:read" || f["client_secret"] != nil {
		t.Errorf("form %v", f)
	}
	now = now.Add(80 * time.Second) // 40 s left: still good
	if tok, _ := src.Token(t.Context()); tok.AccessToken != "tok1" || ep.requests.Load() != 1 {
		t.Errorf("within its life: %+v after %d requests", tok, ep.requests.Load())
	}
	now = now.Add(15 * time.Second) // 25 s left: within DefaultEarly
	if tok, _ := src.Token(t.Context()); tok.AccessToken != "tok2" {
		t.Errorf("near its expiry: %+v, want a new token", tok)
	}
}

func TestSourceRefusals(t *testing.T) {
	for name, opts := range map[string]credentials.Options{
		"no url":         {ClientID: "a", Secret: "s"},
		"no client":      {TokenURL: "https://a/token", Secret: "s"},
		"neither":        {TokenURL: "https://a/token", ClientID: "a"},
		"both":           {TokenURL: "https://a/token", ClientID: "a", Secret: "s", Assertion: credentials.FileAssertion("x")},
		"not http":       {TokenURL: "ftp://a/token", ClientID: "a", Secret: "s"},
		"relative path":  {TokenURL: "/token", ClientID: "a", Secret: "s"},
		"negative early": {TokenURL: "https://a/token", ClientID: "a", Secret: "s", Early: -time.Second},
	} {
		if _, err := credentials.New(opts); !errors.Is(err, credentials.ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"assertion expired"}`))
	}))
	defer srv.Close()
	src, _ := credentials.New(credentials.Options{TokenURL: srv.URL, ClientID: "a", Secret: "s"})
	if _, err := src.Token(t.Context()); !errors.Is(err, credentials.ErrToken) || !strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("a refusal: %v, want ErrToken naming invalid_client", err)
	}
}

// TestKeyAssertion: each assertion is a JWT of the client for the
// audience, fresh jti, a minute's life, that verifies with the public key,
// for each key type; a key too weak or of another type is refused.
func TestKeyAssertion(t *testing.T) {
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		key crypto.Signer
		alg string
	}{{ed, "EdDSA"}, {ec, "ES256"}, {rs, "RS256"}} {
		assert, err := credentials.KeyAssertion("orders-caller", "https://auth.example.com", tc.key, "k1")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := assert(t.Context(), now)
		b, _ := assert(t.Context(), now)
		var c jwt.RegisteredClaims
		tok, err := jwt.NewParser(jwt.WithValidMethods([]string{tc.alg}), jwt.WithTimeFunc(func() time.Time { return now })).
			ParseWithClaims(a, &c, func(*jwt.Token) (any, error) { return tc.key.Public(), nil })
		if err != nil {
			t.Fatalf("%s: %v", tc.alg, err)
		}
		if c.Issuer != "orders-caller" || c.Subject != "orders-caller" || len(c.Audience) != 1 || c.Audience[0] != "https://auth.example.com" ||
			c.ID == "" || !c.ExpiresAt.Equal(now.Add(time.Minute)) || tok.Header["kid"] != "k1" {
			t.Errorf("%s: claims %+v, header %v", tc.alg, c, tok.Header)
		}
		var c2 jwt.RegisteredClaims
		_, _, _ = jwt.NewParser().ParseUnverified(b, &c2)
		if c2.ID == c.ID {
			t.Errorf("%s: two assertions share jti %q", tc.alg, c.ID)
		}
	}
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for _, k := range []crypto.PrivateKey{weak, p384, "a string"} {
		if _, err := credentials.KeyAssertion("a", "b", k, ""); !errors.Is(err, credentials.ErrKey) {
			t.Errorf("%T: %v, want ErrKey", k, err)
		}
	}
}

// TestAssertionSentAndTransport: the token request carries the client ID
// and a fresh assertion each time, read from a file renewed in place; the
// Transport sends a DPoP token as DPoP, with a proof through a
// dpop.Transport, and a Bearer token as Bearer.
func TestAssertionSentAndTransport(t *testing.T) {
	ep := &tokenEndpoint{ttl: 1, typ: "DPoP"} // 1 s: renewed at every call
	srv := httptest.NewServer(ep)
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("sa-token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _ := dpop.GenerateProver()
	hc := &http.Client{Transport: &dpop.Transport{Prover: p}}
	src, err := credentials.New(credentials.Options{TokenURL: srv.URL + "/token", ClientID: "orders-caller",
		Assertion: credentials.FileAssertion(path), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Pointer[http.Header]
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		got.Store(&h)
	}))
	defer api.Close()
	c := &http.Client{Transport: &credentials.Transport{Source: src, Base: hc.Transport}}
	for i, want := range []string{"sa-token-1", "sa-token-2"} {
		if i == 1 {
			_ = os.WriteFile(path, []byte(want), 0o600) // the kubelet renews it
		}
		resp, err := c.Get(api.URL + "/orders")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		f := *ep.form.Load()
		if f["client_id"][0] != "orders-caller" || f["client_assertion"][0] != want || f["client_assertion_type"][0] != credentials.AssertionType {
			t.Errorf("token request %d: form %v", i, f)
		}
		if (*ep.header.Load()).Get("Authorization") != "" {
			t.Errorf("token request %d sent Authorization with an assertion", i)
		}
		h := *got.Load()
		if !strings.HasPrefix(h.Get("Authorization"), "DPoP tok") || h.Get("DPoP") == "" {
			t.Errorf("API request %d: Authorization %q, DPoP %q", i, h.Get("Authorization"), h.Get("DPoP"))
		}
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Token(context.Background()); !errors.Is(err, credentials.ErrToken) {
		t.Errorf("an empty token file: %v, want ErrToken", err)
	}
}

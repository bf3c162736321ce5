package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
)

// publicURL is the DPoP tests' service, as its clients reach it.
const publicURL = "https://orders.example"

func prover(tb testing.TB) *dpop.Prover {
	tb.Helper()
	p, err := dpop.GenerateProver()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// proofFor is p's proof for method and url at now, for token.
func proofFor(tb testing.TB, p *dpop.Prover, method, url, token string, now time.Time) string {
	tb.Helper()
	proof, err := p.Proof(method, url, token, "", now)
	if err != nil {
		tb.Fatal(err)
	}
	return proof
}

// bound is a token of f issued at now with scope, bound to key.
func (f *fakeJWKS) bound(tb testing.TB, now time.Time, scope string, key *dpop.Prover) string {
	tb.Helper()
	cl := f.claims(now, scope)
	cl.Confirmation.JKT = key.Thumbprint()
	return f.sign(tb, cl)
}

// serve sends method target to h with the Authorization header auth and
// the DPoP headers proofs, and returns the answer.
func serve(h http.Handler, method, target, auth string, proofs ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// wantRefused checks that rec is a 401 with the DPoP challenge for code.
func wantRefused(tb testing.TB, name string, rec *httptest.ResponseRecorder, code string) {
	tb.Helper()
	challenge := `DPoP realm="snowtoken", algs="EdDSA ES256", error="` + code + `"`
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") != challenge || middlewaretest.ErrorCode(tb, rec) != code {
		tb.Errorf("%s: got %d %q %s, want 401 %q", name, rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, challenge)
	}
}

// TestLocalDPoP: Local mode accepts a bound token with a proof of its key
// for the request, and refuses every other presentation of it.
func TestLocalDPoP(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{DPoP: client.DPoP{PublicURL: publicURL + "/"}})
	h := v.Middleware(middlewaretest.Echo, "orders:read")
	key, other := prover(t), prover(t)
	tok := f.bound(t, now, "orders:read", key)
	bearer := f.sign(t, f.claims(now, "orders:read"))
	url := publicURL + "/orders"

	// Accepted: the proof for the URL PublicURL and the path make, whatever
	// the query and the Host header say.
	rec := serve(h, "GET", "http://10.0.0.7:8080/orders?id=7", "DPoP "+tok, proofFor(t, key, "GET", url, tok, now))
	var got client.Claims
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.JKT != key.Thumbprint() || got.Subject != "alice" {
		t.Fatalf("bound token with its proof: got %d %s, want 200 with jkt %s", rec.Code, rec.Body, key.Thumbprint())
	}
	if rec := serve(h, "GET", "/orders", "Bearer "+bearer); rec.Code != 200 {
		t.Errorf("bearer token: got %d %s, want 200", rec.Code, rec.Body)
	}

	replayed := proofFor(t, key, "GET", url, tok, now)
	serve(h, "GET", "/orders", "DPoP "+tok, replayed)
	old := now.Add(-dpop.DefaultMaxAge - time.Second)
	for _, tc := range []struct {
		name, auth string
		proofs     []string
		code       string
	}{
		{"bound token as Bearer", "Bearer " + tok, nil, "invalid_token"},
		{"bound token as Bearer with a proof", "Bearer " + tok, []string{proofFor(t, key, "GET", url, tok, now)}, "invalid_token"},
		{"no proof", "DPoP " + tok, nil, "invalid_dpop_proof"},
		{"two proofs", "DPoP " + tok, []string{proofFor(t, key, "GET", url, tok, now), proofFor(t, key, "GET", url, tok, now)}, "invalid_dpop_proof"},
		{"proof for another URL", "DPoP " + tok, []string{proofFor(t, key, "GET", publicURL+"/invoices", tok, now)}, "invalid_dpop_proof"},
		{"proof for the Host header's URL", "DPoP " + tok, []string{proofFor(t, key, "GET", "http://10.0.0.7:8080/orders", tok, now)}, "invalid_dpop_proof"},
		{"proof for another method", "DPoP " + tok, []string{proofFor(t, key, "POST", url, tok, now)}, "invalid_dpop_proof"},
		{"proof for another token", "DPoP " + tok, []string{proofFor(t, key, "GET", url, bearer, now)}, "invalid_dpop_proof"},
		{"proof too old", "DPoP " + tok, []string{proofFor(t, key, "GET", url, tok, old)}, "invalid_dpop_proof"},
		{"replayed proof", "DPoP " + tok, []string{replayed}, "invalid_dpop_proof"},
		// The issuer's answer too (jwtpolicy.ErrProofKey): a refused proof.
		{"proof of another key", "DPoP " + tok, []string{proofFor(t, other, "GET", url, tok, now)}, "invalid_dpop_proof"},
		{"unbound token as DPoP", "DPoP " + bearer, []string{proofFor(t, key, "GET", url, bearer, now)}, "invalid_token"},
	} {
		wantRefused(t, tc.name, serve(h, "GET", "/orders?id=7", tc.auth, tc.proofs...), tc.code)
	}
	if _, err := v.Validate(t.Context(), tok, "orders:read"); !errors.Is(err, client.ErrTokenBound) || !errors.Is(err, client.ErrInvalidToken) {
		t.Errorf("Validate of a bound token: got %v, want ErrTokenBound", err)
	}
}

// TestLocalDPoPPublicURLPath: a PublicURL with a path (a proxy strips it)
// comes before the request's path in htu.
func TestLocalDPoPPublicURLPath(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{DPoP: client.DPoP{PublicURL: "https://api.example/orders-api/"}})
	key := prover(t)
	tok := f.bound(t, now, "", key)
	h := v.Middleware(middlewaretest.Echo)
	if rec := serve(h, "DELETE", "/orders/a%2Fb", "DPoP "+tok, proofFor(t, key, "DELETE", "https://api.example/orders-api/orders/a%2Fb", tok, now)); rec.Code != 200 {
		t.Errorf("got %d %s, want 200", rec.Code, rec.Body)
	}
}

// TestDPoPWithoutPublicURL: without DPoP.PublicURL every bound token is
// refused, with the DPoP scheme or as Bearer, and saying why.
func TestDPoPWithoutPublicURL(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{})
	key := prover(t)
	tok := f.bound(t, now, "", key)
	h := v.Middleware(middlewaretest.Echo)
	for name, tc := range map[string]struct {
		auth, desc string
	}{
		"DPoP":   {"DPoP " + tok, "this service does not accept DPoP tokens"},
		"Bearer": {"Bearer " + tok, "the token is DPoP-bound (send it with the DPoP scheme and a DPoP proof)"},
	} {
		rec := serve(h, "GET", "/orders", tc.auth, proofFor(t, key, "GET", "http://example.com/orders", tok, now))
		var body struct {
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != `Bearer realm="snowtoken", error="invalid_token"` || body.Description != tc.desc {
			t.Errorf("%s: got %d %q %s, want 401 invalid_token saying %q", name, rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, tc.desc)
		}
	}
	req := httptest.NewRequest("GET", "/orders", nil)
	req.Header.Set("Authorization", "DPoP "+tok)
	if _, err := v.Authenticate(req); !errors.Is(err, client.ErrDPoPOff) {
		t.Errorf("Authenticate: got %v, want ErrDPoPOff", err)
	}
}

// TestNoTokenChallenges: with DPoP on, a request without a token is told
// both schemes.
func TestNoTokenChallenges(t *testing.T) {
	t.Parallel()
	f := newFakeJWKS(t)
	v := localValidator(t, f, time.Now(), client.Options{DPoP: client.DPoP{PublicURL: publicURL, Algorithms: []string{"ES256"}}})
	rec := serve(v.Middleware(middlewaretest.Echo), "GET", "/orders", "")
	want := []string{`Bearer realm="snowtoken"`, `DPoP realm="snowtoken", algs="ES256"`}
	if got := rec.Header().Values("WWW-Authenticate"); rec.Code != 401 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %d %q, want 401 %q", rec.Code, got, want)
	}
}

func TestDPoPOptions(t *testing.T) {
	t.Parallel()
	for _, d := range []client.DPoP{
		{PublicURL: "orders.example"},
		{PublicURL: "ftp://orders.example"},
		{PublicURL: "https://orders.example/?x=1"},
		{PublicURL: "https://orders.example/#top"},
		{PublicURL: "https://user@orders.example"},
		{PublicURL: publicURL, Algorithms: []string{"HS256"}},
		{PublicURL: publicURL, MaxAge: -time.Second},
	} {
		if _, err := client.New(client.Options{IssuerURL: "http://issuer", DPoP: d}); !errors.Is(err, client.ErrOptions) {
			t.Errorf("New(DPoP %+v): got %v, want ErrOptions", d, err)
		}
	}
}

// FuzzAuthenticateDPoP feeds Local mode's DPoP path arbitrary
// Authorization and DPoP headers: none may panic, and nothing but the
// valid token with its valid proof may pass.
func FuzzAuthenticateDPoP(f *testing.F) {
	now := time.Now() // fixed: the proof stays in its window
	is := newFakeJWKS(f)
	v := localValidator(f, is, now, client.Options{DPoP: client.DPoP{PublicURL: publicURL, Replay: neverSeen{}}})
	key := prover(f)
	tok := is.bound(f, now, "", key)
	proof := proofFor(f, key, "GET", publicURL+"/orders", tok, now)
	for _, seed := range [][2]string{
		{"DPoP " + tok, proof}, {"Bearer " + tok, proof}, {"dpop  " + tok + " ", proof}, {"DPoP " + tok, proof + "A"},
		{"DPoP " + tok, ""}, {"DPoP", proof}, {"DPoP " + tok, strings.Replace(proof, ".", "..", 1)}, {"Basic x", "y"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, auth, dpopHeader string) {
		req := httptest.NewRequest("GET", "/orders", nil)
		req.Header["Authorization"] = []string{auth}
		req.Header["Dpop"] = []string{dpopHeader}
		_, err := v.Authenticate(req)
		valid := strings.HasPrefix(strings.ToLower(auth), "dpop ") && strings.TrimSpace(auth[5:]) == tok && dpopHeader == proof
		switch {
		case err == nil && !valid:
			t.Fatalf("accepted Authorization %q with DPoP %q", auth, dpopHeader)
		case err != nil && valid:
			t.Fatalf("refused the valid pair: %v", err)
		}
	})
}

// neverSeen is a replay record that records nothing, so that fuzzing may
// send one proof many times.
type neverSeen struct{}

func (neverSeen) Seen(context.Context, string, time.Time, time.Time) (bool, error) { return false, nil }

// TestDPoPReplayRecordDown: a replay record that fails leaves the proof
// unjudged: 503, never a pass.
func TestDPoPReplayRecordDown(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{DPoP: client.DPoP{PublicURL: publicURL, Replay: downReplay{}}})
	key := prover(t)
	tok := f.bound(t, now, "", key)
	rec := serve(v.Middleware(middlewaretest.Echo), "GET", "/orders", "DPoP "+tok, proofFor(t, key, "GET", publicURL+"/orders", tok, now))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("got %d %s, want 503 with Retry-After", rec.Code, rec.Body)
	}
}

// downReplay is a replay record whose store is down.
type downReplay struct{}

func (downReplay) Seen(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, errors.New("connection refused")
}

// countingReplay counts the proofs recorded.
type countingReplay struct{ n atomic.Int32 }

func (c *countingReplay) Seen(context.Context, string, time.Time, time.Time) (bool, error) {
	c.n.Add(1)
	return false, nil
}

// TestLocalDPoPRecordsAfterTheToken: in Local mode a proof is recorded
// against replay only once its token passed, so that a made-up token with
// a proof of anyone's key fills no record.
func TestLocalDPoPRecordsAfterTheToken(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	rec := &countingReplay{}
	v := localValidator(t, f, now, client.Options{DPoP: client.DPoP{PublicURL: publicURL, Replay: rec}})
	h := v.Middleware(middlewaretest.Echo)
	key := prover(t)
	fake := f.bound(t, now, "orders:read", key)
	fake = fake[:len(fake)-4] + "AAAA" // its signature broken
	if r := serve(h, "GET", "/orders", "DPoP "+fake, proofFor(t, key, "GET", publicURL+"/orders", fake, now)); r.Code != http.StatusUnauthorized {
		t.Fatalf("a made-up token: %d", r.Code)
	}
	if n := rec.n.Load(); n != 0 {
		t.Errorf("a made-up token's proof was recorded (%d)", n)
	}
	tok := f.bound(t, now, "orders:read", key)
	if r := serve(h, "GET", "/orders", "DPoP "+tok, proofFor(t, key, "GET", publicURL+"/orders", tok, now)); r.Code != http.StatusOK || rec.n.Load() != 1 {
		t.Errorf("a good token: %d, %d records, want 200 and 1", r.Code, rec.n.Load())
	}
}

package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
)

// dpopIssuer stands in for the issuer's GET /token/validate with DPoP, as
// the contract goes: a token presented as DPoP is checked with its proof
// against the request the X-Forwarded-* headers describe (it trusts them
// unless untrusting), with its own replay record and, when nonce is set,
// a nonce; the answer carries the token's cnf. It answers a bound token
// presented as Bearer with its cnf too (the real issuer refuses it), so
// that the client's own check shows.
type dpopIssuer struct {
	*httptest.Server
	checker *dpop.Checker

	mu         sync.Mutex
	tokens     map[string]string // token -> its cnf.jkt, "" for a bearer token
	nonce      string            // required in proofs, unless empty
	untrusting bool              // ignores X-Forwarded-*, as for a peer not in SNOWTOKEN_DPOP_FORWARDERS
	cnf        *string           // when set, the jkt answered ("" for no cnf) whatever the token's
	calls      []http.Header
	jwksOf     string // serves the JWKS of this server, when set
	// refusesBound refuses a bound token sent as Bearer with a DPoP
	// challenge, as the real issuer does.
	refusesBound bool
}

// newDPoPIssuer returns an issuer that requires nonce in proofs, unless
// nonce is empty.
func newDPoPIssuer(t *testing.T, nonce string) *dpopIssuer {
	t.Helper()
	is := &dpopIssuer{tokens: make(map[string]string), nonce: nonce}
	var opts dpop.Options
	if nonce != "" {
		opts.Nonce = func(n string, _ time.Time) bool { return n == nonce }
	}
	c, err := dpop.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	is.checker = c
	is.Server = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.Close)
	return is
}

func (is *dpopIssuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	jwksOf := is.jwksOf
	is.mu.Unlock()
	if r.URL.Path == "/.well-known/jwks.json" && jwksOf != "" {
		resp, err := http.Get(jwksOf + r.URL.Path)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
		return
	}
	is.mu.Lock()
	is.calls = append(is.calls, r.Header.Clone())
	jkt, known := is.tokens[strings.TrimPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "DPoP "), "Bearer ")]
	nonce, untrusting, cnf, refusesBound := is.nonce, is.untrusting, is.cnf, is.refusesBound
	is.mu.Unlock()
	refuse := func(code string) {
		w.Header().Set("WWW-Authenticate", `DPoP error="`+code+`"`)
		if code == "use_dpop_nonce" {
			w.Header().Set("DPoP-Nonce", nonce)
		}
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"` + code + `","error_description":"the issuer says no"}`))
	}
	if !known || r.URL.Path != "/token/validate" {
		refuse("invalid_token")
		return
	}
	tok, asDPoP := strings.CutPrefix(r.Header.Get("Authorization"), "DPoP ")
	if !asDPoP && jkt != "" && refusesBound {
		refuse("invalid_token")
		return
	}
	if asDPoP {
		method, htu := r.Method, is.URL+r.URL.Path
		if !untrusting {
			u, _ := url.Parse(r.Header.Get("X-Forwarded-Uri"))
			method, htu = r.Header.Get("X-Forwarded-Method"), r.Header.Get("X-Forwarded-Proto")+"://"+r.Header.Get("X-Forwarded-Host")+u.EscapedPath()
		}
		p, err := is.checker.Check(r.Context(), r.Header.Get("DPoP"), dpop.Request{Method: method, URL: htu, AccessToken: tok}, time.Now())
		switch {
		case errors.Is(err, dpop.ErrUseNonce):
			refuse("use_dpop_nonce")
			return
		case err != nil:
			refuse("invalid_dpop_proof")
			return
		case p.Thumbprint != jkt:
			refuse("invalid_token")
			return
		}
	}
	if cnf != nil {
		jkt = *cnf
	}
	answer := map[string]any{"active": true, "sub": "alice", "client_id": "orders-app", "scope": "orders:read", "iss": is.URL,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "jti": "4198400", "worker_id": 1}
	if jkt != "" {
		answer["cnf"] = map[string]string{"jkt": jkt}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

func (is *dpopIssuer) set(f func(is *dpopIssuer)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f(is)
}

func (is *dpopIssuer) called() []http.Header {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.calls
}

// remoteDPoP is a Remote Validator on is, with a cache, for publicURL.
func remoteDPoP(tb testing.TB, is *dpopIssuer, publicURL string) *client.Validator {
	tb.Helper()
	v, err := client.New(client.Options{IssuerURL: is.URL, CacheTTL: time.Minute, DPoP: client.DPoP{PublicURL: publicURL},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestRemoteDPoP: Remote mode forwards the token, its proof and the request
// to the issuer on every DPoP request, cache or not; refuses a proof
// already seen without asking; and checks the answer's cnf against the
// proof's key, and that a bearer request's answer has none.
func TestRemoteDPoP(t *testing.T) {
	t.Parallel()
	is := newDPoPIssuer(t, "")
	key, other := prover(t), prover(t)
	is.set(func(is *dpopIssuer) { is.tokens["bound.tok.en"], is.tokens["plain.tok.en"] = key.Thumbprint(), "" })
	h := remoteDPoP(t, is, publicURL).Middleware(middlewaretest.Echo, "orders:read")
	url := publicURL + "/orders"

	proof := proofFor(t, key, "GET", url, "bound.tok.en", time.Now())
	for i := range 2 {
		if i == 1 {
			proof = proofFor(t, key, "GET", url, "bound.tok.en", time.Now())
		}
		if rec := serve(h, "GET", "/orders?id=7&x=%2F", "DPoP bound.tok.en", proof); rec.Code != 200 {
			t.Fatalf("request %d: got %d %s, want 200", i, rec.Code, rec.Body)
		}
	}
	calls := is.called()
	if len(calls) != 2 {
		t.Fatalf("%d calls to the issuer, want 2: a DPoP answer is never cached", len(calls))
	}
	want := map[string]string{"Authorization": "DPoP bound.tok.en", "DPoP": proof, "X-Forwarded-Method": "GET",
		"X-Forwarded-Proto": "https", "X-Forwarded-Host": "orders.example", "X-Forwarded-Uri": "/orders?id=7&x=%2F"}
	for name, value := range want {
		if got := calls[1].Get(name); got != value {
			t.Errorf("the issuer got %s %q, want %q", name, got, value)
		}
	}

	wantRefused(t, "replayed proof", serve(h, "GET", "/orders", "DPoP bound.tok.en", proof), "invalid_dpop_proof")
	if n := len(is.called()); n != 2 {
		t.Errorf("%d calls to the issuer, want 2: a replayed proof is refused here", n)
	}
	wantRefused(t, "bound token as Bearer", serve(h, "GET", "/orders", "Bearer bound.tok.en"), "invalid_token")
	wantRefused(t, "proof of another key", serve(h, "GET", "/orders", "DPoP bound.tok.en", proofFor(t, other, "GET", url, "bound.tok.en", time.Now())), "invalid_token")
	wantRefused(t, "proof for another method", serve(h, "GET", "/orders", "DPoP bound.tok.en", proofFor(t, key, "PUT", url, "bound.tok.en", time.Now())), "invalid_dpop_proof")
	for name, tc := range map[string]struct{ cnf, code string }{
		"answer without cnf":            {"", "invalid_token"},
		"answer with another key's cnf": {other.Thumbprint(), "invalid_dpop_proof"}, // jwtpolicy.ErrProofKey
	} {
		is.set(func(is *dpopIssuer) { is.cnf = &tc.cnf })
		wantRefused(t, name, serve(h, "GET", "/orders", "DPoP bound.tok.en", proofFor(t, key, "GET", url, "bound.tok.en", time.Now())), tc.code)
	}
	is.set(func(is *dpopIssuer) { is.cnf = nil })
	if rec := serve(h, "GET", "/orders", "Bearer plain.tok.en"); rec.Code != 200 {
		t.Errorf("bearer token: got %d %s, want 200", rec.Code, rec.Body)
	}
}

// TestRemoteBoundAsBearer: an issuer that refuses a DPoP-bound token sent
// as Bearer with a DPoP challenge, as the real one does, makes Validate say
// ErrTokenBound and the middleware answer with a DPoP challenge, as in
// Local mode; a token refused with a Bearer challenge is not called bound.
func TestRemoteBoundAsBearer(t *testing.T) {
	t.Parallel()
	is := newDPoPIssuer(t, "")
	is.set(func(is *dpopIssuer) { is.tokens["bound.tok.en"], is.refusesBound = prover(t).Thumbprint(), true })
	v := remoteDPoP(t, is, publicURL)
	wantRefused(t, "bound token as Bearer", serve(v.Middleware(middlewaretest.Echo, "orders:read"), "GET", "/orders", "Bearer bound.tok.en"), "invalid_token")
	if _, err := v.Validate(t.Context(), "bound.tok.en", "orders:read"); !errors.Is(err, client.ErrTokenBound) {
		t.Errorf("Validate of a bound token the issuer refused: %v, want ErrTokenBound", err)
	}

	bearer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="snowtoken", error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_token","error_description":"revoked"}`))
	}))
	t.Cleanup(bearer.Close)
	v2, err := client.New(client.Options{IssuerURL: bearer.URL, DPoP: client.DPoP{PublicURL: publicURL}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Validate(t.Context(), "plain.tok.en", "orders:read"); !errors.Is(err, client.ErrInvalidToken) || errors.Is(err, client.ErrTokenBound) {
		t.Errorf("Validate of a token refused with a Bearer challenge: %v, want ErrInvalidToken, not ErrTokenBound", err)
	}
}

// TestRemoteDPoPUntrusted: an issuer that does not believe this service's
// X-Forwarded-* headers (not among its DPoP forwarders) checks the proof
// against its own URL and refuses it: the request is refused, never passed.
func TestRemoteDPoPUntrusted(t *testing.T) {
	t.Parallel()
	is := newDPoPIssuer(t, "")
	key := prover(t)
	is.set(func(is *dpopIssuer) { is.tokens["bound.tok.en"], is.untrusting = key.Thumbprint(), true })
	h := remoteDPoP(t, is, publicURL).Middleware(middlewaretest.Echo)
	rec := serve(h, "GET", "/orders", "DPoP bound.tok.en", proofFor(t, key, "GET", publicURL+"/orders", "bound.tok.en", time.Now()))
	wantRefused(t, "issuer not trusting the forwarded request", rec, "invalid_dpop_proof")
}

// TestRemoteDPoPNonce runs a service (the middleware behind a real HTTP
// server) for a client with dpop.Transport, the issuer requiring a nonce:
// the issuer's use_dpop_nonce and DPoP-Nonce reach the client, whose
// Transport retries once with it, and the request passes.
func TestRemoteDPoPNonce(t *testing.T) {
	t.Parallel()
	is := newDPoPIssuer(t, "n-1")
	key := prover(t)
	is.set(func(is *dpopIssuer) { is.tokens["bound.tok.en"] = key.Thumbprint() })
	var h http.Handler
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	defer svc.Close()
	h = remoteDPoP(t, is, svc.URL).Middleware(middlewaretest.Echo, "orders:read")

	// What the service answers to a proof without the nonce.
	rec := serve(h, "GET", "/orders", "DPoP bound.tok.en", proofFor(t, key, "GET", svc.URL+"/orders", "bound.tok.en", time.Now()))
	wantRefused(t, "proof without the issuer's nonce", rec, "use_dpop_nonce")
	if got := rec.Header().Get("DPoP-Nonce"); got != "n-1" {
		t.Errorf("DPoP-Nonce %q, want the issuer's n-1", got)
	}

	hc := &http.Client{Transport: &dpop.Transport{Prover: key}}
	req, _ := http.NewRequest(http.MethodGet, svc.URL+"/orders", nil)
	req.Header.Set("Authorization", "DPoP bound.tok.en")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), key.Thumbprint()) {
		t.Errorf("through dpop.Transport: got %d %s, want 200 with the claims", resp.StatusCode, body)
	}
	if n := len(is.called()); n != 3 {
		t.Errorf("%d calls to the issuer, want 3 (the probe, then the Transport's try and retry)", n)
	}
}

// TestLocalCheckDPoP: Local mode with RevocationCheck Check verifies the
// JWT and the proof here, then asks the issuer with the proof and the
// forwarded request, every time: the stand-in serves the fake issuer's
// JWKS and checks the proof again.
func TestLocalCheckDPoP(t *testing.T) {
	t.Parallel()
	f := newFakeJWKS(t)
	is := newDPoPIssuer(t, "")
	is.set(func(is *dpopIssuer) { is.jwksOf = f.URL })
	now := time.Now()
	key := prover(t)
	cl := f.claims(now, "orders:read")
	cl.Issuer, cl.Confirmation.JKT = is.URL, key.Thumbprint()
	tok := f.sign(t, cl)
	is.set(func(is *dpopIssuer) { is.tokens[tok] = key.Thumbprint() })
	v, err := client.New(client.Options{IssuerURL: is.URL, Mode: client.Local, CacheTTL: time.Minute,
		DPoP: client.DPoP{PublicURL: publicURL}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := v.Middleware(middlewaretest.Echo, "orders:read")
	for i := range 2 {
		if rec := serve(h, "GET", "/orders", "DPoP "+tok, proofFor(t, key, "GET", publicURL+"/orders", tok, time.Now())); rec.Code != 200 {
			t.Fatalf("request %d: got %d %s, want 200", i, rec.Code, rec.Body)
		}
	}
	calls := is.called()
	if len(calls) != 2 || calls[1].Get("Authorization") != "DPoP "+tok || calls[1].Get("X-Forwarded-Uri") != "/orders" {
		t.Errorf("the issuer got %d calls, the last %v; want 2 with the DPoP token and the forwarded request", len(calls), calls)
	}
	wantRefused(t, "bound token as Bearer", serve(h, "GET", "/orders", "Bearer "+tok), "invalid_token")
}

package client_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/internal/jwttest"
	"github.com/snowtoken/snowtoken/client/txntoken"
)

const txnDomain = "shop.internal"

// txnClaims are good claims of a Txn-Token issued at now.
func txnClaims(now time.Time) *txntoken.Claims {
	return &txntoken.Claims{IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Minute).Unix(), Audience: txnDomain,
		Txn: "117811659438825472", Subject: "alice", Scope: "orders:read", Workload: "web",
		Transaction: &txntoken.TransactionContext{ClientID: "web"},
		Request:     &txntoken.RequestContext{IP: "192.0.2.7", Method: "GET", Path: "/orders"}}
}

// sign signs c as the fake issuer does, with header members over
// {typ: txntoken+jwt, kid: k1}.
func (f *fakeJWKS) signTxn(tb testing.TB, c *txntoken.Claims, header map[string]any) string {
	tb.Helper()
	h := map[string]any{"typ": txntoken.Type, "kid": f.kid}
	for k, v := range header {
		h[k] = v
	}
	return jwttest.Sign(tb, jwt.SigningMethodEdDSA, f.key, h, c)
}

func newTxnVerifier(tb testing.TB, f *fakeJWKS, now time.Time) *client.TxnVerifier {
	tb.Helper()
	v, err := client.NewTxnVerifier(client.TxnOptions{IssuerURL: f.URL, TrustDomain: txnDomain, Now: func() time.Time { return now }})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func TestTxnMiddleware(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now().Truncate(time.Second)
	v := newTxnVerifier(t, f, now)
	var seen *txntoken.Claims
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := client.TxnFrom(r.Context())
		if !ok {
			t.Error("no Txn-Token in the context")
		}
		seen = c
	}))
	good := f.signTxn(t, txnClaims(now), nil)
	mod := func(m func(c *txntoken.Claims)) *txntoken.Claims {
		c := txnClaims(now)
		m(c)
		return c
	}
	accessToken := jwttest.Sign(t, jwt.SigningMethodEdDSA, f.key, map[string]any{"typ": "at+jwt", "kid": f.kid},
		jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Minute).Unix(), "iat": now.Unix(), "aud": txnDomain})
	parts := strings.Split(good, ".")
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
		code   string
	}{
		{"good", http.Header{"Txn-Token": {good}}, http.StatusOK, ""},
		{"good, beside an access token in Authorization", http.Header{"Txn-Token": {good}, "Authorization": {"Bearer " + accessToken}}, http.StatusOK, ""},
		{"none", nil, http.StatusUnauthorized, "invalid_token"},
		{"two", http.Header{"Txn-Token": {good, good}}, http.StatusBadRequest, "invalid_request"},
		{"sent as Authorization", http.Header{"Authorization": {"Bearer " + good}}, http.StatusUnauthorized, "invalid_token"},
		{"sent as Authorization too", http.Header{"Txn-Token": {good}, "Authorization": {"Bearer " + good}}, http.StatusUnauthorized, "invalid_token"},
		{"expired", http.Header{"Txn-Token": {f.signTxn(t, mod(func(c *txntoken.Claims) {
			c.IssuedAt, c.ExpiresAt = now.Add(-2*time.Minute).Unix(), now.Add(-time.Minute).Unix()
		}), nil)}}, http.StatusUnauthorized, "invalid_token"},
		{"issued in the future", http.Header{"Txn-Token": {f.signTxn(t, mod(func(c *txntoken.Claims) {
			c.IssuedAt, c.ExpiresAt = now.Add(time.Minute).Unix(), now.Add(2*time.Minute).Unix()
		}), nil)}}, http.StatusUnauthorized, "invalid_token"},
		{"another trust domain", http.Header{"Txn-Token": {f.signTxn(t, mod(func(c *txntoken.Claims) { c.Audience = "evil.internal" }), nil)}},
			http.StatusUnauthorized, "invalid_token"},
		{"no req_wl", http.Header{"Txn-Token": {f.signTxn(t, mod(func(c *txntoken.Claims) { c.Workload = "" }), nil)}},
			http.StatusUnauthorized, "invalid_token"},
		{"no scope", http.Header{"Txn-Token": {f.signTxn(t, mod(func(c *txntoken.Claims) { c.Scope = "" }), nil)}},
			http.StatusUnauthorized, "invalid_token"},
		{"typ at+jwt", http.Header{"Txn-Token": {f.signTxn(t, txnClaims(now), map[string]any{"typ": "at+jwt"})}}, http.StatusUnauthorized, "invalid_token"},
		{"no typ", http.Header{"Txn-Token": {f.signTxn(t, txnClaims(now), map[string]any{"typ": jwttest.Omit})}}, http.StatusUnauthorized, "invalid_token"},
		{"an access token", http.Header{"Txn-Token": {accessToken}}, http.StatusUnauthorized, "invalid_token"},
		{"unknown kid", http.Header{"Txn-Token": {f.signTxn(t, txnClaims(now), map[string]any{"kid": "k2"})}}, http.StatusUnauthorized, "invalid_token"},
		{"tampered", http.Header{"Txn-Token": {parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iat":1,"exp":9999999999,"aud":"shop.internal","txn":"1","sub":"root","scope":"admin","req_wl":"x"}`)) + "." + parts[2]}},
			http.StatusUnauthorized, "invalid_token"},
		{"alg none", http.Header{"Txn-Token": {jwttest.Sign(t, jwt.SigningMethodNone, nil, map[string]any{"typ": txntoken.Type, "kid": f.kid}, txnClaims(now))}},
			http.StatusUnauthorized, "invalid_token"},
		{"HS256 keyed with the public key", http.Header{"Txn-Token": {jwttest.Sign(t, jwt.SigningMethodHS256, []byte(f.key.Public().(ed25519.PublicKey)),
			map[string]any{"typ": txntoken.Type, "kid": f.kid}, txnClaims(now))}}, http.StatusUnauthorized, "invalid_token"},
		{"not a JWT", http.Header{"Txn-Token": {"abc"}}, http.StatusUnauthorized, "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			req := httptest.NewRequest(http.MethodGet, "/orders", nil)
			req.Header = tc.header.Clone()
			if req.Header == nil {
				req.Header = http.Header{}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("status %d %s, want %d", w.Code, w.Body, tc.status)
			}
			if tc.status == http.StatusOK {
				if seen == nil || seen.Txn != "117811659438825472" || seen.Subject != "alice" || seen.Scope != "orders:read" ||
					seen.Workload != "web" || seen.Transaction.ClientID != "web" || seen.Request.IP != "192.0.2.7" {
					t.Errorf("the handler saw %+v", seen)
				}
				return
			}
			if seen != nil {
				t.Error("a refused request reached the handler")
			}
			var body struct {
				Error string `json:"error"`
				Desc  string `json:"error_description"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != tc.code || body.Desc == "" {
				t.Errorf("body %s, want error %s with a description", w.Body, tc.code)
			}
			if strings.Contains(w.Body.String(), "eyJ") {
				t.Errorf("the answer holds a token: %s", w.Body)
			}
			if tc.status == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Txn-Token ") {
				t.Errorf("WWW-Authenticate %q", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestTxnSentAsAuthorizationSaysSo: the refusal of a Txn-Token in
// Authorization says what to do instead.
func TestTxnSentAsAuthorizationSaysSo(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now()
	v := newTxnVerifier(t, f, now)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer "+f.signTxn(t, txnClaims(now), nil))
	w := httptest.NewRecorder()
	v.Middleware(http.NotFoundHandler()).ServeHTTP(w, req)
	if !strings.Contains(w.Body.String(), "send it in the Txn-Token header") {
		t.Errorf("answer %s", w.Body)
	}
}

func TestTxnTransport(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now()
	v := newTxnVerifier(t, f, now)
	raw := f.signTxn(t, txnClaims(now), nil)
	var got []string
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values(txntoken.Header)
	}))
	defer downstream.Close()
	hc := &http.Client{Transport: client.TxnTransport{}}
	call := func(r *http.Request, own string) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if own != "" {
			req.Header.Set(txntoken.Header, own)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if own == "" && req.Header.Get(txntoken.Header) != "" {
			t.Error("the transport changed the caller's request")
		}
	}
	front := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { call(r, "") }))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(txntoken.Header, raw)
	front.ServeHTTP(httptest.NewRecorder(), req)
	if len(got) != 1 || got[0] != raw {
		t.Errorf("downstream got %q, want the incoming Txn-Token unchanged", got)
	}

	call(httptest.NewRequest(http.MethodGet, "/", nil), "")
	if got != nil {
		t.Errorf("downstream got %q from a request with no Txn-Token", got)
	}
	front = v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { call(r, "replacement") }))
	front.ServeHTTP(httptest.NewRecorder(), req)
	if len(got) != 1 || got[0] != "replacement" {
		t.Errorf("downstream got %q, want the request's own Txn-Token", got)
	}
}

func TestNewTxnVerifierOptions(t *testing.T) {
	for _, opts := range []client.TxnOptions{
		{IssuerURL: "http://issuer:8080"},
		{TrustDomain: txnDomain},
		{IssuerURL: "http://issuer:8080", TrustDomain: txnDomain, Leeway: -2},
	} {
		if _, err := client.NewTxnVerifier(opts); err == nil {
			t.Errorf("%+v: accepted", opts)
		}
	}
}

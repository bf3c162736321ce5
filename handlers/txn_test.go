package handlers_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/token/txn"
)

const trustDomain = "shop.internal"

// verifyTxnJOSE verifies a Txn-Token with go-jose, a JOSE library of its
// own, against the issuer's JWKS as served, and returns its header's typ
// and its claims as plain JSON.
func (e *env) verifyTxnJOSE(tb testing.TB, raw string) (typ string, claims map[string]any) {
	tb.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(e.do(tb, http.MethodGet, "/.well-known/jwks.json", nil, nil).Body, &set); err != nil {
		tb.Fatal(err)
	}
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		tb.Fatalf("go-jose cannot parse the Txn-Token: %v", err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 {
		tb.Fatalf("kid %q: %d keys in the JWKS", jws.Signatures[0].Header.KeyID, len(keys))
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		tb.Fatalf("go-jose: the Txn-Token does not verify with the JWKS: %v", err)
	}
	d := json.NewDecoder(strings.NewReader(string(payload)))
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		tb.Fatal(err)
	}
	typ, _ = jws.Signatures[0].Header.ExtraHeaders["typ"].(string)
	return typ, claims
}

// TestValidateMintsTxn: a validation that asks (?txn_token=1) answers
// with a Txn-Token that an independent JOSE library verifies with the
// JWKS and that carries the claims of draft -10; one that does not ask
// gets none.
func TestValidateMintsTxn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTxn(txn.Options{TrustDomain: trustDomain, TTL: 30 * time.Second}), withDPoPForwarders("127.0.0.1"))
	tok := e.issue(t, e.Normal, nil).AccessToken
	auth := http.Header{"Authorization": {"Bearer " + tok}}

	if r := e.validate(t, tok); r.Status != http.StatusOK || r.Header.Values(txntoken.Header) != nil {
		t.Errorf("a validation that does not ask: %d, Txn-Token %q: want 200 and none", r.Status, r.Header.Values(txntoken.Header))
	}
	hdr := auth.Clone()
	hdr.Set("X-Forwarded-Method", "POST")
	hdr.Set("X-Forwarded-Proto", "https")
	hdr.Set("X-Forwarded-Host", "shop.example")
	hdr.Set("X-Forwarded-Uri", "/orders/7?coupon=secret")
	r := e.do(t, http.MethodGet, "/token/validate?scope=orders:read&txn_token=1", nil, hdr)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	raw := r.Header.Get(txntoken.Header)
	if len(r.Header.Values(txntoken.Header)) != 1 || raw == "" {
		t.Fatalf("Txn-Token %q, want one", r.Header.Values(txntoken.Header))
	}
	typ, c := e.verifyTxnJOSE(t, raw)
	if typ != "txntoken+jwt" {
		t.Errorf("typ %q, want txntoken+jwt", typ)
	}
	now := e.Clock.Now().Unix()
	want := map[string]any{
		"iss": testIssuer, "aud": trustDomain, "sub": e.Normal.ID, "scope": "orders:read", "req_wl": e.Normal.ID,
		"iat": json.Number(strconv.FormatInt(now, 10)), "exp": json.Number(strconv.FormatInt(now+30, 10)),
		"tctx": map[string]any{"client_id": e.Normal.ID},
		"rctx": map[string]any{"req_ip": "127.0.0.1", "transport": "https", "method": "POST", "path": "/orders/7"},
	}
	for k, v := range want {
		got, _ := json.Marshal(c[k])
		w, _ := json.Marshal(v)
		if string(got) != string(w) {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	id, err := strconv.ParseInt(c["txn"].(string), 10, 64)
	if err != nil || id <= 0 {
		t.Errorf("txn %v: want a Snowflake ID in decimal", c["txn"])
	}
	for _, k := range []string{"jti", "client_id", "act", "parents", "cnf"} {
		if _, ok := c[k]; ok {
			t.Errorf("a Txn-Token carries %s", k)
		}
	}
	if strings.Contains(raw, tok) {
		t.Error("the Txn-Token holds the access token")
	}

	t.Run("no scope asked: the token's", func(t *testing.T) {
		r := e.do(t, http.MethodGet, "/token/validate?txn_token=1", nil, auth)
		_, c := e.verifyTxnJOSE(t, r.Header.Get(txntoken.Header))
		if c["scope"] != "orders:read orders:write" {
			t.Errorf("scope %v, want the access token's", c["scope"])
		}
		if _, ok := c["rctx"].(map[string]any)["method"]; ok {
			t.Errorf("rctx %v: a method with no forwarded request", c["rctx"])
		}
	})
	t.Run("each token its own txn", func(t *testing.T) {
		r2 := e.do(t, http.MethodGet, "/token/validate?txn_token=1", nil, auth)
		_, c2 := e.verifyTxnJOSE(t, r2.Header.Get(txntoken.Header))
		if c2["txn"] == c["txn"] {
			t.Errorf("two validations minted the same txn %v", c["txn"])
		}
	})
}

// TestMetadataTxn: the metadata names the trust domain while Transaction
// Tokens are on, and nothing of them while they are off.
func TestMetadataTxn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    *env
		want any
	}{{newEnv(t, withTxn(txn.Options{TrustDomain: trustDomain})), trustDomain}, {newEnv(t), nil}} {
		var m map[string]any
		if err := json.Unmarshal(tc.e.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", nil, nil).Body, &m); err != nil {
			t.Fatal(err)
		}
		if m["txn_token_trust_domain"] != tc.want {
			t.Errorf("txn_token_trust_domain %v, want %v", m["txn_token_trust_domain"], tc.want)
		}
	}
}

// TestValidateTxnRefused: what asks for a Txn-Token wrongly, or where none
// can be minted, is refused, and no refusal carries one.
func TestValidateTxnRefused(t *testing.T) {
	t.Parallel()
	on := newEnv(t, withTxn(txn.Options{TrustDomain: trustDomain}))
	off := newEnv(t)
	for _, tc := range []struct {
		name   string
		e      *env
		query  string
		tok    func(e *env) string
		status int
		code   string
	}{
		{"off at this issuer", off, "?txn_token=1", nil, http.StatusBadRequest, "invalid_request"},
		{"a value other than 1", on, "?txn_token=true", nil, http.StatusBadRequest, "invalid_request"},
		{"asked twice", on, "?txn_token=1&txn_token=1", nil, http.StatusBadRequest, "invalid_request"},
		{"a scope the token lacks", on, "?txn_token=1&scope=admin", nil, http.StatusForbidden, "insufficient_scope"},
		{"an invalid token", on, "?txn_token=1", func(*env) string { return "not.a.token" }, http.StatusUnauthorized, "invalid_token"},
		{"a Txn-Token as the access token", on, "", func(e *env) string {
			r := e.do(t, http.MethodGet, "/token/validate?txn_token=1", nil, http.Header{"Authorization": {"Bearer " + e.issue(t, e.Normal, nil).AccessToken}})
			return r.Header.Get(txntoken.Header)
		}, http.StatusUnauthorized, "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.e.issue(t, tc.e.Normal, nil).AccessToken
			if tc.tok != nil {
				tok = tc.tok(tc.e)
			}
			r := tc.e.do(t, http.MethodGet, "/token/validate"+tc.query, nil, http.Header{"Authorization": {"Bearer " + tok}})
			var body struct {
				Error string `json:"error"`
				Desc  string `json:"error_description"`
			}
			_ = json.Unmarshal(r.Body, &body)
			if r.Status != tc.status || body.Error != tc.code {
				t.Errorf("%d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if r.Header.Values(txntoken.Header) != nil || r.Header.Get("X-Auth-Subject") != "" {
				t.Errorf("a refusal carries Txn-Token %q, X-Auth-Subject %q", r.Header.Values(txntoken.Header), r.Header.Get("X-Auth-Subject"))
			}
			if tc.name == "a Txn-Token as the access token" && !strings.Contains(body.Desc, "Txn-Token") {
				t.Errorf("description %q: want it to say a Txn-Token is not an access token", body.Desc)
			}
		})
	}
}

// BenchmarkValidateTxn is a hot validation (decided from the revocation
// log: no Redis command) that mints a Txn-Token, beside one that does not
// and one Ed25519 signature alone: what minting adds is the signature and
// its JSON. Besides ns/op it reports cpu-ns/op, the process's CPU time (user
// and system) per operation, which other load on a shared machine inflates
// less than wall time.
func BenchmarkValidateTxn(b *testing.B) {
	e := newEnv(b, withRevocations(liveLog{}), withTxn(txn.Options{TrustDomain: trustDomain}))
	tok := e.issue(b, e.Normal, nil).AccessToken
	// The floor: one Ed25519 signature of a Txn-Token's size, alone.
	b.Run("ed25519-sign", func(b *testing.B) {
		_, key, _ := ed25519.GenerateKey(nil)
		msg := make([]byte, 400)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			ed25519.Sign(key, msg)
		}
	})
	for _, c := range []struct{ name, query string }{{"plain", ""}, {"txn", "?txn_token=1"}, {"txn-scope", "?scope=orders:read&txn_token=1"}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/token/validate"+c.query, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			serve(b, e, req)
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				serve(b, e, req)
			}
		})
	}
}

// reportCPU starts measuring the process's CPU time; the function it
// returns reports it per operation as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// TestAuthorizeMintsTxn: a gateway's check over a protocol of its own
// (Authorize, Envoy's ext_authz) mints a Transaction Token when the route
// asks (Resource.TxnToken), as ?txn_token=1 does, with the original
// request as rctx; none when it does not ask; and is refused while
// Transaction Tokens are off.
func TestAuthorizeMintsTxn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTxn(txn.Options{TrustDomain: trustDomain, TTL: 30 * time.Second}))
	tok := e.issue(t, e.Normal, nil).AccessToken
	r := handlers.Resource{Header: http.Header{"Authorization": {"Bearer " + tok}}, Scope: "orders:read",
		Method: "POST", Scheme: "https", Host: "shop.example", Path: "/orders/7", Addr: "203.0.113.9"}
	if a := e.Server.Authorize(t.Context(), r); a.Status != http.StatusOK || a.Header.Get(txntoken.Header) != "" {
		t.Fatalf("not asked: %d, Txn-Token %q: want 200 and none", a.Status, a.Header.Get(txntoken.Header))
	}
	r.TxnToken = true
	a := e.Server.Authorize(t.Context(), r)
	if a.Status != http.StatusOK {
		t.Fatalf("asked: %d %s", a.Status, a.Body)
	}
	_, c := e.verifyTxnJOSE(t, a.Header.Get(txntoken.Header))
	got, _ := json.Marshal(c["rctx"])
	if want := `{"method":"POST","path":"/orders/7","req_ip":"203.0.113.9","transport":"https"}`; string(got) != want {
		t.Errorf("rctx %s, want %s", got, want)
	}
	if c["scope"] != "orders:read" || c["sub"] != e.Normal.ID {
		t.Errorf("claims %v", c)
	}
	off := newEnv(t)
	r.Header = http.Header{"Authorization": {"Bearer " + off.issue(t, off.Normal, nil).AccessToken}}
	if a := off.Server.Authorize(t.Context(), r); a.Status != http.StatusBadRequest || a.Header.Get(txntoken.Header) != "" {
		t.Errorf("off: %d %s, want 400 and no token", a.Status, a.Body)
	}
}

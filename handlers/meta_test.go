package handlers_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
)

func TestJWKS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(t, http.MethodGet, "/.well-known/jwks.json", nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	// The max-age is the JWKS cache lifetime a key is published for before it signs.
	if got, want := r.Header.Get("Cache-Control"), "public, max-age="+strconv.Itoa(int(keyset.JWKSMaxAge/time.Second)); got != want {
		t.Errorf("Cache-Control %q, want %q", got, want)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(r.Body, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 {
		t.Fatalf("%d keys, want 1: %s", len(set.Keys), r.Body)
	}
	k := set.Keys[0]
	public := map[string]bool{"kty": true, "crv": true, "x": true, "kid": true, "use": true, "alg": true}
	for m := range k {
		if !public[m] {
			t.Errorf("member %q in a public JWK (a private part?): %s", m, r.Body)
		}
	}
	if _, ok := k["d"]; ok {
		t.Fatalf("the private key is published: %s", r.Body)
	}
	x, _ := k["x"].(string)
	pub, err := base64.RawURLEncoding.DecodeString(x)
	if err != nil || !bytes.Equal(pub, e.Key.Public) {
		t.Errorf("x %q is not our public key", x)
	}
	if k["kid"] != keyset.Thumbprint(e.Key.Public) || k["kid"] != e.Key.ID {
		t.Errorf("kid %v, want the RFC 7638 thumbprint %q", k["kid"], keyset.Thumbprint(e.Key.Public))
	}
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" {
		t.Errorf("jwk %v", k)
	}
	// The kid of an issued token names this key.
	h, _ := segments(t, e.issue(t, e.Normal, nil).AccessToken)
	if h["kid"] != k["kid"] {
		t.Errorf("token kid %v, JWKS kid %v", h["kid"], k["kid"])
	}
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var md map[string]any
	if err := json.Unmarshal(r.Body, &md); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"issuer":                 testIssuer,
		"token_endpoint":         e.URL + "/token",
		"jwks_uri":               e.URL + "/.well-known/jwks.json",
		"introspection_endpoint": e.URL + "/token/introspect",
		"revocation_endpoint":    e.URL + "/token/revoke",
	}
	for k, v := range want {
		if md[k] != v {
			t.Errorf("%s = %v, want %q", k, md[k], v)
		}
	}
	if g, _ := md["grant_types_supported"].([]any); len(g) != 2 || g[0] != "client_credentials" || g[1] != "urn:ietf:params:oauth:grant-type:token-exchange" {
		t.Errorf("grant_types_supported %v", md["grant_types_supported"])
	}
	// The endpoints it names answer.
	jwks := e.do(t, http.MethodGet, strings.TrimPrefix(md["jwks_uri"].(string), e.URL), nil, nil)
	if jwks.Status != http.StatusOK {
		t.Errorf("jwks_uri: status %d", jwks.Status)
	}
	tok := e.post(t, strings.TrimPrefix(md["token_endpoint"].(string), e.URL), &e.Normal, url.Values{"grant_type": {"client_credentials"}})
	if tok.Status != http.StatusOK {
		t.Errorf("token_endpoint: status %d: %s", tok.Status, tok.Body)
	}
}

func TestDecodeID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := time.Now()
	tok := e.issue(t, e.Normal, nil)
	after := time.Now()
	var id string
	if err := json.Unmarshal(tok.JTI, &id); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, http.MethodGet, "/ids/"+id, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var p struct {
		ID       string    `json:"id"`
		Time     time.Time `json:"time"`
		Worker   int64     `json:"worker_id"`
		Sequence int64     `json:"sequence"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	// Decode the default 41/10/12 layout by hand.
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ms, worker, seq := n>>22, (n>>12)&(1<<10-1), n&(1<<12-1)
	at := snowflakealg.DefaultEpoch.Add(time.Duration(ms) * time.Millisecond)
	if p.ID != id || p.Worker != testWorker || worker != testWorker || p.Sequence != seq || !p.Time.Equal(at) {
		t.Errorf("decoded %+v, want id %s worker %d sequence %d time %v", p, id, testWorker, seq, at)
	}
	if p.Time.Before(before.Truncate(time.Millisecond)) || p.Time.After(after) {
		t.Errorf("time %v not within the request [%v, %v]", p.Time, before, after)
	}

	for _, bad := range []string{"abc", "-1", "99999999999999999999", "9223372036854775808", "01", "1.0", "%201", "0x10"} {
		t.Run(bad, func(t *testing.T) {
			wantError(t, e.do(t, http.MethodGet, "/ids/"+bad, nil, nil), http.StatusBadRequest, "invalid_request")
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t.Run("unknown route", func(t *testing.T) {
		for _, p := range []string{"/nope", "/token/", "/subjects/x", "/ids/"} {
			wantError(t, e.do(t, http.MethodGet, p, nil, nil), http.StatusNotFound, "not_found")
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		tests := []struct{ method, path, allow string }{
			{http.MethodGet, "/token", "POST"},
			{http.MethodPut, "/token/revoke", "POST"},
			{http.MethodPost, "/token/validate", "GET"},
			{http.MethodGet, "/subjects/u/tokens", "DELETE"},
			{http.MethodDelete, "/.well-known/jwks.json", "GET"},
		}
		for _, tt := range tests {
			r := e.do(t, tt.method, tt.path, nil, nil)
			wantError(t, r, http.StatusMethodNotAllowed, "invalid_request")
			if allow := r.Header.Get("Allow"); !strings.Contains(allow, tt.allow) {
				t.Errorf("%s %s: Allow %q, want it to list %s (RFC 9110 §15.5.6)", tt.method, tt.path, allow, tt.allow)
			}
		}
	})
	t.Run("healthz", func(t *testing.T) {
		if r := e.do(t, http.MethodGet, "/healthz", nil, nil); r.Status != http.StatusOK || r.object(t)["status"] != "ok" {
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	})
	t.Run("readyz", func(t *testing.T) {
		if r := e.do(t, http.MethodGet, "/readyz", nil, nil); r.Status != http.StatusOK || r.object(t)["status"] != "ready" {
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	})
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.issue(t, e.Normal, nil).AccessToken
	e.issue(t, e.Short, nil)
	o := e.issue(t, e.Opaque, nil).AccessToken
	e.validate(t, a)
	e.validate(t, a)
	e.validate(t, o)
	e.validate(t, "garbage")
	e.validate(t, token.OpaquePrefix+"garbage")
	e.do(t, http.MethodGet, "/token/validate", nil, nil)
	e.do(t, http.MethodGet, "/token/validate?scope=admin", nil, http.Header{"Authorization": {"Bearer " + a}})
	e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {a}})
	e.validate(t, a)
	e.do(t, http.MethodGet, "/no/such/route", nil, nil)

	// The API does not serve the metrics: they are the registry's, which
	// the program serves on a listener of its own (SNOWTOKEN_METRICS_ADDR).
	wantError(t, e.do(t, http.MethodGet, "/metrics", nil, nil), http.StatusNotFound, "not_found")
	got := e.metrics(t)
	want := map[string]string{
		`snowtoken_tokens_issued_total{format="jwt"}`:                                         "2",
		`snowtoken_tokens_issued_total{format="opaque"}`:                                      "1",
		`snowtoken_issue_duration_seconds_count{format="jwt"}`:                                "2",
		`snowtoken_issue_duration_seconds_count{format="opaque"}`:                             "1",
		`snowtoken_validations_total{format="jwt",outcome="valid"}`:                           "2",
		`snowtoken_validations_total{format="opaque",outcome="valid"}`:                        "1",
		`snowtoken_validations_total{format="jwt",outcome="invalid"}`:                         "1",
		`snowtoken_validations_total{format="opaque",outcome="invalid"}`:                      "1",
		`snowtoken_validations_total{format="none",outcome="invalid"}`:                        "1",
		`snowtoken_validations_total{format="jwt",outcome="revoked"}`:                         "1",
		`snowtoken_validations_total{format="jwt",outcome="insufficient_scope"}`:              "1",
		`snowtoken_validation_duration_seconds_count{format="jwt"}`:                           "5",
		`snowtoken_validation_duration_seconds_count{format="opaque"}`:                        "2",
		`snowtoken_validation_duration_seconds_count{format="none"}`:                          "1",
		`snowtoken_http_requests_total{route="/token",status="200"}`:                          "3",
		`snowtoken_http_requests_total{route="/token/validate",status="200"}`:                 "3",
		`snowtoken_http_requests_total{route="/token/validate",status="401"}`:                 "4",
		`snowtoken_http_requests_total{route="/token/validate",status="403"}`:                 "1",
		`snowtoken_http_requests_total{route="unmatched",status="404"}`:                       "2",
		`snowtoken_http_request_duration_seconds_count{route="/token/validate",status="200"}`: "3",
		`snowtoken_http_request_duration_seconds_count{route="/token/revoke",status="200"}`:   "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestMetricsStartAtZero: the counters whose labels are known in advance
// are exported at 0 before the first event, so that a rate or increase in
// an alert works from the start and a scrape shows every series.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	got := newEnv(t).metrics(t)
	var want []string
	for _, f := range []string{"jwt", "opaque", "none"} {
		for _, o := range []string{"valid", "revoked", "dpop_refused", "invalid", "insufficient_scope", "unavailable", "bad_request"} {
			want = append(want, `snowtoken_validations_total{format="`+f+`",outcome="`+o+`"}`)
		}
		want = append(want, `snowtoken_validation_duration_seconds_count{format="`+f+`"}`)
		if f != "none" {
			want = append(want, `snowtoken_tokens_issued_total{format="`+f+`"}`, `snowtoken_issue_duration_seconds_count{format="`+f+`"}`)
		}
	}
	for _, by := range []string{authlimit.Client, authlimit.Address} {
		want = append(want, `snowtoken_auth_rate_limited_total{limited_by="`+by+`"}`)
	}
	for _, k := range want {
		if v, ok := got[k]; !ok || v != "0" {
			t.Errorf("%s = %q (present: %t), want 0 before any request", k, v, ok)
		}
	}
}

package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/txn"
)

// txnEnv is an env with Transaction Tokens on and ordersX, a client that
// may exchange tokens, and orders-solo, one that may not.
func txnEnv(t testing.TB) *env {
	t.Helper()
	return newEnv(t, withTxn(txn.Options{TrustDomain: trustDomain, TTL: 30 * time.Second}), withClients(
		clients.Client{ID: ordersX, Scopes: []string{"orders:read", "orders:write"}, TokenExchange: true},
		clients.Client{ID: notExchangeXID, Scopes: []string{"orders:read"}},
	))
}

// TestTxnTokenService: POST /token's token exchange with
// requested_token_type txn_token mints a Txn-Token for a live access token
// that names the caller (N_A, no refresh token, verified with the JWKS by
// go-jose), and a replacement of one that only narrows; every other
// request is refused with RFC 8693's error.
func TestTxnTokenService(t *testing.T) {
	e := txnEnv(t)
	x := e.client(ordersX)
	user := e.issue(t, e.APIs, url.Values{"audience": {ordersX}}).AccessToken // scope orders:read
	txnType := url.Values{"requested_token_type": {txntoken.TokenType}}

	r := e.exchange(t, x, user, txnType, "")
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	o := r.object(t)
	if o["token_type"] != "N_A" || o["issued_token_type"] != txntoken.TokenType || o["refresh_token"] != nil {
		t.Errorf("answer %v: want token_type N_A, issued_token_type %s, no refresh_token", o, txntoken.TokenType)
	}
	raw, _ := o["access_token"].(string)
	typ, c := e.verifyTxnJOSE(t, raw)
	if typ != "txntoken+jwt" || c["aud"] != trustDomain || c["sub"] != e.APIs.ID || c["req_wl"] != ordersX || c["scope"] != "orders:read" {
		t.Errorf("typ %q, claims %v: want txntoken+jwt, aud %s, sub %s, req_wl %s, scope orders:read", typ, c, trustDomain, e.APIs.ID, ordersX)
	}
	if fmt.Sprint(o["jti"]) != c["txn"] {
		t.Errorf("jti %v, want the txn %v", o["jti"], c["txn"])
	}

	t.Run("replacement", func(t *testing.T) {
		e.Clock.Add(time.Second)
		r := e.exchange(t, x, raw, url.Values{"requested_token_type": {txntoken.TokenType}, "subject_token_type": {txntoken.TokenType}}, "")
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		_, n := e.verifyTxnJOSE(t, r.object(t)["access_token"].(string))
		for _, k := range []string{"txn", "sub", "aud", "scope"} {
			if n[k] != c[k] {
				t.Errorf("replacement's %s %v, want %v (kept)", k, n[k], c[k])
			}
		}
		if ne, ce := fmt.Sprint(n["exp"]), fmt.Sprint(c["exp"]); len(ne) > len(ce) || len(ne) == len(ce) && ne > ce {
			t.Errorf("replacement expires at %s, after %s", ne, ce)
		}
	})

	for _, tc := range []struct {
		name    string
		caller  client
		subject string
		form    url.Values
		status  int
		code    string
	}{
		{"a wider scope", x, user, url.Values{"scope": {"orders:write"}}, 400, "invalid_scope"},
		{"another audience", x, user, url.Values{"audience": {"elsewhere"}}, 400, "invalid_target"},
		{"an actor token", x, user, url.Values{"actor_token": {user}, "actor_token_type": {typeAccess}}, 400, "invalid_request"},
		{"expires_in", x, user, url.Values{"expires_in": {"10"}}, 400, "invalid_request"},
		{"request_context", x, user, url.Values{"request_context": {"{}"}}, 400, "invalid_request"},
		{"a subject token that does not name the caller", x, e.issue(t, e.APIs, url.Values{"audience": {billingAPI}}).AccessToken, nil, 400, "invalid_request"},
		{"not a token", x, "nope", nil, 400, "invalid_request"},
		{"a client not opted in", e.client(notExchangeXID), user, nil, 400, "unauthorized_client"},
		{"an access token as a Txn-Token", x, user, url.Values{"subject_token_type": {txntoken.TokenType}}, 400, "invalid_request"},
		{"a Txn-Token whose scope would grow", x, raw, url.Values{"subject_token_type": {txntoken.TokenType}, "scope": {"orders:read orders:write"}}, 400, "invalid_scope"},
		{"an unknown subject token type", x, user, url.Values{"subject_token_type": {"urn:x"}}, 400, "invalid_request"},
		{"a tampered Txn-Token", x, raw[:len(raw)-4] + "AAAA", url.Values{"subject_token_type": {txntoken.TokenType}}, 400, "invalid_request"},
		{"resource", x, user, url.Values{"resource": {"https://x.test"}}, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := url.Values{"requested_token_type": {txntoken.TokenType}}
			for k, v := range tc.form {
				f[k] = v
			}
			r := e.exchange(t, tc.caller, tc.subject, f, "")
			if r.Status != tc.status || r.object(t)["error"] != tc.code {
				t.Errorf("%d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if r.object(t)["access_token"] != nil {
				t.Error("a refusal holds a token")
			}
		})
	}

	t.Run("revoked subject token", func(t *testing.T) {
		tok := e.issue(t, e.APIs, url.Values{"audience": {ordersX}}).AccessToken
		if r := e.post(t, "/token/revoke", &e.APIs, url.Values{"token": {tok}}); r.Status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		if r := e.exchange(t, x, tok, txnType, ""); r.Status != 400 || r.object(t)["error"] != "invalid_request" {
			t.Errorf("%d %s, want 400 invalid_request", r.Status, r.Body)
		}
	})

	t.Run("off", func(t *testing.T) {
		off := newEnv(t, withClients(clients.Client{ID: ordersX, Scopes: []string{"orders:read"}, TokenExchange: true}))
		tok := off.issue(t, off.APIs, url.Values{"audience": {ordersX}}).AccessToken
		if r := off.exchange(t, off.client(ordersX), tok, txnType, ""); r.Status != 400 || r.object(t)["error"] != "invalid_request" {
			t.Errorf("%d %s, want 400 invalid_request", r.Status, r.Body)
		}
	})
}

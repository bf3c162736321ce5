package handlers_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/token/clients"
)

// opaquePair issues, for subject, a JWT to the gateway and an opaque token
// to the opaque client, both with scope orders:read.
func opaquePair(t *testing.T, e *env, subject string) (jwt, opaque issued) {
	t.Helper()
	form := url.Values{"subject": {subject}, "scope": {"orders:read"}}
	jwt, opaque = e.issue(t, e.Gateway, form), e.issue(t, e.Opaque, form)
	if tok := opaque.AccessToken; len(tok) != 35 || !strings.HasPrefix(tok, "st_") || strings.Contains(tok, ".") {
		t.Fatalf("the opaque client got %q, want st_ and 32 base64url characters", tok)
	}
	if opaque.TokenType != "Bearer" || opaque.ExpiresIn != jwt.ExpiresIn || opaque.Scope != jwt.Scope {
		t.Errorf("opaque token response %+v, want as the JWT's %+v", opaque, jwt)
	}
	return jwt, opaque
}

// validateWith calls GET /token/validate?query with tok.
func (e *env) validateWith(t *testing.T, method, tok, query string) *response {
	t.Helper()
	return e.do(t, method, "/token/validate?"+query, nil, http.Header{"Authorization": {"Bearer " + tok}})
}

// wantInvalidToken checks a 401 invalid_token that names no identity and
// echoes no token.
func wantInvalidToken(t *testing.T, r *response, tok string) {
	t.Helper()
	wantError(t, r, http.StatusUnauthorized, "invalid_token")
	wantBearerChallenge(t, r, "invalid_token")
	wantNoEcho(t, r, tok)
	if h := r.Header.Get("X-Auth-Subject"); h != "" {
		t.Errorf("X-Auth-Subject %q on a 401", h)
	}
}

// TestOpaqueValidateAsJWT: an opaque token validates with the body and the
// headers a JWT gets, claims from its record, and ?scope= and ?audience=
// apply alike.
func TestOpaqueValidateAsJWT(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jwt, opaque := opaquePair(t, e, "alice")
	r := e.validate(t, jwt.AccessToken)
	if r.Status != http.StatusOK {
		t.Fatalf("JWT: status %d: %s", r.Status, r.Body)
	}
	want := r.object(t)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		r := e.validateWith(t, method, opaque.AccessToken, "")
		if r.Status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", method, r.Status, r.Body)
		}
		var jti string
		if err := json.Unmarshal(opaque.JTI, &jti); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"X-Auth-Subject": "alice", "X-Auth-Client": e.Opaque.ID, "X-Auth-Scope": "orders:read",
			"X-Auth-Token-Id": jti, "Cache-Control": "no-store"} {
			if got := r.Header.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", method, k, got, v)
			}
		}
		if method == http.MethodHead {
			continue
		}
		got := r.object(t)
		want["jti"], want["client_id"] = jti, e.Opaque.ID
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Errorf("opaque body %s, want the members of the JWT's %v", r.Body, want)
		}
		for k, v := range want {
			if k != "aud" && got[k] != v {
				t.Errorf("%s = %#v, want %#v (the JWT's)", k, got[k], v)
			}
		}
		if aud, _ := got["aud"].([]any); len(aud) != 1 || aud[0] != testAudience {
			t.Errorf("aud %v, want [%q]", got["aud"], testAudience)
		}
	}
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"scope=orders:read", http.StatusOK, ""},
		{"scope=orders:write", http.StatusForbidden, "insufficient_scope"},
		{"audience=" + ordersAPI, http.StatusOK, ""},
		{"audience=" + billingAPI, http.StatusUnauthorized, "invalid_token"},
		{"scope=a%20%20b", http.StatusBadRequest, "invalid_request"},
	} {
		for _, tok := range []string{jwt.AccessToken, opaque.AccessToken} {
			r := e.validateWith(t, http.MethodGet, tok, tc.query)
			if tc.code == "" {
				if r.Status != tc.status {
					t.Errorf("?%s: status %d, want %d: %s", tc.query, r.Status, tc.status, r.Body)
				}
				continue
			}
			wantError(t, r, tc.status, tc.code)
		}
	}
}

// TestOpaqueRejected: a tampered or forged opaque token is a 401
// invalid_token, whichever part is changed, and nothing is echoed.
func TestOpaqueRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.issue(t, e.Opaque, nil).AccessToken
	flip := func(i int) string {
		c := byte('A')
		if tok[i] == 'A' {
			c = 'B'
		}
		return tok[:i] + string(c) + tok[i+1:]
	}
	for name, raw := range map[string]string{
		"ID changed": flip(5), "secret changed": flip(30), "last character changed": flip(len(tok) - 1),
		"cut": tok[:20], "longer": tok + "A", "prefix only": "st_", "not base64": "st_" + strings.Repeat("*", 32),
	} {
		t.Run(name, func(t *testing.T) { wantInvalidToken(t, e.validate(t, raw), tok) })
	}
	if r := e.validate(t, tok); r.Status != http.StatusOK {
		t.Fatalf("the token itself: status %d: %s", r.Status, r.Body)
	}
}

// TestOpaqueIntrospectAndRevoke: RFC 7662 and RFC 7009 for opaque tokens,
// with the same rights as for a JWT.
func TestOpaqueIntrospectAndRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.issue(t, e.Opaque, url.Values{"subject": {"bob"}}).AccessToken
	introspect := func(t *testing.T, caller client, raw string) map[string]any {
		t.Helper()
		r := e.post(t, "/token/introspect", &caller, url.Values{"token": {raw}})
		if r.Status != http.StatusOK {
			t.Fatalf("introspect: status %d: %s", r.Status, r.Body)
		}
		return r.object(t)
	}
	for _, tc := range []struct {
		name   string
		caller client
		active bool
	}{
		{"own token", e.Opaque, true},
		{"another client's token", e.Normal, false},
		{"may_introspect", e.Auditor, true},
		{"admin", e.Admin, true},
	} {
		t.Run("introspect/"+tc.name, func(t *testing.T) {
			body := introspect(t, tc.caller, tok)
			if body["active"] != tc.active || (!tc.active && len(body) != 1) {
				t.Errorf("body %v, want active %v", body, tc.active)
			}
			if tc.active && (body["sub"] != "bob" || body["client_id"] != e.Opaque.ID || body["token_type"] != "Bearer") {
				t.Errorf("body %v, want sub bob, client_id %s, token_type Bearer", body, e.Opaque.ID)
			}
		})
	}
	revoke := func(t *testing.T, caller client, raw string) *response {
		t.Helper()
		return e.post(t, "/token/revoke", &caller, url.Values{"token": {raw}})
	}
	t.Run("revoke/another client's token", func(t *testing.T) {
		wantError(t, revoke(t, e.Normal, tok), http.StatusForbidden, "unauthorized_client")
	})
	t.Run("revoke/a wrong secret revokes nothing", func(t *testing.T) {
		wrong := tok[:len(tok)-2] + "AA"
		if wrong == tok {
			wrong = tok[:len(tok)-2] + "BA"
		}
		for _, caller := range []client{e.Opaque, e.Admin} {
			if r := revoke(t, caller, wrong); r.Status != http.StatusOK {
				t.Errorf("revoke with a wrong secret: status %d, want 200 (RFC 7009): %s", r.Status, r.Body)
			}
		}
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Errorf("after a revocation with a wrong secret: status %d: %s", r.Status, r.Body)
		}
	})
	t.Run("revoke/own token", func(t *testing.T) {
		if r := revoke(t, e.Opaque, tok); r.Status != http.StatusOK {
			t.Fatalf("revoke: status %d: %s", r.Status, r.Body)
		}
		wantInvalidToken(t, e.validate(t, tok), tok)
		if body := introspect(t, e.Opaque, tok); body["active"] != false {
			t.Errorf("introspect after revoke: %v", body)
		}
	})
}

// TestOpaqueSubjectAndClientRevocation: DELETE /subjects/{s}/tokens ends a
// subject's tokens of both formats; DELETE /clients/{c}/tokens the client's.
func TestOpaqueSubjectAndClientRevocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jwt, opaque := opaquePair(t, e, "carol")
	_, other := opaquePair(t, e, "dave")
	admin := http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}}
	if r := e.do(t, http.MethodDelete, "/subjects/carol/tokens", nil, admin); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE /subjects/carol/tokens: %d %s", r.Status, r.Body)
	}
	for _, tok := range []string{jwt.AccessToken, opaque.AccessToken} {
		wantInvalidToken(t, e.validate(t, tok), tok)
	}
	if r := e.validate(t, other.AccessToken); r.Status != http.StatusOK {
		t.Fatalf("another subject's token: status %d: %s", r.Status, r.Body)
	}
	gateway := e.issue(t, e.Gateway, url.Values{"subject": {"dave"}}).AccessToken
	if r := e.do(t, http.MethodDelete, "/clients/"+e.Opaque.ID+"/tokens", nil, admin); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE /clients/%s/tokens: %d %s", e.Opaque.ID, r.Status, r.Body)
	}
	wantInvalidToken(t, e.validate(t, other.AccessToken), other.AccessToken)
	if r := e.validate(t, gateway); r.Status != http.StatusOK {
		t.Errorf("another client's token: status %d: %s", r.Status, r.Body)
	}
}

// TestOpaqueClientDisabled: the verdict's client check applies to opaque tokens: a
// disabled or removed client's tokens end at once.
func TestOpaqueClientDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.issue(t, e.Opaque, nil).AccessToken
	for _, tc := range []struct {
		name string
		edit func([]clients.Client) []clients.Client
	}{
		{"disabled", func(list []clients.Client) []clients.Client {
			for i := range list {
				list[i].Disabled = list[i].Disabled || list[i].ID == e.Opaque.ID
			}
			return list
		}},
		{"removed", func(list []clients.Client) []clients.Client {
			return slices.DeleteFunc(list, func(c clients.Client) bool { return c.ID == e.Opaque.ID })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := clients.New(tc.edit(e.Clients.All()))
			if err != nil {
				t.Fatal(err)
			}
			h, err := handlers.New(handlers.Options{Service: e.Svc, Clients: cs, IDs: e.IDs})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/token/validate", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			h.ServeHTTP(rec, req)
			wantInvalidToken(t, &response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}, tok)
		})
	}
	if r := e.validate(t, tok); r.Status != http.StatusOK {
		t.Errorf("with the client in force: status %d: %s", r.Status, r.Body)
	}
}

// TestOpaqueRedisDown: with Redis down an opaque token is a 503 with
// Retry-After at every endpoint, never a pass and never "invalid".
func TestOpaqueRedisDown(t *testing.T) {
	t.Parallel()
	srv, e := newStoppableEnv(t)
	tok := e.issue(t, e.Opaque, nil).AccessToken
	if r := e.validate(t, tok); r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	srv.Stop()
	for name, r := range map[string]func() *response{
		"issue": func() *response {
			return e.post(t, "/token", &e.Opaque, url.Values{"grant_type": {"client_credentials"}})
		},
		"validate":   func() *response { return e.validate(t, tok) },
		"introspect": func() *response { return e.post(t, "/token/introspect", &e.Opaque, url.Values{"token": {tok}}) },
		"revoke":     func() *response { return e.post(t, "/token/revoke", &e.Opaque, url.Values{"token": {tok}}) },
	} {
		t.Run(name, func(t *testing.T) {
			resp := r()
			wantUnavailable(t, resp, 1)
			if h := resp.Header.Get("X-Auth-Subject"); h != "" {
				t.Errorf("X-Auth-Subject %q on a 503", h)
			}
		})
	}
}

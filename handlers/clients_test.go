package handlers_test

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"snowtoken/handlers"
	"snowtoken/token"
)

// TestRemovedOrDisabledClientsTokens: once a client is removed from the
// clients file, or disabled, the tokens it holds stop validating and
// introspect as inactive, and it cannot get new ones; other clients'
// tokens are untouched.
func TestRemovedOrDisabledClientsTokens(t *testing.T) {
	e := newEnv(t)
	normal := e.issue(t, e.Normal, nil)
	gateway := e.issue(t, e.Gateway, url.Values{"subject": {"ceo"}})
	short := e.issue(t, e.Short, nil)

	// The operator's new clients file: Normal removed, Gateway disabled.
	var list []token.Client
	for _, c := range []client{e.Gateway, e.Admin, e.Short} {
		tc := token.Client{ID: c.ID, SecretSHA256: secretSum(e.secrets[c.ID]), Scopes: []string{"orders:read", "orders:write"}}
		tc.Disabled = c.ID == e.Gateway.ID
		tc.Admin = c.ID == e.Admin.ID
		tc.MaySetSubject = c.ID == e.Gateway.ID
		list = append(list, tc)
	}
	clients, err := token.NewClients(list)
	if err != nil {
		t.Fatal(err)
	}
	h, err := handlers.New(handlers.Options{Service: e.Svc, Clients: clients, IDs: e.IDs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	validate := func(tok string) int {
		req := httptest.NewRequest(http.MethodGet, "/token/validate", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return serve(req).Code
	}
	introspect := func(tok string) string {
		req := httptest.NewRequest(http.MethodPost, "/token/introspect", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", formType)
		req.SetBasicAuth(e.Admin.ID, e.Admin.Secret)
		return serve(req).Body.String()
	}
	for name, tok := range map[string]string{"removed client": normal.AccessToken, "disabled client": gateway.AccessToken} {
		if code := validate(tok); code != http.StatusUnauthorized {
			t.Errorf("%s's token: validate %d, want 401", name, code)
		}
		if body := introspect(tok); body != `{"active":false}` {
			t.Errorf("%s's token: introspect %s, want inactive", name, body)
		}
	}
	if code := validate(short.AccessToken); code != http.StatusOK {
		t.Errorf("a live client's token: validate %d, want 200", code)
	}
	req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", formType)
	req.SetBasicAuth(e.Gateway.ID, e.Gateway.Secret)
	if rec := serve(req); rec.Code != http.StatusUnauthorized {
		t.Errorf("a disabled client asks for a token: %d %s, want 401", rec.Code, rec.Body)
	}
}

// secretSum is a clients file's secret_sha256 of secret.
func secretSum(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

package handlers_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestValidateQueryStrict: a ?scope= or ?audience= (or any pair of the
// query) that does not parse is a 400 invalid_request, never a pair skipped
// and a check not made. Each token lacks orders:write and is not for
// billing-api, so a skipped pair would show as a 200.
func TestValidateQueryStrict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	short := e.issue(t, e.Short, nil).AccessToken // orders:read only, aud orders-api
	for _, q := range []string{
		"scope=orders:write;",
		"scope=orders%zzwrite",
		"scope=orders:write%",
		"scope=orders:write&x=%zz",
		"x;y&scope=orders:write",
		"audience=billing-api;",
		"audience=billing%2",
		"access_token=abc;",
		"scope=orders:read;&scope=orders:write",
	} {
		t.Run(q, func(t *testing.T) {
			r := e.validateWith(t, http.MethodGet, short, q)
			wantError(t, r, http.StatusBadRequest, "invalid_request")
			wantBearerChallenge(t, r, "invalid_request")
			if h := r.Header.Get("X-Auth-Subject"); h != "" {
				t.Errorf("X-Auth-Subject %q on a 400", h)
			}
		})
	}
	t.Run("HEAD", func(t *testing.T) {
		r := e.validateWith(t, http.MethodHead, short, "scope=orders:write;")
		if r.Status != http.StatusBadRequest {
			t.Errorf("status %d, want 400", r.Status)
		}
	})
}

// TestValidateRepeatedScope: ?scope= given more than once requires every
// scope of every value: a value appended to the query can only make the
// check stricter, never drop one.
func TestValidateRepeatedScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	short := e.issue(t, e.Short, nil).AccessToken   // orders:read
	normal := e.issue(t, e.Normal, nil).AccessToken // orders:read orders:write
	for _, tt := range []struct {
		name, tok, query string
		status           int
	}{
		{"narrow token, second value missing", short, "scope=orders:read&scope=orders:write", http.StatusForbidden},
		{"narrow token, first value missing", short, "scope=orders:write&scope=orders:read", http.StatusForbidden},
		{"wide token", normal, "scope=orders:read&scope=orders:write", http.StatusOK},
		{"empty second value", normal, "scope=orders:read&scope=", http.StatusBadRequest}, // as a doubled space is
		{"malformed second value", normal, "scope=orders:read&scope=a%20%20b", http.StatusBadRequest},
		{"audience twice", normal, "audience=orders-api&audience=orders-api", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.validateWith(t, http.MethodGet, tt.tok, tt.query)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
			}
			if tt.status == http.StatusForbidden {
				wantError(t, r, tt.status, "insufficient_scope")
				if h := r.Header.Get("WWW-Authenticate"); !strings.Contains(h, `scope="orders:`) || !strings.Contains(h, "orders:read") || !strings.Contains(h, "orders:write") {
					t.Errorf("WWW-Authenticate %q does not name every scope asked for", h)
				}
			}
		})
	}
}

// TestQueryStrictEveryRoute: every route refuses a query that does not
// parse, whatever it does with its parameters, and before it authenticates.
func TestQueryStrictEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, rt := range e.Engine.Routes() {
		path := fillParams(rt.Path)
		for _, q := range []string{"x=%zz", "a;b"} {
			t.Run(rt.Method+" "+rt.Path+"?"+q, func(t *testing.T) {
				r := e.do(t, rt.Method, path+"?"+q, nil, http.Header{"Content-Type": {formType}})
				if r.Status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400", r.Status)
				}
				if rt.Method != http.MethodHead {
					wantError(t, r, http.StatusBadRequest, "invalid_request")
				}
			})
		}
	}
}

// TestFormStrict: a form body (POST /token, /token/introspect,
// /token/revoke) with a pair that does not parse, or with a parameter given
// twice that may appear once, is a 400 invalid_request, never a pair
// dropped.
func TestFormStrict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	live := e.issue(t, e.Normal, nil).AccessToken
	hdr := func() http.Header {
		return http.Header{"Content-Type": {formType}, "Authorization": {basic(e.Normal.ID, e.Normal.Secret)}}
	}
	for _, tt := range []struct{ path, body string }{
		{"/token", "grant_type=client_credentials&scope=orders:read;"},
		{"/token", "grant_type=client_credentials&scope=orders%zzread"},
		{"/token", "grant_type=client_credentials;scope=orders:read"},
		{"/token", "grant_type=client_credentials&scope=orders:read&scope=orders:write"},
		{"/token", "grant_type=client_credentials&grant_type=client_credentials"},
		{"/token", "grant_type=client_credentials&expires_in=60&expires_in=3600"},
		{"/token/introspect", "token=" + live + "&x=%zz"},
		{"/token/introspect", "token=" + live + "&token=" + live},
		{"/token/revoke", "token=" + live + ";"},
		{"/token/revoke", "token=" + live + "&token_type_hint=access_token&token_type_hint=refresh_token"},
	} {
		t.Run(tt.path+" "+tt.body[len(tt.body)-min(len(tt.body), 40):], func(t *testing.T) {
			r := e.do(t, http.MethodPost, tt.path, strings.NewReader(tt.body), hdr())
			wantError(t, r, http.StatusBadRequest, "invalid_request")
		})
	}
	if r := e.validate(t, live); r.Status != http.StatusOK {
		t.Errorf("a refused revoke revoked the token: validate %d", r.Status)
	}
}

// fillParams puts a value in each parameter of a gin route template.
func fillParams(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") || strings.HasPrefix(p, "*") {
			parts[i] = "1"
		}
	}
	return strings.Join(parts, "/")
}

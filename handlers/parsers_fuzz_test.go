package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/snowflakealg"
)

// More placeholders, next to those of fuzz_test.go.
const (
	phToken   = "$TOKEN"   // a live token of orders-svc, scopes orders:read orders:write
	phAdmin64 = "$ADMIN64" // base64 of ops-admin's id:secret, as HTTP Basic sends it
)

// serve sends req through the engine and returns the recorded answer.
func (e *env) serve(req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	e.Engine.ServeHTTP(w, req)
	return w
}

// wantOAuthError fails unless w is an OAuth2 JSON error.
func wantOAuthError(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var out struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Error == "" {
		t.Fatalf("status %d without an OAuth2 error body: %q (%v)", w.Code, w.Body, err)
	}
	return out.Error
}

// FuzzValidateBearer throws arbitrary Authorization headers and query
// strings at GET /token/validate. Only the live token, sent as
// "Bearer <token>" (scheme in any case, spaces around the token), passes,
// and only when the scopes ?scope= asks for are the token's and the one
// ?audience= names, if any, is its aud; every refusal is an OAuth2 error
// with a Bearer challenge, never a 5xx.
func FuzzValidateBearer(f *testing.F) {
	e := newEnv(f)
	live := e.issue(f, e.Normal, nil).AccessToken
	for _, s := range []struct{ auth, query string }{
		{"Bearer " + phToken, ""},
		{"bearer  " + phToken + " ", "scope=orders:read"},
		{"Bearer " + phToken, "scope=orders:read%20orders:write"},
		{"Bearer " + phToken, "scope=admin"},
		{"Bearer " + phToken, "scope=orders:read%20%20x"},
		{"Bearer " + phToken, "scope=%22"},
		{"Bearer " + phToken, "access_token=" + phToken},
		{"", "access_token=" + phToken},
		{"Bearer " + phToken + "x", ""},
		{"Basic " + phToken, ""},
		{"Bearer", ""},
		{"Bearer ", ""},
		{"Bearer a.b.c", ""},
		{"Bearer " + strings.Repeat("A", 5000), ""},
		{"", ""},
		{"Bearer " + phToken, "scope=%zz"},
		{"Bearer\t" + phToken, ""},
		{"Bearer " + phToken, "audience=" + testAudience},
		{"Bearer " + phToken, "audience=" + testAudience + "&scope=orders:read"},
		{"Bearer " + phToken, "audience=billing-api"},
		{"Bearer " + phToken, "audience=" + testAudience + "&audience=" + testAudience},
		{"Bearer " + phToken, "audience="},
		{"Bearer " + phToken, "audience=orders-api%20x"},
	} {
		f.Add(s.auth, s.query)
	}
	expand := strings.NewReplacer(phToken, live)

	f.Fuzz(func(t *testing.T, auth, query string) {
		auth, query = expand.Replace(auth), expand.Replace(query)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/token/validate", nil)
		req.URL.RawQuery = query
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := e.serve(req)

		scheme, raw, _ := strings.Cut(auth, " ")
		presented := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(raw) == live
		aud, audAsked := req.URL.Query()["audience"]
		forUs := !audAsked || len(aud) == 1 && aud[0] == testAudience
		switch w.Code {
		case http.StatusOK:
			if !presented {
				t.Fatalf("200 for Authorization %q", auth)
			}
			if _, inURL := req.URL.Query()["access_token"]; inURL {
				t.Fatalf("200 with a token in the URL: %q", query)
			}
			for _, s := range strings.Fields(req.URL.Query().Get("scope")) {
				if s != "orders:read" && s != "orders:write" {
					t.Fatalf("200 though ?scope= asks for %q", s)
				}
			}
			if !forUs {
				t.Fatalf("200 though ?audience= asks for %q", aud)
			}
			if w.Header().Get("X-Auth-Client") != e.Normal.ID {
				t.Fatalf("200 with X-Auth-Client %q", w.Header().Get("X-Auth-Client"))
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
			wantOAuthError(t, w)
			if h := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer ") {
				t.Fatalf("%d with WWW-Authenticate %q", w.Code, h)
			}
			if w.Code == http.StatusUnauthorized && presented && forUs {
				t.Fatalf("the live token refused as invalid: %s", w.Body)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

// FuzzBasicAuth throws arbitrary Authorization headers at DELETE
// /subjects/{subject}/tokens, the one route that reads HTTP Basic alone:
// 204 only with the admin's credentials, 403 only with another client's,
// else 401 invalid_client with a Basic challenge; never a 5xx.
func FuzzBasicAuth(f *testing.F) {
	e := newEnv(f)
	for _, s := range []string{
		"Basic " + phAdmin64, "basic " + phAdmin64, "Basic  " + phAdmin64 + " ", "Basic\t" + phAdmin64,
		phBasic, "Basic", "Basic ", "Basic !!!", "Basic b3BzLWFkbWlu", "Basic JXp6OiV6eg==", "Bearer x", "",
		"Basic " + strings.Repeat("QUFB", 3000),
	} {
		f.Add(s)
	}
	admin64 := strings.TrimPrefix(basic(e.Admin.ID, e.Admin.Secret), "Basic ")
	expand := strings.NewReplacer(phAdmin64, admin64, phBasic, basic(e.Normal.ID, e.Normal.Secret))

	f.Fuzz(func(t *testing.T, auth string) {
		auth = expand.Replace(auth)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/subjects/fuzz-subject/tokens", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := e.serve(req)
		switch w.Code {
		case http.StatusNoContent:
			if !presented("", auth, e.Admin.ID, e.Admin.Secret) {
				t.Fatalf("204 for Authorization %q", auth)
			}
		case http.StatusForbidden:
			if !presented("", auth, e.Normal.ID, e.Normal.Secret) && !presented("", auth, e.Gateway.ID, e.Gateway.Secret) &&
				!presented("", auth, e.Short.ID, e.Short.Secret) && !presented("", auth, e.Partner.ID, e.Partner.Secret) {
				t.Fatalf("403 for Authorization %q, which names no client", auth)
			}
		case http.StatusUnauthorized:
			if code := wantOAuthError(t, w); code != "invalid_client" {
				t.Fatalf("401 %q", code)
			}
			if h := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(h, "Basic ") {
				t.Fatalf("401 with WWW-Authenticate %q", h)
			}
			if presented("", auth, e.Admin.ID, e.Admin.Secret) {
				t.Fatalf("the admin's credentials refused: %q", auth)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

// FuzzDecodeIDRoute throws arbitrary path parameters at GET /ids/{id}
// through the engine: 200 exactly for what ParseID accepts, with the ID
// and its parts, else 400 invalid_request; never a 5xx.
func FuzzDecodeIDRoute(f *testing.F) {
	e := newEnv(f)
	for _, s := range []string{"117811659438825472", "0", "1", "9223372036854775807", "9223372036854775808",
		"-1", "01", "+1", " 1", "1 ", "1e3", "0x10", "", "1/2", "%31", "١٢٣", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
		req.URL.Path, req.URL.RawPath = "/ids/"+s, ""
		w := e.serve(req)
		id, perr := snowflakealg.ParseID(s)
		if s == "" || strings.Contains(s, "/") {
			// Not one path segment: not this route's parameter.
			if w.Code == http.StatusOK || w.Code >= 500 {
				t.Fatalf("GET /ids/%q: %d %s", s, w.Code, w.Body)
			}
			return
		}
		switch {
		case perr == nil:
			var p snowflakealg.Parts
			if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.ID != id {
				t.Fatalf("GET /ids/%q: %d %s, want 200 with id %d", s, w.Code, w.Body, id)
			}
			if want, _ := e.IDs.Decompose(id); !p.Time.Equal(want.Time) || p.Worker != want.Worker || p.Sequence != want.Sequence {
				t.Fatalf("GET /ids/%q = %+v, want %+v", s, p, want)
			}
		default:
			if w.Code != http.StatusBadRequest || wantOAuthError(t, w) != "invalid_request" {
				t.Fatalf("GET /ids/%q: %d %s, want 400 invalid_request (ParseID: %v)", s, w.Code, w.Body, perr)
			}
		}
	})
}

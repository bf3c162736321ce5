package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/middlewaretest"
	"github.com/snowtoken/snowtoken/internal/clocktest"
)

// TestAuthorizationOneRule sends the same Authorization headers to the
// issuer's GET /token/validate and to the client module's middleware, in
// each of its modes: both read them by one rule (jwtpolicy.Presented) and
// answer alike. Several Authorization headers are a malformed request, 400
// invalid_request (RFC 6750 §3.1), whatever they hold: the issuer took the
// first of them before, the client answered 401.
func TestAuthorizationOneRule(t *testing.T) {
	t.Parallel()
	const (
		noToken    = `Bearer realm="snowtoken"`
		badRequest = `Bearer realm="snowtoken", error="invalid_request"`
	)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New(time.Now())
			is, v := setup(t, clk, m.opts)
			tok := issue(t, is, "orders:read")
			bearer := middlewaretest.Bearer(tok)
			cases := []struct {
				name      string
				headers   []string // the Authorization headers, in order
				status    int
				challenge string
				code      string
			}{
				{"one bearer", []string{bearer}, http.StatusOK, "", ""},
				{"scheme in lower case", []string{"bearer " + tok}, http.StatusOK, "", ""},
				{"none", nil, http.StatusUnauthorized, noToken, "invalid_token"},
				{"basic", []string{"Basic b3JkZXJzOnNlY3JldA=="}, http.StatusUnauthorized, noToken, "invalid_token"},
				{"scheme alone", []string{"Bearer"}, http.StatusUnauthorized, noToken, "invalid_token"},
				{"empty token", []string{"Bearer  "}, http.StatusUnauthorized, noToken, "invalid_token"},
				{"the same bearer twice", []string{bearer, bearer}, http.StatusBadRequest, badRequest, "invalid_request"},
				{"bearer, then basic", []string{bearer, "Basic b3JkZXJzOnNlY3JldA=="}, http.StatusBadRequest, badRequest, "invalid_request"},
				{"basic, then bearer", []string{"Basic b3JkZXJzOnNlY3JldA==", bearer}, http.StatusBadRequest, badRequest, "invalid_request"},
				{"empty, then bearer", []string{"", bearer}, http.StatusBadRequest, badRequest, "invalid_request"},
				{"bearer, then DPoP", []string{bearer, "DPoP " + tok}, http.StatusBadRequest, badRequest, "invalid_request"},
			}
			h := v.Middleware(middlewaretest.Echo)
			for _, tc := range cases {
				req := httptest.NewRequest(http.MethodGet, "/orders", nil)
				req.Header["Authorization"] = tc.headers
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				checkAnswer(t, "client: "+tc.name, rec.Result(), tc.status, tc.challenge, tc.code)

				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, is.URL+"/token/validate", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header["Authorization"] = tc.headers
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				checkAnswer(t, "issuer: "+tc.name, resp, tc.status, tc.challenge, tc.code)
			}
		})
	}
}

// checkAnswer compares resp, an answer to the request of test case name, with
// the status, WWW-Authenticate and error code it should have, and closes
// its body.
func checkAnswer(t *testing.T, name string, resp *http.Response, status int, challenge, code string) {
	t.Helper()
	defer resp.Body.Close()
	rec := httptest.NewRecorder()
	rec.Code = resp.StatusCode
	if _, err := rec.Body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	got := ""
	if resp.StatusCode != http.StatusOK {
		got = middlewaretest.ErrorCode(t, rec)
	}
	if resp.StatusCode != status || resp.Header.Get("WWW-Authenticate") != challenge || got != code {
		t.Errorf("%s: got %d %q %s, want %d %q %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), rec.Body, status, challenge, code)
	}
}

package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/token"
)

// scopes is n distinct scopes of size bytes each (at least 6), space-separated.
func scopes(n, size int) string {
	list := make([]string, n)
	for i := range list {
		list[i] = fmt.Sprintf("s%0*d", max(size-1, 5), i)
	}
	return strings.Join(list, " ")
}

// issueRequest is POST /token by orders-svc asking for scope.
func (e *env) issueRequest(tb testing.TB, scope string) *http.Request {
	body := url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}.Encode()
	req := httptest.NewRequestWithContext(tb.Context(), http.MethodPost, "/token", strings.NewReader(body))
	req.Header.Set("Content-Type", formType)
	req.Header.Set("Authorization", basic(e.Normal.ID, e.Normal.Secret))
	return req
}

// validateRequest is GET /token/validate?scope=<scope> with tok.
func validateRequest(tb testing.TB, tok, scope string) *http.Request {
	req := httptest.NewRequestWithContext(tb.Context(), http.MethodGet, "/token/validate?"+url.Values{"scope": {scope}}.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// TestScopeLimits: what a client asks for is bounded and parsed only once
// its credentials pass; a refusal is a 400 that quotes at most a short
// prefix of the input.
func TestScopeLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	live := e.issue(t, e.Normal, nil).AccessToken
	bad := live[:len(live)-4] + "AAAA" // the signature no longer verifies
	bomb := scopes(15_000, 3)          // about 100 KB as a form body
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{
		{"issue, 9,000 scopes (63 KB)", e.issueRequest(t, scopes(9_000, 3)), http.StatusBadRequest, "invalid_scope"},
		{"issue, 65 scopes", e.issueRequest(t, scopes(token.MaxScopes+1, 6)), http.StatusBadRequest, "invalid_scope"},
		{"issue, 64 scopes not held", e.issueRequest(t, scopes(token.MaxScopes, 31)), http.StatusBadRequest, "invalid_scope"},
		{"validate, 15,000 scopes", validateRequest(t, live, bomb), http.StatusBadRequest, "invalid_request"},
		{"validate, 64 scopes not held", validateRequest(t, live, scopes(token.MaxScopes, 31)), http.StatusForbidden, "insufficient_scope"},
		{"validate, bad token, 15,000 scopes", validateRequest(t, bad, bomb), http.StatusBadRequest, "invalid_request"},
		{"validate, bad token, 1,000 scopes in 2,000 bytes", validateRequest(t, bad, strings.Repeat("a ", 999)+"a"), http.StatusUnauthorized, "invalid_token"},
		{"validate, 1,000 scopes in 2,000 bytes", validateRequest(t, live, strings.Repeat("a ", 999)+"a"), http.StatusBadRequest, "invalid_request"},
		{"validate, longest query", validateRequest(t, live, strings.Repeat(strings.Repeat(":", 127)+" ", 15)+strings.Repeat(":", 127)), http.StatusForbidden, "insufficient_scope"},
		{"validate, bad token, bad scope", validateRequest(t, bad, "a  b"), http.StatusUnauthorized, "invalid_token"},
		{"validate, no token, bad scope", validateRequest(t, "", "a  b"), http.StatusUnauthorized, "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.serve(tc.req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %.200s", w.Code, tc.status, w.Body)
			}
			if got := wantOAuthError(t, w); got != tc.code {
				t.Errorf("error %q, want %q", got, tc.code)
			}
			if n := w.Body.Len(); n > 300 {
				t.Errorf("a body of %d bytes: %.300s", n, w.Body)
			}
		})
	}
}

// TestScopeBombCost: a request for 15,000 scopes costs no more than twice
// an ordinary request, counted in allocations (the timing is
// BenchmarkScopeLimits').
func TestScopeBombCost(t *testing.T) {
	e := newEnv(t)
	live := e.issue(t, e.Normal, nil).AccessToken
	bad := live[:len(live)-4] + "AAAA"
	bomb, issueBomb := scopes(15_000, 3), scopes(9_000, 3)
	allocs := func(newReq func() *http.Request) float64 {
		return testing.AllocsPerRun(20, func() { e.serve(newReq()) })
	}
	for _, tc := range []struct {
		name           string
		ordinary, bomb func() *http.Request
	}{
		{"issue",
			func() *http.Request { return e.issueRequest(t, "orders:read") },
			func() *http.Request { return e.issueRequest(t, issueBomb) }},
		{"validate",
			func() *http.Request { return validateRequest(t, live, "orders:read") },
			func() *http.Request { return validateRequest(t, live, bomb) }},
		{"validate, bad token",
			func() *http.Request { return validateRequest(t, bad, "orders:read") },
			func() *http.Request { return validateRequest(t, bad, bomb) }},
	} {
		ordinary, b := allocs(tc.ordinary), allocs(tc.bomb)
		if b > 2*ordinary {
			t.Errorf("%s: %v allocations for 15,000 scopes, %v for one: want at most twice", tc.name, b, ordinary)
		}
	}
}

// BenchmarkScopeLimits is the cost of the largest ?scope= and scope
// parameters parsed in full (MaxScopes of 31 bytes: 2 KB), of the smallest
// refused for its count (MaxScopes+1), and of a bomb, against an ordinary
// request.
func BenchmarkScopeLimits(b *testing.B) {
	e := newEnv(b)
	live := e.issue(b, e.Normal, nil).AccessToken
	largest, smallest := scopes(token.MaxScopes, 31), scopes(token.MaxScopes+1, 6)
	issueBomb, validateBomb := scopes(9_000, 3), scopes(15_000, 3)
	for _, bc := range []struct {
		name   string
		newReq func() *http.Request
	}{
		{"issue/ordinary", func() *http.Request { return e.issueRequest(b, "orders:read") }},
		{"issue/largest parsed", func() *http.Request { return e.issueRequest(b, largest) }},
		{"issue/smallest refused", func() *http.Request { return e.issueRequest(b, smallest) }},
		{"issue/9000 scopes", func() *http.Request { return e.issueRequest(b, issueBomb) }},
		{"validate/ordinary", func() *http.Request { return validateRequest(b, live, "orders:read") }},
		{"validate/largest parsed", func() *http.Request { return validateRequest(b, live, largest) }},
		{"validate/smallest refused", func() *http.Request { return validateRequest(b, live, smallest) }},
		{"validate/15000 scopes", func() *http.Request { return validateRequest(b, live, validateBomb) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				req := bc.newReq()
				b.StartTimer()
				e.serve(req)
			}
		})
	}
}

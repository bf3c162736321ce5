// Package middlewaretest helps test handlers behind client.Validator's
// middleware: send a request with an Authorization header, read the RFC 6750
// error code of a refusal, and a handler that echoes the claims the
// middleware passed on. The client module's tests and the issuer's system
// tests (e2e/) share it, and a consuming service may use it too.
package middlewaretest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/snowtoken/snowtoken/client"
)

// Echo answers with the claims the middleware passed on, as JSON, or 500
// when there are none.
var Echo http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, ok := client.ClaimsFrom(r.Context())
	if !ok {
		http.Error(w, "no claims in the context", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(c)
})

// Get sends GET /orders to h with the given Authorization header value
// (none when empty) and returns what h answered.
func Get(h http.Handler, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/orders", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Bearer is the Authorization header value of a bearer token.
func Bearer(tok string) string { return "Bearer " + tok }

// ErrorCode returns the error member of the JSON body of rec (RFC 6749
// §5.2, RFC 6750 §3.1), failing tb when the body is not such JSON.
func ErrorCode(tb testing.TB, rec *httptest.ResponseRecorder) string {
	tb.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatalf("error body %q: %v", rec.Body, err)
	}
	return body.Error
}

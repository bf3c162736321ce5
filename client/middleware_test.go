package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// TestWriteErrorDescriptions: a refused token is described in one phrase,
// never with the chain of Go errors behind it.
func TestWriteErrorDescriptions(t *testing.T) {
	t.Parallel()
	_, v := fakeIssuer(t, func(http.ResponseWriter, *http.Request) {})
	req := httptest.NewRequest(http.MethodGet, "/orders", nil)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %w", client.ErrInvalidToken, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, jwt.ErrTokenExpired)), "the token has expired"},
		{fmt.Errorf("%w: %w", client.ErrInvalidToken, fmt.Errorf("%w: %w", jwt.ErrTokenSignatureInvalid, errors.New("ed25519: verification error"))), "the signature does not verify"},
		{fmt.Errorf("%w: audience mismatch: the token is for %q, this service is %q", client.ErrInvalidToken, "a", "b"), "audience mismatch"},
		{fmt.Errorf("%w: %w", client.ErrInvalidRequest, jwtpolicy.ErrAuthorizations), "more than one Authorization header"},
		{fmt.Errorf("%w: %w", client.ErrInvalidToken, errors.New("something: deep: inside")), "something"},
	} {
		rec := httptest.NewRecorder()
		v.WriteError(rec, req, tc.err)
		var body struct {
			ErrorDescription string `json:"error_description"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if body.ErrorDescription != tc.want || strings.Contains(rec.Body.String(), "client:") {
			t.Errorf("WriteError(%v): description %q, want %q", tc.err, body.ErrorDescription, tc.want)
		}
	}
}

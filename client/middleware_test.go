package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	now := time.Now()
	f := newFakeJWKS(t)
	_, audErr := localValidator(t, f, now, client.Options{Audience: "billing"}).Validate(t.Context(), f.sign(t, f.claims(now, "", "orders")))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %w", client.ErrInvalidToken, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, jwt.ErrTokenExpired)), "the token has expired"},
		{fmt.Errorf("%w: %w", client.ErrInvalidToken, fmt.Errorf("%w: %w", jwt.ErrTokenSignatureInvalid, errors.New("ed25519: verification error"))), "the signature does not verify"},
		{audErr, "audience mismatch"},
		{fmt.Errorf("%w: %w", client.ErrInvalidRequest, jwtpolicy.ErrAuthorizations), "more than one Authorization header"},
		// A library's error carries no description: its kind's fixed text.
		{fmt.Errorf("%w: %w", client.ErrInvalidToken, errors.New("something: deep: inside")), "the token is not valid"},
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

// TestWriteErrorDescriptionNoLeak: an error of each kind that carries no
// description of its own, whatever its text says (an address, a library's
// words), is answered with its kind's fixed text: the text of an error
// never becomes an answer.
func TestWriteErrorDescriptionNoLeak(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-10.0.0.7:6379"
	_, v := fakeIssuer(t, func(http.ResponseWriter, *http.Request) {})
	req := httptest.NewRequest(http.MethodGet, "/orders", nil)
	for _, row := range []struct {
		kind error
		want string
	}{
		{client.ErrInvalidToken, "the token is not valid"},
		{client.ErrInsufficientScope, "the token lacks a required scope"},
		{client.ErrInvalidRequest, "malformed request"},
		{client.ErrInvalidProof, "the DPoP proof is not valid"},
		{client.ErrNoToken, "send Authorization: Bearer <token>"},
		{client.ErrUnavailable, "the token issuer cannot be reached; retry later"},
		{errors.New("elsewhere: not ours"), "internal error"},
	} {
		for _, err := range []error{
			fmt.Errorf("%w: %s", row.kind, secret),
			fmt.Errorf("%w: %s: deeper", row.kind, secret),
			fmt.Errorf("%w: %w", row.kind, fmt.Errorf("redis: dial %s: %w", secret, errors.New("refused"))),
			fmt.Errorf("%w: dpop: %s", row.kind, secret),
			fmt.Errorf("%w: jwtpolicy: %s", row.kind, secret),
		} {
			rec := httptest.NewRecorder()
			v.WriteError(rec, req, err)
			var body struct {
				ErrorDescription string `json:"error_description"`
			}
			if jerr := json.Unmarshal(rec.Body.Bytes(), &body); jerr != nil {
				t.Fatal(jerr)
			}
			if body.ErrorDescription != row.want || strings.Contains(rec.Body.String(), "s3cr3t") {
				t.Errorf("WriteError(%q): %s; want the description %q", err, rec.Body.String(), row.want)
			}
		}
	}
}

package jwtpolicy_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// TestPresented: the one rule by which the issuer and the client module
// read a presented token (e2e's TestAuthorizationOneRule runs both).
func TestPresented(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		headers []string
		raw     string
		isDPoP  bool
		err     error
	}{
		{[]string{"Bearer a.b.c"}, "a.b.c", false, nil},
		{[]string{"bearer  a.b.c "}, "a.b.c", false, nil},
		{[]string{"DPoP a.b.c"}, "a.b.c", true, nil},
		{[]string{"dpop a.b.c"}, "a.b.c", true, nil},
		{nil, "", false, jwtpolicy.ErrNoToken},
		{[]string{""}, "", false, jwtpolicy.ErrNoToken},
		{[]string{"Bearer"}, "", false, jwtpolicy.ErrNoToken},
		{[]string{"Bearer  "}, "", false, jwtpolicy.ErrNoToken},
		{[]string{"Basic b3JkZXJzOnNlY3JldA=="}, "", false, jwtpolicy.ErrNoToken},
		{[]string{"Bearera.b.c"}, "", false, jwtpolicy.ErrNoToken},
		{[]string{"Bearer a.b.c", "Bearer a.b.c"}, "", false, jwtpolicy.ErrAuthorizations},
		{[]string{"", "Bearer a.b.c"}, "", false, jwtpolicy.ErrAuthorizations},
		{[]string{"Basic eDp5", "DPoP a.b.c"}, "", false, jwtpolicy.ErrAuthorizations},
	} {
		raw, isDPoP, err := jwtpolicy.Presented(http.Header{"Authorization": tc.headers})
		if raw != tc.raw || isDPoP != tc.isDPoP || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("Presented(%q) = %q, %v, %v; want %q, %v, %v", tc.headers, raw, isDPoP, err, tc.raw, tc.isDPoP, tc.err)
		}
	}
}

// TestCheckBinding: the DPoP binding rule of the issuer and the client
// module alike.
func TestCheckBinding(t *testing.T) {
	t.Parallel()
	const jkt, other = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I", "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
	for _, tc := range []struct {
		jkt      string
		asDPoP   bool
		proofKey string
		want     error
	}{
		{"", false, "", nil},
		{jkt, true, jkt, nil},
		{"", true, jkt, jwtpolicy.ErrNotBound},
		{"", true, "", jwtpolicy.ErrNotBound},
		{jkt, false, "", jwtpolicy.ErrBound},
		{jkt, false, jkt, jwtpolicy.ErrBound},
		{jkt, true, other, jwtpolicy.ErrProofKey},
		{jkt, true, "", jwtpolicy.ErrProofKey}, // no proof key: never a pass
	} {
		if err := jwtpolicy.CheckBinding(tc.jkt, tc.asDPoP, tc.proofKey); err != tc.want {
			t.Errorf("CheckBinding(%q, %v, %q) = %v, want %v", tc.jkt, tc.asDPoP, tc.proofKey, err, tc.want)
		}
	}
	if jwtpolicy.TokenType(jkt) != "DPoP" || jwtpolicy.TokenType("") != "Bearer" {
		t.Errorf("TokenType: %q and %q, want DPoP and Bearer", jwtpolicy.TokenType(jkt), jwtpolicy.TokenType(""))
	}
}

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

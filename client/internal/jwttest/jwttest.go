// Package jwttest forges JWTs for tests: one call signs any claims under any
// header with any method and key, including alg none and HMAC keyed with a
// public key, as an attacker would. It is the client module's one forging
// helper; the root module has its own twin (internal/jwttest),
// because neither module may import the other's internal packages.
package jwttest

import (
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// Omit, as the value of a header member given to Sign, removes the member.
var Omit any = omit{}

type omit struct{}

// Sign returns claims signed with key by method, under the header golang-jwt
// writes (alg, typ "JWT") with the members of header copied over it: a member
// set to Omit is removed, a nil one is written as null, and an alg member
// replaces the method's name (to make a header lie). With
// jwt.SigningMethodNone the key is ignored and the signature is empty. It
// fails tb when signing fails.
func Sign(tb testing.TB, method jwt.SigningMethod, key any, header map[string]any, claims jwt.Claims) string {
	tb.Helper()
	t := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		if v == Omit {
			delete(t.Header, k)
			continue
		}
		t.Header[k] = v
	}
	if method == jwt.SigningMethodNone {
		key = jwt.UnsafeAllowNoneSignatureType
	}
	s, err := t.SignedString(key)
	if err != nil {
		tb.Fatalf("jwttest: sign %s: %v", method.Alg(), err)
	}
	return s
}

// Package jwtpolicy is the one statement of what makes a snowtoken access
// token acceptable, shared by the issuer (package token) and the services that
// verify tokens themselves (package client), so that the two never drift
// apart. It depends on golang-jwt only, not on Redis.
package jwtpolicy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Type is the JWT typ of an access token (RFC 9068).
const Type = "at+jwt"

// ErrType is returned by CheckType for any other typ.
var ErrType = errors.New("jwtpolicy: wrong token type")

// ParserOptions accepts only EdDSA, requires exp, checks iss, iat and exp with
// leeway at now, and aud when audience is set.
func ParserOptions(issuer, audience string, leeway time.Duration, now func() time.Time) []jwt.ParserOption {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithLeeway(leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
	}
	if audience != "" {
		opts = append(opts, jwt.WithAudience(audience))
	}
	return opts
}

// CheckType accepts the typ "at+jwt" or "application/at+jwt", in any case.
func CheckType(t *jwt.Token) error {
	typ, _ := t.Header["typ"].(string)
	if !strings.EqualFold(typ, Type) && !strings.EqualFold(typ, "application/"+Type) {
		return fmt.Errorf("%w: typ %.32q, want %s", ErrType, typ, Type)
	}
	return nil
}

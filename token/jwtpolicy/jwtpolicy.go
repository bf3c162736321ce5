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

	jsonv2 "github.com/go-json-experiment/json"
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

// Errors of Claims.
var (
	ErrDateType = errors.New("jwtpolicy: a date claim must be a JSON number")
	ErrNoIAT    = errors.New("jwtpolicy: iat is required")
)

// Claims are the claims of an access token as the issuer writes them:
//
//	{"iss","sub","aud"?,"client_id","scope"?,"iat","exp","jti"}
//
// They decode strictly, so that a claim means one thing to every reader:
// member names match exactly, case included ("iAt" is not iat, which
// encoding/json would take for it), a name given twice is an error, and a
// date (exp, iat, nbf) must be a JSON number, as RFC 7519 §2 defines
// NumericDate (golang-jwt alone accepts "123" in quotes). A date given as
// null is as good as absent.
type Claims struct {
	jwt.RegisteredClaims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope,omitempty"`
}

// UnmarshalJSON decodes the claims in one pass with encoding/json/v2
// semantics (github.com/go-json-experiment/json), each date through
// numericDate.
func (c *Claims) UnmarshalJSON(b []byte) error {
	type plain Claims // the fields without this method
	var w struct {
		plain
		// Shallower than the embedded fields of the same names, so they win.
		ExpiresAt *numericDate `json:"exp"`
		NotBefore *numericDate `json:"nbf"`
		IssuedAt  *numericDate `json:"iat"`
	}
	if err := jsonv2.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Claims(w.plain)
	c.ExpiresAt, c.NotBefore, c.IssuedAt = w.ExpiresAt.date(), w.NotBefore.date(), w.IssuedAt.date()
	return nil
}

// Validate requires iat, which golang-jwt checks only when present; the
// parser calls it after its own checks, unless claims validation is off.
// exp and iss are required by ParserOptions.
func (c *Claims) Validate() error {
	if c.IssuedAt == nil {
		return ErrNoIAT
	}
	return nil
}

// numericDate is a jwt.NumericDate that must be written as a JSON number.
type numericDate jwt.NumericDate

func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return ErrDateType
	}
	return (*jwt.NumericDate)(d).UnmarshalJSON(b)
}

func (d *numericDate) date() *jwt.NumericDate { return (*jwt.NumericDate)(d) }

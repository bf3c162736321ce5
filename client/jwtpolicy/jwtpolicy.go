// Package jwtpolicy is the one statement of what makes a snowtoken access
// token acceptable, shared by the issuer (package token) and the services that
// verify tokens themselves (package client), so that the two never drift
// apart. It lives in the client module, so it depends on the standard
// library, golang-jwt and bitsalloc (the Snowflake ID's syntax) only.
package jwtpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/txntoken"
)

// Type is the JWT typ of an access token (RFC 9068).
const Type = "at+jwt"

// ErrType is returned by CheckType for any other typ.
var ErrType error = refusal.Sentinel("jwtpolicy", "wrong token type")

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
// A Transaction Token (typ txntoken+jwt) is refused saying what it is: it
// is never an access token (draft-ietf-oauth-transaction-tokens-10), and
// travels in the Txn-Token header.
func CheckType(t *jwt.Token) error {
	typ, _ := t.Header["typ"].(string)
	switch {
	case strings.EqualFold(typ, txntoken.Type) || strings.EqualFold(typ, "application/"+txntoken.Type):
		return refusal.New(ErrType, "a Txn-Token is not an access token (send it in the %s header, never in Authorization)", txntoken.Header)
	case !strings.EqualFold(typ, Type) && !strings.EqualFold(typ, "application/"+Type):
		return refusal.New(ErrType, "typ %.32q, want %s", typ, Type)
	}
	return nil
}

// Errors of Claims.
var (
	ErrDateType  = errors.New("jwtpolicy: a date claim must be a JSON number")
	ErrNoIAT     = errors.New("jwtpolicy: iat is required")
	ErrSyntax    = errors.New("jwtpolicy: claims must be one JSON object in UTF-8")
	ErrDuplicate = errors.New("jwtpolicy: a member name is given twice")
)

// Claims are the claims of an access token as the issuer writes them:
//
//	{"iss","sub","aud"?,"client_id","scope"?,"iat","exp","jti","cnf"?,
//	 "act"?,"may_act"?,"parents"?}     the last three: an exchanged token's (chain.go)
//
// They decode strictly, so that a claim means one thing to every reader:
// member names match exactly, case included ("iAt" is not iat, which
// encoding/json would take for it), a name given twice is an error (at any
// depth), the text must be valid UTF-8, and a date (exp, iat, nbf) must be a
// JSON number, as RFC 7519 §2 defines NumericDate (golang-jwt alone accepts
// "123" in quotes). A date given as null is as good as absent. The chain
// claims are checked as they decode: an act or may_act is an object with
// a sub, nested at most MaxChain deep; parents an array of at most
// MaxChain objects, each with a jti the issuer writes, a client_id and an
// integer iat; null for any of them is an error, not an absence. Claims as
// the issuer writes them decode without encoding/json, to the same result.
type Claims struct {
	jwt.RegisteredClaims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope,omitempty"`
	// Confirmation is the token's cnf (RFC 7800): a token with a jkt is
	// bound to that DPoP key (RFC 9449 §6) and counts only with a proof
	// signed by it. A cnf without a jkt does not decode: a token bound by a
	// method this package does not know must not pass for a bearer token.
	Confirmation Confirmation `json:"cnf,omitzero"`
	// Act and MayAct are an exchanged token's actor and who may act for
	// its subject (RFC 8693 §4.1, §4.4), nested at most MaxChain deep.
	Act    *Actor `json:"act,omitempty"`
	MayAct *Actor `json:"may_act,omitempty"`
	// Parents are the snowtoken tokens an exchanged token derives from,
	// nearest first: the subject token, then its parents; at most
	// MaxChain. The token is revoked when it or any of them is (the
	// cascade rule, package revocation).
	Parents []Parent `json:"parents,omitempty"` // nearest first: the subject token, then its parents
}

// Confirmation is a token's cnf claim.
type Confirmation struct {
	// JKT is the RFC 7638 thumbprint (base64url SHA-256) of the DPoP key
	// the token is bound to.
	JKT string `json:"jkt,omitempty"`
}

// ErrConfirmation: a cnf claim that is not an object holding a jkt string.
var ErrConfirmation = errors.New("jwtpolicy: cnf must be an object with a jkt")

// UnmarshalJSON decodes the claims. Claims in the shape the issuer writes
// take decodeIssued, a single pass with no encoding/json; anything else,
// and anything decodeIssued is unsure of, takes decodeStrict, which alone
// defines what is accepted and every error (FuzzClaimsDecoders holds the
// first to the second).
func (c *Claims) UnmarshalJSON(b []byte) error {
	if decodeIssued(b, c) {
		return nil
	}
	return c.decodeStrict(b)
}

// decodeStrict decodes the claims in one pass over encoding/json's tokens,
// each known member into its field and each date through numericDate.
//
// It is hand-written because encoding/json/v2, which has these semantics
// built in (exact names, no duplicates, valid UTF-8), is still behind
// GOEXPERIMENT=jsonv2 in Go 1.26, and it predates go-json-experiment in the
// client module (client/dpop brought it); FuzzClaimsDecoders holds it.
func (c *Claims) decodeStrict(b []byte) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: invalid UTF-8", ErrSyntax)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%w: does not start with {", ErrSyntax)
	}
	var out Claims
	err := members(dec, func(name string) error {
		switch name {
		case "iss":
			return dec.Decode(&out.Issuer)
		case "sub":
			return dec.Decode(&out.Subject)
		case "aud":
			return dec.Decode(&out.Audience)
		case "jti":
			return dec.Decode(&out.ID)
		case "client_id":
			return dec.Decode(&out.ClientID)
		case "scope":
			return dec.Decode(&out.Scope)
		case "exp":
			return decodeDate(dec, &out.ExpiresAt)
		case "nbf":
			return decodeDate(dec, &out.NotBefore)
		case "iat":
			return decodeDate(dec, &out.IssuedAt)
		case "cnf":
			return decodeConfirmation(dec, &out.Confirmation)
		case "act":
			var err error
			out.Act, err = decodeActor(dec, 0)
			return err
		case "may_act":
			var err error
			out.MayAct, err = decodeActor(dec, 0)
			return err
		case "parents":
			var err error
			out.Parents, err = decodeParents(dec)
			return err
		}
		return skipValue(dec)
	})
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: more after the object", ErrSyntax)
	}
	*c = out
	return nil
}

// members reads the members of an object whose { dec has just read, up to
// and including its }, calling value for each name to read its value. A
// name given twice is ErrDuplicate.
func members(dec *json.Decoder, value func(name string) error) error {
	seen := make(map[string]bool)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string) // encoding/json gives a member name as a string
		if seen[name] {
			return fmt.Errorf("%w: %.32q", ErrDuplicate, name)
		}
		seen[name] = true
		if err := value(name); err != nil {
			return fmt.Errorf("jwtpolicy: member %.32q: %w", name, err)
		}
	}
	_, err := dec.Token() // the }
	return err
}

// skipValue reads the next value, whatever it is, still refusing a name
// given twice in any object within it.
func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		return members(dec, func(string) error { return skipValue(dec) })
	case json.Delim('['):
		for dec.More() {
			if err := skipValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token() // the ]
		return err
	}
	return nil
}

// decodeConfirmation reads a cnf: an object whose jkt is a non-empty
// string; its other members are skipped (strictly), as a claim's are.
func decodeConfirmation(dec *json.Decoder, cnf *Confirmation) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ErrConfirmation
	}
	err := members(dec, func(name string) error {
		if name == "jkt" {
			return dec.Decode(&cnf.JKT)
		}
		return skipValue(dec)
	})
	if err != nil {
		return err
	}
	if cnf.JKT == "" {
		return ErrConfirmation
	}
	return nil
}

// decodeDate reads a date that must be a JSON number or null.
func decodeDate(dec *json.Decoder, d **jwt.NumericDate) error {
	var n *numericDate
	if err := dec.Decode(&n); err != nil {
		return err
	}
	*d = n.date()
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

// Package txntoken is the one statement of a Transaction Token (Txn-Token)
// as snowtoken writes and reads it, after draft-ietf-oauth-transaction-tokens-10
// (29 July 2026): its JWT header type, its claims and how they decode, its
// HTTP header, and the rule that verifies one (Parse). The issuer (package
// token/txn) mints with these types and the client module's middleware
// (client.TxnVerifier) verifies with them, so the two cannot drift apart.
// It depends on the standard library, golang-jwt and go-json-experiment only.
//
// A Txn-Token carries the subject of a call and its context through a call
// chain inside one trust domain (aud): short-lived, signed with the issuer's
// key (EdDSA, verified with its JWKS), sent from workload to workload in the
// Txn-Token request header, never in Authorization. It is not a credential
// (draft §Security Considerations): a workload that receives one still
// authenticates its caller by other means (mTLS, the caller's own token).
package txntoken

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
)

// Draft names the version of the Transaction Tokens draft this package
// implements.
const Draft = "draft-ietf-oauth-transaction-tokens-10"

// Type is the JWT typ of a Txn-Token (draft §JWT Header; media type
// application/txntoken+jwt).
const Type = "txntoken+jwt"

// Header is the HTTP request header a Txn-Token travels in, from one
// workload to the next (draft §"Txn-Token" HTTP Header): exactly one token.
const Header = "Txn-Token"

// TokenType is the token type URN of a Txn-Token in an OAuth 2.0 token
// exchange (RFC 8693 requested_token_type and issued_token_type).
const TokenType = "urn:ietf:params:oauth:token-type:txn_token"

// MaxLen bounds the Txn-Tokens looked at.
const MaxLen = 4096

// Errors of Parse and Claims, wrapped with detail; match them with errors.Is.
var (
	// ErrMalformed: not a compact JWS, or claims that do not decode.
	ErrMalformed = errors.New("txntoken: malformed Txn-Token")
	// ErrType: a JWT whose typ is not txntoken+jwt, such as an access token.
	ErrType = errors.New("txntoken: not a Txn-Token (typ)")
	// ErrInvalid: a bad signature, an unknown key, a wrong aud, an
	// expired token or a required claim missing.
	ErrInvalid = errors.New("txntoken: invalid Txn-Token")
)

// Claims are a Txn-Token's claims (draft §JWT Body Claims). They decode
// strictly, as jwtpolicy.Claims do: member names match exactly, case
// included, a name given twice is an error, the text must be valid UTF-8,
// and a date must be a JSON number (an integer here, as the issuer writes
// it). Members this package does not know are ignored, as the draft says
// recipients must.
type Claims struct {
	// Issuer (iss) is optional in the draft; the issuer writes its own.
	Issuer string `json:"iss,omitempty"`
	// IssuedAt and ExpiresAt are iat and exp, in Unix seconds.
	IssuedAt  int64 `json:"iat"`
	ExpiresAt int64 `json:"exp"`
	// Audience (aud) is the trust domain the token is valid in: one string.
	Audience string `json:"aud"`
	// Txn identifies the transaction across the whole call chain: a
	// Snowflake ID in decimal, kept by every replacement.
	Txn string `json:"txn"`
	// Subject (sub) is the principal of the transaction: the subject of
	// the access token it was minted from.
	Subject string `json:"sub"`
	// Scope is what the transaction may do, its scopes separated by
	// spaces: never more than the access token it was minted from held.
	Scope string `json:"scope"`
	// Workload (req_wl) names the workload that requested the token.
	Workload string `json:"req_wl"`
	// Transaction (tctx) holds what stays the same along the call chain.
	Transaction *TransactionContext `json:"tctx,omitempty"`
	// Request (rctx) describes the request that started the transaction.
	Request *RequestContext `json:"rctx,omitempty"`
}

// TransactionContext is a Txn-Token's tctx: what the issuer asserts of the
// transaction, immutable along the call chain.
type TransactionContext struct {
	// ClientID is the client the access token behind the transaction was
	// issued to.
	ClientID string `json:"client_id"`
	// Actor is the access token's act claim (RFC 8693 §4.1), if any: the
	// party acting for the subject.
	Actor *Actor `json:"act,omitempty"`
}

// Actor is an act claim (RFC 8693 §4.1): the party acting for the subject;
// Act is the actor before it, newest outermost. It is the one type of the
// claim: jwtpolicy.Actor, an access token's act and may_act, is this type.
type Actor struct {
	Subject  string `json:"sub"`
	Issuer   string `json:"iss,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Act      *Actor `json:"act,omitempty"`
}

// Clone returns a deep copy of a, nil for nil: for a holder of shared
// claims that hands out copies.
func (a *Actor) Clone() *Actor {
	if a == nil {
		return nil
	}
	c := *a
	c.Act = a.Act.Clone()
	return &c
}

// RequestContext is a Txn-Token's rctx: the environment of the request
// that started the transaction, as far as the issuer knows it from a party
// it trusts. Every member is optional.
type RequestContext struct {
	// IP (req_ip) is the address of the original caller, the draft's own
	// member.
	IP string `json:"req_ip,omitempty"`
	// Transport is "http" or "https": how the original request came.
	Transport string `json:"transport,omitempty"`
	// Method and Path are the original request's method and path (no
	// query), as the gateway names them.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
}

// claimsWire is Claims without its methods, for jsonv2.
type claimsWire Claims

// UnmarshalJSON decodes the claims strictly (see Claims).
func (c *Claims) UnmarshalJSON(b []byte) error {
	var w claimsWire
	if err := jsonv2.Unmarshal(b, &w, jsonv2.RejectUnknownMembers(false)); err != nil {
		return fmt.Errorf("%w: claims: %w", ErrMalformed, err)
	}
	*c = Claims(w)
	return nil
}

// MarshalJSON encodes the claims.
func (c Claims) MarshalJSON() ([]byte, error) { return jsonv2.Marshal(claimsWire(c)) }

// The methods of jwt.Claims, so that golang-jwt checks exp, iat and aud.

// GetExpirationTime is exp.
func (c *Claims) GetExpirationTime() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.ExpiresAt, 0)), nil
}

// GetIssuedAt is iat.
func (c *Claims) GetIssuedAt() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.IssuedAt, 0)), nil
}

// GetNotBefore is none: a Txn-Token has no nbf.
func (c *Claims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuer is iss.
func (c *Claims) GetIssuer() (string, error) { return c.Issuer, nil }

// GetSubject is sub.
func (c *Claims) GetSubject() (string, error) { return c.Subject, nil }

// GetAudience is aud, the trust domain.
func (c *Claims) GetAudience() (jwt.ClaimStrings, error) { return jwt.ClaimStrings{c.Audience}, nil }

// Scopes returns the token's scopes.
func (c *Claims) Scopes() []string { return strings.Fields(c.Scope) }

// Check reports whether the claims the draft requires are all there: iat,
// exp after iat, aud, txn, sub, scope and req_wl.
func (c *Claims) Check() error {
	switch {
	case c.IssuedAt <= 0 || c.ExpiresAt <= c.IssuedAt:
		return refusal.New(ErrInvalid, "iat and exp are required, exp after iat")
	case c.Audience == "" || c.Txn == "" || c.Subject == "" || c.Workload == "":
		return refusal.New(ErrInvalid, "aud, txn, sub and req_wl are required")
	case c.Scope == "":
		return refusal.New(ErrInvalid, "scope is required")
	}
	return nil
}

// Keys finds the public key of a kid: the issuer's JWKS, as a cache of it
// holds it. An error that is not ErrInvalid (the keys could not be
// fetched) is returned by Parse as it is.
type Keys func(kid string) (ed25519.PublicKey, error)

// ParseOptions say what Parse accepts.
type ParseOptions struct {
	// TrustDomain is the aud a token must carry. Required.
	TrustDomain string
	// Leeway allows for clock skew on exp and iat.
	Leeway time.Duration
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
}

// Parse verifies raw as a Txn-Token and returns its claims: a compact JWS
// of at most MaxLen bytes, typ txntoken+jwt (checked before any key is
// looked up), alg EdDSA alone, signed by the key its kid names in keys,
// aud the trust domain, not expired, iat not in the future, every required
// claim there (Claims.Check). Errors wrap ErrMalformed, ErrType or
// ErrInvalid, or are keys' own.
func Parse(raw string, keys Keys, opts ParseOptions) (*Claims, error) {
	if opts.TrustDomain == "" {
		return nil, fmt.Errorf("%w: no trust domain to check aud against", ErrInvalid)
	}
	if err := CheckType(raw); err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	p := jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithAudience(opts.TrustDomain),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(opts.Leeway), jwt.WithTimeFunc(now))
	var c Claims
	var keyErr error
	_, err := p.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, fmt.Errorf("%w: no kid", ErrInvalid)
		}
		k, err := keys(kid)
		keyErr = err
		return k, err
	})
	switch {
	case keyErr != nil && !errors.Is(keyErr, ErrInvalid):
		return nil, keyErr
	case errors.Is(err, ErrMalformed):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return &c, nil
}

// CheckType reports whether raw is shaped as a JWT whose header says typ
// txntoken+jwt (or application/txntoken+jwt, in any case). It verifies
// nothing: it tells a Txn-Token from an access token before any key is
// looked at (ErrType), and anything else (ErrMalformed).
func CheckType(raw string) error {
	if len(raw) > MaxLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	typ, ok := HeaderType(raw)
	switch {
	case !ok:
		return fmt.Errorf("%w: not a compact JWS", ErrMalformed)
	case !strings.EqualFold(typ, Type) && !strings.EqualFold(typ, "application/"+Type):
		return fmt.Errorf("%w: typ %.32q, want %s", ErrType, typ, Type)
	}
	return nil
}

// HeaderType returns the typ of raw's JOSE header, and whether raw is
// shaped as a compact JWS whose header decodes: what tells a Txn-Token
// sent where an access token belongs (Authorization), before any key is
// looked at.
func HeaderType(raw string) (string, bool) {
	head, rest, ok := strings.Cut(raw, ".")
	if !ok || head == "" || strings.Count(rest, ".") != 1 || len(head) > MaxLen {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	var h struct {
		Typ string `json:"typ"`
	}
	if jsonv2.Unmarshal(b, &h) != nil {
		return "", false
	}
	return h.Typ, true
}

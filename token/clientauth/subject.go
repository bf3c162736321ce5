package clientauth

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// SubjectToken is a JWT that VerifySubjectToken accepted: the claims token
// exchange decides from (package token's Exchange). An issuer the operator
// trusts made it for a subject, such as a workload's projected
// service-account token, and the client trades it for a token of ours.
type SubjectToken struct {
	Issuer, Subject string
	// Scope is its scope claim (RFC 8693 §4.2, space-separated) as it is,
	// "" for none.
	Scope string
	// JKT is its cnf.jkt (a DPoP-bound token), "" for none.
	JKT                 string
	IssuedAt, ExpiresAt time.Time
	// Act and MayAct are its act and may_act (RFC 8693 §4.1, §4.4), nil
	// for none.
	Act, MayAct *jwtpolicy.Actor
}

// VerifySubjectToken checks raw, a JWT that the client audience sends as
// a subject token of token exchange (RFC 8693 §3's subject_token_type
// urn:ietf:params:oauth:token-type:jwt), against issuers, the
// issuers that client trusts (a clients file's subject_token_issuers), in
// this order, each failure refusing it:
//
//	size ≤ MaxAssertionBytes → header: alg in Algorithms, kid a string → iss exactly
//	one of issuers → the key: that issuer's (Fetcher, as for a workload identity:
//	cached, the address rules) → signature → claims, strictly (jwtpolicy.Claims: a
//	name once, dates as numbers, act and may_act in shape) → aud names audience,
//	exp (required), nbf, iat (required), with Leeway → exp − iat and exp − now
//	≤ MaxWorkloadLifetime → sub one line of at most 512 bytes
//
// Its jti is not single-use, as a workload identity token's is not (see
// WorkloadIdentity): what it is worth is bounded by its audience (the
// client that exchanges it) and its lifetime. A refusal's description
// says why and names no key material; a key server that cannot answer is
// ErrFetch.
func (v *Verifier) VerifySubjectToken(ctx context.Context, issuers []TrustedIssuer, audience, raw string) (SubjectToken, error) {
	if len(raw) > MaxAssertionBytes {
		return SubjectToken{}, refusal.New(ErrTooLarge, "the token is longer than %d bytes", MaxAssertionBytes)
	}
	now := v.opts.Now()
	var claims jwtpolicy.Claims // filled in before the keyfunc runs
	names := jwtNames{"the token", fmt.Sprintf("the requesting client, %q", audience)}
	err := v.parse(raw, names, now, &claims, func(kid, alg string) (any, error) {
		i := slices.IndexFunc(issuers, func(ti TrustedIssuer) bool { return ti.Issuer == claims.Issuer })
		if i < 0 {
			return nil, refusal.New(ErrClaims, "the token's iss %.64q is not an issuer this client trusts (subject_token_issuers)", claims.Issuer)
		}
		return v.fetchedKey(ctx, issuers[i].source(), kid, alg)
	}, jwt.WithAudience(audience))
	if err != nil {
		return SubjectToken{}, err
	}
	if err := v.checkWorkload(claims.RegisteredClaims, now); err != nil {
		return SubjectToken{}, err
	}
	if !isSubject(claims.Subject) {
		return SubjectToken{}, refusal.New(ErrClaims, "the token's sub must be one line of at most %d bytes", maxSubjectLen)
	}
	return SubjectToken{Issuer: claims.Issuer, Subject: claims.Subject, Scope: claims.Scope, JKT: claims.Confirmation.JKT,
		IssuedAt: claims.IssuedAt.Time, ExpiresAt: claims.ExpiresAt.Time, Act: claims.Act, MayAct: claims.MayAct}, nil
}

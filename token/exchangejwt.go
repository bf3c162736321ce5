package token

import (
	"context"
	"errors"
	"time"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// SubjectJWTs verifies a subject token of type TokenTypeJWT for the client
// audience against the issuers it trusts: clientauth.Verifier, which the
// HTTP layer keeps across reloads with its cache of fetched key sets.
type SubjectJWTs interface {
	VerifySubjectToken(ctx context.Context, issuers []clientauth.TrustedIssuer, audience, raw string) (clientauth.SubjectToken, error)
}

// subject is what Exchange decides from: the subject token's claims,
// whatever its type.
type subject struct {
	sub, jkt    string
	scopes      []string
	exp         time.Time
	act, mayAct *jwtpolicy.Actor
	// parents are the new token's: the subject token and its own parents
	// for a token of this issuer; none for a JWT of another, which has no
	// session here to revoke.
	parents []jwtpolicy.Parent
	iss     string // a JWT's iss; "" for a token of this issuer
}

// exchangeSubject is the subject token of req, an exchange by c with the
// clients cs in force, as Exchange decides from it: an access token of
// this issuer (subjectToken), or a JWT of another (jwtSubject).
func (s *Service) exchangeSubject(ctx context.Context, cs *clients.Registry, c *clients.Client, req ExchangeRequest) (subject, error) {
	if req.SubjectTokenType == TokenTypeJWT {
		return s.jwtSubject(ctx, c, req)
	}
	v, err := s.subjectToken(ctx, cs, c, req.SubjectToken)
	if err != nil {
		return subject{}, err
	}
	parents := append([]jwtpolicy.Parent{{ID: v.JTI(), ClientID: v.ClientID(), IssuedAt: v.IssuedAt().Unix(),
		Opaque: isOpaque(req.SubjectToken)}}, v.claims.Parents...)
	return subject{sub: v.Subject(), jkt: v.JKT(), scopes: v.scopes, exp: v.ExpiresAt(),
		act: v.claims.Act, mayAct: v.claims.MayAct, parents: parents}, nil
}

// jwtSubject is the subject token of req, an exchange by c, of type
// TokenTypeJWT: a JWT that req.JWTs accepts from an issuer c trusts
// (clients.Client.SubjectTokenIssuers) naming c in its aud
// (clientauth.Verifier.VerifySubjectToken: signature, exp, iat, nbf,
// lifetime), and then one a token of ours can stand for:
//
//   - not of this issuer: a token of ours is exchanged as an access token,
//     which the verdict judges (revocation, its client's standing);
//   - no act: the actors another issuer names are not ours to vouch for
//     (a may_act is honoured, as a token of ours' is);
//   - its sub a name, as every token of ours has (syntax.CheckName), such
//     as system:serviceaccount:shop:orders;
//   - its scope claim, if any, the scopes it holds: with none, the new
//     token has none.
//
// A refusal is ErrInvalidRequest (RFC 8693 §2.2.2) saying why; a key
// server that cannot answer is clientauth.ErrFetch.
func (s *Service) jwtSubject(ctx context.Context, c *clients.Client, req ExchangeRequest) (subject, error) {
	if req.JWTs == nil || len(c.SubjectTokenIssuers) == 0 {
		return subject{}, refusal.New(ErrInvalidRequest, "subject_token_type %s: client %q trusts no issuer of JWTs (subject_token_issuers)", TokenTypeJWT, c.ID)
	}
	t, err := req.JWTs.VerifySubjectToken(ctx, c.SubjectTokenIssuers, c.ID, req.SubjectToken)
	switch {
	case errors.Is(err, clientauth.ErrFetch):
		return subject{}, err
	case err != nil:
		return subject{}, exchangeTokenError("subject_token", err)
	case t.Issuer == s.opts.Issuer:
		return subject{}, refusal.New(ErrInvalidRequest, "subject_token refused: a token of this issuer is exchanged as subject_token_type %s", TokenTypeAccessToken)
	case t.Act != nil:
		return subject{}, refusal.New(ErrInvalidRequest, "subject_token refused: it has an act: this issuer does not vouch for the actors another issuer names")
	}
	if err := syntax.CheckName(t.Subject); err != nil {
		return subject{}, refusal.New(ErrInvalidRequest, "subject_token refused: its sub, the new token's, %v", err)
	}
	scopes, err := syntax.ParseScope(t.Scope)
	if err != nil { // not wrapped: the subject token's fault, not the scope asked for
		return subject{}, refusal.New(ErrInvalidRequest, "subject_token refused: its scope claim: %v", err)
	}
	return subject{sub: t.Subject, jkt: t.JKT, scopes: scopes, exp: t.ExpiresAt, mayAct: t.MayAct, iss: t.Issuer}, nil
}

package token

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Scheme is how a token came to be checked: presented by its holder as
// Bearer or DPoP (RFC 6750, RFC 9449 §7.1), or examined by a third party
// (introspection, RFC 7662), where its binding is reported, not checked.
type Scheme uint8

// Schemes of a Request. The zero value is Examined.
const (
	// Examined: the token is not presented by its holder; its binding is
	// not checked (an introspection answers with its token_type).
	Examined Scheme = iota
	// Bearer: Authorization: Bearer. A DPoP-bound token is refused.
	Bearer
	// DPoP: Authorization: DPoP. Only a DPoP-bound token counts, with a
	// proof by its key (Request.Proof).
	DPoP
)

// Request is what Verdict checks a token for. Its zero value but Token
// asks whether the token is good at all: examined, for no audience or
// scope.
type Request struct {
	// Token is the token as presented: a JWT or an opaque token.
	Token string
	// Scheme is how the token was presented.
	Scheme Scheme
	// Proof, for a DPoP-bound token presented as DPoP, checks the
	// request's DPoP proof (its signature, request, time, nonce and
	// replay: package client/dpop, the caller's) and returns the RFC 7638
	// thumbprint of its key; Verdict binds the token to it by
	// jwtpolicy.CheckBinding. It is called at most once, and only for
	// such a token, after every check of the token itself; its error is
	// returned as it is. Nil, or an empty thumbprint with no error, is a
	// request with no proof.
	Proof func() (thumbprint string, err error)
	// Audience are the values of the audience the caller requires, as
	// given (?audience=): none, or one, which the token's aud must hold;
	// more than one is a malformed request.
	Audience []string
	// Scope is the scopes the caller requires, separated by spaces
	// (?scope=); "" requires none.
	Scope string
}

// Verdict answers whether a token is good for the request req, in this
// order, the first refusal answering:
//
//  1. its signature and claims, and its session: not revoked (validate);
//  2. its client's standing in cs, the clients in force: there, not
//     disabled, its aud one the client could get today (checkClient);
//  3. its binding to how it was presented (bindingFor);
//  4. the audience req requires (a malformed one ErrInvalidRequest, one
//     its aud lacks ErrInvalidToken), then the scopes (a malformed scope
//     ErrInvalidRequest, a missing one ErrInsufficientScope).
//
// It is the one way, outside this package, to learn whether a token is
// good: every route that accepts a token asks it. A refusal of the token
// wraps ErrInvalidToken (with ErrRevoked for a revoked session); of its
// presentation, ErrDPoPBound or ErrDPoPProof; a Redis failure is
// ErrUnavailable, never a pass. Each carries what a client is told
// (package refusal). The Verified is shared with later validations of the
// same token, and immutable. A token that passes costs no allocation here
// once cached (BenchmarkVerdict).
func (s *Service) Verdict(ctx context.Context, cs *clients.Registry, req Request) (*Verified, error) {
	v, err := s.validate(ctx, req.Token)
	if err != nil {
		return nil, err
	}
	if err := s.checkClient(cs, v); err != nil {
		return nil, err
	}
	if err := bindingFor(v, req); err != nil {
		return nil, err
	}
	if len(req.Audience) > 0 {
		if err := audienceFor(v, req.Audience); err != nil {
			return nil, err
		}
	}
	if req.Scope != "" {
		if err := scopeFor(v, req.Scope); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// bindingFor checks v against how req presented it, by
// jwtpolicy.CheckBinding, the client module's rule too: a DPoP-bound token
// (cnf.jkt) counts only as DPoP, with a proof of the request by its key
// (RFC 9449 §7.1); a bearer token only as Bearer. The presentation is
// checked before the proof, which req.Proof checks only for a bound token
// presented as DPoP. An examined token is not checked.
func bindingFor(v *Verified, req Request) error {
	if req.Scheme == Examined {
		return nil
	}
	jkt, asDPoP := v.JKT(), req.Scheme == DPoP
	if jkt == "" || !asDPoP {
		return bindingError(jwtpolicy.CheckBinding(jkt, asDPoP, ""))
	}
	if req.Proof == nil {
		return errNoProof
	}
	thumbprint, err := req.Proof()
	switch {
	case err != nil:
		return err
	case thumbprint == "":
		return errNoProof
	}
	return bindingError(jwtpolicy.CheckBinding(jkt, asDPoP, thumbprint))
}

// errNoProof is a DPoP-bound token presented as DPoP without a proof.
var errNoProof = refusal.New(ErrDPoPProof, "no DPoP header: a DPoP-bound token counts only with a DPoP proof of the request")

// bindingError is how a refusal of jwtpolicy.CheckBinding is answered: a
// bound token as Bearer is ErrDPoPBound, a proof of another key
// ErrDPoPProof, an unbound token as DPoP an invalid token.
func bindingError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwtpolicy.ErrBound):
		return fmt.Errorf("%w: %w", ErrDPoPBound, err)
	case errors.Is(err, jwtpolicy.ErrProofKey):
		return fmt.Errorf("%w: %w", ErrDPoPProof, err)
	}
	return fmt.Errorf("%w: %w", ErrInvalidToken, err)
}

// audienceFor checks v against want, the values of the audience required:
// one audience, which the token's aud must hold; given twice it is
// refused, as a token is checked for one. What the token holds instead is
// in the error's text (the log) only.
func audienceFor(v *Verified, want []string) error {
	if len(want) > 1 {
		return refusal.New(ErrInvalidRequest, "audience given %d times; a token is checked for one", len(want))
	}
	if err := syntax.CheckAudience(want[0]); err != nil {
		// %v, not %w: a bad required audience is the caller's
		// invalid_request (RFC 6750 §3.1), not the token endpoint's
		// invalid_target.
		return refusal.New(ErrInvalidRequest, "%v", err)
	}
	if !v.ForAudience(want[0]) {
		return &AudienceMismatch{Want: want[0], Aud: v.AppendAudience(nil), ClientID: v.ClientID(), JTI: v.JTI()}
	}
	return nil
}

// AudienceMismatch is Verdict's refusal of a token whose aud lacks the
// audience required: an ErrInvalidToken whose client is told what was
// required, and whose fields (what the token holds instead) are for the
// log only.
type AudienceMismatch struct {
	Want          string
	Aud           []string
	ClientID, JTI string
}

func (e *AudienceMismatch) Error() string {
	return fmt.Sprintf("%v: audience mismatch: want %q, aud %q", ErrInvalidToken, e.Want, e.Aud)
}

// Unwrap is ErrInvalidToken.
func (e *AudienceMismatch) Unwrap() error { return ErrInvalidToken }

// Description is what a client is told (package refusal).
func (e *AudienceMismatch) Description() string {
	return fmt.Sprintf("audience mismatch: the token is not for %q", e.Want)
}

// scopeFor checks that v carries every scope of scope, the scopes
// required.
func scopeFor(v *Verified, scope string) error {
	want, err := syntax.ParseScope(scope)
	if err != nil {
		// %v, not %w: a bad required scope is the caller's invalid_request
		// (RFC 6750 §3.1), not the token endpoint's invalid_scope.
		d, _ := refusal.Description(err)
		return refusal.Describe(fmt.Errorf("%w: %v", ErrInvalidRequest, err), "scope: "+d)
	}
	if !v.HasScopes(want) {
		return refusal.New(ErrInsufficientScope, "the token lacks %.64q", strings.Join(v.MissingScopes(want), " "))
	}
	return nil
}

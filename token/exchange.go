package token

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Token exchange (RFC 8693): a client trades a live token of a subject for
// a new token of the same subject that can only be narrower. The subject
// token is an access token of this issuer, or a JWT of an issuer the
// client trusts (TokenTypeJWT, exchangejwt.go); either becomes one value,
// its claims (subject), which Exchange decides from, never from which
// parameters came: a subject token's act is never dropped, its may_act is
// honoured, and the new token lists the subject token and its parents
// (parents), if it is ours, so that revoking any of them revokes it (the
// cascade rule, package client/revocation).
//
// Who may exchange what:
//
//   - the client opted in (clients.Client.TokenExchange), else
//     ErrUnauthorizedClient;
//   - the subject token is live now through the one verdict (Verdict: not
//     revoked, not expired, its client in good standing), and names the
//     client in its aud or was issued to it; or it is a JWT of an issuer
//     the client trusts that names it in its aud (exchangejwt.go); a
//     DPoP-bound subject token only
//     with the request's DPoP proof by its key (the new token is then bound
//     to that key too);
//   - with an actor_token (delegation): the caller's own live token, issued
//     to it and not itself delegated; the new token's act names its sub and
//     client, and nests the subject token's act; a subject token's may_act
//     must name it;
//   - without one (impersonation): only for a client that may
//     (clients.Client.Impersonation), and never for a subject token with a
//     may_act; the new token keeps the subject token's act;
//   - act nesting and parents are capped at MaxChain.
//
// The new token: scope ⊆ the subject token's ∩ the client's (none asked:
// that intersection), aud among the client's audiences as for Issue, exp no
// later than the subject token's (and the actor token's), the client's
// lifetime and format, never a refresh token.

// MaxChain caps an exchanged token's parents and the depth of its act
// (jwtpolicy.MaxChain, which every reader holds them to): an exchange whose
// result would need more is refused.
const MaxChain = jwtpolicy.MaxChain

// RFC 8693 §3's token types Exchange takes: an access token of this issuer
// (the one type it issues), and a JWT of an issuer the client trusts.
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// ExchangeRequest is what a client asks of Exchange: RFC 8693 §2.1's
// parameters, and JKT as for IssueRequest.
type ExchangeRequest struct {
	SubjectToken, SubjectTokenType string
	// ActorToken and ActorTokenType go together; none means impersonation.
	ActorToken, ActorTokenType string
	// RequestedTokenType is "" or TokenTypeAccessToken.
	RequestedTokenType string
	Scope              string
	Resource, Audience []string
	ExpiresIn          time.Duration
	// JKT, if set, binds the new token to the DPoP key of that thumbprint,
	// whose proof the caller has checked; a DPoP-bound subject or actor
	// token needs it to be its own key's.
	JKT string
	// JWTs verifies a subject token of type TokenTypeJWT; nil refuses
	// every one.
	JWTs SubjectJWTs
}

// Exchanged is a token Exchange made, with what the audit log tells of it.
type Exchanged struct {
	Issued
	Subject string // the token's sub, the subject token's
	Actor   string // the outermost act's sub; "" for none
	Parent  string // the subject token's jti; "" for a JWT of another issuer
	// SubjectIssuer is a JWT subject token's iss; "" for a token of this
	// issuer.
	SubjectIssuer string
}

// errChainCap is the refusal of an exchange whose result would pass MaxChain.
var errChainCap = refusal.New(ErrInvalidRequest, "the exchange chain is at its cap")

// Exchange makes a token for client c from the subject token of req, with
// the clients cs in force (see the rules above). A refusal of the subject
// or actor token is ErrInvalidRequest (RFC 8693 §2.2.2), of a scope
// ErrInvalidScope, of an audience ErrInvalidTarget; a Redis failure is
// ErrUnavailable, and a JWT subject token's key server that cannot answer
// clientauth.ErrFetch.
func (s *Service) Exchange(ctx context.Context, cs *clients.Registry, c *clients.Client, req ExchangeRequest) (Exchanged, error) {
	if !c.TokenExchange {
		return Exchanged{}, refusal.New(ErrUnauthorizedClient, "client %q may not exchange tokens (token_exchange)", c.ID)
	}
	if err := checkTypes(req); err != nil {
		return Exchanged{}, err
	}
	sub, err := s.exchangeSubject(ctx, cs, c, req)
	if err != nil {
		return Exchanged{}, err
	}
	if sub.jkt != "" && sub.jkt != req.JKT {
		return Exchanged{}, refusal.New(ErrInvalidRequest, "subject_token refused: it is DPoP-bound: exchange it with a DPoP proof by its key")
	}
	if err := checkKey(c, req.JKT); err != nil {
		return Exchanged{}, err
	}
	act, notAfter, err := s.actorOf(ctx, cs, c, sub, req)
	if err != nil {
		return Exchanged{}, err
	}
	if depth(act) > MaxChain || len(sub.parents) > MaxChain {
		return Exchanged{}, errChainCap
	}
	scope, err := narrowScope(c, sub.scopes, req.Scope)
	if err != nil {
		return Exchanged{}, err
	}
	aud, err := s.audiences(c, IssueRequest{Resource: req.Resource, Audience: req.Audience})
	if err != nil {
		return Exchanged{}, err
	}
	ttl, err := s.lifetime(c, req.ExpiresIn)
	if err != nil {
		return Exchanged{}, err
	}
	g := &grant{sub: sub.sub, client: c.ID, scope: scope, aud: aud, jkt: req.JKT, chain: encodeChain(act, sub.parents)}
	issued, err := s.mint(ctx, c, g, ttl, notAfter)
	if err != nil {
		return Exchanged{}, err
	}
	out := Exchanged{Issued: issued, Subject: g.sub, SubjectIssuer: sub.iss}
	if len(sub.parents) > 0 {
		out.Parent = sub.parents[0].ID
	}
	if act != nil {
		out.Actor = act.Subject
	}
	return out, nil
}

// checkTypes checks the token types of req: RFC 8693 §2.1's, strictly.
func checkTypes(req ExchangeRequest) error {
	switch {
	case req.SubjectToken == "" || req.SubjectTokenType == "":
		return refusal.New(ErrInvalidRequest, "subject_token and subject_token_type are required")
	case req.SubjectTokenType != TokenTypeAccessToken && req.SubjectTokenType != TokenTypeJWT:
		return refusal.New(ErrInvalidRequest, "subject_token_type %.80q: want %s or %s", req.SubjectTokenType, TokenTypeAccessToken, TokenTypeJWT)
	case (req.ActorToken == "") != (req.ActorTokenType == ""):
		return refusal.New(ErrInvalidRequest, "actor_token and actor_token_type go together")
	case req.ActorToken != "" && req.ActorTokenType != TokenTypeAccessToken:
		return refusal.New(ErrInvalidRequest, "actor_token_type %.80q: want %s", req.ActorTokenType, TokenTypeAccessToken)
	case req.RequestedTokenType != "" && req.RequestedTokenType != TokenTypeAccessToken:
		return refusal.New(ErrInvalidRequest, "requested_token_type %.80q: this issuer issues %s only", req.RequestedTokenType, TokenTypeAccessToken)
	}
	return nil
}

// actorOf returns the act of the token exchanged from sub for c, and the
// time it must expire by: the subject token's exp, and with an actor token
// its exp too.
func (s *Service) actorOf(ctx context.Context, cs *clients.Registry, c *clients.Client, sub subject, req ExchangeRequest) (*jwtpolicy.Actor, time.Time, error) {
	notAfter := sub.exp
	if req.ActorToken == "" {
		switch {
		case !c.Impersonation:
			return nil, notAfter, refusal.New(ErrUnauthorizedClient, "client %q may exchange only with an actor_token (impersonation is off)", c.ID)
		case sub.mayAct != nil:
			return nil, notAfter, refusal.New(ErrInvalidRequest, "subject_token refused: its may_act names who may act for its subject: send that actor's actor_token")
		}
		return sub.act.Clone(), notAfter, nil // never dropped
	}
	a, err := s.Verdict(ctx, cs, Request{Token: req.ActorToken})
	if err != nil {
		return nil, notAfter, exchangeTokenError("actor_token", err)
	}
	switch {
	case a.ClientID() != c.ID:
		return nil, notAfter, refusal.New(ErrInvalidRequest, "actor_token refused: it is not the caller's: it was issued to another client")
	case a.claims.Act != nil:
		return nil, notAfter, refusal.New(ErrInvalidRequest, "actor_token refused: it is itself delegated (it has an act)")
	case a.JKT() != "" && a.JKT() != req.JKT:
		return nil, notAfter, refusal.New(ErrInvalidRequest, "actor_token refused: it is DPoP-bound: send a DPoP proof by its key")
	case sub.mayAct != nil && !s.mayAct(sub.mayAct, a):
		return nil, notAfter, refusal.New(ErrInvalidRequest, "actor_token refused: its subject is not the one the subject_token's may_act names")
	}
	act := &jwtpolicy.Actor{Subject: a.Subject(), ClientID: a.ClientID(), Act: sub.act.Clone()}
	if a.ExpiresAt().Before(notAfter) {
		notAfter = a.ExpiresAt()
	}
	return act, notAfter, nil
}

// mayAct reports whether the actor token a is the party may names: its
// sub, and its client and issuer where may names them.
func (s *Service) mayAct(may *jwtpolicy.Actor, a *Verified) bool {
	return may.Subject == a.Subject() && (may.ClientID == "" || may.ClientID == a.ClientID()) &&
		(may.Issuer == "" || may.Issuer == s.opts.Issuer)
}

// narrowScope returns the scope of a token exchanged by c from a subject
// token of the scopes held, asking for scope: its scopes among held and
// c's both; all of them when it asks for none (none if there are none).
func narrowScope(c *clients.Client, held []string, scope string) (string, error) {
	want, err := syntax.ParseScope(scope)
	if err != nil {
		return "", err
	}
	both := slices.DeleteFunc(slices.Clone(held), func(sc string) bool { return !c.HasScopes([]string{sc}) })
	if len(want) == 0 {
		return strings.Join(both, " "), nil
	}
	if !syntax.ContainsAll(both, want) {
		return "", refusal.New(ErrInvalidScope, "scope %.64q is beyond the subject token's scope or this client's", strings.Join(syntax.Missing(both, want), " "))
	}
	return strings.Join(want, " "), nil
}

// exchangeTokenError is how Exchange answers a refusal of the token of
// parameter name by Verdict: invalid_request (RFC 8693 §2.2.2), saying
// why; a Redis failure stays ErrUnavailable.
func exchangeTokenError(name string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	d, ok := refusal.Description(err)
	if !ok {
		d = "not a live token of this issuer"
	}
	return refusal.Describe(fmt.Errorf("%w: %s: %v", ErrInvalidRequest, name, err), name+" refused: "+d)
}

// depth is how many actors a nests, a itself included.
func depth(a *jwtpolicy.Actor) int {
	n := 0
	for ; a != nil; a = a.Act {
		n++
	}
	return n
}

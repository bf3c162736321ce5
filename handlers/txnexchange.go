package handlers

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/txn"
)

// txnExchange serves POST /token with grant_type GrantTokenExchange and
// requested_token_type txntoken.TokenType: the draft's Txn-Token Service
// (draft-ietf-oauth-transaction-tokens-10), for the client cl
// authenticated as for every grant. Its subject_token is either
//
//	an access token of this issuer (subject_token_type RFC 8693's
//	access_token)    a new Txn-Token for it (token.Service.TxnSubject's
//	                 rules, then txn.Minter.Mint: scope the scopes asked
//	                 for that the token holds, req_wl the caller, tctx the
//	                 token's client and act, rctx the caller's address)
//	a Txn-Token this issuer signed (subject_token_type txn_token)
//	                 its replacement (txn.Minter.Replace: txn, sub, aud,
//	                 tctx and rctx kept, scope only narrower, exp never
//	                 later, req_wl the caller)
//
// The answer is RFC 8693's, with token_type N_A, issued_token_type the
// Txn-Token's, jti its txn, and no refresh token. What it does not take is
// refused (400 invalid_request), never ignored: an actor token (a Txn-Token
// names the actor of the access token it comes from), expires_in (its
// lifetime is SNOWTOKEN_TXN_TTL), a DPoP proof (a Txn-Token is bound to no
// key), resource, an audience other than the trust domain
// (invalid_target), and request_context or request_details (the issuer
// fills rctx only from what it knows itself). Every request, made or
// refused, is an audit event (txn_token.issued, txn_token.refused).
func (s *Server) txnExchange(c *gin.Context, cl call) {
	raw, claims, err := s.txnFor(c, cl)
	if err != nil {
		s.audit(c, "txn_token.refused", "refused a Transaction Token", "client_id", cl.client.ID, "reason", answerFor(err).told(err))
		s.fail(c, err)
		return
	}
	txnID, _ := snowflakealg.ParseID(claims.Txn) // Mint writes a Snowflake ID; a replacement keeps it
	s.audit(c, "txn_token.issued", "issued a Transaction Token", "client_id", cl.client.ID, "sub", claims.Subject,
		"txn", claims.Txn, "replacement", cl.form.Get("subject_token_type") == txntoken.TokenType)
	setNoStore(c.Writer.Header())
	writeJSON(c, http.StatusOK, &tokenResponse{
		AccessToken: raw, TokenType: "N_A", ExpiresIn: claims.ExpiresAt - claims.IssuedAt,
		Scope: claims.Scope, JTI: txnID, IssuedTokenType: txntoken.TokenType,
	})
}

// txnFor checks cl's Transaction Token request and mints its token: see
// txnExchange.
func (s *Server) txnFor(c *gin.Context, cl call) (string, txntoken.Claims, error) {
	m, form := s.opts.Txn, cl.form
	if m == nil {
		return "", txntoken.Claims{}, refusal.New(token.ErrInvalidRequest, "Transaction Tokens are off at this issuer (SNOWTOKEN_TXN_TRUST_DOMAIN is not set)")
	}
	for _, p := range [...]string{"actor_token", "actor_token_type", "expires_in", "resource", "request_context", "request_details"} {
		if form.Has(p) {
			return "", txntoken.Claims{}, refusal.New(token.ErrInvalidRequest, "%s is not a parameter of a Transaction Token request", p)
		}
	}
	if cl.proof != nil {
		return "", txntoken.Claims{}, refusal.New(token.ErrInvalidRequest, "DPoP: a Transaction Token is bound to no key")
	}
	if aud := form["audience"]; len(aud) > 1 || len(aud) == 1 && aud[0] != m.TrustDomain() {
		return "", txntoken.Claims{}, refusal.New(token.ErrInvalidTarget, "audience: this issuer's Transaction Tokens are for the trust domain %q only", m.TrustDomain())
	}
	scopes := strings.Fields(form.Get("scope"))
	subject := form.Get("subject_token")
	switch typ := form.Get("subject_token_type"); {
	case subject == "" || typ == "":
		return "", txntoken.Claims{}, refusal.New(token.ErrInvalidRequest, "subject_token and subject_token_type are required")
	case typ == token.TokenTypeAccessToken:
		v, err := cl.svc.TxnSubject(c.Request.Context(), cl.clients, cl.client, subject)
		if err != nil {
			return "", txntoken.Claims{}, err
		}
		raw, claims, err := m.Mint(c.Request.Context(), cl.svc, v,
			txn.Request{Scopes: scopes, Workload: cl.client.ID, Actor: v.Act(), Context: &txntoken.RequestContext{IP: clientAddr(c)}})
		return raw, claims, txnError(err)
	case typ == txntoken.TokenType:
		if !cl.client.TokenExchange {
			return "", txntoken.Claims{}, refusal.New(token.ErrUnauthorizedClient, "client %q may not exchange tokens (token_exchange)", cl.client.ID)
		}
		opts := cl.svc.Options()
		keys := func(kid string) (ed25519.PublicKey, error) {
			k, err := cl.svc.VerifyingKey(kid)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", txntoken.ErrInvalid, err)
			}
			return k, nil
		}
		prev, err := txntoken.Parse(subject, keys, txntoken.ParseOptions{TrustDomain: m.TrustDomain(), Leeway: opts.Leeway, Now: opts.Now})
		if err != nil {
			return "", txntoken.Claims{}, refusal.Describe(fmt.Errorf("%w: subject_token: %w", token.ErrInvalidRequest, err),
				"subject_token refused: not a live Transaction Token of this issuer")
		}
		raw, claims, err := m.Replace(cl.svc, *prev, scopes, cl.client.ID)
		return raw, claims, txnError(err)
	default:
		return "", txntoken.Claims{}, refusal.New(token.ErrInvalidRequest, "subject_token_type %.80q: want %s or %s", typ, token.TokenTypeAccessToken, txntoken.TokenType)
	}
}

// txnError is what a client is told of a Minter's error: a scope that
// would grow or be empty is invalid_scope, a replacement that would not
// narrow or an expired token invalid_request, anything else the server's.
func txnError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, txn.ErrScope):
		return refusal.Describe(fmt.Errorf("%w: %w", token.ErrInvalidScope, err), "scope: a Transaction Token holds the subject token's scopes or fewer, and at least one")
	case errors.Is(err, txn.ErrReplacement):
		return refusal.Describe(fmt.Errorf("%w: %w", token.ErrInvalidRequest, err), "subject_token refused: a replacement keeps txn, sub, aud and tctx, and expires no later")
	case errors.Is(err, txn.ErrExpired):
		return refusal.Describe(fmt.Errorf("%w: %w", token.ErrInvalidRequest, err), "subject_token refused: expired")
	}
	return fmt.Errorf("%w: transaction token: %w", token.ErrUnavailable, err)
}

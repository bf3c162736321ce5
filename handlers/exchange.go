package handlers

import (
	"errors"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// exchange serves POST /token with grant_type GrantTokenExchange (RFC
// 8693) for the client cl authenticated, as every grant is (issue): its
// DPoP proof, if any, binds the new token; the assertion checker verifies
// a JWT subject token (token.TokenTypeJWT), its key server's failure
// counted as a client's key set's (clientKeysUnavailable);
// token.Service.Exchange decides the rest. Every exchange, made or
// refused, is an audit event (token.exchanged, token.exchange_refused),
// with names and IDs, never a token.
func (s *Server) exchange(c *gin.Context, cl call, start time.Time) {
	form := cl.form
	if form.Get("requested_token_type") == txntoken.TokenType { // the Txn-Token Service (txnexchange.go)
		s.txnExchange(c, cl)
		return
	}
	req := token.ExchangeRequest{
		SubjectToken: form.Get("subject_token"), SubjectTokenType: form.Get("subject_token_type"),
		ActorToken: form.Get("actor_token"), ActorTokenType: form.Get("actor_token_type"),
		RequestedTokenType: form.Get("requested_token_type"),
		Scope:              form.Get("scope"), Resource: form["resource"], Audience: form["audience"],
	}
	if form.Has("subject") {
		s.fail(c, refusal.New(token.ErrInvalidRequest, "subject: an exchanged token's subject is its subject token's"))
		return
	}
	if s.assertions != nil { // never a nil *Verifier in the interface
		req.JWTs = s.assertions
	}
	var err error
	if req.ExpiresIn, req.JKT, err = s.grantTerms(c, cl); err != nil {
		s.fail(c, err)
		return
	}
	out, err := cl.svc.Exchange(c.Request.Context(), cl.clients, cl.client, req)
	if errors.Is(err, clientauth.ErrFetch) {
		s.clientKeysUnavailable(cl.client.ID, err)
	}
	if err != nil {
		s.audit(c, "token.exchange_refused", "refused a token exchange", "client_id", cl.client.ID,
			"reason", answerFor(err).told(err))
		s.fail(c, err)
		return
	}
	s.audit(c, "token.exchanged", "exchanged a token", "client_id", cl.client.ID, "sub", out.Subject,
		"actor", out.Actor, "parent", out.Parent, "subject_issuer", out.SubjectIssuer, "jti", out.ID.String())
	s.writeIssued(c, cl, out.Issued, start, token.TokenTypeAccessToken)
}

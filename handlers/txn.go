package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/txn"
)

// paramTxn is the query parameter of GET /token/validate by which a
// gateway asks for a Transaction Token on success: ?txn_token=1. The
// gateway's configuration decides per route (nginx's auth_request URL,
// Traefik's ForwardAuth address).
const paramTxn = "txn_token"

// txnToken mints the Transaction Token (package token/txn) a successful
// validation of v answers with, in the Txn-Token response header, when
// the request asks for one (?txn_token=1); otherwise it does nothing, and
// a validation without a query costs nothing more. With Transaction
// Tokens off (no Options.Txn: SNOWTOKEN_TXN_TRUST_DOMAIN unset) a request
// that asks is refused (400 invalid_request), so that a gateway configured
// for them fails closed rather than passing requests on without one.
//
// The token's scope is the scopes ?scope= required (the route's), or the
// access token's when none are; req_wl is the access token's client; tctx
// its client and its act (an exchanged token's actor, as it is); rctx
// holds the client's address (req_ip, X-Forwarded-For from
// Options.TrustedProxies, else the TCP peer) and, from a DPoP forwarder
// (Options.DPoPForwarders) that names it, the original request's transport,
// method and path (X-Forwarded-Proto, -Method, -Uri; the query left out).
func (s *Server) txnToken(c *gin.Context, st *set, v *token.Verified) error {
	raw := c.Request.URL.RawQuery
	if !strings.Contains(raw, paramTxn) {
		return nil
	}
	q, err := query(c) // parsed by checkBearer already: it cannot fail here
	if err != nil {
		return err
	}
	switch vs := q[paramTxn]; {
	case len(vs) == 0:
		return nil
	case len(vs) > 1 || vs[0] != "1":
		return refusal.New(token.ErrInvalidRequest, "%s must be given once, as %s=1", paramTxn, paramTxn)
	}
	rctx, err := s.requestContext(c)
	if err != nil {
		return err
	}
	tok, err := s.mintTxn(c.Request.Context(), st, v, requiredScope(q), rctx)
	if err != nil {
		return err
	}
	c.Writer.Header()[txntoken.Header] = []string{tok}
	return nil
}

// mintTxn mints the Transaction Token of a gateway's successful check of
// v, with st's keys, for a route that required scope ("" for none) and the
// request context rctx: both front doors' (txnToken, Authorize). Off (no
// Options.Txn) is a refusal, so that a gateway configured for them fails
// closed.
func (s *Server) mintTxn(ctx context.Context, st *set, v *token.Verified, scope string, rctx *txntoken.RequestContext) (string, error) {
	if s.opts.Txn == nil {
		return "", refusal.New(token.ErrInvalidRequest, "Transaction Tokens are off at this issuer (SNOWTOKEN_TXN_TRUST_DOMAIN is not set)")
	}
	req := txn.Request{Scopes: strings.Fields(scope), Workload: v.ClientID(), Actor: v.Act(), Context: rctx}
	tok, _, err := s.opts.Txn.Mint(ctx, st.svc, v, req)
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, txn.ErrScope):
		return "", refusal.New(token.ErrInsufficientScope, "a Transaction Token needs a scope, and the token has none")
	case errors.Is(err, txn.ErrExpired):
		return "", refusal.New(token.ErrInvalidToken, "expired")
	}
	return "", fmt.Errorf("%w: transaction token: %w", token.ErrUnavailable, err)
}

// requestContext is the rctx of a Transaction Token minted for c: see
// txnToken. Forwarded headers that a forwarder sends malformed are refused,
// as a DPoP proof's check refuses them (resourceRequest).
func (s *Server) requestContext(c *gin.Context) (*txntoken.RequestContext, error) {
	rc := &txntoken.RequestContext{IP: clientAddr(c)}
	if _, forwarded := c.Request.Header[dpop.HeaderForwardedMethod]; !forwarded || !s.fromForwarder(c) {
		return rc, nil
	}
	method, full, err := s.resourceRequest(c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(full)
	if err != nil {
		return nil, refusal.New(token.ErrInvalidRequest, "%s is not a path", dpop.HeaderForwardedURI)
	}
	rc.Transport, rc.Method, rc.Path = u.Scheme, method, u.EscapedPath()
	return rc, nil
}

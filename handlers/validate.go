package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// bearer reads the token from Authorization: Bearer, or DPoP (RFC 9449
// §7.1), and reports whether it came as DPoP: jwtpolicy.Presented, the rule
// the client module's middleware follows too. Several Authorization headers
// are a malformed request (400 invalid_request, RFC 6750 §3.1). A token in
// the URL (q, the request's query) is refused: URLs end up in logs.
func bearer(c *gin.Context, q url.Values) (raw string, asDPoP bool, err error) {
	if q.Has("access_token") {
		return "", false, refusal.New(token.ErrInvalidRequest, "a token in the URL is refused (URLs are logged); use Authorization: Bearer")
	}
	raw, asDPoP, err = jwtpolicy.Presented(c.Request.Header)
	switch {
	case errors.Is(err, jwtpolicy.ErrAuthorizations):
		return "", false, fmt.Errorf("%w: %w", token.ErrInvalidRequest, err)
	case err != nil:
		return "", false, fmt.Errorf("%w: %w", ErrNoToken, err)
	}
	return raw, asDPoP, nil
}

// The identity headers of a successful validation, for gateways; never set
// on any other answer.
const (
	hdrSubject = "X-Auth-Subject"
	hdrClient  = "X-Auth-Client"
	hdrScope   = "X-Auth-Scope"
	hdrTokenID = "X-Auth-Token-Id"
)

// claimsResponse is the body of a successful validation, and of an active
// introspection (RFC 7662 §2.2).
type claimsResponse struct {
	Active    bool            `json:"active"`
	Subject   string          `json:"sub"`
	ClientID  string          `json:"client_id"`
	Scope     string          `json:"scope"`
	Issuer    string          `json:"iss"`
	Audience  []string        `json:"aud,omitempty"`
	IssuedAt  int64           `json:"iat"`
	ExpiresAt int64           `json:"exp"`
	JTI       snowflakealg.ID `json:"jti"`
	WorkerID  int64           `json:"worker_id"`
	TokenType string          `json:"token_type,omitempty"`
	// Confirmation is a DPoP-bound token's cnf (RFC 9449 §6.2).
	Confirmation *confirmation `json:"cnf,omitempty"`
}

// confirmation is a cnf claim: the RFC 7638 thumbprint of the DPoP key.
type confirmation struct {
	JKT string `json:"jkt"`
}

func newClaimsResponse(v *token.Verified) claimsResponse {
	cl := v.Claims
	r := claimsResponse{
		Active: true, Subject: cl.Subject, ClientID: cl.ClientID, Scope: cl.Scope,
		Issuer: cl.Issuer, Audience: cl.Audience,
		IssuedAt: cl.IssuedAt.Unix(), ExpiresAt: cl.ExpiresAt.Unix(),
		JTI: v.ID, WorkerID: v.Parts.Worker,
	}
	if jkt := cl.Confirmation.JKT; jkt != "" {
		r.Confirmation = &confirmation{JKT: jkt}
	}
	return r
}

func (s *Server) validate(c *gin.Context) {
	v, err := s.checkBearer(c)
	if err != nil {
		s.metrics.validation(err)
		s.fail(c, err)
		return
	}
	s.metrics.validation(nil)
	resp := newClaimsResponse(v)
	// The identity headers for gateways, set in the map directly: their keys
	// are canonical already, and one backing array serves the five values.
	// Set last, just before the 200 is written: fail removes them as well.
	vals := [...]string{"no-store", v.Claims.Subject, v.Claims.ClientID, v.Claims.Scope, v.Claims.ID}
	h := c.Writer.Header()
	h["Cache-Control"] = vals[0:1:1]
	h[hdrSubject] = vals[1:2:2]
	h[hdrClient] = vals[2:3:3]
	h[hdrScope] = vals[3:4:4]
	h[hdrTokenID] = vals[4:5:5]
	writeJSON(c, http.StatusOK, &resp)
}

// checkBearer validates the request's token, then its binding to a DPoP
// key (checkBinding), then the audience
// ?audience= requires and the scopes ?scope= requires: the query is parsed
// (query: its syntax, bounded by MaxQueryLen) before the token is looked
// at, what the caller asks for in it only once its token passes. A token
// for another audience is invalid here (401), whatever its scopes.
func (s *Server) checkBearer(c *gin.Context) (*token.Verified, error) {
	q, err := query(c)
	if err != nil {
		return nil, err
	}
	raw, asDPoP, err := bearer(c, q)
	if err != nil {
		return nil, err
	}
	v, err := s.validateToken(c.Request.Context(), raw)
	if err != nil {
		return nil, err
	}
	if err := s.checkBinding(c, raw, asDPoP, v); err != nil {
		return nil, err
	}
	if q == nil { // most calls have no query
		return v, nil
	}
	if err := s.checkAudience(q, v); err != nil {
		return nil, err
	}
	want, err := token.ParseScope(requiredScope(q))
	if err != nil {
		// %v, not %w: a bad ?scope= is the caller's invalid_request (RFC 6750
		// §3.1), not the token endpoint's invalid_scope that fail checks first.
		return nil, refusal.Describe(fmt.Errorf("%w: %v", token.ErrInvalidRequest, err), "scope: "+description(err))
	}
	if !v.HasScopes(want) {
		return nil, refusal.New(token.ErrInsufficientScope, "the token lacks %.64q", strings.Join(v.MissingScopes(want), " "))
	}
	return v, nil
}

// requiredScope is what ?scope= asks for: every scope of every value, when
// it is given more than once (?scope=a&scope=b asks for a and b). A value
// appended to the query can only make the check stricter; keeping the first
// value alone would let one that comes first drop the others. The values
// are joined with a space, so that ParseScope's limits hold for them all
// and an empty value among several is malformed, as a doubled space is.
func requiredScope(q url.Values) string {
	if vs := q["scope"]; len(vs) > 1 {
		return strings.Join(vs, " ")
	} else if len(vs) == 1 {
		return vs[0]
	}
	return ""
}

// checkAudience checks the token against ?audience=, if given (q): one
// audience, which the token's aud must hold; given twice it is refused, as a
// token is checked for one. What the token holds instead goes to the debug
// log only.
func (s *Server) checkAudience(q url.Values, v *token.Verified) error {
	want, ok := q["audience"]
	switch {
	case !ok:
		return nil
	case len(want) > 1:
		return refusal.New(token.ErrInvalidRequest, "audience given %d times; a token is checked for one", len(want))
	}
	if err := token.CheckAudience(want[0]); err != nil {
		// %v, not %w: a bad ?audience= is the caller's invalid_request
		// (RFC 6750 §3.1), not the token endpoint's invalid_target.
		return refusal.New(token.ErrInvalidRequest, "%v", err)
	}
	if !v.ForAudience(want[0]) {
		s.log.Debug("audience mismatch", "want", want[0], "aud", v.Claims.Audience, "client_id", v.Claims.ClientID, "jti", v.Claims.ID)
		return refusal.New(token.ErrInvalidToken, "audience mismatch: the token is not for %q", want[0])
	}
	return nil
}

// validateToken is Service.Validate for a token its client could still get:
// a client removed from the clients file or disabled, or one whose
// audiences no longer hold the token's, has its tokens end at once, at the
// cost of a map lookup (Service.CheckClient).
func (s *Server) validateToken(ctx context.Context, raw string) (*token.Verified, error) {
	v, err := s.svc.Validate(ctx, raw)
	if err != nil {
		return nil, err
	}
	if err := s.svc.CheckClient(s.clients, v); err != nil {
		s.log.Debug("token refused for its client", "client_id", v.Claims.ClientID, "aud", v.Claims.Audience, "jti", v.Claims.ID, "err", err)
		return nil, err
	}
	return v, nil
}

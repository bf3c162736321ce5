package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/client/txntoken"
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
	return presented(c.Request.Header)
}

// presented reads the token of a request's headers h as bearer says.
func presented(h http.Header) (raw string, asDPoP bool, err error) {
	raw, asDPoP, err = jwtpolicy.Presented(h)
	switch {
	case errors.Is(err, jwtpolicy.ErrAuthorizations):
		return "", false, fmt.Errorf("%w: %w", token.ErrInvalidRequest, err)
	case err != nil:
		return "", false, fmt.Errorf("%w: %w", ErrNoToken, err)
	}
	return raw, asDPoP, nil
}

// The identity headers of a successful validation, for gateways; never set
// on any other answer. A gateway's check (Authorize) answers with them too.
const (
	HeaderSubject = "X-Auth-Subject"
	HeaderClient  = "X-Auth-Client"
	HeaderScope   = "X-Auth-Scope"
	HeaderTokenID = "X-Auth-Token-Id"
	// HeaderActor is an exchanged token's outermost act's sub (RFC 8693
	// §4.1: the one actor that counts), absent for a token without act.
	HeaderActor = "X-Auth-Actor"
)

// IdentityHeaders are the identity headers, in the order of setIdentity's
// values.
var IdentityHeaders = [...]string{HeaderSubject, HeaderClient, HeaderScope, HeaderTokenID, HeaderActor}

// UpstreamHeaders are the headers a gateway passes upstream from a valid
// answer, and removes from a client's request otherwise: the identity
// headers and, when one was asked for, the Transaction Token
// (txntoken.Header).
var UpstreamHeaders = [...]string{HeaderSubject, HeaderClient, HeaderScope, HeaderTokenID, HeaderActor, txntoken.Header}

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
	// Act and Parents are an exchanged token's (RFC 8693 §4.1): who acts
	// for its subject, and the tokens it was exchanged from.
	Act     *jwtpolicy.Actor   `json:"act,omitempty"`
	Parents []jwtpolicy.Parent `json:"parents,omitempty"`

	aud [token.MaxAudiences]string // Audience's array (set)
}

// confirmation is a cnf claim: the RFC 7638 thumbprint of the DPoP key.
type confirmation struct {
	JKT string `json:"jkt"`
}

// set makes r the body of v's answer. Its audience is a copy (the
// Verified is shared and stays as it is), in r's own array.
func (r *claimsResponse) set(v *token.Verified) {
	*r = claimsResponse{
		Active: true, Subject: v.Subject(), ClientID: v.ClientID(), Scope: v.Scope(),
		Issuer:   v.Issuer(),
		IssuedAt: v.IssuedAt().Unix(), ExpiresAt: v.ExpiresAt().Unix(),
		JTI: v.ID(), WorkerID: v.Parts().Worker,
	}
	r.Audience = v.AppendAudience(r.aud[:0])
	if len(r.Audience) == 0 {
		r.Audience = nil
	}
	if jkt := v.JKT(); jkt != "" {
		r.Confirmation = &confirmation{JKT: jkt}
	}
	if r.Parents = v.Parents(); v.ActorSubject() != "" { // no allocation for a token not exchanged
		r.Act = v.Act()
	}
}

func (s *Server) validate(c *gin.Context, cl call) {
	start := time.Now()
	v, raw, err := s.checkBearer(c, cl.set)
	if err == nil {
		err = s.txnToken(c, cl.set, v) // the Txn-Token header, when asked (txn.go)
	}
	if err != nil {
		s.metrics.validation(raw, start, err)
		s.fail(c, err)
		return
	}
	s.metrics.validation(raw, start, nil)
	var resp claimsResponse
	resp.set(v)
	// Set last, just before the 200 is written: fail removes them as well.
	setIdentity(c.Writer.Header(), v)
	writeJSON(c, http.StatusOK, &resp)
}

// setIdentity sets in h the headers of v's valid answer: Cache-Control and
// the identity headers for gateways, in the map directly: their keys are
// canonical already, and one backing array serves the six values.
func setIdentity(h http.Header, v *token.Verified) {
	vals := [...]string{"no-store", v.Subject(), v.ClientID(), v.Scope(), v.JTI(), v.ActorSubject()}
	h["Cache-Control"] = vals[0:1:1]
	for i, k := range IdentityHeaders {
		if vals[i+1] == "" && k == HeaderActor { // a token without act: no actor header
			delete(h, k)
			continue
		}
		h[k] = vals[i+1 : i+2 : i+2]
	}
}

// checkBearer asks the verdict (token.Service.Verdict) of the request's
// token as presented (bearer: Bearer, or DPoP with the request's proof,
// proofKey), for the audience ?audience= requires and the scopes ?scope=
// requires: the query is parsed (query: its syntax, bounded by
// MaxQueryLen) before the token is looked at, what the caller asks for in
// it only once its token passes. A token for another audience is invalid
// here (401), whatever its scopes.
func (s *Server) checkBearer(c *gin.Context, st *set) (*token.Verified, string, error) {
	q, err := query(c)
	if err != nil {
		return nil, "", err
	}
	raw, asDPoP, err := bearer(c, q)
	if err != nil {
		return nil, "", err
	}
	req := token.Request{Token: raw, Scheme: token.Bearer}
	if asDPoP {
		req.Scheme = token.DPoP
		req.Proof = func() (string, error) { return s.proofKey(c, st, raw) }
	}
	if q != nil { // most calls have no query
		req.Audience, req.Scope = q["audience"], requiredScope(q)
	}
	v, err := st.svc.Verdict(c.Request.Context(), st.clients, req)
	if err != nil {
		s.logMismatch(err)
	}
	return v, raw, err
}

// logMismatch logs at debug what a token refused for its audience holds
// instead: the client is told only what was required.
func (s *Server) logMismatch(err error) {
	if am := (*token.AudienceMismatch)(nil); errors.As(err, &am) {
		s.log.Debug("audience mismatch", "want", am.Want, "aud", am.Aud, "client_id", am.ClientID, "jti", am.JTI)
	}
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

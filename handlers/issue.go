package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// tokenResponse is RFC 6749 §5.1, plus jti: the token's Snowflake ID, named as in its claims.
type tokenResponse struct {
	AccessToken string          `json:"access_token"`
	TokenType   string          `json:"token_type"`
	ExpiresIn   int64           `json:"expires_in"`
	Scope       string          `json:"scope"`
	JTI         snowflakealg.ID `json:"jti"`
}

// issueProof is POST /token's step before its client authenticates
// (routeEntry.proofFirst): a DPoP proof binds the token to its key (RFC
// 9449 §5). It is checked before the client authenticates and recorded
// against replay after (issue): a use_dpop_nonce answer makes the client
// send the same body again, whose client assertion must not have been
// spent by the first try (its jti is recorded as the client
// authenticates), and no one else's request uses up a proof. The check
// before is one signature, bounded by the proof's size
// (dpop.Options.MaxLength). It returns the proof, nil for none.
func (s *Server) issueProof(c *gin.Context, st *set) (*dpop.Proof, error) {
	raw, ok, err := proofHeader(c)
	if err != nil || !ok {
		return nil, err
	}
	return s.verifyProof(c, st, raw, http.MethodPost, s.tokenURL(), "")
}

// issue serves POST /token for the client cl authenticated, with the
// proof issueProof checked.
func (s *Server) issue(c *gin.Context, cl call) {
	start := time.Now()
	form, client, proof := cl.form, cl.client, cl.proof
	switch gt := form.Get("grant_type"); gt {
	case "client_credentials":
	case "":
		s.fail(c, refusal.New(token.ErrInvalidRequest, "grant_type is required"))
		return
	default:
		s.fail(c, refusal.New(ErrUnsupportedGrant, "%.32q (only client_credentials)", gt))
		return
	}
	req := token.IssueRequest{Scope: form.Get("scope"), Subject: form.Get("subject"),
		Resource: form["resource"], Audience: form["audience"]}
	if e := form.Get("expires_in"); e != "" {
		n, err := strconv.ParseInt(e, 10, 32)
		if err != nil || n <= 0 {
			s.fail(c, refusal.New(token.ErrInvalidRequest, "expires_in must be a positive number of seconds"))
			return
		}
		req.ExpiresIn = time.Duration(n) * time.Second
	}
	if proof != nil {
		if err := s.recordProof(c, proof); err != nil {
			s.fail(c, err)
			return
		}
		req.JKT = proof.Thumbprint
	}
	issued, err := cl.svc.Issue(c.Request.Context(), client, req)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.metrics.issue(client.TokenFormat, start)
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	if issued.JKT != "" && cl.nonces != nil {
		c.Header("DPoP-Nonce", cl.nonces.give(s.now()))
	}
	writeJSON(c, http.StatusOK, &tokenResponse{
		AccessToken: issued.AccessToken,
		TokenType:   jwtpolicy.TokenType(issued.JKT), // RFC 9449 §5
		ExpiresIn:   int64(issued.ExpiresIn / time.Second),
		Scope:       issued.Scope,
		JTI:         issued.ID,
	})
}

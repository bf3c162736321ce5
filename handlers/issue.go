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

// tokenResponse is RFC 6749 §5.1, plus jti: the token's Snowflake ID, named
// as in its claims; and for an exchange RFC 8693 §2.2.1's issued_token_type.
type tokenResponse struct {
	AccessToken     string          `json:"access_token"`
	TokenType       string          `json:"token_type"`
	ExpiresIn       int64           `json:"expires_in"`
	Scope           string          `json:"scope"`
	JTI             snowflakealg.ID `json:"jti"`
	IssuedTokenType string          `json:"issued_token_type,omitempty"`
}

// Grant types of POST /token.
const (
	grantClientCredentials = "client_credentials"
	// GrantTokenExchange is RFC 8693's grant (exchange.go).
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
)

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
	raw, ok, err := proofHeader(c.Request.Header)
	if err != nil || !ok {
		return nil, err
	}
	return s.verifyProof(c.Writer.Header(), st, raw, http.MethodPost, s.tokenURL(), "")
}

// issue serves POST /token for the client cl authenticated, with the
// proof issueProof checked: client credentials here, token exchange in
// exchange.go, each grant through the same client authentication, DPoP
// proof and answer.
func (s *Server) issue(c *gin.Context, cl call) {
	start := time.Now()
	form, client := cl.form, cl.client
	switch gt := form.Get("grant_type"); gt {
	case grantClientCredentials:
	case GrantTokenExchange:
		s.exchange(c, cl, start)
		return
	case "":
		s.fail(c, refusal.New(token.ErrInvalidRequest, "grant_type is required"))
		return
	default:
		s.fail(c, refusal.New(ErrUnsupportedGrant, "%.80q (client_credentials or %s)", gt, GrantTokenExchange))
		return
	}
	req := token.IssueRequest{Scope: form.Get("scope"), Subject: form.Get("subject"),
		Resource: form["resource"], Audience: form["audience"]}
	var err error
	if req.ExpiresIn, req.JKT, err = s.grantTerms(c, cl); err != nil {
		s.fail(c, err)
		return
	}
	issued, err := cl.svc.Issue(c.Request.Context(), client, req)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeIssued(c, cl, issued, start, "")
}

// grantTerms reads what every grant of POST /token takes alike: the
// lifetime asked for (expires_in: zero for none, else a positive number
// of seconds), and the thumbprint of the key of the request's DPoP proof,
// which the new token is bound to ("" without a proof), once the proof is
// recorded against replay.
func (s *Server) grantTerms(c *gin.Context, cl call) (expiresIn time.Duration, jkt string, err error) {
	if e := cl.form.Get("expires_in"); e != "" {
		n, err := strconv.ParseInt(e, 10, 32)
		if err != nil || n <= 0 {
			return 0, "", refusal.New(token.ErrInvalidRequest, "expires_in must be a positive number of seconds")
		}
		expiresIn = time.Duration(n) * time.Second
	}
	if cl.proof == nil {
		return expiresIn, "", nil
	}
	if err := s.recordProof(c, cl.proof); err != nil {
		return 0, "", err
	}
	return expiresIn, cl.proof.Thumbprint, nil
}

// writeIssued answers POST /token with issued, a new token of cl's client
// (issuedType: RFC 8693's issued_token_type, "" for another grant).
func (s *Server) writeIssued(c *gin.Context, cl call, issued token.Issued, start time.Time, issuedType string) {
	s.metrics.issue(cl.client.TokenFormat, start)
	setNoStore(c.Writer.Header())
	if issued.JKT != "" && cl.nonces != nil {
		c.Header("DPoP-Nonce", cl.nonces.give(s.now()))
	}
	writeJSON(c, http.StatusOK, &tokenResponse{
		AccessToken:     issued.AccessToken,
		TokenType:       jwtpolicy.TokenType(issued.JKT), // RFC 9449 §5
		ExpiresIn:       int64(issued.ExpiresIn / time.Second),
		Scope:           issued.Scope,
		JTI:             issued.ID,
		IssuedTokenType: issuedType,
	})
}

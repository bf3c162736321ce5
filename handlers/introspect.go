package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/token"
)

func (s *Server) introspect(c *gin.Context, cl call) {
	raw, err := tokenParam(cl.form)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	// Examined, not presented: the answer tells the binding (token_type),
	// which the introspecting client does not hold.
	v, err := cl.svc.Verdict(c.Request.Context(), cl.clients, token.Request{Token: raw, Scheme: token.Examined})
	switch {
	case errors.Is(err, token.ErrUnavailable):
		s.fail(c, err) // fail closed, and say so: not "inactive"
	case err != nil, !cl.client.MayIntrospectToken(v.ClientID()):
		// Another client's token is as inactive as a bad one: the answer
		// does not tell it exists (RFC 7662 §4).
		c.JSON(http.StatusOK, gin.H{"active": false})
	default:
		var resp claimsResponse
		resp.set(v)
		resp.TokenType = jwtpolicy.TokenType(v.JKT()) // RFC 9449 §6.2
		writeJSON(c, http.StatusOK, &resp)
	}
}

package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
)

func (s *Server) revoke(c *gin.Context) {
	raw, client, err := s.tokenForm(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	jti, err := s.svc.Revoke(c.Request.Context(), client, raw)
	if errors.Is(err, token.ErrForbidden) {
		s.audit(c, "token.revoke_refused", "refused to revoke another client's token", "client_id", client.ID)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if jti != "" { // "" is no token of ours: nothing was revoked
		s.audit(c, "token.revoked", "revoked a token", "jti", jti, "client_id", client.ID)
	}
	c.Header("Cache-Control", "no-store")
	c.Status(http.StatusOK)
}

func (s *Server) revokeSubject(c *gin.Context) {
	s.adminRevoke(c, "subject", s.svc.RevokeSubject)
}

func (s *Server) revokeClient(c *gin.Context) {
	s.adminRevoke(c, "client", s.svc.RevokeClient)
}

// adminRevoke serves DELETE /{what}s/{name}/tokens: an admin client,
// authenticated with HTTP Basic (there is no body), revokes every token of
// the name in the path; 204.
func (s *Server) adminRevoke(c *gin.Context, what string, revoke func(context.Context, string) error) {
	client, err := s.basicClient(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !client.Admin {
		s.audit(c, "admin.refused", "refused an admin request from a client that is not an admin", "client_id", client.ID, "route", c.FullPath())
		s.fail(c, refusal.New(token.ErrForbidden, "only an admin client may revoke a %s's tokens", what))
		return
	}
	name := c.Param(what)
	if err := revoke(c.Request.Context(), name); err != nil {
		s.fail(c, err)
		return
	}
	s.audit(c, what+".revoked", "revoked all tokens of a "+what, what, truncate(name), "client_id", client.ID)
	c.Status(http.StatusNoContent)
}

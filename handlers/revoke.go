package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/token"
)

func (s *Server) revoke(c *gin.Context, cl call) {
	client := cl.client
	raw, err := tokenParam(cl.form)
	if err != nil {
		s.fail(c, err)
		return
	}
	jti, err := cl.svc.Revoke(c.Request.Context(), client, raw)
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

func (s *Server) revokeSubject(c *gin.Context, cl call) {
	s.adminRevoke(c, cl, "subject", cl.svc.RevokeSubject)
}

func (s *Server) revokeClient(c *gin.Context, cl call) {
	s.adminRevoke(c, cl, "client", cl.svc.RevokeClient)
}

// adminRevoke serves DELETE /{what}s/{name}/tokens: the admin client cl
// authenticated (authAdmin) revokes every token of the name in the path;
// 204.
func (s *Server) adminRevoke(c *gin.Context, cl call, what string, revoke func(context.Context, string) error) {
	name := c.Param(what)
	if err := revoke(c.Request.Context(), name); err != nil {
		s.fail(c, err)
		return
	}
	s.audit(c, what+".revoked", "revoked all tokens of a "+what, what, truncate(name), "client_id", cl.client.ID)
	c.Status(http.StatusNoContent)
}

package handlers

import (
	"github.com/gin-gonic/gin"
)

// audit logs a security event with its stable "event" name (the table in
// docs/audit.md), the client's address (clientAddr) and args as attributes,
// never a secret or a whole token.
// It logs at Info, below the level internal/logsum summarises, so that no
// event is folded into another's count; its callers bound their own rate.
func (s *Server) audit(c *gin.Context, event, msg string, args ...any) {
	s.log.InfoContext(c.Request.Context(), msg, append([]any{"event", event, "addr", clientAddr(c)}, args...)...)
}

// clientAddr is the client's IP address: the TCP peer's, or, when the peer
// is one of Options.TrustedProxies, the last address in X-Forwarded-For that
// is not a trusted proxy (gin's ClientIP). A header from any other peer is
// ignored: anyone can send one.
func clientAddr(c *gin.Context) string { return c.ClientIP() }

// maxLoggedName bounds a name from a request (a client ID, a subject) in the log.
const maxLoggedName = 128

// truncate cuts a name from a request to maxLoggedName bytes for the log.
func truncate(name string) string {
	if len(name) > maxLoggedName {
		return name[:maxLoggedName] + "..."
	}
	return name
}

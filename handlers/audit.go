package handlers

import (
	"github.com/gin-gonic/gin"
)

// audit logs a security event with its stable "event" name (the table in
// docs/audit.md), the source address (the TCP peer's, as the
// failed-authentication limit keys it) and args as attributes, never a
// secret or a whole token.
// It logs at Info, below the level internal/logsum summarises, so that no
// event is folded into another's count; its callers bound their own rate.
func (s *Server) audit(c *gin.Context, event, msg string, args ...any) {
	s.log.InfoContext(c.Request.Context(), msg, append([]any{"event", event, "addr", c.RemoteIP()}, args...)...)
}

// maxLoggedName bounds a name from a request (a client ID, a subject) in the log.
const maxLoggedName = 128

// truncate cuts a name from a request to maxLoggedName bytes for the log.
func truncate(name string) string {
	if len(name) > maxLoggedName {
		return name[:maxLoggedName] + "..."
	}
	return name
}

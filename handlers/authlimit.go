package handlers

import (
	"errors"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// authenticateClient is Clients.Authenticate, on the clients of st, behind the failed-authentication
// limit (limited). A client whose token_endpoint_auth_method is not method
// (AuthSecretBasic, AuthSecretPost; empty: any secret method, on the routes
// without a body) is refused after its secret is checked.
func (s *Server) authenticateClient(c *gin.Context, st *set, id, secret, method string) (*clients.Client, error) {
	return s.limited(c, id, func() (*clients.Client, error) {
		client, err := st.clients.Authenticate(id, secret, s.now())
		if err == nil && method != "" && !client.MaySendSecretBy(method) {
			return nil, refusal.New(token.ErrInvalidClient, "this client authenticates by %s", client.Method())
		}
		return client, err
	})
}

// limited runs check, which authenticates client id, behind the
// failed-authentication limit (Options.AuthLimiter), keyed by the client ID
// and by the client's address (clientAddr: behind a proxy not in
// Options.TrustedProxies, every client shares the proxy's address key). A
// key this process knows to be limited is refused before check runs, from
// memory; a success costs nothing more; only a failure is recorded in
// Redis, and the one that uses up a key's failures is refused (429)
// instead of a 401. If Redis cannot record the failure, the answer is 503:
// the failing path fails closed, the succeeding one does not depend on the
// limiter. A failure of the service itself (token.ErrUnavailable, such as
// the record of client assertions) or of a client's key server
// (clientauth.ErrFetch) is not the client's: not recorded.
func (s *Server) limited(c *gin.Context, id string, check func() (*clients.Client, error)) (*clients.Client, error) {
	l := s.opts.AuthLimiter
	if l == nil {
		return check()
	}
	keys := [...]authlimit.Key{{Kind: authlimit.Client, Name: id}, {Kind: authlimit.Address, Name: clientAddr(c)}}
	if err := l.Blocked(keys[:]...); err != nil {
		s.rateLimited(c, id, err)
		return nil, err
	}
	client, err := check()
	if err == nil {
		return client, nil
	}
	if errors.Is(err, token.ErrUnavailable) || errors.Is(err, clientauth.ErrFetch) {
		return nil, err
	}
	s.metrics.authFailures.Inc()
	switch ferr := l.Fail(c.Request.Context(), keys[:]...); {
	case errors.Is(ferr, authlimit.ErrLimited):
		s.rateLimited(c, id, ferr)
		return nil, ferr
	case ferr != nil:
		return nil, fmt.Errorf("%w: %w", token.ErrUnavailable, ferr)
	}
	return nil, err
}

// rateLimited counts a refusal by the limit, and logs the first of each key
// in a window as the audit event auth.rate_limited.
func (s *Server) rateLimited(c *gin.Context, id string, err error) {
	var le *authlimit.LimitedError
	if !errors.As(err, &le) {
		return
	}
	s.metrics.rateLimited.WithLabelValues(le.Key.Kind).Inc()
	if le.Report {
		s.audit(c, "auth.rate_limited", "too many failed authentications",
			"client_id", truncate(id), "limited_by", le.Key.Kind, "retry_after", le.Wait.Round(time.Second).String())
	}
}

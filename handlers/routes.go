package handlers

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/internal/tracing"
)

// routes is the route table: every route the engine serves, by route group,
// each group served from the file its comment names. Every route runs
// through the middleware of newEngine, then route; a GET route answers HEAD
// as well.
var routes = [...]struct {
	method, path string
	handle       func(*Server, *gin.Context)
	// parsesQuery is set for a handler that reads its query, through
	// query and first thing, so that route does not parse it twice.
	parsesQuery bool
}{
	// Token issue (issue.go).
	{http.MethodPost, "/token", (*Server).issue, false},
	// Validation (validate.go).
	{http.MethodGet, "/token/validate", (*Server).validate, true},
	// Introspection (introspect.go), revocation and admin revocation (revoke.go).
	{http.MethodPost, "/token/introspect", (*Server).introspect, false},
	{http.MethodPost, "/token/revoke", (*Server).revoke, false},
	{http.MethodDelete, "/subjects/:subject/tokens", (*Server).revokeSubject, false},
	{http.MethodDelete, "/clients/:client/tokens", (*Server).revokeClient, false},
	// The revocation feed (revfeed.go, package revfeed).
	{http.MethodGet, "/revocations/events", (*Server).revocationEvents, false},
	{http.MethodGet, "/revocations", (*Server).revocationSnapshot, false},
	{http.MethodPost, "/revocations/poll", (*Server).revocationPoll, false},
	// Metadata: keys, discovery, IDs, health (metadata.go).
	{http.MethodGet, "/.well-known/jwks.json", (*Server).jwks, false},
	{http.MethodGet, "/.well-known/oauth-authorization-server", (*Server).metadata, false},
	{http.MethodGet, "/ids/:id", (*Server).decodeID, false},
	{http.MethodGet, "/healthz", (*Server).healthz, false},
	{http.MethodGet, "/readyz", (*Server).ready, false},
}

// newEngine returns the gin engine serving routes, behind this middleware,
// outermost first: tracing (Options.TracerProvider), metrics, recover,
// closeWhileDraining (Options.Draining). Unknown paths and methods are
// answered here too.
func (s *Server) newEngine() (*gin.Engine, error) {
	opts := s.opts
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// gin believes X-Forwarded-For and X-Real-IP from anyone by default.
	if err := r.SetTrustedProxies(opts.TrustedProxies); err != nil {
		return nil, fmt.Errorf("handlers: TrustedProxies: %w", err)
	}
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	r.HandleMethodNotAllowed = true
	if opts.TracerProvider != nil {
		r.Use(otelgin.Middleware(tracing.ServiceName, otelgin.WithTracerProvider(opts.TracerProvider),
			otelgin.WithPropagators(tracing.Propagator)))
	}
	r.Use(s.metrics.middleware, s.recover) // metrics outermost, so a recovered panic is counted as its 500
	if opts.Draining != nil {
		r.Use(s.closeWhileDraining)
	}
	r.NoRoute(func(c *gin.Context) { s.fail(c, refusal.New(ErrNotFound, "no route %s", c.Request.URL.Path)) })
	r.NoMethod(func(c *gin.Context) {
		c.Header("Cache-Control", "no-store")
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, oauthError{Error: "invalid_request", Description: "method not allowed"})
	})

	for _, rt := range routes {
		h := s.route(rt.handle, rt.parsesQuery)
		r.Handle(rt.method, rt.path, h)
		if rt.method == http.MethodGet {
			// RFC 9110 §9.3.2: HEAD wherever GET is served. The handler is
			// GET's, so status and headers are the same; net/http drops
			// the body.
			r.Handle(http.MethodHead, rt.path, h)
		}
	}
	s.metrics.cacheRoutes(r.Routes())
	return r, nil
}

// route runs h on the Server current when the request begins. Unless h
// parses the query itself (parsesQuery), route parses it first (query), so
// that every route refuses a query that does not parse, whether or not it
// reads one.
func (s *Server) route(h func(*Server, *gin.Context), parsesQuery bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		cur := s.current.Load()
		if !parsesQuery {
			if _, err := query(c); err != nil {
				cur.fail(c, err)
				return
			}
		}
		h(cur, c)
	}
}

// closeWhileDraining answers with Connection: close while the server drains,
// so each client leaves its keep-alive connection after its answer instead of
// sending on it just as the server closes it.
func (s *Server) closeWhileDraining(c *gin.Context) {
	if s.opts.Draining() {
		c.Header("Connection", "close")
	}
	c.Next()
}

// recover turns a panic into a 500 without losing the server.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.fail(c, fmt.Errorf("panic: %v", p))
		}
	}()
	c.Next()
}

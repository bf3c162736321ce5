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
// each group served from the file its comment names, with who may call it
// (auth). Every route runs through the middleware of newEngine, then route,
// which authenticates its caller as auth declares; a GET route answers
// HEAD as well.
var routes = [...]routeEntry{
	// Token issue (issue.go): its DPoP proof is checked before the client
	// authenticates (issueProof).
	{method: http.MethodPost, path: "/token", auth: authClient, handle: (*Server).issue, proofFirst: true},
	// Validation (validate.go): the token is the credential, not a caller's.
	{method: http.MethodGet, path: "/token/validate", auth: authNone, handle: (*Server).validate, parsesQuery: true},
	// Introspection (introspect.go), revocation and admin revocation (revoke.go).
	{method: http.MethodPost, path: "/token/introspect", auth: authClient, handle: (*Server).introspect},
	{method: http.MethodPost, path: "/token/revoke", auth: authClient, handle: (*Server).revoke},
	{method: http.MethodDelete, path: "/subjects/:subject/tokens", auth: authAdmin, handle: (*Server).revokeSubject,
		forbidden: "only an admin client may revoke a subject's tokens"},
	{method: http.MethodDelete, path: "/clients/:client/tokens", auth: authAdmin, handle: (*Server).revokeClient,
		forbidden: "only an admin client may revoke a client's tokens"},
	// The revocation feed (revfeed.go, package revfeed).
	{method: http.MethodGet, path: "/revocations/events", auth: authFeed, handle: (*Server).revocationEvents},
	{method: http.MethodGet, path: "/revocations", auth: authFeed, handle: (*Server).revocationSnapshot},
	{method: http.MethodPost, path: "/revocations/poll", auth: authFeed, handle: (*Server).revocationPoll},
	// Metadata: keys, discovery, IDs, health (metadata.go).
	{method: http.MethodGet, path: "/.well-known/jwks.json", auth: authNone, handle: (*Server).jwks},
	{method: http.MethodGet, path: "/.well-known/oauth-authorization-server", auth: authNone, handle: (*Server).metadata},
	{method: http.MethodGet, path: "/ids/:id", auth: authNone, handle: (*Server).decodeID},
	{method: http.MethodGet, path: "/healthz", auth: authNone, handle: (*Server).healthz},
	{method: http.MethodGet, path: "/readyz", auth: authNone, handle: (*Server).ready},
}

// routeEntry is one route of the table.
type routeEntry struct {
	method, path string
	// auth is who may call the route, which route authenticates before
	// handle runs (authenticate, caller.go).
	auth   auth
	handle func(*Server, *gin.Context, call)
	// parsesQuery is set for a handler that reads its query, through
	// query and first thing, so that route does not parse it twice.
	parsesQuery bool
	// proofFirst, on an authClient route, checks the request's DPoP
	// proof once its form is read and before its client authenticates
	// (issueProof).
	proofFirst bool
	// forbidden is what a client that authenticates but is not an admin
	// is told on an authAdmin route.
	forbidden string
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

	for i := range routes {
		rt := &routes[i]
		h := s.route(rt)
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

// route is the middleware of every route, and the one place a caller is
// authenticated: it takes the set in force when the request begins, parses
// the query (query) unless rt's handler does, so that every route refuses
// a query that does not parse, whether or not it reads one, then
// authenticates the caller as rt.auth declares (authenticate), and runs
// rt's handler with the set and the caller (call).
func (s *Server) route(rt *routeEntry) gin.HandlerFunc {
	return func(c *gin.Context) {
		cl := call{set: s.set.Load()}
		if !rt.parsesQuery {
			if _, err := query(c); err != nil {
				s.fail(c, err)
				return
			}
		}
		if err := s.authenticate(c, rt, &cl); err != nil {
			s.fail(c, err)
			return
		}
		rt.handle(s, c, cl)
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

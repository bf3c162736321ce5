// Package handlers serves the token service over HTTP with gin.
//
//	POST   /token                                   issue (OAuth2 client credentials, RFC 6749 §4.4)
//	GET    /token/validate                          check a Bearer token (for services and gateways)
//	POST   /token/introspect                        RFC 7662
//	POST   /token/revoke                            RFC 7009
//	DELETE /subjects/{subject}/tokens               admin: revoke every token of a subject
//	DELETE /clients/{client}/tokens                 admin: revoke every token of a client
//	GET    /revocations/events                      the revocation feed, SSE (package revfeed)
//	GET    /revocations                             the revocation feed's snapshot
//	POST   /revocations/poll                        the revocation feed, RFC 8936 poll
//	GET    /.well-known/jwks.json                   public keys
//	GET    /.well-known/oauth-authorization-server  RFC 8414 metadata
//	GET    /ids/{id}                                decode a Snowflake ID
//	GET    /healthz, /readyz
//
// Every GET route answers HEAD as well, and every route refuses a query that
// does not parse (query); both come from the one route table (routes).
//
// The metrics are not served here: they go to Options.Registry, which the
// caller serves on a listener of its own (SNOWTOKEN_METRICS_ADDR), so that
// the public port does not tell them.
//
// Errors are OAuth2 JSON ({"error","error_description"}) with the status,
// WWW-Authenticate and Retry-After headers their RFCs ask for; see fail.
package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/tracing"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// IDs is what the HTTP layer needs of the ID generator.
type IDs interface {
	Decompose(id snowflakealg.ID) (snowflakealg.Parts, error)
	// Health fails while the generator cannot issue (clock far behind, lease lost).
	Health() error
	Stats() snowflakealg.Stats
}

// Options configures the handlers. Service, Clients and IDs are required.
type Options struct {
	Service *token.Service
	Clients *token.Clients
	IDs     IDs
	// BaseURL is where clients reach this service, for the RFC 8414
	// metadata. Empty means the issuer.
	BaseURL string
	// Logger receives request errors. Nil means slog.Default().
	Logger *slog.Logger
	// Registry receives the metrics, for the caller to serve apart from
	// these routes. Nil means a new registry of its own.
	Registry *prometheus.Registry
	// MaxBodyBytes bounds request bodies. Zero means 64 KiB.
	MaxBodyBytes int64
	// ReadyTimeout bounds the readiness checks. Zero means 2 s.
	ReadyTimeout time.Duration
	// Ready, if set, is one more readiness check, such as the Redis
	// settings (package redisconf); its error is /readyz's reason, so it
	// must hold no secret.
	Ready func(ctx context.Context) error
	// Draining, if set and true, makes /readyz fail while the server finishes
	// its work before shutting down, so load balancers stop sending to it.
	Draining func() bool
	// AuthLimiter, if set, limits failed client authentications (see
	// authenticateClient). Nil means no limit.
	AuthLimiter *authlimit.Limiter
	// Version names the files Service's keys and Clients were read from, for
	// /readyz. Zero means none (dev mode generates both).
	Version Version
	// Refused, if set, returns the sources (such as "clients", "keys")
	// whose last reload was refused, for /readyz's config.refused. They do
	// not fail readiness: the set in force (Version) still serves, and a
	// bad file rolled out to every replica must not take them all out.
	Refused func() map[string]Refusal
	// TrustedProxies are the addresses and CIDRs of proxies whose
	// X-Forwarded-For names the client's address (clientAddr). Nil means
	// none: the TCP peer is the client.
	TrustedProxies []string
	// TracerProvider, if set, records a server span for every request,
	// continuing the caller's trace (W3C traceparent); see package tracing.
	// Nil means no tracing middleware at all.
	TracerProvider trace.TracerProvider
	// Feed, if set, is the revocation log the /revocations routes serve
	// (package revfeed: a revlog.Follower), to clients with revocation_feed
	// and admins. Nil means those routes answer 404.
	Feed revfeed.Source
	// FeedOptions tune the feed (Heartbeat, MaxSubscribers, WriteTimeout,
	// Page); their zero values are revfeed's defaults. Source, Sign, Issuer,
	// Draining and Logger are set here.
	FeedOptions revfeed.Options
}

// MaxQueryLen bounds the query of every route (GET /token/validate's is the
// one read): room for a ?scope= of token.MaxScopeLen bytes, every byte
// percent-encoded.
const MaxQueryLen = 8192

// Server holds the handlers. A Server is one set of clients and keys (svc
// and clients), never changed: Swap stores a copy with the new set as the
// current one, and every request runs on the Server current when it began
// (route), so that it uses one set from start to finish. Every route is
// registered through route.
type Server struct {
	svc     *token.Service
	clients *token.Clients
	version Version
	current *atomic.Pointer[Server] // shared by every copy
	engine  *gin.Engine
	ids     IDs
	feed    *revfeed.Feed // nil without Options.Feed
	log     *slog.Logger
	metrics *metrics
	opts    Options
	// now is the service's clock (token.Options.Now), which decides when a
	// client secret has expired as it decides when a token has.
	now func() time.Time
}

// Version names the clients and keys a Server uses, as /readyz shows them:
// the short SHA-256 of each file (token.Clients.Version, token.KeySet.Version),
// so that an operator can see every replica runs the same set.
type Version struct {
	Clients string `json:"clients"`
	Keys    string `json:"keys"`
}

// Refusal is why a source of the set was refused on reload, and since when
// it has been (the first refusal since it last loaded). /readyz, on the
// public port, shows only since when: the reason names files, clients and
// fields, and is in the error log (event config.reload_refused).
type Refusal struct {
	Reason string    `json:"-"`
	Since  time.Time `json:"since"`
}

// configState is /readyz's config: the set in force, and the sources on
// disk that were refused.
type configState struct {
	Version
	Refused map[string]Refusal `json:"refused,omitempty"`
}

// New returns the gin engine serving every route.
func New(opts Options) (*gin.Engine, error) {
	s, err := NewServer(opts)
	if err != nil {
		return nil, err
	}
	return s.Engine(), nil
}

// NewServer returns the Server, for a caller that swaps its clients and keys
// (Swap) while it serves Engine.
func NewServer(opts Options) (*Server, error) {
	if opts.Service == nil || opts.Clients == nil || opts.IDs == nil {
		return nil, errors.New("handlers: Service, Clients and IDs are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 64 << 10
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Second
	}
	if opts.BaseURL == "" {
		opts.BaseURL = opts.Service.Options().Issuer
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	s := &Server{svc: opts.Service, clients: opts.Clients, version: opts.Version, current: new(atomic.Pointer[Server]),
		ids: opts.IDs, log: opts.Logger, opts: opts, now: opts.Service.Options().Now}
	s.current.Store(s)
	m, err := newMetrics(opts.Registry, opts.IDs, func() *token.Clients { return s.current.Load().clients })
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if opts.Feed != nil {
		fo := opts.FeedOptions
		fo.Source, fo.Issuer, fo.Draining, fo.Logger = opts.Feed, opts.Service.Options().Issuer, opts.Draining, opts.Logger
		// Signed with the keys of the Server current when it signs (Swap).
		fo.Sign = func(typ string, claims jwt.Claims) (string, error) {
			return s.current.Load().svc.SignEvent(typ, claims)
		}
		if s.feed, err = revfeed.New(fo); err != nil {
			return nil, fmt.Errorf("handlers: %w", err)
		}
		if err := registerFeed(opts.Registry, s.feed); err != nil {
			return nil, err
		}
	}

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
	r.Use(m.middleware, s.recover) // metrics outermost, so a recovered panic is counted as its 500
	if opts.Draining != nil {
		r.Use(s.closeWhileDraining)
	}
	r.NoRoute(func(c *gin.Context) { s.fail(c, fmt.Errorf("%w: no route %s", ErrNotFound, c.Request.URL.Path)) })
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
	m.cacheRoutes(r.Routes())
	s.engine = r
	return s, nil
}

// routes is the route table: every route the engine serves, each through
// route. A GET route answers HEAD as well.
var routes = [...]struct {
	method, path string
	handle       func(*Server, *gin.Context)
	// parsesQuery is set for a handler that reads its query, through
	// query and first thing, so that route does not parse it twice.
	parsesQuery bool
}{
	{http.MethodPost, "/token", (*Server).issue, false},
	{http.MethodGet, "/token/validate", (*Server).validate, true},
	{http.MethodPost, "/token/introspect", (*Server).introspect, false},
	{http.MethodPost, "/token/revoke", (*Server).revoke, false},
	{http.MethodDelete, "/subjects/:subject/tokens", (*Server).revokeSubject, false},
	{http.MethodDelete, "/clients/:client/tokens", (*Server).revokeClient, false},
	{http.MethodGet, "/revocations/events", (*Server).revocationEvents, false},
	{http.MethodGet, "/revocations", (*Server).revocationSnapshot, false},
	{http.MethodPost, "/revocations/poll", (*Server).revocationPoll, false},
	{http.MethodGet, "/.well-known/jwks.json", (*Server).jwks, false},
	{http.MethodGet, "/.well-known/oauth-authorization-server", (*Server).metadata, false},
	{http.MethodGet, "/ids/:id", (*Server).decodeID, false},
	{http.MethodGet, "/healthz", (*Server).healthz, false},
	{http.MethodGet, "/readyz", (*Server).ready, false},
}

// Engine returns the gin engine serving every route.
func (s *Server) Engine() *gin.Engine { return s.engine }

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

// query returns the request's query parameters, parsed strictly: at most
// MaxQueryLen bytes, and url.ParseQuery's error (a pair with a ';' or a bad
// '%' escape) is the request's invalid_request. gin's c.Query and
// url.URL.Query skip such a pair without a word, so that
// ?scope=orders:write; asked for no scope at all: no handler reads its
// query but through query. Without a query it is nil, at no cost.
func query(c *gin.Context) (url.Values, error) {
	raw := c.Request.URL.RawQuery
	if raw == "" {
		return nil, nil
	}
	if len(raw) > MaxQueryLen {
		return nil, fmt.Errorf("%w: query longer than %d bytes", token.ErrInvalidRequest, MaxQueryLen)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, token.Describe(fmt.Errorf("%w: query: %w", token.ErrInvalidRequest, err),
			"the query is not well-formed: a pair with ';' or a malformed '%' escape")
	}
	return q, nil
}

// Swap makes svc and clients, loaded from the files v names, the set of the
// requests that begin from now on; those under way finish with the set they
// began with. svc must share the session store and ID generator of the
// Service in Options (token.Service.WithKeys). Calls must not overlap.
func (s *Server) Swap(svc *token.Service, clients *token.Clients, v Version) {
	n := *s.current.Load()
	n.svc, n.clients, n.version = svc, clients, v
	s.current.Store(&n)
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

// form parses a POST body as application/x-www-form-urlencoded, bounded in
// size, and rejects repeated parameters (RFC 6749 §3.2) other than resource
// and audience, which RFC 8707 §2 and RFC 8693 §2.1 let a client repeat.
func (s *Server) form(c *gin.Context) (url.Values, error) {
	req := c.Request
	if ct := req.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		return nil, fmt.Errorf("%w: content type must be application/x-www-form-urlencoded", token.ErrInvalidRequest)
	}
	req.Body = http.MaxBytesReader(c.Writer, req.Body, s.opts.MaxBodyBytes)
	if err := req.ParseForm(); err != nil {
		desc := "the body is not a well-formed form"
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			desc = fmt.Sprintf("the body is larger than %d bytes", s.opts.MaxBodyBytes)
		}
		return nil, token.Describe(fmt.Errorf("%w: body: %w", token.ErrInvalidRequest, err), desc)
	}
	if len(req.URL.RawQuery) > 0 {
		return nil, fmt.Errorf("%w: parameters belong in the body, not the URL", token.ErrInvalidRequest)
	}
	for k, v := range req.PostForm {
		if len(v) > 1 && k != "resource" && k != "audience" {
			return nil, fmt.Errorf("%w: parameter %.32q repeated", token.ErrInvalidRequest, k)
		}
	}
	return req.PostForm, nil
}

// authenticate finds the client by HTTP Basic (RFC 6749 §2.3.1: id and secret
// form-urlencoded, then base64) or by client_id and client_secret in the form;
// using both is an error.
func (s *Server) authenticate(c *gin.Context, form url.Values) (*token.Client, error) {
	h := c.GetHeader("Authorization")
	formID, formSecret := form.Get("client_id"), form.Get("client_secret")
	if h != "" {
		if formSecret != "" {
			return nil, fmt.Errorf("%w: use one client authentication method", token.ErrInvalidRequest)
		}
		id, secret, err := parseBasic(h)
		if err != nil {
			return nil, err
		}
		if formID != "" && formID != id {
			return nil, fmt.Errorf("%w: client_id does not match the Authorization header", token.ErrInvalidRequest)
		}
		return s.authenticateClient(c, id, secret)
	}
	if formID == "" || formSecret == "" {
		return nil, fmt.Errorf("%w: no client credentials", token.ErrInvalidClient)
	}
	return s.authenticateClient(c, formID, formSecret)
}

// clientForm reads the form of an OAuth2 endpoint and the client it authenticates.
func (s *Server) clientForm(c *gin.Context) (url.Values, *token.Client, error) {
	form, err := s.form(c)
	if err != nil {
		return nil, nil, err
	}
	client, err := s.authenticate(c, form)
	return form, client, err
}

// tokenForm reads the token parameter of introspection and revocation, and
// the client that sends it.
func (s *Server) tokenForm(c *gin.Context) (string, *token.Client, error) {
	form, client, err := s.clientForm(c)
	if err != nil {
		return "", nil, err
	}
	raw := form.Get("token")
	if raw == "" {
		return "", nil, fmt.Errorf("%w: token is required", token.ErrInvalidRequest)
	}
	// A byte outside base64url and the dots (a line break, which base64
	// decoding would skip) is a malformed parameter, not a token that
	// is "not active" or "not ours": a 400, never a 200 that revoked
	// nothing. What is merely not in a token's shape is the service's to
	// call inactive (RFC 7662 §2.2, RFC 7009 §2.2).
	if err := jwtpolicy.CheckSyntax(raw); errors.Is(err, jwtpolicy.ErrTokenBytes) {
		return "", nil, token.Describe(fmt.Errorf("%w: token: %w", token.ErrInvalidRequest, err),
			"the token parameter holds a byte outside base64url and its two dots (a line break, a space, padding)")
	}
	return raw, client, nil
}

// basicClient authenticates the client of a request without a body: HTTP
// Basic only.
func (s *Server) basicClient(c *gin.Context) (*token.Client, error) {
	id, secret, err := parseBasic(c.GetHeader("Authorization"))
	if err != nil {
		return nil, err
	}
	return s.authenticateClient(c, id, secret)
}

func parseBasic(h string) (id, secret string, err error) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", fmt.Errorf("%w: Authorization must be Basic", token.ErrInvalidClient)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", fmt.Errorf("%w: malformed Basic credentials", token.ErrInvalidClient)
	}
	encID, encSecret, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("%w: malformed Basic credentials", token.ErrInvalidClient)
	}
	if id, err = url.QueryUnescape(encID); err != nil {
		return "", "", fmt.Errorf("%w: malformed Basic credentials", token.ErrInvalidClient)
	}
	if secret, err = url.QueryUnescape(encSecret); err != nil {
		return "", "", fmt.Errorf("%w: malformed Basic credentials", token.ErrInvalidClient)
	}
	return id, secret, nil
}

// tokenResponse is RFC 6749 §5.1, plus jti: the token's Snowflake ID, named as in its claims.
type tokenResponse struct {
	AccessToken string          `json:"access_token"`
	TokenType   string          `json:"token_type"`
	ExpiresIn   int64           `json:"expires_in"`
	Scope       string          `json:"scope"`
	JTI         snowflakealg.ID `json:"jti"`
}

func (s *Server) issue(c *gin.Context) {
	form, client, err := s.clientForm(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	switch gt := form.Get("grant_type"); gt {
	case "client_credentials":
	case "":
		s.fail(c, fmt.Errorf("%w: grant_type is required", token.ErrInvalidRequest))
		return
	default:
		s.fail(c, fmt.Errorf("%w: %.32q (only client_credentials)", ErrUnsupportedGrant, gt))
		return
	}
	req := token.IssueRequest{Scope: form.Get("scope"), Subject: form.Get("subject"),
		Resource: form["resource"], Audience: form["audience"]}
	if e := form.Get("expires_in"); e != "" {
		n, err := strconv.ParseInt(e, 10, 32)
		if err != nil || n <= 0 {
			s.fail(c, fmt.Errorf("%w: expires_in must be a positive number of seconds", token.ErrInvalidRequest))
			return
		}
		req.ExpiresIn = time.Duration(n) * time.Second
	}
	issued, err := s.svc.Issue(c.Request.Context(), client, req)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.metrics.issued.Inc()
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	writeJSON(c, http.StatusOK, &tokenResponse{
		AccessToken: issued.AccessToken,
		TokenType:   "Bearer",
		ExpiresIn:   int64(issued.ExpiresIn / time.Second),
		Scope:       issued.Scope,
		JTI:         issued.ID,
	})
}

// bearer reads the token from Authorization: Bearer only. A token in the URL
// (q, the request's query) is refused: URLs end up in logs.
func bearer(c *gin.Context, q url.Values) (string, error) {
	if q.Has("access_token") {
		return "", fmt.Errorf("%w: a token in the URL is refused (URLs are logged); use Authorization: Bearer", token.ErrInvalidRequest)
	}
	h := c.GetHeader("Authorization")
	if h == "" {
		return "", fmt.Errorf("%w: send Authorization: Bearer <token>", ErrNoToken)
	}
	scheme, raw, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization must use the Bearer scheme", ErrNoToken)
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("%w: empty bearer token", ErrNoToken)
	}
	return raw, nil
}

// The identity headers of a successful validation, for gateways; never set
// on any other answer.
const (
	hdrSubject = "X-Auth-Subject"
	hdrClient  = "X-Auth-Client"
	hdrScope   = "X-Auth-Scope"
	hdrTokenID = "X-Auth-Token-Id"
)

// claimsResponse is the body of a successful validation, and of an active
// introspection (RFC 7662 §2.2).
type claimsResponse struct {
	Active    bool            `json:"active"`
	Subject   string          `json:"sub"`
	ClientID  string          `json:"client_id"`
	Scope     string          `json:"scope"`
	Issuer    string          `json:"iss"`
	Audience  []string        `json:"aud,omitempty"`
	IssuedAt  int64           `json:"iat"`
	ExpiresAt int64           `json:"exp"`
	JTI       snowflakealg.ID `json:"jti"`
	WorkerID  int64           `json:"worker_id"`
	TokenType string          `json:"token_type,omitempty"`
}

func newClaimsResponse(v *token.Verified) claimsResponse {
	cl := v.Claims
	return claimsResponse{
		Active: true, Subject: cl.Subject, ClientID: cl.ClientID, Scope: cl.Scope,
		Issuer: cl.Issuer, Audience: cl.Audience,
		IssuedAt: cl.IssuedAt.Unix(), ExpiresAt: cl.ExpiresAt.Unix(),
		JTI: v.ID, WorkerID: v.Parts.Worker,
	}
}

func (s *Server) validate(c *gin.Context) {
	v, err := s.checkBearer(c)
	if err != nil {
		s.metrics.validation(err)
		s.fail(c, err)
		return
	}
	s.metrics.validation(nil)
	resp := newClaimsResponse(v)
	// The identity headers for gateways, set in the map directly: their keys
	// are canonical already, and one backing array serves the five values.
	// Set last, just before the 200 is written: fail removes them as well.
	vals := [...]string{"no-store", v.Claims.Subject, v.Claims.ClientID, v.Claims.Scope, v.Claims.ID}
	h := c.Writer.Header()
	h["Cache-Control"] = vals[0:1:1]
	h[hdrSubject] = vals[1:2:2]
	h[hdrClient] = vals[2:3:3]
	h[hdrScope] = vals[3:4:4]
	h[hdrTokenID] = vals[4:5:5]
	writeJSON(c, http.StatusOK, &resp)
}

// checkBearer validates the request's bearer token, then the audience
// ?audience= requires and the scopes ?scope= requires: the query is parsed
// (query: its syntax, bounded by MaxQueryLen) before the token is looked
// at, what the caller asks for in it only once its token passes. A token
// for another audience is invalid here (401), whatever its scopes.
func (s *Server) checkBearer(c *gin.Context) (*token.Verified, error) {
	q, err := query(c)
	if err != nil {
		return nil, err
	}
	raw, err := bearer(c, q)
	if err != nil {
		return nil, err
	}
	v, err := s.validateToken(c.Request.Context(), raw)
	if err != nil {
		return nil, err
	}
	if q == nil { // most calls have no query
		return v, nil
	}
	if err := s.checkAudience(q, v); err != nil {
		return nil, err
	}
	want, err := token.ParseScope(requiredScope(q))
	if err != nil {
		// %v, not %w: a bad ?scope= is the caller's invalid_request (RFC 6750
		// §3.1), not the token endpoint's invalid_scope that fail checks first.
		return nil, token.Describe(fmt.Errorf("%w: %v", token.ErrInvalidRequest, err), "scope: "+description(err))
	}
	if !v.HasScopes(want) {
		return nil, fmt.Errorf("%w: the token lacks %.64q", token.ErrInsufficientScope, strings.Join(v.MissingScopes(want), " "))
	}
	return v, nil
}

// requiredScope is what ?scope= asks for: every scope of every value, when
// it is given more than once (?scope=a&scope=b asks for a and b). A value
// appended to the query can only make the check stricter; keeping the first
// value alone would let one that comes first drop the others. The values
// are joined with a space, so that ParseScope's limits hold for them all
// and an empty value among several is malformed, as a doubled space is.
func requiredScope(q url.Values) string {
	if vs := q["scope"]; len(vs) > 1 {
		return strings.Join(vs, " ")
	} else if len(vs) == 1 {
		return vs[0]
	}
	return ""
}

// checkAudience checks the token against ?audience=, if given (q): one
// audience, which the token's aud must hold; given twice it is refused, as a
// token is checked for one. What the token holds instead goes to the debug
// log only.
func (s *Server) checkAudience(q url.Values, v *token.Verified) error {
	want, ok := q["audience"]
	switch {
	case !ok:
		return nil
	case len(want) > 1:
		return fmt.Errorf("%w: audience given %d times; a token is checked for one", token.ErrInvalidRequest, len(want))
	}
	if err := token.CheckAudience(want[0]); err != nil {
		// %v, not %w: a bad ?audience= is the caller's invalid_request
		// (RFC 6750 §3.1), not the token endpoint's invalid_target.
		return token.Describe(fmt.Errorf("%w: %v", token.ErrInvalidRequest, err), description(err))
	}
	if !v.ForAudience(want[0]) {
		s.log.Debug("audience mismatch", "want", want[0], "aud", v.Claims.Audience, "client_id", v.Claims.ClientID, "jti", v.Claims.ID)
		return fmt.Errorf("%w: audience mismatch: the token is not for %q", token.ErrInvalidToken, want[0])
	}
	return nil
}

// validateToken is Service.Validate for a token its client could still get:
// a client removed from the clients file or disabled, or one whose
// audiences no longer hold the token's, has its tokens end at once, at the
// cost of a map lookup (Service.CheckClient).
func (s *Server) validateToken(ctx context.Context, raw string) (*token.Verified, error) {
	v, err := s.svc.Validate(ctx, raw)
	if err != nil {
		return nil, err
	}
	if err := s.svc.CheckClient(s.clients, v); err != nil {
		s.log.Debug("token refused for its client", "client_id", v.Claims.ClientID, "aud", v.Claims.Audience, "jti", v.Claims.ID, "err", err)
		return nil, err
	}
	return v, nil
}

func (s *Server) introspect(c *gin.Context) {
	raw, client, err := s.tokenForm(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	v, err := s.validateToken(c.Request.Context(), raw)
	switch {
	case errors.Is(err, token.ErrUnavailable):
		s.fail(c, err) // fail closed, and say so: not "inactive"
	case err != nil, !client.MayIntrospectToken(v.Claims.ClientID):
		// Another client's token is as inactive as a bad one: the answer
		// does not tell it exists (RFC 7662 §4).
		c.JSON(http.StatusOK, gin.H{"active": false})
	default:
		resp := newClaimsResponse(v)
		resp.TokenType = "Bearer"
		writeJSON(c, http.StatusOK, &resp)
	}
}

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
		s.fail(c, fmt.Errorf("%w: only an admin client may revoke a %s's tokens", token.ErrForbidden, what))
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

// jwksCacheControl lets consumers cache the JWKS for token.JWKSMaxAge, which
// a key is published for (with the time every replica takes to load it)
// before it signs.
var jwksCacheControl = "public, max-age=" + strconv.Itoa(int(token.JWKSMaxAge/time.Second))

func (s *Server) jwks(c *gin.Context) {
	c.Header("Cache-Control", jwksCacheControl)
	c.JSON(http.StatusOK, s.svc.JWKS())
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *Server) metadata(c *gin.Context) {
	b := s.opts.BaseURL
	c.JSON(http.StatusOK, gin.H{
		"issuer":                                s.svc.Options().Issuer,
		"token_endpoint":                        b + "/token",
		"jwks_uri":                              b + "/.well-known/jwks.json",
		"introspection_endpoint":                b + "/token/introspect",
		"revocation_endpoint":                   b + "/token/revoke",
		"grant_types_supported":                 []string{"client_credentials"},
		"response_types_supported":              []string{},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"introspection_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"revocation_endpoint_auth_methods_supported":    []string{"client_secret_basic", "client_secret_post"},
	})
}

func (s *Server) decodeID(c *gin.Context) {
	id, err := snowflakealg.ParseID(c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.ids.Decompose(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

func (s *Server) ready(c *gin.Context) {
	if s.opts.Draining != nil && s.opts.Draining() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": "shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.ReadyTimeout)
	defer cancel()
	// Every reason at once, so that an operator fixes them in one go.
	var reasons []string
	notReady := func(reason string, err error) {
		reasons = append(reasons, reason)
		s.log.Warn("not ready", "err", err)
	}
	if err := s.svc.Ready(ctx); err != nil {
		notReady("redis does not accept writes: "+redisReason(err), err)
	} else if s.opts.Ready != nil {
		if err := s.opts.Ready(ctx); err != nil {
			notReady(err.Error(), err)
		}
	}
	if err := s.ids.Health(); err != nil {
		notReady(err.Error(), err)
	}
	config := configState{Version: s.version}
	if s.opts.Refused != nil {
		config.Refused = s.opts.Refused()
	}
	if len(reasons) > 0 {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": strings.Join(reasons, "; "), "config": config})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "config": config})
}

// Package handlers serves the token service over HTTP with gin. Each route,
// and who may call it (none, client, admin, feed: auth, caller.go):
//
//	POST   /token                                   client  issue (OAuth2 client credentials, RFC 6749 §4.4), exchange (RFC 8693)
//	GET    /token/validate                          none    check a Bearer token (for services and gateways)
//	POST   /token/introspect                        client  RFC 7662
//	POST   /token/revoke                            client  RFC 7009
//	DELETE /subjects/{subject}/tokens               admin   revoke every token of a subject
//	DELETE /clients/{client}/tokens                 admin   revoke every token of a client
//	GET    /revocations/events                      feed    the revocation feed, SSE (package revfeed)
//	GET    /revocations                             feed    the revocation feed's snapshot
//	POST   /revocations/poll                        feed    the revocation feed, RFC 8936 poll
//	GET    /.well-known/jwks.json                   none    public keys
//	GET    /.well-known/oauth-authorization-server  none    RFC 8414 metadata
//	GET    /ids/{id}                                none    decode a Snowflake ID
//	GET    /healthz, /readyz                        none
//
// A token presented to GET /token/validate, or sent to introspection, is
// judged by one call, token.Service.Verdict (signature and claims,
// revocation, its client's standing, its DPoP binding, audience, scopes):
// the handlers translate its answer to HTTP and decide nothing of it.
//
// Every GET route answers HEAD as well, every route refuses a query that
// does not parse (query), and every caller is authenticated as its route
// declares before its handler runs: all three come from the one route
// table (routes, in routes.go) and its middleware (route). Each route
// group is served from a file of its own:
//
//	handlers.go    Options, Server and the set a reload swaps, New, Swap
//	routes.go      the route table and the middleware every route runs through
//	caller.go      who may call a route (auth), its authentication, the call a handler gets
//	issue.go       POST /token: client credentials, and what every grant shares
//	exchange.go    POST /token: token exchange (token.Service.Exchange)
//	validate.go    GET /token/validate: the verdict (token.Service.Verdict) to HTTP
//	txn.go         the Transaction Token a validation mints when asked (package token/txn)
//	authorize.go   the same verdict and answer for a gateway's check, gin-free (Authorize; package extauthz)
//	introspect.go  POST /token/introspect
//	revoke.go      POST /token/revoke, DELETE .../tokens (admin)
//	revfeed.go     /revocations... (the feed itself is package revfeed)
//	metadata.go    JWKS, RFC 8414 metadata, /ids, /healthz, /readyz
//	request.go     the parsing the routes share: query, form, client credentials
//	authlimit.go   client authentication behind the failed-authentication limit
//	errors.go      errors to HTTP answers: one table (answers), read by refuse for every front door
//	description.go what a client is told of an error (description)
//	audit.go, metrics.go, jsonbody.go  audit log, Prometheus series, hot JSON bodies
//
// The metrics are not served here: they go to Options.Registry, which the
// caller serves on a listener of its own (SNOWTOKEN_METRICS_ADDR), so that
// the public port does not tell them.
//
// Errors are OAuth2 JSON ({"error","error_description"}) with the status,
// WWW-Authenticate and Retry-After headers their RFCs ask for; see answers.
package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/txn"
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
	Clients *clients.Registry
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
	// X-Forwarded-For names the client's address (clientAddr), for the
	// failed-authentication limit and the audit log: a gateway in front of
	// the clients. Nil means none: the TCP peer is the client.
	TrustedProxies []string
	// DPoPForwarders are the addresses and CIDRs of callers whose
	// X-Forwarded-Method, -Proto, -Host and -Uri name the original request
	// a DPoP proof sent to GET /token/validate is checked against
	// (resourceRequest): a gateway's auth_request, a Remote-mode consumer.
	// The two trusts are apart: a forwarder does not name the client's
	// address, a trusted proxy does not name a proof's request. Nil means
	// none: a proof is checked against the request it came with.
	DPoPForwarders []string
	// TracerProvider, if set, records a server span for every request,
	// continuing the caller's trace (W3C traceparent); see package tracing.
	// Nil means no tracing middleware at all.
	TracerProvider trace.TracerProvider
	// Feed, if set, is the revocation log the /revocations routes serve
	// (package revfeed: a revlog.Follower), to clients with revocation_feed
	// and admins. Nil means those routes answer 404.
	Feed revfeed.Source
	// Assertions configure client authentication by client assertion
	// (client_assertion, RFC 7523 §2.2: private_key_jwt and workload
	// identity clients; package token/clientauth). Its Audiences are set
	// here: the issuer, and the token endpoint under the issuer and under
	// BaseURL. Without Assertions.Replay, the record of used jti that
	// every replica must share, every assertion is refused.
	Assertions clientauth.Options
	// FeedOptions tune the feed (Heartbeat, MaxSubscribers, MaxPerClient,
	// MaxSnapshots, WriteTimeout, Page); their zero values are revfeed's
	// defaults. Source, Sign, SignPayload, Issuer, Draining and Logger are
	// set here.
	FeedOptions revfeed.Options
	// DPoP tunes the checks of DPoP proofs (package client/dpop; dpop.go):
	// its zero values are dpop's defaults. Its Replay, the record of the
	// proofs accepted, must be shared by every replica (redisstore.Proofs);
	// nil means one of this process's own, for tests and dev mode. Its
	// Nonce is set here, from DPoPNonces.
	DPoP dpop.Options
	// Txn, if set, mints a Transaction Token on a successful GET
	// /token/validate that asks for one (?txn_token=1; txn.go). Nil means
	// Transaction Tokens are off: such a request is refused.
	Txn *txn.Minter
	// DPoPNonces makes every DPoP proof carry a nonce this service gave
	// out (RFC 9449 §8; dpopnonce.go), which bounds how long before its use
	// a proof can have been made. False means none is asked for.
	DPoPNonces bool
}

// Server holds the handlers: the parts that live as long as it does
// (engine, options, logger, metrics, the feed, the DPoP and assertion
// checkers with their caches), and, behind one atomic pointer, the set
// that a reload replaces (set). Every request runs on the set in force when
// it began (route), so that it uses one set from start to finish.
//
//	Server ── long-lived: engine, ids, feed, assertions, dpop, forwarders, log, metrics, opts
//	   └── set (atomic.Pointer, Swap) ── per reload: svc (keys), clients, version, nonces
type Server struct {
	set    atomic.Pointer[set]
	engine *gin.Engine
	ids    IDs
	feed   *revfeed.Feed // nil without Options.Feed
	// assertions checks client assertions: nil without
	// Options.Assertions.Replay. It outlives reloads of the clients, so
	// that its cache of fetched key sets does (Swap drops the changed).
	assertions *clientauth.Verifier
	log        *slog.Logger
	metrics    *metrics
	opts       Options
	dpop       *dpop.Checker
	forwarders []netip.Prefix // Options.DPoPForwarders
	// now is the service's clock (token.Options.Now), which decides when a
	// client secret has expired as it decides when a token has.
	now func() time.Time
}

// set is what a reload replaces, all at once (Swap): the service with its
// keys, the clients, the files' version, and the DPoP nonces made from the
// keys. A set is never changed once stored.
type set struct {
	svc     *token.Service
	clients *clients.Registry
	version Version
	nonces  *nonces // nil without Options.DPoPNonces; made from svc's keys
}

// newSet returns the set of svc, clients and v, with nonces made from
// svc's keys if DPoP nonces are on.
func newSet(svc *token.Service, clients *clients.Registry, v Version, withNonces bool) *set {
	st := &set{svc: svc, clients: clients, version: v}
	if withNonces {
		st.nonces = &nonces{key: svc.Keys().Secret("dpop nonce")}
	}
	return st
}

// Version names the clients and keys a Server uses, as /readyz shows them:
// the short SHA-256 of each file (clients.Registry.Version, keyset.Set.Version),
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
		return nil, fmt.Errorf("%w: Service, Clients and IDs are required", ErrOptions)
	}
	if opts.MaxBodyBytes < 0 || opts.ReadyTimeout < 0 {
		return nil, fmt.Errorf("%w: MaxBodyBytes %d and ReadyTimeout %v must not be negative (zero means the default)", ErrOptions, opts.MaxBodyBytes, opts.ReadyTimeout)
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
	s := &Server{ids: opts.IDs, log: opts.Logger, opts: opts, now: opts.Service.Options().Now}
	s.set.Store(newSet(opts.Service, opts.Clients, opts.Version, opts.DPoPNonces))
	forwarders, err := parsePrefixes("DPoPForwarders", opts.DPoPForwarders)
	if err != nil {
		return nil, err
	}
	s.forwarders = forwarders
	if opts.DPoPNonces {
		opts.DPoP.Nonce = func(n string, now time.Time) bool { return s.set.Load().nonces.valid(n, now) }
	}
	if s.dpop, err = dpop.New(opts.DPoP); err != nil {
		return nil, fmt.Errorf("handlers: DPoP: %w", err)
	}
	m, err := newMetrics(opts.Registry, opts.IDs, func() *clients.Registry { return s.set.Load().clients })
	if err != nil {
		return nil, err
	}
	s.metrics = m
	m.knowClients(opts.Clients)
	if opts.Feed != nil {
		fo := opts.FeedOptions
		fo.Source, fo.Issuer, fo.Draining, fo.Logger = opts.Feed, opts.Service.Options().Issuer, opts.Draining, opts.Logger
		// Signed with the keys of the set in force when it signs (Swap).
		fo.Sign = func(typ string, claims jwt.Claims) (string, error) {
			return s.set.Load().svc.SignEvent(typ, claims)
		}
		fo.SignPayload = func(typ string, payload ...[]byte) ([]byte, error) {
			return s.set.Load().svc.SignEventPayload(typ, payload...)
		}
		if s.feed, err = revfeed.New(fo); err != nil {
			return nil, fmt.Errorf("handlers: %w", err)
		}
		if err := registerFeed(opts.Registry, s.feed); err != nil {
			return nil, err
		}
	}
	if opts.Assertions.Replay != nil {
		ao := opts.Assertions
		iss := opts.Service.Options().Issuer
		ao.Audiences = slices.Compact([]string{iss, strings.TrimRight(iss, "/") + "/token", opts.BaseURL + "/token"})
		if ao.Now == nil {
			ao.Now = s.now
		}
		if s.assertions, err = clientauth.New(ao); err != nil {
			return nil, fmt.Errorf("handlers: %w", err)
		}
	}
	if s.engine, err = s.newEngine(); err != nil {
		return nil, err
	}
	return s, nil
}

// Engine returns the gin engine serving every route.
func (s *Server) Engine() *gin.Engine { return s.engine }

// Swap makes svc and clients, loaded from the files v names, the set of the
// requests that begin from now on; those under way finish with the set they
// began with, except the streams and waiting polls of the revocation feed:
// each asks again whether its client may still follow the feed
// (revfeed.Feed.Recheck) and ends if not. svc must share the session store
// and ID generator of the Service in Options (token.Service.WithKeys). Calls
// must not overlap.
//
// The key sets fetched for the clients that clients removes or whose entry
// it changes (clients.Registry.KeysChanged) are dropped first, so that no
// request on the new set, nor one begun on the old set after this call,
// checks an assertion against keys fetched before the change.
func (s *Server) Swap(svc *token.Service, clients *clients.Registry, v Version) {
	if s.assertions != nil {
		for _, reg := range s.set.Load().clients.KeysChanged(clients) {
			s.assertions.Forget(reg)
		}
	}
	s.metrics.knowClients(clients)
	s.set.Store(newSet(svc, clients, v, s.opts.DPoPNonces))
	if s.feed != nil {
		s.feed.Recheck()
	}
}

// Package extauthz serves Envoy's external authorization protocol over
// gRPC (envoy.service.auth.v3.Authorization/Check), the one Istio's CUSTOM
// policies, Envoy Gateway's SecurityPolicy, Contour and Emissary call: a
// front door onto the verdict GET /token/validate gives, on a listener of
// its own (SNOWTOKEN_EXTAUTHZ_ADDR).
//
// A CheckRequest is read as GET /token/validate reads its request
// (handlers.Server.Authorize decides, handlers' one error table answers):
//
//	attributes.request.http.headers     Authorization (Bearer or DPoP) and DPoP;
//	  (or header_map)                   header_map, when the gateway sends it, keeps
//	                                    repeated headers apart
//	attributes.request.http.method,     the original request a DPoP proof must be of
//	  scheme, host, path                (htm, htu; the path's query is not compared)
//	attributes.context_extensions       audience, scope: what ?audience= and ?scope=
//	                                    require; any other key is refused (below)
//
// A CheckResponse answers OK with the identity headers (X-Auth-Subject,
// X-Auth-Client, X-Auth-Scope, X-Auth-Token-Id) set on the upstream
// request, replacing any copy the client sent; one whose value is empty is
// removed instead (headers_to_remove, which Envoy applies after the headers
// it sets), so a client never forges one. A refusal is Denied with the
// status, WWW-Authenticate, Retry-After and OAuth2 JSON body a client gets
// from GET /token/validate, and the gRPC code nearest the status.
//
// A context extension other than audience and scope is refused, as the
// server's error (500 server_error, logged at error): a misspelt key
// (scopes, aud) would otherwise drop a requirement without a word and let
// through the tokens a route means to refuse.
//
// A call whose deadline passes, or that its caller cancels, ends with the
// gRPC error (DEADLINE_EXCEEDED, CANCELED), never an OK: the gateway then
// applies its own failure policy, which must stay closed
// (failure_mode_allow: false, Envoy's default). A CheckRequest larger than
// Options.MaxRecvMsgSize is refused (RESOURCE_EXHAUSTED) before it is read.
//
// The listener also serves gRPC's health service (grpc.health.v1, for
// "" and the Authorization service: NOT_SERVING until SetServing, and from
// the drain on), and no reflection. Its callers are the gateways, which
// name the original request a proof is checked against: keep the port to
// them (deploy/kubernetes's NetworkPolicy).
package extauthz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/handlers"
)

// Errors of New and of a CheckRequest.
var (
	ErrOptions = errors.New("extauthz: bad options")
	// ErrExtension: a context extension other than audience, scope and
	// txn_token (whose one value is "1").
	ErrExtension = errors.New("extauthz: unknown context extension")
)

// The context extensions a route may set (attributes.context_extensions).
const (
	ExtensionAudience = "audience"
	ExtensionScope    = "scope"
	// ExtensionTxnToken "1" asks for a Transaction Token on success, as
	// GET /token/validate?txn_token=1 does: it goes upstream in Txn-Token.
	ExtensionTxnToken = "txn_token"
)

// DefaultMaxRecvMsgSize bounds a CheckRequest unless Options say
// otherwise: room for the 60 KiB of headers Envoy accepts by default
// (max_request_headers_kb) and the attributes around them. A request body
// is never read: configure the gateway not to send one.
const DefaultMaxRecvMsgSize = 128 << 10

// maxSendMsgSize bounds an answer: the identity headers, or a refusal's
// headers and body, a few hundred bytes.
const maxSendMsgSize = 64 << 10

// Authorizer decides a gateway's check: handlers.Server.
type Authorizer interface {
	Authorize(ctx context.Context, r handlers.Resource) handlers.Answer
	Refusal(h http.Header, err error, scope string) handlers.Answer
}

// Options configure a Server. Authorizer is required.
type Options struct {
	Authorizer Authorizer
	// Registry receives the metrics (snowtoken_extauthz_*). Nil means a new
	// registry of its own.
	Registry *prometheus.Registry
	// TracerProvider, if set, records a server span for every call,
	// continuing the gateway's trace (otelgrpc). Nil means none.
	TracerProvider trace.TracerProvider
	// MaxRecvMsgSize bounds a CheckRequest, in bytes. Zero means
	// DefaultMaxRecvMsgSize; a negative size is an error.
	MaxRecvMsgSize int
}

// Server is the Authorization service, with gRPC's health service, on a
// grpc.Server of its own.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	auth    Authorizer
	grpc    *grpc.Server
	health  *health.Server
	metrics *metrics
}

// New returns a Server for opts, not yet serving.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Authorizer == nil:
		return nil, fmt.Errorf("%w: Authorizer is required", ErrOptions)
	case opts.MaxRecvMsgSize < 0:
		return nil, fmt.Errorf("%w: MaxRecvMsgSize %d is negative", ErrOptions, opts.MaxRecvMsgSize)
	case opts.MaxRecvMsgSize == 0:
		opts.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opts.MaxRecvMsgSize),
		grpc.MaxSendMsgSize(maxSendMsgSize),
		grpc.MaxHeaderListSize(16 << 10), // gRPC's own metadata: a gateway sends a few hundred bytes
		grpc.ConnectionTimeout(5 * time.Second),
	}
	if opts.TracerProvider != nil {
		sopts = append(sopts, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(opts.TracerProvider))))
	}
	s := &Server{auth: opts.Authorizer, grpc: grpc.NewServer(sopts...), health: health.NewServer(), metrics: m}
	authv3.RegisterAuthorizationServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.SetServing(false)
	return s, nil
}

// SetServing sets what the health service says, for "" and for the
// Authorization service: SERVING once the issuer is ready, NOT_SERVING
// before and from its drain on.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(authv3.Authorization_ServiceDesc.ServiceName, st)
}

// Serve serves ln until Stop; it returns nil once stopped.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.grpc.Serve(ln); !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop stops taking calls and waits for those in flight (GracefulStop),
// until ctx ends: then it ends them (Stop).
func (s *Server) Stop(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() { defer close(done); s.grpc.GracefulStop() }()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
}

// Check answers a gateway's CheckRequest (see the package doc).
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	start := time.Now()
	var a handlers.Answer
	if r, err := resource(req); err != nil {
		a = s.auth.Refusal(make(http.Header, 2), err, "")
	} else {
		a = s.auth.Authorize(ctx, r)
	}
	if err := ctx.Err(); err != nil {
		s.metrics.count(outcomeAbandoned, start)
		return nil, status.FromContextError(err).Err()
	}
	s.metrics.count(handlers.Outcome(a.Err), start)
	return response(a), nil
}

// resource reads what handlers.Server.Authorize needs of req.
func resource(req *authv3.CheckRequest) (handlers.Resource, error) {
	attrs := req.GetAttributes()
	hr := attrs.GetRequest().GetHttp()
	r := handlers.Resource{Header: credentials(hr), Method: hr.GetMethod(), Scheme: hr.GetScheme(), Host: hr.GetHost(), Path: hr.GetPath(),
		Addr: attrs.GetSource().GetAddress().GetSocketAddress().GetAddress()}
	for k, v := range attrs.GetContextExtensions() {
		switch {
		case k == ExtensionAudience:
			r.Audience = []string{v}
		case k == ExtensionScope:
			r.Scope = v
		case k == ExtensionTxnToken && v == "1":
			r.TxnToken = true
		case k == ExtensionTxnToken:
			return r, fmt.Errorf("%w: %s %.16q (only 1)", ErrExtension, k, v)
		default:
			return r, fmt.Errorf("%w: %.64q (only %s, %s and %s)", ErrExtension, k, ExtensionAudience, ExtensionScope, ExtensionTxnToken)
		}
	}
	return r, nil
}

// credentials are the headers of hr a verdict reads, Authorization and
// DPoP, each value apart: from header_map when the gateway sends it
// (encode_raw_headers), else from headers, where Envoy has joined a
// repeated header's values with commas (a token or proof never holds one,
// so such a value is refused as malformed).
func credentials(hr *authv3.AttributeContext_HttpRequest) http.Header {
	h := make(http.Header, 2)
	add := func(k, v string) {
		switch {
		case strings.EqualFold(k, "authorization"):
			h["Authorization"] = append(h["Authorization"], v)
		case strings.EqualFold(k, "dpop"):
			h["Dpop"] = append(h["Dpop"], v)
		}
	}
	if hm := hr.GetHeaderMap(); hm != nil {
		for _, kv := range hm.GetHeaders() {
			v := kv.GetValue()
			if raw := kv.GetRawValue(); len(raw) > 0 {
				v = string(raw)
			}
			add(kv.GetKey(), v)
		}
		return h
	}
	for k, v := range hr.GetHeaders() {
		add(k, v)
	}
	return h
}

// response makes a the CheckResponse Envoy acts on.
func response(a handlers.Answer) *authv3.CheckResponse {
	if a.Status == http.StatusOK {
		ok := &authv3.OkHttpResponse{}
		for _, k := range handlers.UpstreamHeaders {
			if v := a.Header.Get(k); v != "" {
				ok.Headers = append(ok.Headers, set(k, v))
			} else {
				ok.HeadersToRemove = append(ok.HeadersToRemove, strings.ToLower(k))
			}
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}
	}
	denied := &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode(a.Status)}, Body: string(a.Body)}
	for _, k := range slices.Sorted(maps.Keys(a.Header)) {
		for _, v := range a.Header[k] {
			denied.Headers = append(denied.Headers, set(k, v))
		}
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code(a.Status))},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: denied}}
}

// set is a header that replaces the request's own copies.
func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// code is the gRPC code of a refusal's HTTP status; any code but OK is a
// denial to Envoy, which answers with the denied response's status.
func code(status int) codes.Code {
	switch {
	case status == http.StatusUnauthorized:
		return codes.Unauthenticated
	case status == http.StatusForbidden:
		return codes.PermissionDenied
	case status == http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case status == http.StatusServiceUnavailable:
		return codes.Unavailable
	case status < http.StatusInternalServerError:
		return codes.InvalidArgument
	}
	return codes.Internal
}

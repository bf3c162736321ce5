package handlers

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// Errors of the HTTP layer itself; the rest come from package token.
var (
	ErrUnsupportedGrant = errors.New("handlers: unsupported grant type")
	ErrNoToken          = errors.New("handlers: no bearer token")
	ErrNotFound         = errors.New("handlers: not found")
	// ErrOptions: NewServer's options miss what it needs or hold a
	// negative bound.
	ErrOptions = errors.New("handlers: invalid options")
	// ErrDPoPProof: a DPoP proof missing where one is needed, repeated, or
	// refused by its checks (package client/dpop); ErrDPoPNonce: a proof
	// without the current server nonce (RFC 9449 §8); ErrDPoPBound: a
	// DPoP-bound token presented as a bearer token. ErrDPoPProof and
	// ErrDPoPBound are token's: the verdict (token.Service.Verdict)
	// refuses a binding with them, as a proof's checks here do.
	ErrDPoPProof = token.ErrDPoPProof
	ErrDPoPNonce = errors.New("handlers: DPoP proof without the current nonce")
	ErrDPoPBound = token.ErrDPoPBound
)

// oauthError is the body of every error: RFC 6749 §5.2 and RFC 6750 §3.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// realm names us in WWW-Authenticate challenges.
const realm = "snowtoken"

// answer is how fail answers one kind of error: a row of answers.
type answer struct {
	err    error // matched with errors.Is
	status int
	code   string // the OAuth2 error code
	// description, if set, is told instead of description(err): a fixed
	// text where the details are the server's own. fallback is told when
	// the error carries no description of its own: never its Go text.
	description string
	fallback    string
	// challenge, if set, is the WWW-Authenticate header (RFC 6750 §3, RFC
	// 7617). With challengeScope it ends with the scope ?scope= asks for;
	// with bearerOnly it is sent on GET /token/validate only, the one route
	// a Bearer token is sent to.
	challenge      string
	challengeScope bool
	bearerOnly     bool
	// dpop makes the answer, on GET /token/validate, a 401 with a DPoP
	// challenge naming code (RFC 9449 §7.1): there a proof is the
	// resource's to refuse, at the token endpoint the request's (§5).
	dpop bool
	// retry sets Retry-After: retryAfterSeconds.
	retry bool
	// logMsg, if set, logs the error at logLevel with its route;
	// unavailable counts it as the service unavailable (redisErrors).
	logMsg      string
	logLevel    slog.Level
	unavailable bool
}

// answers map errors to HTTP, the first that matches in this order; an error
// that matches none is the server's own (internalError).
var answers = [...]answer{
	// Nothing failed: the client's tokens were revoked moments ago, or a
	// token's kid is unknown while the keys are not known to be current.
	// A client (or anyone, with a made-up kid) causes these: they are
	// not counted as the service unavailable nor logged as a warning.
	{err: token.ErrClientRevoking, status: http.StatusServiceUnavailable, code: "temporarily_unavailable", retry: true,
		logMsg: "request deferred", logLevel: slog.LevelDebug,
		description: "this client's tokens were revoked moments ago and a token issued now would not validate; retry after Retry-After"},
	{err: token.ErrKeysUndecided, status: http.StatusServiceUnavailable, code: "temporarily_unavailable", retry: true,
		logMsg: "request deferred", logLevel: slog.LevelDebug,
		description: "this replica cannot yet tell whether the token's signing key is one of the issuer's; retry later"},
	// Not Redis: the feed's subscribers are at their bound
	// (revfeed.Options.MaxSubscribers); the consumer retries (ErrBusy
	// carries no wait: 1 s).
	{err: revfeed.ErrBusy, status: http.StatusServiceUnavailable, code: "temporarily_unavailable", retry: true,
		logMsg: "revocation feed full", logLevel: slog.LevelWarn,
		description: "the revocation feed serves as many subscribers as it may; retry later"},
	// Not Redis either: the snapshots served at once are at their bound
	// (revfeed.Options.MaxSnapshots), each holding a buffer of its size.
	{err: revfeed.ErrSnapshotsBusy, status: http.StatusServiceUnavailable, code: "temporarily_unavailable", retry: true,
		logMsg: "revocation snapshots at their bound", logLevel: slog.LevelWarn,
		description: "the revocation feed serves as many snapshots at once as it may; retry later"},
	// Not Redis: a key set a client's request needs cannot be fetched (its
	// key server is down or refused); counted and logged per client where
	// it happens (clientKeysUnavailable), not as the service unavailable.
	{err: clientauth.ErrFetch, status: http.StatusServiceUnavailable, code: "temporarily_unavailable", retry: true,
		description: "keys this client's request needs cannot be fetched from their key server (its jwks_uri, its workload issuer's, or its subject token issuer's) now; retry later"},
	// This client holds as many streams and waiting polls, or snapshots,
	// as one may (revfeed.Options.MaxPerClient, MaxSnapshotsPerClient): the
	// client's own doing, so 429
	// (RFC 6585 §4), as the failed-authentication limit answers, not the
	// 503 of a full server, and no log line (its rate is the client's);
	// temporarily_unavailable for the reason that row gives.
	{err: revfeed.ErrClientBusy, status: http.StatusTooManyRequests, code: "temporarily_unavailable", retry: true,
		description: "this client holds as many streams, waiting polls or snapshots of the revocation feed at once as one client may; retry once one has ended"},
	// Every one counted: the log summarises repeats (internal/logsum).
	{err: token.ErrUnavailable, status: http.StatusServiceUnavailable, code: "temporarily_unavailable", retry: true,
		logMsg: "unavailable", logLevel: slog.LevelWarn, unavailable: true,
		description: "the token service is temporarily unavailable; retry later"},
	// No OAuth2 code means "too many attempts": temporarily_unavailable
	// (RFC 6749 §4.1.2.1) is registered, tells clients to retry later,
	// and does not claim the credentials are wrong, which a refusal
	// before the secret is checked does not know. invalid_client would
	// send an operator rotating a good secret; slow_down is the device
	// flow's polling signal (RFC 8628 §3.5).
	{err: authlimit.ErrLimited, status: http.StatusTooManyRequests, code: "temporarily_unavailable", retry: true,
		fallback: "too many failed authentications; retry later"},
	{err: token.ErrInvalidClient, status: http.StatusUnauthorized, code: "invalid_client", fallback: "client authentication failed",
		challenge: `Basic realm="` + realm + `"`},
	// RFC 9449 §5 and §7.1; their rows come before token's, which the
	// errors of a proof never are.
	{err: ErrDPoPNonce, status: http.StatusBadRequest, code: "use_dpop_nonce", dpop: true,
		description: "send the DPoP proof again with the nonce in the DPoP-Nonce header"},
	{err: ErrDPoPProof, status: http.StatusBadRequest, code: "invalid_dpop_proof", dpop: true, fallback: "invalid DPoP proof"},
	{err: token.ErrDPoPRequired, status: http.StatusBadRequest, code: "invalid_dpop_proof",
		description: "this client's tokens are DPoP-bound (dpop_bound_access_tokens): send a DPoP proof of the token request in the DPoP header"},
	{err: ErrDPoPBound, status: http.StatusUnauthorized, code: "invalid_token", dpop: true, fallback: "DPoP-bound token presented as Bearer"},
	{err: ErrNoToken, status: http.StatusUnauthorized, code: "invalid_token", fallback: "no bearer token",
		challenge: `Bearer realm="` + realm + `"`},
	{err: token.ErrInvalidToken, status: http.StatusUnauthorized, code: "invalid_token", fallback: "invalid token",
		challenge: `Bearer realm="` + realm + `", error="invalid_token"`},
	{err: token.ErrInsufficientScope, status: http.StatusForbidden, code: "insufficient_scope", fallback: "insufficient scope",
		challenge: `Bearer realm="` + realm + `", error="insufficient_scope"`, challengeScope: true},
	{err: token.ErrForbidden, status: http.StatusForbidden, code: "unauthorized_client", fallback: "not allowed for this client"},
	// RFC 6749 §5.2: at the token endpoint, a 400.
	{err: token.ErrUnauthorizedClient, status: http.StatusBadRequest, code: "unauthorized_client", fallback: "this client may not use this grant"},
	{err: token.ErrInvalidScope, status: http.StatusBadRequest, code: "invalid_scope", fallback: "invalid scope"},
	{err: token.ErrInvalidTarget, status: http.StatusBadRequest, code: "invalid_target", fallback: "invalid target"}, // RFC 8707 §2
	{err: ErrUnsupportedGrant, status: http.StatusBadRequest, code: "unsupported_grant_type", fallback: "unsupported grant type"},
	{err: token.ErrInvalidRequest, status: http.StatusBadRequest, code: "invalid_request", fallback: "invalid request",
		challenge: `Bearer realm="` + realm + `", error="invalid_request"`, bearerOnly: true},
	{err: snowflakealg.ErrInvalidID, status: http.StatusBadRequest, code: "invalid_request", fallback: "not a snowflake id",
		challenge: `Bearer realm="` + realm + `", error="invalid_request"`, bearerOnly: true},
	{err: ErrNotFound, status: http.StatusNotFound, code: "not_found", fallback: "not found"},
}

// internalError answers an error no row of answers matches.
var internalError = answer{status: http.StatusInternalServerError, code: "server_error",
	logMsg: "request failed", logLevel: slog.LevelError, description: "internal error"}

// answerFor is err's row of answers, else internalError.
func answerFor(err error) *answer {
	for i := range answers {
		if errors.Is(err, answers[i].err) {
			return &answers[i]
		}
	}
	return &internalError
}

// told is what fail tells a client of err, whose row is a: the row's
// fixed description, else the one err carries, else the row's fallback.
func (a *answer) told(err error) string {
	if a.description != "" {
		return a.description
	}
	if d := description(err); d != "" {
		return d
	}
	return a.fallback
}

// fail writes err as the protocol's own error, as refuse makes it, and
// ends the request.
func (s *Server) fail(c *gin.Context, err error) {
	onValidate := strings.HasPrefix(c.FullPath(), "/token/validate")
	status, body := s.refuse(c.Writer.Header(), err, c.FullPath(), onValidate, func() string {
		q, _ := query(c) // it parsed: an insufficient scope comes after it
		return requiredScope(q)
	})
	c.AbortWithStatusJSON(status, body)
}

// refuse is the one place that makes an error an HTTP answer, for every
// front door (fail for the routes, Refusal for a gateway's check), as
// answers says: it sets the answer's headers in h (the challenge,
// Retry-After, Cache-Control; the identity headers removed) and returns
// its status and OAuth2 body. resource says the answer is a resource's to
// a presented token (GET /token/validate, a gateway's check), which gets
// the bearer and DPoP challenges; scope, called only for an insufficient
// scope, is the scope that was required, for the challenge. route names
// the front door in the logs.
//
// The description shown is told's, never the Go error chain, which is
// logged instead: at debug for a client's error (a mismatched issuer's
// expected and received values are there), as an error for a server's,
// whose description is a fixed text. Neither ever holds a token or secret.
func (s *Server) refuse(h http.Header, err error, route string, resource bool, scope func() string) (int, oauthError) {
	a := answerFor(err)
	status := a.status
	if a.retry {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(err)))
	}
	if a.dpop && resource {
		status = http.StatusUnauthorized
		h.Set("WWW-Authenticate", s.dpopChallenge(a.code))
	} else if a.challenge != "" && (!a.bearerOnly || resource) {
		challenge := a.challenge
		if a.challengeScope {
			challenge += `, scope="` + scope() + `"`
		}
		h.Set("WWW-Authenticate", challenge)
	}
	if a.unavailable {
		s.metrics.redisErrors.Inc()
	}
	if a.logMsg != "" {
		s.log.Log(context.Background(), a.logLevel, a.logMsg, "route", route, "err", err)
	}
	if status < http.StatusInternalServerError {
		s.log.Debug("request refused", "route", route, "status", status, "err", err)
	}
	for _, k := range IdentityHeaders {
		delete(h, k) // an identity must never come with an error, even after a panic
	}
	h.Set("Cache-Control", "no-store")
	return status, oauthError{Error: a.code, Description: a.told(err)}
}

// retryAfterSeconds is how long a client should wait: what the error says
// (a clock rollback knows), else one second.
func retryAfterSeconds(err error) int {
	var r interface{ RetryAfter() time.Duration }
	if errors.As(err, &r) {
		return max(1, int(math.Ceil(r.RetryAfter().Seconds())))
	}
	return 1
}

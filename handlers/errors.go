package handlers

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// Errors of the HTTP layer itself; the rest come from package token.
var (
	ErrUnsupportedGrant = errors.New("handlers: unsupported grant type")
	ErrNoToken          = errors.New("handlers: no bearer token")
	ErrNotFound         = errors.New("handlers: not found")
)

// oauthError is the body of every error: RFC 6749 §5.2 and RFC 6750 §3.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// realm names us in WWW-Authenticate challenges.
const realm = "snowtoken"

// fail writes err as the protocol's own error. It is the one place that maps
// errors to HTTP: status, error code, challenge header and Retry-After. The
// description shown is description(err), never the Go error chain, which is
// logged instead: at debug for a client's error (a mismatched issuer's
// expected and received values are there), as an error for a server's, whose
// description is a fixed text. Neither ever holds a token or secret.
func (s *Server) fail(c *gin.Context, err error) {
	status, code := http.StatusInternalServerError, "server_error"
	desc := description(err)
	bearer := strings.HasPrefix(c.FullPath(), "/token/validate")
	switch {
	case errors.Is(err, token.ErrClientRevoking), errors.Is(err, token.ErrKeysUndecided):
		// Nothing failed: the client's tokens were revoked moments ago, or a
		// token's kid is unknown while the keys are not known to be current.
		// A client (or anyone, with a made-up kid) causes these: they are
		// not counted as the service unavailable nor logged as a warning.
		status, code = http.StatusServiceUnavailable, "temporarily_unavailable"
		c.Header("Retry-After", strconv.Itoa(retryAfterSeconds(err)))
		s.log.Debug("request deferred", "route", c.FullPath(), "err", err)
		desc = deferredDescription(err)
	case errors.Is(err, revfeed.ErrBusy):
		// Not Redis: the feed's subscribers are at their bound
		// (revfeed.Options.MaxSubscribers); the consumer retries.
		status, code = http.StatusServiceUnavailable, "temporarily_unavailable"
		c.Header("Retry-After", "1")
		s.log.Warn("revocation feed full", "route", c.FullPath(), "err", err)
		desc = "the revocation feed serves as many subscribers as it may; retry later"
	case errors.Is(err, token.ErrUnavailable):
		status, code = http.StatusServiceUnavailable, "temporarily_unavailable"
		c.Header("Retry-After", strconv.Itoa(retryAfterSeconds(err)))
		s.metrics.redisErrors.Inc() // every one: the log summarises repeats (internal/logsum)
		s.log.Warn("unavailable", "route", c.FullPath(), "err", err)
		desc = "the token service is temporarily unavailable; retry later"
	case errors.Is(err, authlimit.ErrLimited):
		// No OAuth2 code means "too many attempts": temporarily_unavailable
		// (RFC 6749 §4.1.2.1) is registered, tells clients to retry later,
		// and does not claim the credentials are wrong, which a refusal
		// before the secret is checked does not know. invalid_client would
		// send an operator rotating a good secret; slow_down is the device
		// flow's polling signal (RFC 8628 §3.5).
		status, code = http.StatusTooManyRequests, "temporarily_unavailable"
		c.Header("Retry-After", strconv.Itoa(retryAfterSeconds(err)))
	case errors.Is(err, token.ErrInvalidClient):
		status, code = http.StatusUnauthorized, "invalid_client"
		c.Header("WWW-Authenticate", `Basic realm="`+realm+`"`)
	case errors.Is(err, ErrNoToken):
		status, code = http.StatusUnauthorized, "invalid_token"
		c.Header("WWW-Authenticate", `Bearer realm="`+realm+`"`)
	case errors.Is(err, token.ErrInvalidToken):
		status, code = http.StatusUnauthorized, "invalid_token"
		c.Header("WWW-Authenticate", `Bearer realm="`+realm+`", error="invalid_token"`)
	case errors.Is(err, token.ErrInsufficientScope):
		status, code = http.StatusForbidden, "insufficient_scope"
		q, _ := query(c) // it parsed: an insufficient scope comes after it
		c.Header("WWW-Authenticate", `Bearer realm="`+realm+`", error="insufficient_scope", scope="`+requiredScope(q)+`"`)
	case errors.Is(err, token.ErrForbidden):
		status, code = http.StatusForbidden, "unauthorized_client"
	case errors.Is(err, token.ErrInvalidScope):
		status, code = http.StatusBadRequest, "invalid_scope"
	case errors.Is(err, token.ErrInvalidTarget):
		status, code = http.StatusBadRequest, "invalid_target" // RFC 8707 §2
	case errors.Is(err, ErrUnsupportedGrant):
		status, code = http.StatusBadRequest, "unsupported_grant_type"
	case errors.Is(err, token.ErrInvalidRequest), errors.Is(err, snowflakealg.ErrInvalidID):
		status, code = http.StatusBadRequest, "invalid_request"
		if bearer {
			c.Header("WWW-Authenticate", `Bearer realm="`+realm+`", error="invalid_request"`)
		}
	case errors.Is(err, ErrNotFound):
		status, code = http.StatusNotFound, "not_found"
	default:
		s.log.Error("request failed", "route", c.FullPath(), "err", err)
		desc = "internal error"
	}
	if status < http.StatusInternalServerError {
		s.log.Debug("request refused", "route", c.FullPath(), "status", status, "err", err)
	}
	h := c.Writer.Header()
	for _, k := range [...]string{hdrSubject, hdrClient, hdrScope, hdrTokenID} {
		delete(h, k) // an identity must never come with an error, even after a panic
	}
	c.Header("Cache-Control", "no-store")
	c.AbortWithStatusJSON(status, oauthError{Error: code, Description: desc})
}

// deferredDescription is what a client is told of ErrClientRevoking and
// ErrKeysUndecided.
func deferredDescription(err error) string {
	if errors.Is(err, token.ErrClientRevoking) {
		return "this client's tokens were revoked moments ago and a token issued now would not validate; retry after Retry-After"
	}
	return "this replica cannot yet tell whether the token's signing key is one of the issuer's; retry later"
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

// redisReason is what /readyz shows of a Redis failure: the error Redis
// answered (OOM, READONLY, MISCONF, a NOAUTH), which names the state an
// operator must fix, or that it does not answer. Addresses and the rest of
// the chain stay in the log.
func redisReason(err error) string {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
			msg = msg[:i]
		}
		return msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	return "no answer"
}

// ownPackages are the prefixes of this module's sentinel errors' texts
// ("token: invalid token").
var ownPackages = [...]string{"token: ", "handlers: ", "snowflakealg: ", "bitsalloc: ", "jwtpolicy: ", "lease: ", "revfeed: "}

// description is what a client is told of err: the description
// token.Describe gave it, else the details our own code wrote with the Go
// error chain taken out. Every sentinel error of this module in the chain
// ("token: invalid token", a repeat of the error code) is dropped where
// details follow it, and loses its package prefix where none do:
// "token: invalid request: grant_type is required" is told as
// "grant_type is required", "token: invalid token: token: revoked" as
// "revoked". An error that wraps one from outside the module (a library's,
// whose text tells of internals) must come with token.Describe; the
// handlers' tests check that no description holds a chain.
func description(err error) string {
	if d, ok := token.Description(err); ok {
		return d
	}
	desc := err.Error()
	for _, e := range sentinels(err, nil) {
		text := e.Error()
		desc = strings.ReplaceAll(desc, text+": ", "")
		if strings.HasSuffix(desc, text) {
			desc = strings.TrimSuffix(desc, text) + trimOwnPackage(text)
		}
	}
	return desc
}

// sentinels appends to out the errors in err's tree that have no cause of
// their own and whose text begins with one of ownPackages.
func sentinels(err error, out []error) []error {
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return sentinels(e.Unwrap(), out)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			out = sentinels(inner, out)
		}
		return out
	case nil:
		return out
	}
	if trimOwnPackage(err.Error()) != err.Error() {
		out = append(out, err)
	}
	return out
}

// trimOwnPackage drops one of ownPackages from the front of text.
func trimOwnPackage(text string) string {
	for _, p := range ownPackages {
		if t, ok := strings.CutPrefix(text, p); ok {
			return t
		}
	}
	return text
}

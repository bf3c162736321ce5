package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Middleware returns a handler that lets a request through to next only with
// a valid bearer token carrying every one of requiredScopes, and puts the
// token's claims in its context (see ClaimsFrom). Otherwise it answers
// itself, as RFC 6750 §3 says:
//
//	no bearer token               401  WWW-Authenticate: Bearer realm="..."
//	invalid, expired, revoked     401  ... error="invalid_token"
//	lacking a scope               403  ... error="insufficient_scope", scope="..."
//	issuer unreachable, 5xx       503  Retry-After, {"error":"temporarily_unavailable"}
//
// It panics if a required scope is malformed, as a bad route pattern would.
func (v *Validator) Middleware(next http.Handler, requiredScopes ...string) http.Handler {
	scopes := mustScopes(requiredScopes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := v.check(r, scopes)
		if err != nil {
			v.writeError(w, r, err, scopes)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), c)))
	})
}

// GinMiddleware is Middleware for gin. The claims are stored both with
// c.Set(GinKey, claims) and in c.Request's context; ClaimsFrom(c) finds them.
func (v *Validator) GinMiddleware(requiredScopes ...string) gin.HandlerFunc {
	scopes := mustScopes(requiredScopes)
	return func(c *gin.Context) {
		cl, err := v.check(c.Request, scopes)
		if err != nil {
			v.writeError(c.Writer, c.Request, err, scopes)
			c.Abort()
			return
		}
		c.Set(GinKey, cl)
		c.Request = c.Request.WithContext(NewContext(c.Request.Context(), cl))
		c.Next()
	}
}

func mustScopes(scopes []string) []string {
	if err := checkScopes(scopes); err != nil {
		panic(err)
	}
	return append([]string(nil), scopes...)
}

func (v *Validator) check(r *http.Request, scopes []string) (*Claims, error) {
	raw, err := bearerToken(r.Header)
	if err != nil {
		return nil, err
	}
	return v.Validate(r.Context(), raw, scopes...)
}

// bearerToken reads the token from Authorization: Bearer (RFC 6750 §2.1),
// the only place it is taken from.
func bearerToken(h http.Header) (string, error) {
	vals := h.Values("Authorization")
	switch {
	case len(vals) == 0 || vals[0] == "":
		return "", ErrNoToken
	case len(vals) > 1:
		return "", fmt.Errorf("%w: more than one Authorization header", ErrInvalidToken)
	}
	scheme, raw, _ := strings.Cut(vals[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization is not Bearer", ErrNoToken)
	}
	if raw = strings.TrimSpace(raw); raw == "" {
		return "", fmt.Errorf("%w: empty bearer token", ErrNoToken)
	}
	return raw, nil
}

// errorBody is an OAuth 2.0 error (RFC 6749 §5.2).
type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// writeError is the one place that turns an error into an answer: status,
// code, challenge and Retry-After. Descriptions never hold a token; failures
// of the issuer get a fixed one and are logged.
func (v *Validator) writeError(w http.ResponseWriter, r *http.Request, err error, scopes []string) {
	h := w.Header()
	realm := `Bearer realm="` + v.opts.Realm + `"`
	status, body := http.StatusUnauthorized, errorBody{Error: "invalid_token", Description: err.Error()}
	if errors.Is(err, ErrInsufficientScope) {
		body.Error = "insufficient_scope"
	}
	var rej *rejection
	if errors.As(err, &rej) {
		body.Error = rej.code // the issuer's own code
	}
	switch {
	case errors.Is(err, ErrNoToken):
		// RFC 6750 §3.1: no error code in the challenge when no token came.
		body.Description = "send Authorization: Bearer <token>"
		h.Set("WWW-Authenticate", realm)
	case errors.Is(err, ErrInsufficientScope):
		status = http.StatusForbidden
		h.Set("WWW-Authenticate", realm+`, error="`+body.Error+`", scope="`+strings.Join(scopes, " ")+`"`)
	case errors.Is(err, ErrInvalidToken):
		if body.Error == "invalid_request" {
			status = http.StatusBadRequest
		}
		h.Set("WWW-Authenticate", realm+`, error="`+body.Error+`"`)
	case errors.Is(err, ErrUnavailable):
		status, body = http.StatusServiceUnavailable, errorBody{
			Error: "temporarily_unavailable", Description: "the token issuer cannot be reached; retry later",
		}
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter(err).Seconds()))))
		v.opts.Logger.Warn("snowtoken client: cannot check a token", "path", r.URL.Path, "err", err)
	default:
		status, body = http.StatusInternalServerError, errorBody{Error: "server_error", Description: "internal error"}
		v.opts.Logger.Error("snowtoken client: cannot check a token", "path", r.URL.Path, "err", err)
	}
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

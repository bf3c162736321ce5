package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/golang-jwt/jwt/v5"
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
		c, err := v.Authenticate(r, scopes...)
		if err != nil {
			v.WriteError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), c)))
	})
}

// Authenticate checks the bearer token of r, as Middleware does, and
// returns its claims or an error for WriteError. It is the call for routers
// that do not take an http.Handler middleware, such as gin:
//
//	func requireToken(v *client.Validator, scopes ...string) gin.HandlerFunc {
//		return func(c *gin.Context) {
//			claims, err := v.Authenticate(c.Request, scopes...)
//			if err != nil {
//				v.WriteError(c.Writer, c.Request, err)
//				c.Abort()
//				return
//			}
//			c.Set(client.GinKey, claims) // so ClaimsFrom(c) finds them
//			c.Request = c.Request.WithContext(client.NewContext(c.Request.Context(), claims))
//			c.Next()
//		}
//	}
func (v *Validator) Authenticate(r *http.Request, requiredScopes ...string) (*Claims, error) {
	raw, err := bearerToken(r.Header)
	if err != nil {
		return nil, err
	}
	return v.Validate(r.Context(), raw, requiredScopes...)
}

func mustScopes(scopes []string) []string {
	if err := checkScopes(scopes); err != nil {
		panic(err)
	}
	return append([]string(nil), scopes...)
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

// WriteError answers r with err, an error of Authenticate or Validate, as
// Middleware does. It is the one place that turns an error into an answer:
// status, code, challenge and Retry-After. Descriptions never hold a token;
// failures of the issuer get a fixed one and are logged.
func (v *Validator) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	h := w.Header()
	realm := `Bearer realm="` + v.opts.Realm + `"`
	status, body := http.StatusUnauthorized, errorBody{Error: "invalid_token", Description: description(err)}
	if errors.Is(err, ErrInsufficientScope) {
		body.Error = "insufficient_scope"
	}
	var rej *rejection
	if errors.As(err, &rej) {
		body.Error = rej.code // the issuer's own code
	}
	if status == http.StatusUnauthorized {
		v.opts.Logger.Debug("snowtoken client: token refused", "path", r.URL.Path, "err", err)
	}
	switch {
	case errors.Is(err, ErrNoToken):
		// RFC 6750 §3.1: no error code in the challenge when no token came.
		body.Description = "send Authorization: Bearer <token>"
		h.Set("WWW-Authenticate", realm)
	case errors.Is(err, ErrInsufficientScope):
		status = http.StatusForbidden
		challenge := realm + `, error="` + body.Error + `"`
		if se := (*scopeError)(nil); errors.As(err, &se) && len(se.required) > 0 {
			challenge += `, scope="` + strings.Join(se.required, " ") + `"` // checkScopes let no quote through
		}
		h.Set("WWW-Authenticate", challenge)
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

// description is what a caller is told of err: the issuer's own description
// when the issuer refused the token, else one phrase naming what is wrong,
// never the chain of Go errors behind it (the debug log has that). The
// values behind a mismatch (the token's issuer or audience and this
// service's) are in the chain only.
func description(err error) string {
	var rej *rejection
	switch {
	case errors.As(err, &rej):
		return rej.desc
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the signature does not verify"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "issuer mismatch"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "audience mismatch"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	}
	// Our own errors read "client: <kind>: <phrase>[: <detail>...]": the
	// phrase alone.
	msg := err.Error()
	for _, sentinel := range []error{ErrInvalidToken, ErrInsufficientScope, ErrNoToken} {
		if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok {
			phrase, _, _ := strings.Cut(rest, ": ")
			return phrase
		}
	}
	return "the token is not valid"
}

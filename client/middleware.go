package client

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/internal/refusal"
)

// Middleware returns a handler that lets a request through to next only with
// a valid token carrying every one of requiredScopes, and puts the token's
// claims in its context (see ClaimsFrom). Otherwise it answers itself, as
// RFC 6750 §3 and RFC 9449 §7.1 say:
//
//	no token                      401  WWW-Authenticate: Bearer realm="..."
//	                                   (and DPoP realm="...", algs="..." with DPoP on)
//	two Authorization headers     400  ... error="invalid_request"
//	invalid, expired, revoked     401  ... error="invalid_token"
//	lacking a scope               403  ... error="insufficient_scope", scope="..."
//	bad DPoP proof                401  DPoP realm="...", algs="...", error="invalid_dpop_proof"
//	issuer wants a DPoP nonce     401  ... error="use_dpop_nonce", DPoP-Nonce: <the issuer's>
//	issuer unreachable, 5xx       503  Retry-After, {"error":"temporarily_unavailable"}
//
// A token presented with the DPoP scheme is answered with a DPoP challenge
// (scheme DPoP, with the algorithms accepted), and so is a DPoP-bound
// token presented as Bearer (ErrTokenBound).
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

// Authenticate checks the token of r, as Middleware does, and returns its
// claims or an error for WriteError. The token is taken from
// Authorization: Bearer, or Authorization: DPoP with exactly one DPoP
// header: then the proof must pass dpop.Checker.Check for r's method and
// the URL Options.DPoP.PublicURL and r's path make (never r's Host or
// X-Forwarded-* headers), with the token's hash, and the token's cnf.jkt
// must be the proof key's thumbprint. A token with a cnf is refused as
// Bearer, one without as DPoP. It is the call for routers
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
	raw, isDPoP, err := authorization(r.Header)
	if err != nil {
		return nil, err
	}
	var p *presentation
	if isDPoP {
		if p, err = v.present(r); err != nil {
			return nil, err
		}
	}
	return v.validateAs(r.Context(), raw, requiredScopes, p)
}

func mustScopes(scopes []string) []string {
	if err := checkScopes(scopes); err != nil {
		panic(err)
	}
	return append([]string(nil), scopes...)
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
	if v.dpop != nil && (errors.Is(err, ErrInvalidProof) || errors.Is(err, ErrTokenBound) || isDPoPRequest(r)) {
		realm = v.dpopChallenge()
	}
	status, body := http.StatusUnauthorized, errorBody{Error: "invalid_token", Description: description(err)}
	switch {
	case errors.Is(err, ErrInsufficientScope):
		body.Error = "insufficient_scope"
	case errors.Is(err, ErrInvalidRequest):
		body.Error = "invalid_request"
	case errors.Is(err, ErrInvalidProof):
		body.Error = "invalid_dpop_proof"
	}
	var rej *rejection
	if errors.As(err, &rej) {
		body.Error = rej.code // the issuer's own code
		if rej.nonce != "" {
			h.Set("DPoP-Nonce", rej.nonce)
		}
	}
	if status == http.StatusUnauthorized {
		v.opts.Logger.Debug("snowtoken client: token refused", "path", r.URL.Path, "err", err)
	}
	switch {
	case errors.Is(err, ErrNoToken):
		// RFC 6750 §3.1: no error code in the challenge when no token came.
		body.Description = "send Authorization: Bearer <token>"
		h.Set("WWW-Authenticate", realm)
		if v.dpop != nil {
			body.Description = "send Authorization: Bearer <token>, or DPoP <token> with a DPoP proof"
			h.Add("WWW-Authenticate", v.dpopChallenge())
		}
	case errors.Is(err, ErrInsufficientScope):
		status = http.StatusForbidden
		challenge := realm + `, error="` + body.Error + `"`
		if se := (*scopeError)(nil); errors.As(err, &se) && len(se.required) > 0 {
			challenge += `, scope="` + strings.Join(se.required, " ") + `"` // checkScopes let no quote through
		}
		h.Set("WWW-Authenticate", challenge)
	case errors.Is(err, ErrInvalidToken), errors.Is(err, ErrInvalidProof), errors.Is(err, ErrInvalidRequest):
		if errors.Is(err, ErrDPoPOff) {
			v.opts.Logger.Warn("snowtoken client: a DPoP token was refused: set Options.DPoP.PublicURL to accept them", "path", r.URL.Path)
		}
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
// when the issuer refused the token, what was wrong with a DPoP proof
// (dpop.Reason), the phrase of a library's error we know, else the
// description err carries (refusal.Description: data of the error, never
// cut from its text), else a fixed text of its kind; never the chain of Go
// errors behind it (the debug log has that). The values behind a mismatch
// (the token's issuer or audience and this service's) are in the chain
// only.
func description(err error) string {
	if rej := (*rejection)(nil); errors.As(err, &rej) {
		return rej.desc
	}
	if r, ok := dpop.Reason(err); ok {
		return r
	}
	switch {
	case errors.Is(err, ErrDPoPOff): // the log names the option to set
		return "this service does not accept DPoP tokens"
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
	if d, ok := refusal.Description(err); ok {
		return d
	}
	for _, k := range kindTexts {
		if errors.Is(err, k.kind) {
			return k.text
		}
	}
	return "the token is not valid"
}

// kindTexts are the fixed texts of the kinds of refusal, told of an error
// that carries no description.
var kindTexts = []struct {
	kind error
	text string
}{
	{ErrInsufficientScope, "the token lacks a required scope"},
	{ErrInvalidProof, "the DPoP proof is not valid"},
	{ErrInvalidRequest, "malformed request"},
	{ErrNoToken, "send Authorization: Bearer <token>"},
}

// dpopChallenge is the DPoP challenge (RFC 9449 §7.1), without an error.
func (v *Validator) dpopChallenge() string {
	return `DPoP realm="` + v.opts.Realm + `", algs="` + v.dpop.algs + `"`
}

// isDPoPRequest reports whether r presents its token with the DPoP scheme.
func isDPoPRequest(r *http.Request) bool {
	_, isDPoP, err := authorization(r.Header)
	return err == nil && isDPoP
}

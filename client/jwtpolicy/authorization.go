package jwtpolicy

import (
	"net/http"
	"strings"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
)

// Errors of Authorization and Presented.
var (
	// ErrAuthorizations is a request with more than one Authorization
	// header, whatever they hold: a malformed request, which RFC 6750
	// §3.1 answers 400 invalid_request ("repeats the same parameter, uses
	// more than one method for including an access token"). Taking one of
	// them would let whatever comes first, a proxy's or the client's,
	// decide which credential counts.
	ErrAuthorizations error = refusal.Sentinel("jwtpolicy", "more than one Authorization header")
	// ErrNoToken is a request that presents no token: no Authorization
	// header, a scheme other than Bearer and DPoP, or nothing after the
	// scheme. RFC 6750 §3.1 answers it 401 with a challenge that holds no
	// error code.
	ErrNoToken error = refusal.Sentinel("jwtpolicy", "no token")
)

// Authorization is the request's one Authorization header value (h's), ""
// if it has none; several are ErrAuthorizations. It is the one way the
// header is read, by the issuer (Bearer, DPoP and Basic alike) and by this
// module's middleware.
func Authorization(h http.Header) (string, error) {
	vals := h.Values("Authorization")
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		return vals[0], nil
	}
	return "", ErrAuthorizations
}

// Presented reads the token a request presents (h, its headers): the one
// Authorization header (see Authorization) with the scheme Bearer (RFC 6750
// §2.1) or DPoP (RFC 9449 §7.1), in any case, a space and the token
// (spaces around it are dropped); isDPoP reports the DPoP scheme. Anything
// else is ErrNoToken with what was wrong, or ErrAuthorizations. The
// token's bytes are CheckSyntax's to check.
func Presented(h http.Header) (raw string, isDPoP bool, err error) {
	v, err := Authorization(h)
	switch {
	case err != nil:
		return "", false, err
	case v == "":
		return "", false, refusal.New(ErrNoToken, "send Authorization: Bearer <token>")
	}
	scheme, raw, _ := strings.Cut(v, " ")
	isDPoP = strings.EqualFold(scheme, "DPoP")
	if !isDPoP && !strings.EqualFold(scheme, "Bearer") {
		return "", false, refusal.New(ErrNoToken, "Authorization must use the Bearer or the DPoP scheme")
	}
	if raw = strings.TrimSpace(raw); raw == "" {
		return "", false, refusal.New(ErrNoToken, "empty token")
	}
	return raw, isDPoP, nil
}

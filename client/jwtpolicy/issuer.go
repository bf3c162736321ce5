package jwtpolicy

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrIssuer is returned by Issuer for a URL that cannot be an issuer
// identifier.
var ErrIssuer = errors.New("jwtpolicy: not an issuer URL")

// Issuer returns the canonical form of an issuer URL: the iss of every token
// the issuer signs, the "issuer" of its metadata, and the iss a service
// requires. An issuer identifier is compared as an exact string (RFC 8414
// §3, RFC 7519 §4.1.1), so the issuer and every service derive theirs with
// this one function from whatever spelling each was configured with.
//
// The canonical form is scheme://host[:port][/path] with the scheme and host
// in lower case and no trailing slash: "http://Issuer:8080/" and
// "http://issuer:8080" are both "http://issuer:8080" (OpenID Connect
// Discovery §4 likewise drops a terminating slash before appending its
// well-known path). The scheme must be http or https, the host present, and
// there must be no user information, query or fragment (RFC 8414 §2).
func Issuer(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %.100q does not parse", ErrIssuer, raw)
	case u.Scheme != "http" && u.Scheme != "https", u.Opaque != "":
		return "", fmt.Errorf("%w: %.100q: want an http or https URL such as https://auth.example.com", ErrIssuer, raw)
	case u.Host == "":
		return "", fmt.Errorf("%w: %.100q has no host", ErrIssuer, raw)
	case u.User != nil, strings.ContainsAny(raw, "?#"):
		return "", fmt.Errorf("%w: %.100q: want no user information, query or fragment", ErrIssuer, raw)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host) + strings.TrimRight(u.EscapedPath(), "/"), nil
}

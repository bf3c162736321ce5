package dpop

import (
	"errors"
	"net/url"
	"strings"
)

// defaultPorts are the ports a URL of each scheme may leave out.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// normalURL returns the absolute http(s) URL s without its query and
// fragment, normalised as RFC 3986 §6.2.2 describes: scheme and host in
// lower case, the scheme's default port dropped, an empty path as "/",
// percent-encodings in upper case and those of unreserved characters
// decoded. It refuses a URL with user information, which a request target
// never has, and a host that is not ASCII.
func normalURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	def, ok := defaultPorts[scheme]
	switch {
	case !ok:
		return "", errors.New("scheme is not http or https")
	case u.Opaque != "" || u.Host == "":
		return "", errors.New("not an absolute URL with a host")
	case u.User != nil:
		return "", errors.New("URL with user information")
	}
	host := u.Hostname()
	for i := range len(host) {
		// Only ASCII is lowercased: Unicode case mapping would take another
		// host (İ, U+0130, to i; the Kelvin sign to k) to this one. A name
		// that is not ASCII belongs in its A-label (RFC 5890).
		if host[i] >= 0x80 {
			return "", errors.New("host is not ASCII: send its A-label (xn--…)")
		}
	}
	host = strings.ToLower(host)
	if strings.Contains(host, ":") { // IPv6 literal
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && port != def {
		host += ":" + port
	}
	path := normalPath(u.EscapedPath())
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}

// normalPath writes the percent-encodings of p in upper case, decoding
// those of unreserved characters (RFC 3986 §2.3, §6.2.2.2).
func normalPath(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) {
			b.WriteByte(p[i])
			continue
		}
		c := unhex(p[i+1])<<4 | unhex(p[i+2])
		if isUnreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(p[i+1:i+3]))
		}
		i += 2
	}
	return b.String()
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

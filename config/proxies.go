package config

import (
	"errors"
	"net/netip"
)

// loadProxies reads the two trusts a caller of the issuer may be given,
// which are apart: SNOWTOKEN_TRUSTED_PROXIES, the proxies in front of
// clients whose X-Forwarded-For names the client's address, and
// SNOWTOKEN_DPOP_FORWARDERS, the callers whose X-Forwarded-Method, -Proto,
// -Host and -Uri name the original request of a DPoP proof they forward.
//
// Unset, the forwarders are the trusted proxies (defaulted true when
// there are any), as they were before each trust had a setting of its own:
// a gateway doing both (nginx's auth_request) keeps working on upgrade,
// and serve.go warns. A consumer listed in SNOWTOKEN_TRUSTED_PROXIES so
// that its forwarded requests were believed must move to
// SNOWTOKEN_DPOP_FORWARDERS, or it still names any client's address.
// "none" lists no forwarder.
func loadProxies(getenv func(string) string, bad func(name, v string, err error)) (trusted, forwarders []string, defaulted bool) {
	trusted = addresses(getenv, "SNOWTOKEN_TRUSTED_PROXIES", bad)
	switch v := getenv("SNOWTOKEN_DPOP_FORWARDERS"); v {
	case "":
		return trusted, trusted, len(trusted) > 0
	case "none":
		return trusted, nil, false
	}
	return trusted, addresses(getenv, "SNOWTOKEN_DPOP_FORWARDERS", bad), false
}

// addresses reads variable name, a list of IP addresses and CIDRs, and
// calls bad for each item that is neither.
func addresses(getenv func(string) string, name string, bad func(name, v string, err error)) []string {
	out := list(getenv(name))
	for _, p := range out {
		if _, err := parseNet(p); err != nil {
			bad(name, p, err)
		}
	}
	return out
}

// networks reads variable name as addresses does, as prefixes.
func networks(getenv func(string) string, name string, bad func(name, v string, err error)) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range list(getenv(name)) {
		if p, err := parseNet(n); err != nil {
			bad(name, n, err)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// parseNet reads a CIDR (10.0.0.0/8) or an address (10.0.0.5, as a /32).
func parseNet(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, errors.New("want an IP address or a CIDR such as 10.0.0.0/8")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

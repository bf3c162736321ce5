package clientauth

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// Where a key set may be fetched from. A URL is one the operator wrote (a
// client's jwks_uri, a workload's issuer and jwks_uri, all in the clients
// file) or one the issuer learned (the jwks_uri of an issuer's discovery
// document, which whoever serves that document chose). Each is checked when
// it is accepted (CheckURL when the clients file loads, checkLearned when
// the document is read) and again at every connection, against the address
// actually dialled (dialRules.control, a net.Dialer's Control function: it
// sees the address the host name resolved to, so a name that resolves to
// another address by the time of the connection is caught too):
//
//	never       unspecified (0.0.0.0/8, ::), link-local (169.254.0.0/16, the cloud
//	            metadata address among them, and fe80::/10), multicast and broadcast
//	            addresses: refused, whatever the allow-list says
//	allow-list  FetchOptions.AllowNets: allowed
//	loopback    127.0.0.0/8, ::1: allowed only for a URL the operator wrote that names
//	            loopback itself (localhost, 127.0.0.1, [::1]: tests, development)
//	special     private (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10) and
//	            every other special-purpose range of IANA's registries (documentation,
//	            benchmarking, reserved, NAT64, 6to4, ...): refused
//	else        a public address: allowed
//
// A learned URL must also be https, on the host and port of the issuer URL
// the operator wrote (the jwks_uri of OpenID Connect Discovery is the
// issuer's own): one elsewhere is trusted only by writing it as the
// workload's jwks_uri. The special ranges come from code.dny.dev/ssrf, which
// generates them from IANA's special-purpose registries.

// dialRules say which addresses one fetch may connect to.
type dialRules struct {
	// loopback allows loopback addresses: the URL the operator wrote
	// names loopback.
	loopback bool
	// special allows every address but the never ones: the rules a URL's
	// literal address is held to when the clients file loads, before the
	// allow-list is known (the fetch checks it again, with the allow-list).
	special bool
	// allow are the networks allowed beyond the public ones
	// (FetchOptions.AllowNets).
	allow []netip.Prefix
}

// publicOnly refuses the addresses of IANA's special-purpose registries.
var publicOnly = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// Addresses no fetch connects to, whatever the allow-list says.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
	nat64       = netip.MustParsePrefix("64:ff9b::/96") // an IPv4 address in its last 32 bits (RFC 6052)
)

// never reports whether a is an address no fetch connects to: unspecified,
// link-local, multicast or broadcast, as such or as an IPv4-mapped or
// NAT64 IPv6 address.
func never(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	return a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || thisNetwork.Contains(a) || a == broadcast
}

// check returns why a fetch under r must not connect to a, or nil.
func (r dialRules) check(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	switch {
	case never(a):
		return fmt.Errorf("%w: %s is an unspecified, link-local, multicast or broadcast address", ErrAddress, a)
	case r.special || slices.ContainsFunc(r.allow, func(p netip.Prefix) bool { return p.Contains(a) }):
		return nil
	case a.IsLoopback() && r.loopback:
		return nil
	case a.IsLoopback():
		return fmt.Errorf("%w: %s is a loopback address, which only a URL written in the clients file naming it (localhost, 127.0.0.1, [::1]) may reach", ErrAddress, a)
	}
	if err := publicOnly.SafeAddr(a); err != nil {
		return fmt.Errorf("%w: %s is a private or special-purpose address, which the allow-list of networks (SNOWTOKEN_KEY_FETCH_ALLOW_NETS) does not name", ErrAddress, a)
	}
	return nil
}

// control is a net.Dialer's Control: it checks the address about to be
// connected to, after the host name was resolved.
func (r dialRules) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an address and port", ErrAddress, address)
	}
	return r.check(ap.Addr())
}

// checkLiteral checks u's host under r if it is an IP address; a name is
// checked once resolved, when dialled.
func (r dialRules) checkLiteral(u *url.URL) error {
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	return r.check(a)
}

// writtenRules are the rules of a fetch from a URL the operator wrote:
// loopback only if the URL names it.
func (f *Fetcher) writtenRules(u *url.URL) dialRules {
	return dialRules{loopback: loopback(u.Hostname()), allow: f.opts.AllowNets}
}

// learnedRules are the rules of a fetch from a URL the issuer learned: never
// loopback but by the allow-list.
func (f *Fetcher) learnedRules() dialRules {
	return dialRules{allow: f.opts.AllowNets}
}

// parseURL reads an absolute URL with a host, no user and no fragment.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%.128q is not a URL", raw)
	case u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("%.128q: want an absolute URL with a host, no user and no fragment", raw)
	}
	return u, nil
}

// CheckURL accepts a URL the operator writes in the clients file: that of a
// key set, an issuer or a discovery document. It must be absolute https,
// with no user or fragment; plain http only to localhost or a loopback
// address (tests, development); and an address as its host must not be one
// no fetch connects to (link-local, such as 169.254.169.254, unspecified,
// multicast). A private address is accepted here and checked against the
// allow-list when fetched (see the package's address rules above).
func CheckURL(raw string) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !loopback(u.Hostname())) {
		return fmt.Errorf("%.128q: want https (http only to localhost)", raw)
	}
	if err := (dialRules{loopback: true, special: true}).checkLiteral(u); err != nil {
		return fmt.Errorf("%.128q: %w", raw, err)
	}
	return nil
}

// checkLearned accepts the jwks_uri of issuer's discovery document: https,
// on issuer's host and port, its address (if it is one) allowed under r.
func checkLearned(raw, issuer string, r dialRules) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	iss, err := url.Parse(issuer)
	if err != nil {
		return fmt.Errorf("issuer %.128q is not a URL", issuer)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("%.128q: want https: a URL a discovery document names never gets plain http", raw)
	case !strings.EqualFold(u.Hostname(), iss.Hostname()) || portOf(u) != portOf(iss):
		return fmt.Errorf("%.128q is not on the issuer's host %s: write the workload's jwks_uri in the clients file to fetch keys from elsewhere", raw, iss.Host)
	}
	return r.checkLiteral(u)
}

// portOf is u's port, or its scheme's.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

// loopback reports whether host is localhost or a loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

package clientauth

import "net/netip"

// CheckAddr checks a as a fetch connecting to it does: from a URL the
// operator wrote that names loopback (namedLoopback), or from another URL,
// with the allow-list allow.
func CheckAddr(a netip.Addr, namedLoopback bool, allow []netip.Prefix) error {
	return dialRules{loopback: namedLoopback, allow: allow}.check(a)
}

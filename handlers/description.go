package handlers

import (
	"strings"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// ownPackages are the prefixes of this module's sentinel errors' texts
// ("token: invalid token").
var ownPackages = [...]string{"token: ", "handlers: ", "snowflakealg: ", "bitsalloc: ", "jwtpolicy: ", "lease: ", "revfeed: ", "redisstore: ", "dpop: ", "clientauth: "}

// description is what a client is told of err: the description
// refusal.Description carries, else what was wrong with a DPoP proof
// (dpop.Reason), else the details our own code wrote with the Go error
// chain taken out. Every sentinel error of this module in the chain
// ("token: invalid token", a repeat of the error code) is dropped where
// details follow it, and loses its package prefix where none do:
// "token: invalid request: grant_type is required" is told as
// "grant_type is required", "token: invalid token: token: revoked" as
// "revoked". An error that wraps one from outside the module (a library's,
// whose text tells of internals) must come with refusal.Describe; the
// handlers' tests check that no description holds a chain.
func description(err error) string {
	if d, ok := refusal.Description(err); ok {
		return d
	}
	if r, ok := dpop.Reason(err); ok {
		return r
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

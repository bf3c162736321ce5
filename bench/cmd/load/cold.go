package main

import (
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// Never-seen validation: JWTs that no request has
// validated before, with the issuer's verified-token cache full, so that
// every request parses and verifies its token afresh and the cache evicts
// an entry for it, as in a deployment whose services see a steady stream of
// new tokens.

// cacheFill is how many tokens fill the issuer's verified-token cache past
// its size: the load tool leaves SNOWTOKEN_CACHE_SIZE at its default,
// token.DefaultCacheSize entries.
const cacheFill = token.DefaultCacheSize + token.DefaultCacheSize/10

// fillCache issues cacheFill tokens and validates each once, so that the
// issuer's verified-token cache is full of tokens that later runs do not
// use. It returns the tokens, the last validated last.
func fillCache(issuerURL, basic string) ([]string, error) {
	fmt.Printf("issuing %d tokens and validating each once to fill the verified-token cache (%d entries) past its size\n",
		cacheFill, token.DefaultCacheSize)
	filled := make([]string, cacheFill)
	if err := issueN(issuerURL, basic, int64(len(filled)), filled); err != nil {
		return nil, err
	}
	return filled, validateEach(issuerURL, filled)
}

// validateEach validates each of tokens once through url with 64 clients,
// closed loop, and prints what that took.
func validateEach(url string, tokens []string) error {
	start := time.Now()
	probe, err := probeValidate(url, tokens, 1, 64)
	if err != nil {
		return err
	}
	fmt.Printf("(%d validated through %s in %v, 64 clients closed loop: p50 %v, p99 %v)\n", len(tokens), url,
		time.Since(start).Round(time.Second), probe.p50.Round(time.Microsecond), probe.p99.Round(time.Microsecond))
	return nil
}

// Names of the never-seen rows.
const (
	neverSeenName         = "GET /token/validate, never-seen JWTs (cache full)"
	neverSeenExchangeName = "POST /token, token exchange (never-seen subject JWTs, cache full)"
)

// neverSeenRows follows the endpoint ref (at index i of endpoints) with the
// never-seen row of the same request, if it has one (neverSeen): each round
// a pool of JWTs issued for it alone (pool.go), sized from ref, the row of
// the same round whose requests are the same but for a cached token, and
// cheaper.
func neverSeenRows(i int, dir, issuerURL, basic string, ref *row, server, redis int) []*row {
	r, pool := neverSeen(i, issuerURL, basic)
	if r == nil {
		return nil
	}
	r.server, r.redis = server, redis
	pool.refs = []*row{ref}
	pool.values = func(_, n int) ([]string, error) {
		tokens := make([]string, n)
		return tokens, issueN(issuerURL, basic, int64(n), tokens)
	}
	return []*row{poolRow(dir, r, pool)}
}

// neverSeen is the never-seen row of endpoint i and its pool's request,
// or nil: never-seen validation, on the floor bare + one verification; an
// exchange of a never-seen subject JWT (the floor its target names), one
// verification and one signature, the new token's.
func neverSeen(i int, issuerURL, basic string) (*row, *freshPool) {
	switch i {
	case hotJWT:
		return &row{name: neverSeenName, url: issuerURL + "/token/validate", floor: floorVerify, target: 1.6},
			&freshPool{name: "never-seen", req: httpReq{method: "GET", path: "/token/validate"},
				slot: slot{header: "Authorization", prefix: "Bearer "}}
	case cachedExchange:
		// exchangeRequest's body ends with subject_token=: the pooled JWT goes there.
		return &row{name: neverSeenExchangeName, url: issuerURL + "/token", floor: floorSignAndProof, target: 1.3,
				profile: fileName(neverSeenExchangeName)},
			&freshPool{name: "never-seen-exchange", req: exchangeRequest(basic, "")}
	}
	return nil, nil
}

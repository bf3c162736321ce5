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

// neverSeenName is the never-seen validate row's name.
const neverSeenName = "GET /token/validate, never-seen JWTs (cache full)"

// neverSeenRow is the never-seen validate row: each round a pool of tokens
// issued for it alone (pool.go), sized from hot, the hot validate row of
// the same round, whose requests are cheaper.
func neverSeenRow(dir, issuerURL, basic string, hot *row, server, redis int) *row {
	r := &row{name: neverSeenName, url: issuerURL + "/token/validate",
		server: server, redis: redis, floor: floorVerify, target: 1.6}
	return poolRow(dir, r, &freshPool{name: "never-seen", req: httpReq{method: "GET", path: "/token/validate"},
		slot: slot{header: "Authorization", prefix: "Bearer "}, refs: []*row{hot},
		values: func(_, n int) ([]string, error) {
			tokens := make([]string, n)
			return tokens, issueN(issuerURL, basic, int64(n), tokens)
		}})
}

package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// guesser sends wrong client secrets to a running program as a trusted
// proxy would forward them: the client's address in X-Forwarded-For.
type guesser struct {
	tb testing.TB
	p  *issuer
}

// guess sends one wrong secret for clientID from the address from and
// returns the status: 401 (a counted failure) or 429 (limited).
func (g guesser) guess(clientID, from string) int {
	g.tb.Helper()
	req, err := newCall(http.MethodPost, g.p.url("/token"), &fleetClient{clientID, "wrong-secret"}, "", url.Values{"grant_type": {"client_credentials"}})
	if err != nil {
		g.tb.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", from)
	status, body := doRequest(g.tb, req)
	if status != http.StatusUnauthorized && status != http.StatusTooManyRequests {
		g.tb.Fatalf("a wrong secret for %s from %s: %d %s, want 401 or 429", clientID, from, status, body)
	}
	return status
}

// spread is a review's measurement: 243 wrong secrets spread over 27 client
// IDs (9 each, below the per-client limit, so that only the address can
// limit them), the i-th from addr(i). It returns how many answered 429.
func (g guesser) spread(ids string, addr func(i int) string) (limited int) {
	g.tb.Helper()
	for i := range 243 {
		if g.guess(fmt.Sprintf("%s-%02d", ids, i%27), addr(i)) == http.StatusTooManyRequests {
			limited++
		}
	}
	return limited
}

// authLimitEnv is dev mode (its embedded Redis) behind a trusted proxy on
// loopback, with 10 failures an hour: nothing is forgiven while a test runs,
// so each count is exact.
func authLimitEnv(more ...string) map[string]string {
	env := devEnvVars()
	env["SNOWTOKEN_TRUSTED_PROXIES"] = "127.0.0.1"
	env["SNOWTOKEN_AUTH_FAILURES"] = "10/1h"
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// TestAuthLimitCountsNetworks: by default the failed-authentication limit
// counts an IPv6 client by its /64, so 243 addresses of one /64 are limited
// exactly as one address is (before: never); another /64 and another IPv4
// address keep budgets of their own; an IPv4-mapped IPv6 address is the IPv4
// address it maps.
func TestAuthLimitCountsNetworks(t *testing.T) {
	g := guesser{t, startProgram(t, authLimitEnv())}
	const want = 243 - 10 // every guess after the burst

	if got := g.spread("one", func(int) string { return "2001:db8:1::7" }); got != want {
		t.Errorf("243 wrong secrets from one IPv6 address: %d answered 429, want %d", got, want)
	}
	if got := g.spread("net", func(i int) string { return fmt.Sprintf("2001:db8:2:0:%x:%x::1", i, 7*i) }); got != want {
		t.Errorf("243 wrong secrets from 243 addresses of one /64: %d answered 429, want %d as from one address", got, want)
	}
	for _, other := range []string{"2001:db8:2:1::1", "2001:db8:3::7", "198.51.100.8"} {
		if got := g.guess("other", other); got != http.StatusUnauthorized {
			t.Errorf("a wrong secret from %s, another network: %d, want 401 (a budget of its own)", other, got)
		}
	}

	const v4, mapped = "198.51.100.7", "::ffff:198.51.100.7"
	for i := range 10 {
		from := []string{v4, mapped}[i%2]
		if got := g.guess(fmt.Sprintf("mapped-%d", i), from); got != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d from %s: %d, want 401 within the burst", i+1, from, got)
		}
	}
	for _, from := range []string{v4, mapped} {
		if got := g.guess("mapped-after", from); got != http.StatusTooManyRequests {
			t.Errorf("after 5 wrong secrets from %s and 5 from %s, one from %s: %d, want 429 (one address)", v4, mapped, from, got)
		}
	}
}

// TestAuthLimitPrefixSettings: SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX and
// _IPV6_PREFIX choose the networks: /128 gives every IPv6 address a budget,
// /24 makes an IPv4 /24 one.
func TestAuthLimitPrefixSettings(t *testing.T) {
	g := guesser{t, startProgram(t, authLimitEnv(
		"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX", "24", "SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX", "128"))}
	if got := g.spread("net", func(i int) string { return fmt.Sprintf("2001:db8:2::%x", i+1) }); got != 0 {
		t.Errorf("243 wrong secrets from 243 addresses at /128: %d answered 429, want 0", got)
	}
	for i := range 10 {
		if got := g.guess(fmt.Sprintf("v4-%d", i), fmt.Sprintf("198.51.100.%d", i+1)); got != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d: %d, want 401 within the burst", i+1, got)
		}
	}
	if got := g.guess("v4-after", "198.51.100.200"); got != http.StatusTooManyRequests {
		t.Errorf("an 11th wrong secret from the same /24: %d, want 429", got)
	}
	if got := g.guess("v4-after", "198.51.101.1"); got != http.StatusUnauthorized {
		t.Errorf("a wrong secret from another /24: %d, want 401", got)
	}
}

// TestAuthLimitDPoPForwarder: a caller in SNOWTOKEN_DPOP_FORWARDERS alone
// (a Remote-mode consumer) names no client address: wrong secrets from it,
// each with another X-Forwarded-For and client ID, are limited by its own
// address after the burst, as from any caller (before, the one setting that
// let it forward a proof's request let each escape the limit). A program
// whose forwarders are the trusted proxies by default says so at start.
func TestAuthLimitDPoPForwarder(t *testing.T) {
	env := authLimitEnv("SNOWTOKEN_DPOP_FORWARDERS", "127.0.0.1")
	delete(env, "SNOWTOKEN_TRUSTED_PROXIES")
	p := startProgram(t, env)
	g := guesser{t, p}
	for i := range 10 {
		if got := g.guess(fmt.Sprintf("fwd-%d", i), fmt.Sprintf("198.51.100.%d", i+1)); got != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d: %d, want 401 within the burst", i+1, got)
		}
	}
	if got := g.guess("fwd-after", "198.51.100.200"); got != http.StatusTooManyRequests {
		t.Errorf("an 11th wrong secret from the forwarder, with yet another X-Forwarded-For: %d, want 429", got)
	}
	const warning = "SNOWTOKEN_DPOP_FORWARDERS is unset"
	if strings.Contains(p.logs(), warning) {
		t.Errorf("SNOWTOKEN_DPOP_FORWARDERS set, and the log warns %q", warning)
	}
	if defaulted := startProgram(t, authLimitEnv()); !strings.Contains(defaulted.logs(), warning) {
		t.Errorf("SNOWTOKEN_TRUSTED_PROXIES set, SNOWTOKEN_DPOP_FORWARDERS unset, and no warning %q in the log:\n%s", warning, defaulted.logs())
	}
}

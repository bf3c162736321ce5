package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The three callers of TestForwardersNameNoClient, each at an address of
// its own (fromAddress), so that each has its own address budget.
const (
	unlistedAddr  = "127.0.0.1" // in neither list
	forwarderAddr = "127.0.0.2" // a Remote-mode consumer: DPoPForwarders only
	gatewayAddr   = "127.0.0.3" // a proxy in front of clients: TrustedProxies only
)

// TestForwardersNameNoClient: the two trusts of a caller are apart. A
// DPoP forwarder (a Remote-mode consumer, SNOWTOKEN_DPOP_FORWARDERS) names
// the original request of the proofs it forwards, and nothing more: failed
// authentications from it with a different X-Forwarded-For each are
// limited as those of any caller that is in no list, and the audit log
// names its own address. Only a trusted proxy (SNOWTOKEN_TRUSTED_PROXIES)
// names the client's address. Before the split, the one setting that let
// a consumer forward a proof's request let it name any client address too:
// 20 failures with a rotating X-Forwarded-For were 20 401s, never a 429.
func TestForwardersNameNoClient(t *testing.T) {
	t.Parallel()
	const failures, tries = 5, 20
	e := newLimitedEnv(t, failures, withTrustedProxies(gatewayAddr), withDPoPForwarders(forwarderAddr))
	// The forwarder's forwarded request is believed (before its address
	// is limited, which would refuse the token's issue).
	k := newDPoPKey(t, "EdDSA")
	tok := e.boundToken(t, e.Normal, k)
	const api = "https://api.example/orders/17"
	fwd := forwarded("GET", "https", "api.example", "/orders/17")
	fwdr := *e.env
	fwdr.HTTP = fromAddress(forwarderAddr)
	if r := fwdr.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", api, tok, "", e.Clock.Now(), nil)}, fwd); r.Status != http.StatusOK {
		t.Errorf("a proof of the request the forwarder names: %d %s", r.Status, r.Body)
	}

	for _, tc := range []struct {
		addr    string
		limited bool // by the address's budget: its X-Forwarded-For is ignored
	}{
		{unlistedAddr, true},
		{forwarderAddr, true},
		{gatewayAddr, false},
	} {
		from := *e.env
		from.HTTP = fromAddress(tc.addr)
		var got []int
		for i := range tries {
			// Another client ID and another client address each time:
			// only the caller's own address can be limited.
			hdr := http.Header{"Content-Type": {formType}, "Authorization": {basic(fmt.Sprintf("guess-%s-%d", tc.addr, i), "wrong")},
				"X-Forwarded-For": {fmt.Sprintf("203.0.113.%d", i+1)}}
			r := from.do(t, http.MethodPost, "/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()), hdr)
			got = append(got, r.Status)
		}
		var want []int
		for i := range tries {
			if tc.limited && i >= failures {
				want = append(want, http.StatusTooManyRequests)
			} else {
				want = append(want, http.StatusUnauthorized)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("from %s with a rotating X-Forwarded-For: statuses %v, want %v", tc.addr, got, want)
		}
	}
	var addrs []any
	for _, ev := range e.log.Events(t, "auth.rate_limited") {
		addrs = append(addrs, ev["addr"])
	}
	if want := []any{unlistedAddr, forwarderAddr}; fmt.Sprint(addrs) != fmt.Sprint(want) {
		t.Errorf("auth.rate_limited events name %v, want the callers' own addresses %v", addrs, want)
	}

}

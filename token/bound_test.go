package token_test

import (
	"errors"
	"testing"

	. "github.com/snowtoken/snowtoken/token"
)

// testJKT is an RFC 7638 thumbprint (RFC 7638 §3.1's example key's).
const testJKT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"

// TestIssueBound: a token issued with a JKT carries it, JWT (cnf.jkt) and
// opaque (its record) alike, and Validate returns it, from Redis and from
// the cache; a token issued without one carries none.
func TestIssueBound(t *testing.T) {
	e := newEnv(t, Options{})
	for _, client := range []string{"svc", "osvc"} {
		bound := e.issue(t, e.svc, client, IssueRequest{JKT: testJKT})
		if bound.JKT != testJKT {
			t.Errorf("%s: Issued.JKT %q", client, bound.JKT)
		}
		for range 2 { // the second from the cache, for a JWT
			if v := mustValidate(t, e.svc, bound.AccessToken); v.Claims().Confirmation.JKT != testJKT {
				t.Errorf("%s: validated jkt %q, want %q", client, v.Claims().Confirmation.JKT, testJKT)
			}
		}
		plain := e.issue(t, e.svc, client, IssueRequest{})
		if v := mustValidate(t, e.svc, plain.AccessToken); v.Claims().Confirmation.JKT != "" || plain.JKT != "" {
			t.Errorf("%s: a bearer token validated with jkt %q", client, v.Claims().Confirmation.JKT)
		}
	}
	if cnf := decodeSegment(t, e.issue(t, e.svc, "svc", IssueRequest{JKT: testJKT}).AccessToken, 1)["cnf"]; cnf == nil ||
		cnf.(map[string]any)["jkt"] != testJKT {
		t.Errorf("the JWT's cnf is %v", cnf)
	}
}

// TestIssueBoundRefuses: a client whose tokens are DPoP-bound gets none
// without a key, and a thumbprint that is not one is refused.
func TestIssueBoundRefuses(t *testing.T) {
	e := newEnv(t, Options{})
	c := *e.clients["svc"]
	c.DPoPBoundAccessTokens = true
	if _, err := e.svc.Issue(t.Context(), &c, IssueRequest{}); !errors.Is(err, ErrDPoPRequired) {
		t.Errorf("a dpop_bound_access_tokens client without a proof: %v, want ErrDPoPRequired", err)
	}
	if iss, err := e.svc.Issue(t.Context(), &c, IssueRequest{JKT: testJKT}); err != nil || iss.JKT != testJKT {
		t.Errorf("a dpop_bound_access_tokens client with a key: %+v, %v", iss, err)
	}
	for _, jkt := range []string{"short", testJKT + "A", testJKT[:42] + "=", testJKT[:42] + "\n"} {
		if _, err := e.svc.Issue(t.Context(), e.clients["svc"], IssueRequest{JKT: jkt}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("jkt %q: %v, want ErrInvalidRequest", jkt, err)
		}
	}
}

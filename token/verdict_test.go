package token_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// verdictClients returns the clients of newEnv's svc and osvc (JWT and
// opaque tokens), enabled or disabled.
func verdictClients(tb testing.TB, disabled bool) *clients.Registry {
	tb.Helper()
	cs, err := clients.New([]clients.Client{
		{ID: "svc", SecretSHA256: SHA256Hex("svc"), Scopes: []string{"read", "write"}, Disabled: disabled},
		{ID: "osvc", SecretSHA256: SHA256Hex("osvc"), Scopes: []string{"read", "write"}, TokenFormat: FormatOpaque, Disabled: disabled},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// proofOf is a Request.Proof whose proof's key has the thumbprint jkt.
func proofOf(jkt string) func() (string, error) {
	return func() (string, error) { return jkt, nil }
}

// TestVerdict: each rule of the verdict, for a JWT and an opaque token,
// decides alone: a request that breaks one rule only is refused with that
// rule's error, and every refusal carries a description for the client.
// The disabled client's case is the one a check of the token alone
// (validate, exported as Validate before) let through.
func TestVerdict(t *testing.T) {
	errProof := errors.New("the proof's own check refused it")
	for _, tc := range []struct {
		name string
		// issue is the token's request; prepare, if set, runs once it is
		// issued (a revocation, the clock moved on).
		issue   IssueRequest
		prepare func(e *env, client *clients.Client, raw string)
		req     Request // but Token
		// disabled checks against the clients with the token's disabled.
		disabled bool
		want     []error // nil: good
	}{
		{name: "good, examined", req: Request{}},
		{name: "good, bearer", req: Request{Scheme: Bearer}},
		{name: "good, audience and scope", req: Request{Scheme: Bearer, Audience: []string{testDefaultAud}, Scope: "read"}},
		{name: "good, bound as DPoP with its key's proof", issue: IssueRequest{JKT: testJKT}, req: Request{Scheme: DPoP, Proof: proofOf(testJKT)}},
		{name: "good, bound and examined", issue: IssueRequest{JKT: testJKT}, req: Request{}},
		{name: "expired", issue: IssueRequest{ExpiresIn: time.Minute},
			prepare: func(e *env, _ *clients.Client, _ string) { e.clock.Add(2 * time.Minute) },
			req:     Request{Scheme: Bearer}, want: []error{ErrInvalidToken}},
		{name: "revoked", prepare: func(e *env, c *clients.Client, raw string) {
			if _, err := e.svc.Revoke(context.Background(), c, raw); err != nil {
				panic(err)
			}
		}, req: Request{Scheme: Bearer}, want: []error{ErrInvalidToken, ErrRevoked}},
		{name: "disabled client", disabled: true, req: Request{Scheme: Bearer}, want: []error{ErrInvalidToken}},
		{name: "disabled client, examined", disabled: true, req: Request{}, want: []error{ErrInvalidToken}},
		{name: "bound, as Bearer", issue: IssueRequest{JKT: testJKT}, req: Request{Scheme: Bearer}, want: []error{ErrDPoPBound}},
		{name: "bound, as DPoP without a proof", issue: IssueRequest{JKT: testJKT}, req: Request{Scheme: DPoP}, want: []error{ErrDPoPProof}},
		{name: "bound, proof of another key", issue: IssueRequest{JKT: testJKT}, req: Request{Scheme: DPoP, Proof: proofOf("another")}, want: []error{ErrDPoPProof}},
		{name: "bound, proof refused", issue: IssueRequest{JKT: testJKT},
			req: Request{Scheme: DPoP, Proof: func() (string, error) { return "", errProof }}, want: []error{errProof}},
		{name: "not bound, as DPoP", req: Request{Scheme: DPoP, Proof: proofOf(testJKT)}, want: []error{ErrInvalidToken}},
		{name: "another audience", req: Request{Scheme: Bearer, Audience: []string{"https://other.test"}}, want: []error{ErrInvalidToken}},
		{name: "audience twice", req: Request{Scheme: Bearer, Audience: []string{testDefaultAud, testDefaultAud}}, want: []error{ErrInvalidRequest}},
		{name: "malformed audience", req: Request{Scheme: Bearer, Audience: []string{"a b"}}, want: []error{ErrInvalidRequest}},
		{name: "missing scope", issue: IssueRequest{Scope: "read"}, req: Request{Scheme: Bearer, Scope: "read write"}, want: []error{ErrInsufficientScope}},
		{name: "malformed scope", req: Request{Scheme: Bearer, Scope: "read  write"}, want: []error{ErrInvalidRequest}},
	} {
		for _, client := range []string{"svc", "osvc"} {
			t.Run(tc.name+"/"+client, func(t *testing.T) {
				e := newEnv(t, Options{Audience: testDefaultAud})
				c := e.clients[client]
				raw := e.issue(t, e.svc, client, tc.issue).AccessToken
				if tc.prepare != nil {
					tc.prepare(e, c, raw)
				}
				req := tc.req
				req.Token = raw
				v, err := e.svc.Verdict(t.Context(), verdictClients(t, tc.disabled), req)
				if tc.want == nil {
					if err != nil || v == nil || v.ClientID() != client {
						t.Fatalf("Verdict = %v, %v; want the token good", v, err)
					}
					return
				}
				if v != nil {
					t.Errorf("Verdict returned a token with its refusal: %v", v)
				}
				for _, w := range tc.want {
					if !errors.Is(err, w) {
						t.Errorf("Verdict: %v, want %v", err, w)
					}
				}
				if _, ok := refusal.Description(err); !ok && !errors.Is(err, errProof) {
					t.Errorf("Verdict's refusal %v carries no description for the client", err)
				}
			})
		}
	}
}

// TestVerdictAudienceMismatch: a token for another audience is refused
// with what was required for the client, and what the token holds for
// the log only.
func TestVerdictAudienceMismatch(t *testing.T) {
	e := newEnv(t, Options{Audience: testDefaultAud})
	raw := e.issue(t, e.svc, "svc", IssueRequest{}).AccessToken
	_, err := e.svc.Verdict(t.Context(), verdictClients(t, false), Request{Token: raw, Scheme: Bearer, Audience: []string{"https://other.test"}})
	var am *AudienceMismatch
	if !errors.As(err, &am) || am.Want != "https://other.test" || len(am.Aud) != 1 || am.Aud[0] != testDefaultAud || am.ClientID != "svc" {
		t.Fatalf("Verdict: %v (%+v), want an AudienceMismatch", err, am)
	}
	if d, _ := refusal.Description(err); d != `audience mismatch: the token is not for "https://other.test"` {
		t.Errorf("description %q", d)
	}
}

// TestVerifiedImmutable: what a caller gets of a verified token are
// copies: changing them changes nothing the cache shares with the next
// validation.
func TestVerifiedImmutable(t *testing.T) {
	e := newEnv(t, Options{Audience: testDefaultAud})
	cs := verdictClients(t, false)
	raw := e.issue(t, e.svc, "svc", IssueRequest{}).AccessToken
	v, err := e.svc.Verdict(t.Context(), cs, Request{Token: raw})
	if err != nil {
		t.Fatal(err)
	}
	v.Scopes()[0] = "admin"
	v.AppendAudience(make([]string, 0, 4))[0:1][0] = "https://evil.test"
	cl := v.Claims()
	cl.Audience[0], cl.Subject, cl.ExpiresAt.Time = "https://evil.test", "root", time.Time{}
	again, err := e.svc.Verdict(t.Context(), cs, Request{Token: raw, Audience: []string{testDefaultAud}, Scope: "read write"})
	if err != nil || again != v {
		t.Fatalf("the cached token, again: %v (%p, first %p)", err, again, v)
	}
	if again.HasScopes([]string{"admin"}) || again.ForAudience("https://evil.test") || again.Subject() != "svc" || again.ExpiresAt().IsZero() {
		t.Errorf("a caller changed the shared token: scopes %q, aud %q, sub %q", again.Scopes(), again.AppendAudience(nil), again.Subject())
	}
}

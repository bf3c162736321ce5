package token_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// fakeJWTs accepts every subject token as tok, or refuses it with err.
type fakeJWTs struct {
	tok clientauth.SubjectToken
	err error
}

func (f fakeJWTs) VerifySubjectToken(context.Context, []clientauth.TrustedIssuer, string, string) (clientauth.SubjectToken, error) {
	return f.tok, f.err
}

// TestExchangeJWTSubject: Exchange decides from a verified JWT's claims:
// its sub and scope become the new token's (within the client's), exp no
// later than the JWT's, no parents; a JWT of this issuer, one with an act,
// one whose sub no token of ours can carry or whose scope claim is
// malformed is invalid_request; a key server down stays clientauth.ErrFetch.
func TestExchangeJWTSubject(t *testing.T) {
	e := newEnv(t, Options{})
	cs, err := clients.New([]clients.Client{{ID: "wl", SecretSHA256: SHA256Hex("wl"), Scopes: []string{"read"},
		TokenExchange: true, Impersonation: true, SubjectTokenIssuers: []clientauth.TrustedIssuer{{Issuer: "https://k8s.example"}}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cs.Lookup("wl")
	now := e.clock.Now()
	good := clientauth.SubjectToken{Issuer: "https://k8s.example", Subject: "system:serviceaccount:shop:orders", Scope: "read write",
		IssuedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	exchange := func(f fakeJWTs) (Exchanged, error) {
		return e.svc.Exchange(t.Context(), cs, c, ExchangeRequest{SubjectToken: "x.y.z", SubjectTokenType: TokenTypeJWT, JWTs: f})
	}
	out, err := exchange(fakeJWTs{tok: good})
	if err != nil {
		t.Fatal(err)
	}
	if out.Subject != good.Subject || out.Scope != "read" || out.ExpiresIn > 10*time.Minute || out.Parent != "" || out.SubjectIssuer != good.Issuer {
		t.Errorf("exchanged %+v", out)
	}
	v, err := e.svc.Verdict(t.Context(), cs, Request{Token: out.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	if v.Subject() != good.Subject || len(v.Parents()) != 0 || v.Act() != nil {
		t.Errorf("claims %+v", v.Claims())
	}

	with := func(edit func(*clientauth.SubjectToken)) fakeJWTs {
		tok := good
		edit(&tok)
		return fakeJWTs{tok: tok}
	}
	for _, tc := range []struct {
		name string
		f    fakeJWTs
		want error
	}{
		{"this issuer's own", with(func(s *clientauth.SubjectToken) { s.Issuer = testIssuer }), ErrInvalidRequest},
		{"with an act", with(func(s *clientauth.SubjectToken) { s.Act = &jwtpolicy.Actor{Subject: "ci"} }), ErrInvalidRequest},
		{"a sub no token of ours carries", with(func(s *clientauth.SubjectToken) { s.Subject = "repo:shop/orders" }), ErrInvalidRequest},
		{"a malformed scope claim", with(func(s *clientauth.SubjectToken) { s.Scope = "read  write" }), ErrInvalidRequest},
		{"may_act without an actor token", with(func(s *clientauth.SubjectToken) { s.MayAct = &jwtpolicy.Actor{Subject: "svc"} }), ErrInvalidRequest},
		{"DPoP-bound, no proof", with(func(s *clientauth.SubjectToken) { s.JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I" }), ErrInvalidRequest},
		{"refused by the verifier", fakeJWTs{err: clientauth.ErrSignature}, ErrInvalidRequest},
		{"key server down", fakeJWTs{err: clientauth.ErrFetch}, clientauth.ErrFetch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exchange(tc.f); !errors.Is(err, tc.want) || errors.Is(err, ErrInvalidScope) {
				t.Errorf("Exchange: %v, want %v", err, tc.want)
			}
		})
	}
	// No verifier, or a client that trusts no issuer: refused.
	if _, err := e.svc.Exchange(t.Context(), cs, c, ExchangeRequest{SubjectToken: "x.y.z", SubjectTokenType: TokenTypeJWT}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("no verifier: %v, want %v", err, ErrInvalidRequest)
	}
}

package token_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// exchangeClients are the clients of the exchange tests: a user-facing
// gateway whose tokens name "api" (its audience), the service "api" that
// may exchange them (opaque tokens, scope read only), "imp", which may
// impersonate, and "plain", which may not exchange.
func exchangeClients(tb testing.TB, disabled ...string) (*clients.Registry, map[string]*clients.Client) {
	tb.Helper()
	list := []clients.Client{
		{ID: "gw", SecretSHA256: SHA256Hex("gw"), Scopes: []string{"read", "write"}, MaySetSubject: true, Audiences: []string{"api", "imp"}},
		{ID: "api", SecretSHA256: SHA256Hex("api"), Scopes: []string{"read", "admin"}, Audiences: []string{"downstream"},
			TokenFormat: FormatOpaque, TokenExchange: true},
		{ID: "imp", SecretSHA256: SHA256Hex("imp"), Scopes: []string{"read"}, TokenExchange: true, Impersonation: true},
		{ID: "plain", SecretSHA256: SHA256Hex("plain"), Scopes: []string{"read"}},
	}
	for i := range list {
		for _, d := range disabled {
			list[i].Disabled = list[i].Disabled || list[i].ID == d
		}
	}
	cs, err := clients.New(list)
	if err != nil {
		tb.Fatal(err)
	}
	byID := map[string]*clients.Client{}
	for _, c := range list {
		byID[c.ID], _ = cs.Lookup(c.ID)
	}
	return cs, byID
}

// TestExchangeNarrows: the exchanged token has the subject token's sub,
// the requesting client, the scopes both hold (none asked), act naming the
// actor and parents naming the subject token, and expires no later than
// the subject token.
func TestExchangeNarrows(t *testing.T) {
	e := newEnv(t, Options{})
	cs, c := exchangeClients(t)
	user, err := e.svc.Issue(t.Context(), c["gw"], IssueRequest{Subject: "alice", Audience: []string{"api"}, ExpiresIn: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	actor, err := e.svc.Issue(t.Context(), c["api"], IssueRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.Exchange(t.Context(), cs, c["api"], ExchangeRequest{SubjectToken: user.AccessToken, SubjectTokenType: TokenTypeAccessToken,
		ActorToken: actor.AccessToken, ActorTokenType: TokenTypeAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	if out.Scope != "read" || out.Subject != "alice" || out.Actor != "api" || out.ExpiresIn > 10*time.Minute {
		t.Errorf("exchanged %+v: want scope read (gw's read write ∩ api's read admin), sub alice, actor api, at most 10m", out)
	}
	v, err := e.svc.Verdict(t.Context(), cs, Request{Token: out.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := e.svc.Verdict(t.Context(), cs, Request{Token: user.AccessToken})
	want := []jwtpolicy.Parent{{ID: sub.JTI(), ClientID: "gw", IssuedAt: sub.IssuedAt().Unix()}}
	if got, _ := json.Marshal(v.Parents()); string(got) != mustMarshal(t, want) {
		t.Errorf("parents %s, want %s", got, mustMarshal(t, want))
	}
	if a := v.Act(); a == nil || a.Subject != "api" || a.ClientID != "api" || a.Act != nil || v.ActorSubject() != "api" {
		t.Errorf("act %+v", a)
	}
	if v.Subject() != "alice" || v.ClientID() != "api" || !v.ForAudience("downstream") || v.ExpiresAt().After(sub.ExpiresAt()) {
		t.Errorf("claims %+v", v.Claims())
	}
	// What Act returns is a copy: the cached token is unchanged.
	v.Act().Subject = "mallory"
	if v.ActorSubject() != "api" {
		t.Error("Act's copy changed the verified token")
	}
}

func mustMarshal(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestExchangeRefuses: each refusal is its RFC 8693 error's sentinel, and
// a refused subject token is ErrInvalidRequest, never ErrInvalidToken
// (the token endpoint's 400, not a resource's 401).
func TestExchangeRefuses(t *testing.T) {
	e := newEnv(t, Options{})
	cs, c := exchangeClients(t)
	issue := func(client string, req IssueRequest) string {
		t.Helper()
		iss, err := e.svc.Issue(t.Context(), c[client], req)
		if err != nil {
			t.Fatal(err)
		}
		return iss.AccessToken
	}
	user := issue("gw", IssueRequest{Subject: "alice", Audience: []string{"api"}, Scope: "read"})
	forImp := issue("gw", IssueRequest{Subject: "alice", Audience: []string{"imp"}})
	actor := issue("api", IssueRequest{})
	disabledCS, _ := exchangeClients(t, "gw")
	for _, tc := range []struct {
		name   string
		cs     *clients.Registry
		client string
		req    ExchangeRequest
		want   error
	}{
		{"not opted in", cs, "plain", ExchangeRequest{SubjectToken: issue("plain", IssueRequest{})}, ErrUnauthorizedClient},
		{"no actor, no impersonation", cs, "api", ExchangeRequest{SubjectToken: user}, ErrUnauthorizedClient},
		{"wider scope", cs, "api", ExchangeRequest{SubjectToken: user, ActorToken: actor, Scope: "read write"}, ErrInvalidScope},
		{"a scope the client lacks", cs, "api", ExchangeRequest{SubjectToken: user, ActorToken: actor, Scope: "admin"}, ErrInvalidScope},
		{"audience", cs, "api", ExchangeRequest{SubjectToken: user, ActorToken: actor, Audience: []string{"api"}}, ErrInvalidTarget},
		{"not named", cs, "api", ExchangeRequest{SubjectToken: forImp, ActorToken: actor}, ErrInvalidRequest},
		{"actor not the caller's", cs, "imp", ExchangeRequest{SubjectToken: forImp, ActorToken: actor}, ErrInvalidRequest},
		{"subject client disabled", disabledCS, "api", ExchangeRequest{SubjectToken: user, ActorToken: actor}, ErrInvalidRequest},
		{"not a token", cs, "api", ExchangeRequest{SubjectToken: "st_nope", ActorToken: actor}, ErrInvalidRequest},
		{"malformed DPoP key", cs, "api", ExchangeRequest{SubjectToken: user, ActorToken: actor, JKT: "short"}, ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.SubjectTokenType = TokenTypeAccessToken
			if tc.req.ActorToken != "" {
				tc.req.ActorTokenType = TokenTypeAccessToken
			}
			_, err := e.svc.Exchange(t.Context(), tc.cs, c[tc.client], tc.req)
			if !errors.Is(err, tc.want) || errors.Is(err, ErrInvalidToken) {
				t.Errorf("Exchange: %v, want %v (and not ErrInvalidToken)", err, tc.want)
			}
		})
	}
}

// TestExchangeMayAct: a subject token's may_act names who may act for its
// subject: the actor it names is taken, another actor is refused, and so is
// an exchange without one. (The issuer mints no may_act; a token carrying
// one is made here, as another tool of the operator's might.)
func TestExchangeMayAct(t *testing.T) {
	var probe jwtpolicy.Claims
	if json.Unmarshal([]byte(`{"may_act":{"sub":"a"}}`), &probe); probe.MayAct == nil {
		t.Skip("jwtpolicy.Claims does not decode may_act yet (the cascade's change)")
	}
	e := newEnv(t, Options{})
	cs, c := exchangeClients(t)
	gw := *c["gw"]
	gw.TokenFormat = FormatJWT
	user, err := e.svc.IssueWithChain(t.Context(), &gw, "alice", `"aud":"imp","may_act":{"sub":"someone-else"}`, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.svc.Issue(t.Context(), c["imp"], IssueRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []ExchangeRequest{
		{SubjectToken: user.AccessToken, SubjectTokenType: TokenTypeAccessToken},
		{SubjectToken: user.AccessToken, SubjectTokenType: TokenTypeAccessToken, ActorToken: own.AccessToken, ActorTokenType: TokenTypeAccessToken},
	} {
		if _, err := e.svc.Exchange(t.Context(), cs, c["imp"], req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("may_act naming another actor, actor %v: %v, want ErrInvalidRequest", req.ActorToken != "", err)
		}
	}
	named, err := e.svc.IssueWithChain(t.Context(), &gw, "alice", `"aud":"imp","may_act":{"sub":"imp"}`, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Exchange(t.Context(), cs, c["imp"], ExchangeRequest{SubjectToken: named.AccessToken, SubjectTokenType: TokenTypeAccessToken,
		ActorToken: own.AccessToken, ActorTokenType: TokenTypeAccessToken}); err != nil {
		t.Errorf("may_act naming the actor: %v", err)
	}
}

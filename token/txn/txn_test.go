package txn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/txn"
)

// access is a verified access token as Claims reads one.
type access struct {
	sub, client string
	scopes      []string
	exp         time.Time
}

func (a access) Issuer() string       { return "https://issuer.example" }
func (a access) Subject() string      { return a.sub }
func (a access) ClientID() string     { return a.client }
func (a access) Scopes() []string     { return append([]string(nil), a.scopes...) }
func (a access) ExpiresAt() time.Time { return a.exp }

var now = time.Unix(1_800_000_000, 0)

func TestClaims(t *testing.T) {
	tok := access{sub: "alice", client: "web", scopes: []string{"orders:read", "orders:write"}, exp: now.Add(time.Hour)}
	p := txn.Params{TrustDomain: "shop.internal", TTL: time.Minute, Now: now, Txn: 117811659438825472}
	for _, tc := range []struct {
		name      string
		src       access
		req       txn.Request
		wantScope string
		wantExp   time.Time
		wantErr   error
	}{
		{name: "no scope asked: all of the token's", src: tok, req: txn.Request{Workload: "web"},
			wantScope: "orders:read orders:write", wantExp: now.Add(time.Minute)},
		{name: "a narrower scope", src: tok, req: txn.Request{Workload: "web", Scopes: []string{"orders:read"}},
			wantScope: "orders:read", wantExp: now.Add(time.Minute)},
		{name: "never wider: a scope the token lacks is left out", src: tok,
			req:       txn.Request{Workload: "web", Scopes: []string{"orders:read", "admin", "orders:read"}},
			wantScope: "orders:read", wantExp: now.Add(time.Minute)},
		{name: "only scopes the token lacks", src: tok, req: txn.Request{Workload: "web", Scopes: []string{"admin"}}, wantErr: txn.ErrScope},
		{name: "a token without scope", src: access{sub: "alice", client: "web", exp: now.Add(time.Hour)},
			req: txn.Request{Workload: "web"}, wantErr: txn.ErrScope},
		{name: "exp never past the token's", src: access{sub: "alice", client: "web", scopes: []string{"a"}, exp: now.Add(10 * time.Second)},
			req: txn.Request{Workload: "web"}, wantScope: "a", wantExp: now.Add(10 * time.Second)},
		{name: "an expired token", src: access{sub: "alice", client: "web", scopes: []string{"a"}, exp: now},
			req: txn.Request{Workload: "web"}, wantErr: txn.ErrExpired},
		{name: "no workload", src: tok, req: txn.Request{}, wantErr: txn.ErrOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := txn.Claims(tc.src, tc.req, p)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if c.Scope != tc.wantScope || c.ExpiresAt != tc.wantExp.Unix() {
				t.Errorf("scope %q exp %d, want %q %d", c.Scope, c.ExpiresAt, tc.wantScope, tc.wantExp.Unix())
			}
			want := txntoken.Claims{Issuer: "https://issuer.example", IssuedAt: now.Unix(), ExpiresAt: c.ExpiresAt,
				Audience: "shop.internal", Txn: "117811659438825472", Subject: tc.src.sub, Scope: c.Scope, Workload: "web",
				Transaction: &txntoken.TransactionContext{ClientID: tc.src.client}}
			if c.Transaction == nil || *c.Transaction != *want.Transaction || c.Request != nil {
				t.Errorf("tctx %+v rctx %+v, want %+v and none", c.Transaction, c.Request, want.Transaction)
			}
			c.Transaction, want.Transaction = nil, nil
			if c != want {
				t.Errorf("claims\n%+v, want\n%+v", c, want)
			}
			if err := c.Check(); err != nil {
				t.Errorf("the claims miss a required one: %v", err)
			}
		})
	}
}

func TestClaimsContext(t *testing.T) {
	tok := access{sub: "alice", client: "web", scopes: []string{"a"}, exp: now.Add(time.Hour)}
	actor := &txntoken.Actor{Subject: "orders", ClientID: "orders"}
	rc := &txntoken.RequestContext{IP: "192.0.2.7", Transport: "https", Method: "GET", Path: "/orders"}
	c, err := txn.Claims(tok, txn.Request{Workload: "web", Actor: actor, Context: rc}, txn.Params{TrustDomain: "d", TTL: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if c.Transaction.Actor != actor || c.Request == nil || *c.Request != *rc || c.Request == rc {
		t.Errorf("tctx %+v rctx %+v: want the actor, and a copy of the request context", c.Transaction, c.Request)
	}
	c, _ = txn.Claims(tok, txn.Request{Workload: "web", Context: &txntoken.RequestContext{}}, txn.Params{TrustDomain: "d", TTL: time.Minute, Now: now})
	if c.Request != nil {
		t.Errorf("an empty request context is written as %+v, want none", c.Request)
	}
}

func TestNarrow(t *testing.T) {
	prev := txntoken.Claims{IssuedAt: now.Unix(), ExpiresAt: now.Unix() + 60, Audience: "d", Txn: "1", Subject: "alice",
		Scope: "a b", Workload: "gateway", Transaction: &txntoken.TransactionContext{ClientID: "web"}}
	with := func(f func(c *txntoken.Claims)) txntoken.Claims {
		c := prev
		c.Transaction = &txntoken.TransactionContext{ClientID: "web"}
		c.IssuedAt += 5
		c.Workload = "orders"
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		next txntoken.Claims
		at   time.Time
		want error
	}{
		{name: "the same scope", next: with(func(*txntoken.Claims) {}), at: now},
		{name: "a narrower scope, sooner exp, new rctx", next: with(func(c *txntoken.Claims) {
			c.Scope, c.ExpiresAt, c.Request = "b", c.ExpiresAt-30, &txntoken.RequestContext{Method: "POST"}
		}), at: now},
		{name: "scope grows", next: with(func(c *txntoken.Claims) { c.Scope = "a b c" }), at: now, want: txn.ErrScope},
		{name: "scope replaced", next: with(func(c *txntoken.Claims) { c.Scope = "c" }), at: now, want: txn.ErrScope},
		{name: "no scope", next: with(func(c *txntoken.Claims) { c.Scope = "" }), at: now, want: txn.ErrScope},
		{name: "txn changes", next: with(func(c *txntoken.Claims) { c.Txn = "2" }), at: now, want: txn.ErrReplacement},
		{name: "sub changes", next: with(func(c *txntoken.Claims) { c.Subject = "bob" }), at: now, want: txn.ErrReplacement},
		{name: "aud changes", next: with(func(c *txntoken.Claims) { c.Audience = "e" }), at: now, want: txn.ErrReplacement},
		{name: "tctx changes", next: with(func(c *txntoken.Claims) { c.Transaction.ClientID = "evil" }), at: now, want: txn.ErrReplacement},
		{name: "tctx dropped", next: with(func(c *txntoken.Claims) { c.Transaction = nil }), at: now, want: txn.ErrReplacement},
		{name: "exp later", next: with(func(c *txntoken.Claims) { c.ExpiresAt++ }), at: now, want: txn.ErrReplacement},
		{name: "issued before", next: with(func(c *txntoken.Claims) { c.IssuedAt = prev.IssuedAt - 1 }), at: now, want: txn.ErrReplacement},
		{name: "the replaced one expired", next: with(func(*txntoken.Claims) {}), at: now.Add(time.Minute), want: txn.ErrReplacement},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := txn.Narrow(prev, tc.next, tc.at); !errors.Is(err, tc.want) {
				t.Errorf("Narrow: %v, want %v", err, tc.want)
			}
		})
	}
}

type ids struct{ err error }

func (i ids) NextID(context.Context) (snowflakealg.ID, error) { return 42, i.err }

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts txn.Options
		ok   bool
	}{
		{"defaults", txn.Options{TrustDomain: "shop.internal"}, true},
		{"the longest TTL", txn.Options{TrustDomain: "shop.internal", TTL: txn.MaxTTL}, true},
		{"no trust domain", txn.Options{}, false},
		{"a space in the trust domain", txn.Options{TrustDomain: "shop internal"}, false},
		{"a TTL too long", txn.Options{TrustDomain: "d", TTL: txn.MaxTTL + time.Second}, false},
		{"a TTL too short", txn.Options{TrustDomain: "d", TTL: time.Millisecond}, false},
		{"a negative TTL", txn.Options{TrustDomain: "d", TTL: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := txn.New(tc.opts, ids{})
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, txn.ErrOptions) {
				t.Errorf("New: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

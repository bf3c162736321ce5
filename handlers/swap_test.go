package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// TestSwap replaces the clients and keys of a serving issuer: the requests
// after Swap use the new set (its signing key, its clients, its version in
// /readyz), a token of the old key still validates while the new set keeps
// the key, and a request under way when Swap happens finishes with the set
// it began with.
func TestSwap(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	e := newEnv(t, withReady(func(context.Context) error {
		if hold.Load() {
			entered <- struct{}{}
			<-release
		}
		return nil
	}))
	before := e.issue(t, e.Normal, nil)

	next := keysettest.MustKey(t)
	keys, err := keyset.New(next, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := e.Svc.WithKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	var kept []clients.Client
	for _, c := range e.Clients.All() {
		if c.ID != e.Partner.ID {
			kept = append(kept, c)
		}
	}
	clients, err := clients.New(kept)
	if err != nil {
		t.Fatal(err)
	}

	// A /readyz under way when the set is swapped.
	hold.Store(true)
	inFlight := make(chan *response)
	go func() { inFlight <- e.do(t, http.MethodGet, "/readyz", nil, nil) }()
	<-entered
	hold.Store(false)
	e.Server.Swap(svc, clients, handlers.Version{Clients: "c2", Keys: "k2"})
	close(release)
	if got := (<-inFlight).object(t)["config"]; !versionIs(got, "", "") {
		t.Errorf("/readyz under way during Swap: config %v, want the set it began with (none)", got)
	}

	if got := e.do(t, http.MethodGet, "/readyz", nil, nil).object(t)["config"]; !versionIs(got, "c2", "k2") {
		t.Errorf("/readyz after Swap: config %v, want clients c2, keys k2", got)
	}
	after := e.issue(t, e.Normal, nil)
	if kid := tokenKid(t, after.AccessToken); kid != next.ID {
		t.Errorf("a token issued after Swap has kid %s, want the new key's %s", kid, next.ID)
	}
	for name, tok := range map[string]string{"before": before.AccessToken, "after": after.AccessToken} {
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Errorf("token issued %s Swap: validate %d %s", name, r.Status, r.Body)
		}
	}
	r := e.post(t, "/token", &e.Partner, url.Values{"grant_type": {"client_credentials"}})
	wantError(t, r, http.StatusUnauthorized, "invalid_client")

	var set keyset.JWKS
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/.well-known/jwks.json", nil, nil).Body, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 || set.Keys[0].Kid != next.ID {
		t.Errorf("JWKS after Swap = %+v, want the new key first, then the old", set.Keys)
	}
}

// versionIs reports whether a decoded /readyz config is {clients, keys}.
func versionIs(got any, clients, keys string) bool {
	m, ok := got.(map[string]any)
	return ok && m["clients"] == clients && m["keys"] == keys
}

// tokenKid returns the kid of a token's header.
func tokenKid(tb testing.TB, raw string) string {
	tb.Helper()
	tok, _, err := jwt.NewParser().ParseUnverified(raw, jwt.MapClaims{})
	if err != nil {
		tb.Fatal(err)
	}
	kid, _ := tok.Header["kid"].(string)
	if kid == "" {
		tb.Fatalf("token has no kid: %s", strings.SplitN(raw, ".", 2)[0])
	}
	return kid
}

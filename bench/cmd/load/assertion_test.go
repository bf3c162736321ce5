package main

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// TestAssertions: the load tool's client assertions pass the issuer's own
// verifier (package clientauth) under the key set it registers, each once,
// each with a jti of its own, exp within the issuer's bound; one sent twice
// is refused, and so is one to another audience or from another client. A
// pool too slow to be used before its assertions expire is an error.
func TestAssertions(t *testing.T) {
	const aud = "http://127.0.0.1:1" // the issuer's identifier, alone
	k, err := newProofKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	set, err := k.jwks()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := clientauth.ParseJWKS(set)
	if err != nil {
		t.Fatalf("the registered key set: %v", err)
	}
	v, err := clientauth.New(clientauth.Options{Audiences: []string{aud}, Replay: dpop.NewMemoryReplay()})
	if err != nil {
		t.Fatal(err)
	}
	reg := clientauth.Registration{ClientID: assertionClient, Keys: keys}
	src := k.assertionSource(assertionClient, aud)
	values, err := src.values(20, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, a := range values {
		if err := v.Verify(t.Context(), reg, a); err != nil {
			t.Fatalf("assertion %d: %v", i, err)
		}
		if seen[a] {
			t.Errorf("assertion %d made twice", i)
		}
		seen[a] = true
	}
	if err := v.Verify(t.Context(), reg, values[0]); !errors.Is(err, clientauth.ErrReplayed) {
		t.Errorf("an assertion sent twice: %v, want ErrReplayed", err)
	}
	other, err := k.assertion(assertionClient, "http://elsewhere", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(t.Context(), reg, other); !errors.Is(err, clientauth.ErrClaims) {
		t.Errorf("an assertion to another audience: %v, want ErrClaims", err)
	}
	if err := v.Verify(t.Context(), clientauth.Registration{ClientID: "someone-else", Keys: keys}, values[1]); !errors.Is(err, clientauth.ErrClaims) {
		t.Errorf("an assertion for another client: %v, want ErrClaims", err)
	}
	if _, err := src.values(1, assertionLifetime); err == nil {
		t.Error("assertions for a run as long as their lifetime: no error")
	}
}

// TestAssertionRequest: the request carries the client, the assertion type
// and, at the body's end, the assertion, as a form the issuer parses; no
// Authorization header.
func TestAssertionRequest(t *testing.T) {
	req := assertionSlot.fill(assertionRequest(assertionClient), "eyJ.b.c")
	form, err := url.ParseQuery(req.body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"grant_type": "client_credentials", "scope": "read", "client_id": assertionClient,
		"client_assertion_type": clientauth.AssertionType, "client_assertion": "eyJ.b.c"}
	for name, value := range want {
		if got := form[name]; len(got) != 1 || got[0] != value {
			t.Errorf("%s = %q, want %q", name, got, value)
		}
	}
	if len(form) != len(want) || req.method != "POST" || req.path != "/token" {
		t.Errorf("request %s %s, form %v", req.method, req.path, form)
	}
	if raw := req.raw(); strings.Contains(raw, "Authorization") {
		t.Errorf("request with an Authorization header: %q", raw)
	}
}

package clientauth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

const saSubject = "system:serviceaccount:shop:orders"

// TestVerifyWorkload: a projected service-account token, as Kubernetes
// makes one (RS256, kid, aud a list naming us, iat, nbf, exp, jti, and its
// kubernetes.io claims), authenticates its client with the keys from the
// cluster issuer's discovery document (over TLS with the cluster's CA), as
// often as the pod sends it; every flaw is refused.
func TestVerifyWorkload(t *testing.T) {
	sa := newSigner(t, clientauth.AlgRS256, "k8s-key")
	clusterIssuer, ca, _ := newTLSIssuer(t, func(iss string) string { return iss + "/openid/v1/jwks" }, jwks(t, sa))
	clock := clocktest.New(t0)
	// The cluster is on loopback: the allow-list lets its discovery
	// document's jwks_uri be fetched.
	v := newVerifier(t, clock, clientauth.FetchOptions{AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	reg := clientauth.Registration{ClientID: "orders", Workload: &clientauth.WorkloadIdentity{TrustedIssuer: clientauth.TrustedIssuer{Issuer: clusterIssuer, CAFile: ca}, Subject: saSubject}}
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": clusterIssuer, "sub": saSubject, "aud": []string{issuer},
			"iat": t0.Add(-10 * time.Minute).Unix(), "nbf": t0.Add(-10 * time.Minute).Unix(), "exp": t0.Add(50 * time.Minute).Unix(),
			"jti":           "5b0f0c9e-1d5e-4a4e-9d0e-0c7a0d1f7c11",
			"kubernetes.io": map[string]any{"namespace": "shop", "serviceaccount": map[string]any{"name": "orders", "uid": "u"}}}
		if change != nil {
			change(c)
		}
		return c
	}
	token := sa.sign(t, claims(nil))
	for i := range 3 {
		if err := v.Verify(t.Context(), reg, token); err != nil {
			t.Fatalf("use %d of the pod's token: %v", i+1, err)
		}
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other := signer{alg: clientauth.AlgRS256, kid: "k8s-key", method: sa.method, priv: otherKey}
	tests := []struct {
		name      string
		assertion string
		want      error
	}{
		{"another service account", sa.sign(t, claims(func(c jwt.MapClaims) { c["sub"] = "system:serviceaccount:shop:default" })), clientauth.ErrClaims},
		{"another issuer", sa.sign(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://other.example" })), clientauth.ErrClaims},
		{"the API server's audience", sa.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = []string{"https://kubernetes.default.svc.cluster.local"} })), clientauth.ErrClaims},
		{"expired", sa.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Minute).Unix() })), clientauth.ErrClaims},
		{"lives a year", sa.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(365 * 24 * time.Hour).Unix() })), clientauth.ErrClaims},
		{"lived a year (exp − iat)", sa.sign(t, claims(func(c jwt.MapClaims) { c["iat"] = t0.Add(-365 * 24 * time.Hour).Unix() })), clientauth.ErrClaims},
		{"signed by another key", other.sign(t, claims(nil)), clientauth.ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := v.Verify(t.Context(), reg, tt.assertion); !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
		})
	}
}

// TestWorkloadCheck: the registration's own checks.
func TestWorkloadCheck(t *testing.T) {
	for _, w := range []clientauth.WorkloadIdentity{
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "http://k8s.example"}, Subject: saSubject},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example"}, Subject: ""},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example"}, Subject: "a\nb"},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example", JWKSURI: "http://k8s.example/jwks"}, Subject: saSubject},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example", JWKSURI: "https://169.254.169.254/jwks"}, Subject: saSubject},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://[fe80::1]"}, Subject: saSubject},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example", CAFile: "/nonexistent/ca.crt"}, Subject: saSubject},
		{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example", BearerTokenFile: "/nonexistent/token"}, Subject: saSubject},
	} {
		if err := w.Check(); !errors.Is(err, clientauth.ErrRegistration) {
			t.Errorf("Check(%+v) = %v, want %v", w, err, clientauth.ErrRegistration)
		}
	}
	ok := clientauth.WorkloadIdentity{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://kubernetes.default.svc.cluster.local", JWKSURI: "https://kubernetes.default.svc/openid/v1/jwks"}, Subject: saSubject}
	if err := ok.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

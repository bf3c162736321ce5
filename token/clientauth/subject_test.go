package clientauth_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// TestVerifySubjectToken: a JWT of an issuer the client trusts, naming the
// client in its aud, is accepted with its claims, from the keys of that
// issuer's discovery document; every flaw is refused with the sentinel of
// its kind and a description, and an issuer the client does not trust is
// refused before any key is fetched.
func TestVerifySubjectToken(t *testing.T) {
	sa := newSigner(t, clientauth.AlgES256, "k8s-key")
	clusterIssuer, ca, hits := newTLSIssuer(t, func(iss string) string { return iss + "/openid/v1/jwks" }, jwks(t, sa))
	clock := clocktest.New(t0)
	v := newVerifier(t, clock, clientauth.FetchOptions{AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	trusted := []clientauth.TrustedIssuer{{Issuer: "https://elsewhere.example"}, {Issuer: clusterIssuer, CAFile: ca}}
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": clusterIssuer, "sub": saSubject, "aud": []string{"orders", "other"}, "scope": "orders:read",
			"iat": t0.Add(-time.Minute).Unix(), "exp": t0.Add(time.Hour).Unix(), "may_act": map[string]any{"sub": "billing"}}
		if change != nil {
			change(c)
		}
		return c
	}
	got, err := v.VerifySubjectToken(t.Context(), trusted, "orders", sa.sign(t, claims(nil)))
	if err != nil {
		t.Fatalf("VerifySubjectToken: %v", err)
	}
	if got.Issuer != clusterIssuer || got.Subject != saSubject || got.Scope != "orders:read" || !got.ExpiresAt.Equal(t0.Add(time.Hour)) ||
		!got.IssuedAt.Equal(t0.Add(-time.Minute)) || got.MayAct == nil || got.MayAct.Subject != "billing" || got.Act != nil {
		t.Errorf("VerifySubjectToken = %+v", got)
	}

	fetched := hits.hits.Load()
	if _, err := v.VerifySubjectToken(t.Context(), trusted[:1], "orders", sa.sign(t, claims(nil))); !errors.Is(err, clientauth.ErrClaims) {
		t.Errorf("an issuer the client does not trust: %v, want %v", err, clientauth.ErrClaims)
	}
	if hits.hits.Load() != fetched {
		t.Errorf("an issuer the client does not trust: the key server was asked")
	}
	other := newSigner(t, clientauth.AlgES256, "k8s-key")
	for _, tt := range []struct {
		name, raw string
		want      error
	}{
		{"aud naming another client", sa.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "billing" })), clientauth.ErrClaims},
		{"no aud", sa.sign(t, claims(func(c jwt.MapClaims) { delete(c, "aud") })), clientauth.ErrClaims},
		{"expired", sa.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Minute).Unix() })), clientauth.ErrClaims},
		{"no exp", sa.sign(t, claims(func(c jwt.MapClaims) { delete(c, "exp") })), clientauth.ErrClaims},
		{"no iat", sa.sign(t, claims(func(c jwt.MapClaims) { delete(c, "iat") })), clientauth.ErrClaims},
		{"iat ahead", sa.sign(t, claims(func(c jwt.MapClaims) { c["iat"] = t0.Add(time.Hour).Unix() })), clientauth.ErrClaims},
		{"nbf ahead", sa.sign(t, claims(func(c jwt.MapClaims) { c["nbf"] = t0.Add(time.Hour).Unix() })), clientauth.ErrClaims},
		{"lives longer than MaxWorkloadLifetime", sa.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(25 * time.Hour).Unix() })), clientauth.ErrClaims},
		{"lived longer (exp − iat)", sa.sign(t, claims(func(c jwt.MapClaims) { c["iat"] = t0.Add(-24 * time.Hour).Unix() })), clientauth.ErrClaims},
		{"no sub", sa.sign(t, claims(func(c jwt.MapClaims) { delete(c, "sub") })), clientauth.ErrClaims},
		{"sub of two lines", sa.sign(t, claims(func(c jwt.MapClaims) { c["sub"] = "a\nb" })), clientauth.ErrClaims},
		{"a date as a string", sa.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = "2000000000" })), clientauth.ErrMalformed},
		{"act not an object", sa.sign(t, claims(func(c jwt.MapClaims) { c["act"] = "ci" })), clientauth.ErrMalformed},
		{"signed by another key", other.sign(t, claims(nil)), clientauth.ErrSignature},
		{"alg none", jwttest.Sign(t, jwt.SigningMethodNone, nil, nil, claims(nil)), clientauth.ErrAlgorithm},
		{"alg HS256", jwttest.Sign(t, jwt.SigningMethodHS256, []byte("0123456789abcdef0123456789abcdef"), nil, claims(nil)), clientauth.ErrAlgorithm},
		{"unknown kid", newSigner(t, clientauth.AlgES256, "nope").sign(t, claims(nil)), clientauth.ErrUnknownKey},
		{"too large", string(make([]byte, clientauth.MaxAssertionBytes+1)), clientauth.ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.VerifySubjectToken(t.Context(), trusted, "orders", tt.raw)
			if !errors.Is(err, tt.want) {
				t.Fatalf("VerifySubjectToken: %v, want %v", err, tt.want)
			}
			if d, ok := refusal.Description(err); !ok || d == "" {
				t.Errorf("%v: no description", err)
			}
		})
	}
}

// TestVerifySubjectTokenKeyServerDown: the key server of a trusted issuer
// that cannot be reached is ErrFetch, which the caller answers as a 503.
func TestVerifySubjectTokenKeyServerDown(t *testing.T) {
	sa := newSigner(t, clientauth.AlgES256, "k")
	v := newVerifier(t, clocktest.New(t0), clientauth.FetchOptions{})
	dead := []clientauth.TrustedIssuer{{Issuer: "https://127.0.0.1:1", JWKSURI: "https://127.0.0.1:1/jwks"}}
	raw := sa.sign(t, jwt.MapClaims{"iss": dead[0].Issuer, "sub": saSubject, "aud": "orders", "iat": t0.Unix(), "exp": t0.Add(time.Minute).Unix()})
	if _, err := v.VerifySubjectToken(t.Context(), dead, "orders", raw); !errors.Is(err, clientauth.ErrFetch) {
		t.Fatalf("VerifySubjectToken: %v, want %v", err, clientauth.ErrFetch)
	}
}

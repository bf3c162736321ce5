package clientauth_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// TestVerifyAlgorithms: an assertion of each algorithm, with its client's
// key, is accepted.
func TestVerifyAlgorithms(t *testing.T) {
	clock := clocktest.New(t0)
	v := newVerifier(t, clock, clientauth.FetchOptions{})
	for _, alg := range clientauth.Algorithms {
		t.Run(alg, func(t *testing.T) {
			s := newSigner(t, alg, "k-"+alg)
			reg := clientauth.Registration{ClientID: "gw", Keys: keySet(t, s)}
			if err := v.Verify(t.Context(), reg, s.sign(t, claimsFor("gw"))); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestVerifyRefusals: every flaw of a private_key_jwt assertion is refused
// with its error.
func TestVerifyRefusals(t *testing.T) {
	clock := clocktest.New(t0)
	v := newVerifier(t, clock, clientauth.FetchOptions{})
	ed := newSigner(t, clientauth.AlgEdDSA, "ed")
	es := newSigner(t, clientauth.AlgES256, "es")
	other := newSigner(t, clientauth.AlgEdDSA, "other") // another client's key
	noKid := newSigner(t, clientauth.AlgEdDSA, "")
	reg := clientauth.Registration{ClientID: "gw", Keys: keySet(t, ed, es)}
	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := claimsFor("gw")
		change(c)
		return c
	}
	// An HS256 assertion keyed with the client's public key, as an
	// attacker who read the public key would make.
	hsToken := jwttest.Sign(t, jwt.SigningMethodHS256, []byte(ed.priv.Public().(ed25519.PublicKey)), map[string]any{"kid": "ed"}, claimsFor("gw"))
	noneToken := jwttest.Sign(t, jwt.SigningMethodNone, nil, map[string]any{"kid": "ed"}, claimsFor("gw"))
	// An ES256 header on an EdDSA key's kid.
	wrongType := jwttest.Sign(t, jwt.SigningMethodES256, es.priv, map[string]any{"kid": "ed"}, claimsFor("gw"))
	tests := []struct {
		name      string
		assertion string
		want      error
	}{
		{"wrong iss", ed.sign(t, with(func(c jwt.MapClaims) { c["iss"] = "other" })), clientauth.ErrClaims},
		{"wrong sub", ed.sign(t, with(func(c jwt.MapClaims) { c["sub"] = "other" })), clientauth.ErrClaims},
		{"wrong aud", ed.sign(t, with(func(c jwt.MapClaims) { c["aud"] = "https://elsewhere.example/token" })), clientauth.ErrClaims},
		{"no aud", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "aud") })), clientauth.ErrClaims},
		{"the token endpoint as aud", ed.sign(t, with(func(c jwt.MapClaims) { c["aud"] = endpoint })), clientauth.ErrClaims},
		{"the issuer among others", ed.sign(t, with(func(c jwt.MapClaims) { c["aud"] = []string{issuer, "https://other-as.example"} })), clientauth.ErrClaims},
		{"expired", ed.sign(t, with(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Minute).Unix() })), clientauth.ErrClaims},
		{"no exp", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") })), clientauth.ErrClaims},
		{"exp too far", ed.sign(t, with(func(c jwt.MapClaims) { c["exp"] = t0.Add(time.Hour).Unix() })), clientauth.ErrClaims},
		{"nbf ahead", ed.sign(t, with(func(c jwt.MapClaims) { c["nbf"] = t0.Add(time.Minute).Unix() })), clientauth.ErrClaims},
		{"iat ahead", ed.sign(t, with(func(c jwt.MapClaims) { c["iat"] = t0.Add(time.Minute).Unix() })), clientauth.ErrClaims},
		{"exp a string", ed.sign(t, with(func(c jwt.MapClaims) { c["exp"] = "soon" })), clientauth.ErrMalformed},
		{"no jti", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "jti") })), clientauth.ErrClaims},
		{"alg none", noneToken, clientauth.ErrAlgorithm},
		{"HS256 keyed with the public key", hsToken, clientauth.ErrAlgorithm},
		{"another client's key", other.sign(t, claimsFor("gw")), clientauth.ErrUnknownKey},
		{"another client's key under our kid", signer{alg: other.alg, kid: "ed", method: other.method, priv: other.priv}.sign(t, claimsFor("gw")), clientauth.ErrSignature},
		{"key type does not fit alg", wrongType, clientauth.ErrWrongKey},
		{"malformed", "a.b.c", clientauth.ErrMalformed},
		{"not a JWT", "hello", clientauth.ErrMalformed},
		{"too large", strings.Repeat("a", clientauth.MaxAssertionBytes+1), clientauth.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Verify(t.Context(), reg, tt.assertion)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("no kid, one key of the alg", func(t *testing.T) {
		k := clientauth.Registration{ClientID: "gw", Keys: keySet(t, noKid)}
		if err := v.Verify(t.Context(), k, noKid.sign(t, claimsFor("gw"))); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("no kid, two keys of the alg", func(t *testing.T) {
		two := newSigner(t, clientauth.AlgEdDSA, "")
		k := clientauth.Registration{ClientID: "gw", Keys: keySet(t, noKid, signer{alg: two.alg, kid: "x", method: two.method, priv: two.priv})}
		if err := v.Verify(t.Context(), k, noKid.sign(t, claimsFor("gw"))); !errors.Is(err, clientauth.ErrUnknownKey) {
			t.Fatalf("Verify: %v, want %v", err, clientauth.ErrUnknownKey)
		}
	})
}

// TestVerifyReplay: a jti is single-use per client, across replicas (two
// Stores on the real Redis); the same jti of another client is its own.
func TestVerifyReplay(t *testing.T) {
	r := redistest.New(t)
	a, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	clock := clocktest.New(t0)
	va := newVerifierOn(t, clock, clientauth.FetchOptions{}, a.Assertions())
	vb := newVerifierOn(t, clock, clientauth.FetchOptions{}, b.Assertions())
	s := newSigner(t, clientauth.AlgES256, "k")
	ks := keySet(t, s)
	claims := claimsFor("gw")
	assertion := s.sign(t, claims)
	if err := va.Verify(t.Context(), clientauth.Registration{ClientID: "gw", Keys: ks}, assertion); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := vb.Verify(t.Context(), clientauth.Registration{ClientID: "gw", Keys: ks}, assertion); !errors.Is(err, clientauth.ErrReplayed) {
		t.Fatalf("replayed at another replica: %v, want %v", err, clientauth.ErrReplayed)
	}
	claims["iss"], claims["sub"] = "gw2", "gw2"
	if err := vb.Verify(t.Context(), clientauth.Registration{ClientID: "gw2", Keys: ks}, s.sign(t, claims)); err != nil {
		t.Fatalf("the same jti for another client: %v", err)
	}
	keys, err := r.Client.Keys(t.Context(), r.Prefix+"assertion:*").Result()
	if err != nil || len(keys) != 2 {
		t.Errorf("records %v (%v), want 2 under %sassertion:", keys, err, r.Prefix)
	}
}

// failingReplay is a replay record whose store is down.
type failingReplay struct{}

var errDown = errors.New("redis down")

func (failingReplay) Seen(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, errDown
}

// TestVerifyReplayDown: the replay record failing is ErrUnavailable, with
// its cause, not a refusal of the client.
func TestVerifyReplayDown(t *testing.T) {
	clock := clocktest.New(t0)
	v := newVerifierOn(t, clock, clientauth.FetchOptions{}, failingReplay{})
	s := newSigner(t, clientauth.AlgEdDSA, "k")
	err := v.Verify(t.Context(), clientauth.Registration{ClientID: "gw", Keys: keySet(t, s)}, s.sign(t, claimsFor("gw")))
	if !errors.Is(err, clientauth.ErrUnavailable) || !errors.Is(err, errDown) {
		t.Fatalf("Verify: %v, want %v wrapping %v", err, clientauth.ErrUnavailable, errDown)
	}
}

// TestSubject: the sub of an assertion, unverified, for finding its client.
func TestSubject(t *testing.T) {
	s := newSigner(t, clientauth.AlgEdDSA, "k")
	if got, err := clientauth.Subject(s.sign(t, claimsFor("gw"))); err != nil || got != "gw" {
		t.Errorf("Subject = %q, %v; want gw", got, err)
	}
	for _, bad := range []string{"", "x.y.z", strings.Repeat("a", clientauth.MaxAssertionBytes+1), s.sign(t, jwt.MapClaims{"iss": "gw"})} {
		if _, err := clientauth.Subject(bad); err == nil {
			t.Errorf("Subject(%.20q) = nil error", bad)
		}
	}
}

// TestNewBounds: lifetimes beyond their bounds are refused.
func TestNewBounds(t *testing.T) {
	for _, o := range []clientauth.Options{
		{},
		{Audiences: []string{issuer}},
		{Audiences: []string{issuer}, Replay: failingReplay{}, MaxLifetime: 2 * time.Hour},
		{Audiences: []string{issuer}, Replay: failingReplay{}, MaxWorkloadLifetime: 8 * 24 * time.Hour},
		{Audiences: []string{issuer}, Replay: failingReplay{}, Leeway: -time.Second},
	} {
		if _, err := clientauth.New(o); err == nil {
			t.Errorf("New(%+v) = nil error", o)
		}
	}
}

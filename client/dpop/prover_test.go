package dpop_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/client/dpop"
)

// TestProverProofsPassCheck: proofs of a Prover, Ed25519 and P-256, pass
// Check for their request, with ath and nonce, and their thumbprint is the
// one computed from the key's bytes by the test's own signer.
func TestProverProofsPassCheck(t *testing.T) {
	ed, ec := newEd25519(t), newP256(t)
	for _, s := range []*signer{ed, ec} {
		t.Run(s.alg, func(t *testing.T) {
			p, err := dpop.NewProver(s.priv)
			if err != nil {
				t.Fatal(err)
			}
			if p.Thumbprint() != s.thumb || p.Algorithm() != s.alg {
				t.Errorf("Thumbprint, Algorithm = %q, %q; want %q, %q", p.Thumbprint(), p.Algorithm(), s.thumb, s.alg)
			}
			c := checker(t, dpop.Options{Nonce: func(n string, _ time.Time) bool { return n == "srv-nonce" }})
			proof, err := p.Proof("GET", "https://API.example:443/orders?id=7#top", "tok.en.x", "srv-nonce", testNow)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Check(t.Context(), proof, dpop.Request{Method: "GET", URL: "https://api.example/orders", AccessToken: "tok.en.x"}, testNow)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if got.Thumbprint != s.thumb || got.Nonce != "srv-nonce" || got.URL != "https://api.example/orders" || !got.IssuedAt.Equal(testNow) {
				t.Errorf("Proof = %+v", got)
			}
			if len(got.JTI) < 22 {
				t.Errorf("jti %q: want at least 128 bits in base64url", got.JTI)
			}
			// Another library reads the signature as JWS (R || S for ES256).
			if _, err := jwt.Parse(proof, func(*jwt.Token) (any, error) { return s.priv.Public(), nil },
				jwt.WithValidMethods([]string{s.alg}), jwt.WithoutClaimsValidation()); err != nil {
				t.Errorf("golang-jwt: %v", err)
			}
			// ath for another token, no nonce, another method: refused.
			for name, tc := range map[string]struct {
				req  dpop.Request
				want error
			}{
				"other token":  {dpop.Request{Method: "GET", URL: "https://api.example/orders", AccessToken: "other"}, dpop.ErrAccessToken},
				"other method": {dpop.Request{Method: "POST", URL: "https://api.example/orders", AccessToken: "tok.en.x"}, dpop.ErrMethod},
			} {
				proof, _ := p.Proof("GET", "https://api.example/orders", "tok.en.x", "srv-nonce", testNow)
				if _, err := c.Check(t.Context(), proof, tc.req, testNow); !errors.Is(err, tc.want) {
					t.Errorf("%s: got %v, want %v", name, err, tc.want)
				}
			}
		})
	}
}

// TestProverClaims: jti differs between proofs, ath and nonce appear only
// when given.
func TestProverClaims(t *testing.T) {
	p, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	if p.Algorithm() != dpop.AlgEdDSA {
		t.Errorf("GenerateProver: alg %q, want EdDSA", p.Algorithm())
	}
	claimsOf := func(proof string) jwt.MapClaims {
		t.Helper()
		var c jwt.MapClaims
		if _, _, err := jwt.NewParser().ParseUnverified(proof, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, _ := p.Proof("POST", testURL, "", "", testNow)
	b, _ := p.Proof("POST", testURL, "", "", testNow)
	ca, cb := claimsOf(a), claimsOf(b)
	if ca["jti"] == cb["jti"] {
		t.Errorf("two proofs with jti %v", ca["jti"])
	}
	if _, ok := ca["ath"]; ok {
		t.Errorf("ath without a token: %v", ca)
	}
	if _, ok := ca["nonce"]; ok {
		t.Errorf("nonce without one: %v", ca)
	}
	if ca["iat"] != float64(testNow.Unix()) || ca["htm"] != "POST" || ca["htu"] != testURL {
		t.Errorf("claims %v", ca)
	}
	if _, err := p.Proof("GET", "/relative", "", "", testNow); !errors.Is(err, dpop.ErrRequest) {
		t.Errorf("relative URL: got %v, want ErrRequest", err)
	}
}

func TestNewProverRefusesOtherKeys(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The identity point is a key of small order, which ParseJWK refuses.
	small := ed25519.NewKeyFromSeed(make([]byte, 32))
	copy(small[32:], append([]byte{1}, make([]byte, 31)...))
	for name, k := range map[string]crypto.Signer{"RSA": rsaKey, "P-384": p384} {
		if _, err := dpop.NewProver(k); !errors.Is(err, dpop.ErrKey) {
			t.Errorf("%s: got %v, want ErrKey", name, err)
		}
	}
	if _, err := dpop.NewProver(small); !errors.Is(err, dpop.ErrKey) || !strings.Contains(err.Error(), "small order") {
		t.Errorf("small-order Ed25519 key: got %v, want ErrKey", err)
	}
}

package jwttest_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/internal/jwttest"
)

// header decodes the JOSE header of raw.
func header(t *testing.T, raw string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSign: the header is golang-jwt's with the given members over it (Omit
// removes one, alg may lie), the signature verifies, and alg none has none.
func TestSign(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	claims := jwt.MapClaims{"sub": "alice"}
	raw := jwttest.Sign(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": "k1", "typ": "at+jwt"}, claims)
	if _, err := jwt.Parse(raw, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Fatalf("does not verify: %v", err)
	}
	if h := header(t, raw); h["kid"] != "k1" || h["typ"] != "at+jwt" || h["alg"] != "EdDSA" {
		t.Errorf("header: got %v", h)
	}
	if h := header(t, jwttest.Sign(t, jwt.SigningMethodEdDSA, priv, map[string]any{"typ": jwttest.Omit}, claims)); len(h) != 1 || h["alg"] != "EdDSA" {
		t.Errorf("typ omitted: got %v, want alg alone", h)
	}
	if h := header(t, jwttest.Sign(t, jwt.SigningMethodEdDSA, priv, map[string]any{"alg": "ES256", "typ": nil}, claims)); h["alg"] != "ES256" || h["typ"] != nil {
		t.Errorf("lying alg, null typ: got %v", h)
	}
	none := jwttest.Sign(t, jwt.SigningMethodNone, nil, nil, claims)
	if !strings.HasSuffix(none, ".") || header(t, none)["alg"] != "none" {
		t.Errorf("alg none: got %q", none)
	}
}

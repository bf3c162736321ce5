package token

import (
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// TestSignerMatchesLibrary checks the hand-written claims against what
// golang-jwt would write for the same claims, with an issuer that needs JSON
// escaping, none, one or several audiences (with characters encoding/json
// escapes and the signer need not), and that the library verifies the result.
func TestSignerMatchesLibrary(t *testing.T) {
	k := keysettest.MustKey(t)
	for _, tc := range []struct {
		iss   string
		aud   []string
		scope string
	}{
		{"https://issuer.test", nil, "orders:read orders:write"},
		{"https://issuer.test", []string{"orders-api"}, "orders:read"},
		{`https://issuer.test/a"b\c` + "\u2028é", []string{"https://orders.test/<a&b>?x=1", "billing-api", "urn:x:y"}, ""},
	} {
		s, err := newSigner(k, tc.iss)
		if err != nil {
			t.Fatal(err)
		}
		raw := s.sign(&grant{sub: "alice@example.com", client: "gateway", scope: tc.scope, jti: "117811659438825472", aud: tc.aud, iat: 1795314088, exp: 1795317688})
		want := Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: tc.iss, Subject: "alice@example.com", ID: "117811659438825472",
				IssuedAt: jwt.NewNumericDate(time.Unix(1795314088, 0)), ExpiresAt: jwt.NewNumericDate(time.Unix(1795317688, 0)),
			},
			ClientID: "gateway", Scope: tc.scope,
		}
		if tc.aud != nil {
			want.Audience = tc.aud
		}
		var got Claims
		tok, err := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithoutClaimsValidation()).
			ParseWithClaims(raw, &got, func(*jwt.Token) (any, error) { return k.Public, nil })
		if err != nil {
			t.Fatalf("library rejects the token: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("claims: got %+v, want %+v", got, want)
		}
		if tok.Header["kid"] != k.ID || tok.Header["typ"] != "at+jwt" || tok.Header["alg"] != "EdDSA" {
			t.Errorf("header: got %v", tok.Header)
		}
		// Same members as the library's own encoding of the same claims.
		libJSON, _ := json.Marshal(want)
		var a, b map[string]any
		json.Unmarshal(libJSON, &a)
		payload, _ := b64.DecodeString(strings.Split(raw, ".")[1])
		if err := json.Unmarshal(payload, &b); err != nil {
			t.Fatalf("payload is not JSON: %v: %s", err, payload)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("payload %s, library writes %s", payload, libJSON)
		}
	}
}

// TestSignerSignatureMatchesLibrary: sign's signature is byte for byte
// golang-jwt's EdDSA signature of the same signing input, for a token with
// and without an exchanged token's chain (whose length the buffer's
// estimate counts).
func TestSignerSignatureMatchesLibrary(t *testing.T) {
	k, s := newTestSigner(t)
	for _, chain := range []string{"", `"act":{"sub":"gateway","client_id":"gateway"},"parents":[{"jti":"117811659438825472","client_id":"web","iat":1795314088}]`} {
		raw := s.sign(&grant{sub: "alice@example.com", client: "gateway", scope: "orders:read", jti: "117811659438825473", aud: []string{"orders-api"}, iat: 1795314088, exp: 1795317688, chain: chain})
		dot := strings.LastIndexByte(raw, '.')
		want, err := jwt.SigningMethodEdDSA.Sign(raw[:dot], k.Private)
		if err != nil {
			t.Fatal(err)
		}
		if got := raw[dot+1:]; got != b64.EncodeToString(want) {
			t.Errorf("chain %q: signature %s, golang-jwt's %s", chain, got, b64.EncodeToString(want))
		}
		payload, err := b64.DecodeString(raw[strings.IndexByte(raw, '.')+1 : dot])
		if err != nil || !json.Valid(payload) || chain != "" && !strings.Contains(string(payload), ","+chain+"}") {
			t.Errorf("chain %q: payload %s (%v)", chain, payload, err)
		}
	}
}

// BenchmarkSign compares the whole signer (claims, encoding, signature) with
// the Ed25519 signature alone over a payload of the same size: the signature
// is what an issued token costs.
func BenchmarkSign(b *testing.B) {
	k, s := newTestSigner(b)
	aud := []string{"orders-api"}
	raw := s.sign(&grant{sub: "alice@example.com", client: "gateway", scope: "orders:read", jti: "117811659438825472", aud: aud, iat: 1795314088, exp: 1795317688})
	signingInput := []byte(raw[:strings.LastIndexByte(raw, '.')])
	b.Run("signer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.sign(&grant{sub: "alice@example.com", client: "gateway", scope: "orders:read", jti: "117811659438825472", aud: aud, iat: 1795314088, exp: 1795317688})
		}
	})
	b.Run("ed25519.Sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ed25519.Sign(k.Private, signingInput)
		}
	})
}

// newTestSigner returns a new key and a signer of https://issuer.test with it.
func newTestSigner(tb testing.TB) (keyset.Key, *signer) {
	tb.Helper()
	k := keysettest.MustKey(tb)
	s, err := newSigner(k, "https://issuer.test")
	if err != nil {
		tb.Fatal(err)
	}
	return k, s
}

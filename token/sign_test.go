package token_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/jwttest"
	. "github.com/snowtoken/snowtoken/token"
)

// TestSignEvent checks that SignEvent signs with the current key under its
// kid and the typ asked for, that the JWKS key verifies it, that it refuses
// an access token's typ, and that what it signs never validates as a token.
func TestSignEvent(t *testing.T) {
	e := newEnv(t, Options{})
	claims := jwt.MapClaims{"iss": testIssuer, "sub": "svc", "client_id": "svc", "jti": "117811659438825472",
		"iat": e.clock.Now().Unix(), "exp": e.clock.Now().Add(time.Hour).Unix()}
	raw, err := e.svc.SignEvent("secevent+jwt", claims)
	if err != nil {
		t.Fatal(err)
	}
	header := decodeSegment(t, raw, 0)
	if header["typ"] != "secevent+jwt" || header["kid"] != e.keys.SigningKeyID() || header["alg"] != "EdDSA" {
		t.Errorf("header = %v", header)
	}
	pub := e.keys.Signer().Private.Public()
	if _, err := jwt.Parse(raw, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Errorf("the signing key does not verify the event: %v", err)
	}
	if _, err := e.svc.Validate(t.Context(), raw); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("an event with a token's claims validated as a token: %v", err)
	}
	for _, typ := range []string{"", "at+jwt", "AT+JWT", "application/at+jwt"} {
		if _, err := e.svc.SignEvent(typ, claims); !errors.Is(err, ErrEventType) {
			t.Errorf("SignEvent(%q) = %v, want ErrEventType", typ, err)
		}
	}
}

// TestSignEventPayload checks that SignEventPayload, given a payload
// base64url-encoded in parts, signs the very bytes SignEvent signs for the
// same claims, and that SignEvent's are golang-jwt's (SignedString with the
// header SignEvent sets): Ed25519 is deterministic, so equal bytes mean the
// same header, payload and signature. It refuses an access token's typ too.
func TestSignEventPayload(t *testing.T) {
	e := newEnv(t, Options{})
	claims := jwt.MapClaims{"iss": testIssuer, "iat": e.clock.Now().Unix(), "nonce": "q0n3KZ9kzB4vJ7x1LwYbXbNqk0mJm3h8a9s5uH2Tz0E"}
	raw, err := e.svc.SignEvent("revocation-snapshot+jwt", claims)
	if err != nil {
		t.Fatal(err)
	}
	want := jwttest.Sign(t, jwt.SigningMethodEdDSA, e.keys.Signer().Private,
		map[string]any{"typ": "revocation-snapshot+jwt", "kid": e.keys.SigningKeyID()}, claims)
	if raw != want {
		t.Fatalf("SignEvent\n%s\ngolang-jwt\n%s", raw, want)
	}
	payload := strings.Split(raw, ".")[1] // in parts, one of them empty: they are joined as they are
	parts := [][]byte{[]byte(payload[:3]), nil, []byte(payload[3:9]), []byte(payload[9:])}
	got, err := e.svc.SignEventPayload("revocation-snapshot+jwt", parts...)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != raw || cap(got) != len(got) {
		t.Fatalf("SignEventPayload (len %d cap %d)\n%s\nSignEvent\n%s", len(got), cap(got), got, raw)
	}
	if _, err := e.svc.SignEventPayload("at+jwt", []byte(payload)); !errors.Is(err, ErrEventType) {
		t.Errorf("SignEventPayload(at+jwt) = %v, want ErrEventType", err)
	}
}

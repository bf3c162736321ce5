package token_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

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
	pub := e.keys.SigningKey().Private.Public()
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

package dpop_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/client/internal/jwttest"
)

// Test requests are for this URL, at this time.
const testURL = "https://issuer.example/token"

var testNow = time.Unix(1_800_000_000, 0)

var b64 = base64.RawURLEncoding

// signer is a client's key: it makes proofs with golang-jwt, a library
// independent of the checker.
type signer struct {
	alg    string
	method jwt.SigningMethod
	priv   crypto.Signer
	jwk    map[string]any // the public key's JWK, members required by RFC 7638 only
	thumb  string         // its thumbprint, computed here from the key's bytes
}

func newEd25519(tb testing.TB) *signer {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	x := b64.EncodeToString(pub)
	return &signer{
		alg: "EdDSA", method: jwt.SigningMethodEdDSA, priv: priv,
		jwk:   map[string]any{"kty": "OKP", "crv": "Ed25519", "x": x},
		thumb: sha256B64(`{"crv":"Ed25519","kty":"OKP","x":"` + x + `"}`),
	}
}

func newP256(tb testing.TB) *signer {
	tb.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := priv.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		tb.Fatal(err)
	}
	x, y := b64.EncodeToString(raw[1:33]), b64.EncodeToString(raw[33:])
	return &signer{
		alg: "ES256", method: jwt.SigningMethodES256, priv: priv,
		jwk:   map[string]any{"kty": "EC", "crv": "P-256", "x": x, "y": y},
		thumb: sha256B64(`{"crv":"P-256","kty":"EC","x":"` + x + `","y":"` + y + `"}`),
	}
}

func sha256B64(s string) string {
	sum := sha256.Sum256([]byte(s))
	return b64.EncodeToString(sum[:])
}

// claims returns good claims for a POST to testURL at testNow.
func claims() map[string]any {
	return map[string]any{"jti": "e1j3V_bKic8-LAEB", "htm": "POST", "htu": testURL, "iat": testNow.Unix()}
}

// proof returns a proof of s with claims c, its header changed by edit (nil:
// none), signed by golang-jwt.
func (s *signer) proof(tb testing.TB, c map[string]any, edit func(h map[string]any)) string {
	tb.Helper()
	h := map[string]any{"typ": "dpop+jwt", "jwk": maps.Clone(s.jwk)}
	if edit != nil {
		edit(h)
	}
	if _, ok := h["typ"]; !ok {
		h["typ"] = jwttest.Omit
	}
	return jwttest.Sign(tb, s.method, s.priv, h, jwt.MapClaims(c))
}

// handProof returns a JWS built by hand: the base64url of header and claims
// as given, signed with Ed25519 by crypto/ed25519.
func handProof(priv ed25519.PrivateKey, header, claims string) string {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(claims))
	return input + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(input)))
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// neverSeen is a ReplayCache that records nothing, for fuzzing and
// benchmarks, which check one proof many times.
type neverSeen struct{}

func (neverSeen) Seen(context.Context, string, time.Time, time.Time) (bool, error) { return false, nil }

// failingReplay is a ReplayCache whose store is down.
type failingReplay struct{ err error }

func (f failingReplay) Seen(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, f.err
}

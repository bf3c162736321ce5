package dpop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// refusals are the errors Check may return for a proof.
var refusals = []error{
	dpop.ErrProof, dpop.ErrType, dpop.ErrAlgorithm, dpop.ErrJWK, dpop.ErrPrivateKey, dpop.ErrSignature,
	dpop.ErrClaims, dpop.ErrMethod, dpop.ErrURL, dpop.ErrUseNonce, dpop.ErrIssuedAt, dpop.ErrAccessToken,
}

// FuzzCheck feeds Check arbitrary proofs. It never panics, refuses with one
// of its sentinels, and accepts only a proof whose signature verifies, by
// code of this test, with the key in its header, and whose claims are the
// request's.
func FuzzCheck(f *testing.F) {
	ed, ec := newEd25519(f), newP256(f)
	c := checker(f, dpop.Options{Replay: neverSeen{}})
	req := dpop.Request{Method: "POST", URL: testURL, AccessToken: "token"}
	cl := claims()
	cl["ath"] = dpop.AccessTokenHash("token")
	good := ed.proof(f, cl, nil)
	for _, s := range []string{
		good, ec.proof(f, cl, nil), ed.proof(f, claims(), nil), good + ".", good[:len(good)-2],
		strings.Replace(good, ".", "..", 1), "e30.e30.e30", "", ".", "..", "a.b.c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, proof string) {
		p, err := c.Check(context.Background(), proof, req, testNow)
		if err != nil {
			for _, r := range refusals {
				if errors.Is(err, r) {
					wantReason(t, err) // what the client is told
					return
				}
			}
			t.Fatalf("Check: %v, not a refusal", err)
		}
		parts := strings.Split(proof, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted %q of %d parts", proof, len(parts))
		}
		var h struct {
			Alg string
			JWK map[string]string
		}
		if err := json.Unmarshal(mustDecode(t, parts[0]), &h); err != nil {
			t.Fatalf("accepted %q: header: %v", proof, err)
		}
		input, sig := []byte(parts[0]+"."+parts[1]), mustDecode(t, parts[2])
		x := mustDecode(t, h.JWK["x"])
		var ok bool
		var thumb string
		switch h.Alg {
		case "EdDSA":
			ok = len(x) == ed25519.PublicKeySize && ed25519.Verify(x, input, sig)
			thumb = sha256B64(`{"crv":"Ed25519","kty":"OKP","x":"` + h.JWK["x"] + `"}`)
		case "ES256":
			y := mustDecode(t, h.JWK["y"])
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
			sum := sha256.Sum256(input)
			ok = err == nil && len(sig) == 64 && ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
			thumb = sha256B64(`{"crv":"P-256","kty":"EC","x":"` + h.JWK["x"] + `","y":"` + h.JWK["y"] + `"}`)
		}
		if !ok {
			t.Fatalf("accepted %q, not signed by its jwk", proof)
		}
		if p.Thumbprint != thumb || p.Method != "POST" || p.JTI == "" {
			t.Fatalf("accepted %q as %+v; thumbprint want %q", proof, p, thumb)
		}
	})
}

func mustDecode(tb testing.TB, s string) []byte {
	tb.Helper()
	data, err := b64.DecodeString(s)
	if err != nil {
		tb.Fatalf("decoding %q: %v", s, err)
	}
	return data
}

// FuzzParseJWK feeds ParseJWK arbitrary JSON. It never panics, refuses with
// ErrJWK or ErrPrivateKey, and accepts only a public key of a supported type
// with full-length coordinates, whose thumbprint is that of its members.
func FuzzParseJWK(f *testing.F) {
	for _, s := range []string{
		mustJSON(f, newEd25519(f).jwk), mustJSON(f, newP256(f).jwk),
		`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}`,
		`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k","use":"sig","alg":"EdDSA"}`,
		`{"kty":"oct","k":"c2VjcmV0"}`, `{}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := dpop.ParseJWK(data)
		if err != nil {
			if !errors.Is(err, dpop.ErrJWK) && !errors.Is(err, dpop.ErrPrivateKey) {
				t.Fatalf("ParseJWK: %v, not ErrJWK nor ErrPrivateKey", err)
			}
			wantReason(t, err)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("accepted %q, not a JSON object: %v", data, err)
		}
		for _, name := range []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"} {
			if _, ok := m[name]; ok {
				t.Fatalf("accepted %q, with private member %q", data, name)
			}
		}
		var want string
		switch {
		case m["kty"] == "OKP" && m["crv"] == "Ed25519" && len(mustDecode(t, k.X)) == 32:
			want = `{"crv":"Ed25519","kty":"OKP","x":"` + k.X + `"}`
		case m["kty"] == "EC" && m["crv"] == "P-256" && len(mustDecode(t, k.X)) == 32 && len(mustDecode(t, k.Y)) == 32:
			want = `{"crv":"P-256","kty":"EC","x":"` + k.X + `","y":"` + k.Y + `"}`
		default:
			t.Fatalf("accepted %q as %+v", data, k)
		}
		if m["x"] != k.X || k.Thumbprint() != sha256B64(want) {
			t.Fatalf("accepted %q as %+v, thumbprint %q", data, k, k.Thumbprint())
		}
	})
}

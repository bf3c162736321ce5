package dpop_test

import (
	"errors"
	"testing"

	"github.com/snowtoken/snowtoken/client/dpop"
)

func TestThumbprint(t *testing.T) {
	ed, ec := newEd25519(t), newP256(t)
	for _, tc := range []struct {
		name, jwk, want string
	}{
		// RFC 8037 §A.3.
		{"RFC 8037 Ed25519", `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"},
		// RFC 9449 §4.1's key, whose thumbprint §6.1 gives.
		{"RFC 9449 P-256", `{"kty":"EC","x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","y":"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA","crv":"P-256"}`, "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"},
		// Keys made here, thumbprints computed from the keys' bytes.
		{"Ed25519", mustJSON(t, ed.jwk), ed.thumb},
		{"P-256", mustJSON(t, ec.jwk), ec.thumb},
		{"P-256, other members and order", `{"use":"sig","y":"` + ec.jwk["y"].(string) + `","kid":"k","x":"` + ec.jwk["x"].(string) + `","crv":"P-256","alg":"ES256","kty":"EC"}`, ec.thumb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := dpop.ParseJWK([]byte(tc.jwk))
			if err != nil {
				t.Fatalf("ParseJWK: %v", err)
			}
			if got := k.Thumbprint(); got != tc.want {
				t.Errorf("Thumbprint = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseJWKRefuses(t *testing.T) {
	const x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	const ecX, ecY = "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs", "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"
	for _, tc := range []struct {
		name, jwk string
		want      error
	}{
		{"d", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}`, dpop.ErrPrivateKey},
		{"EC d", `{"kty":"EC","crv":"P-256","x":"` + ecX + `","y":"` + ecY + `","d":null}`, dpop.ErrPrivateKey},
		{"symmetric k", `{"kty":"oct","k":"c2VjcmV0"}`, dpop.ErrPrivateKey},
		{"RSA p", `{"kty":"RSA","n":"AQAB","e":"AQAB","p":"AQAB"}`, dpop.ErrJWK},
		{"RSA", `{"kty":"RSA","n":"AQAB","e":"AQAB"}`, dpop.ErrJWK},
		{"unknown member", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","x5u":"https://evil.example/k"}`, dpop.ErrJWK},
		{"Kty for kty", `{"Kty":"OKP","crv":"Ed25519","x":"` + x + `"}`, dpop.ErrJWK},
		{"kty twice", `{"kty":"OKP","kty":"EC","crv":"Ed25519","x":"` + x + `"}`, dpop.ErrJWK},
		{"x a number", `{"kty":"OKP","crv":"Ed25519","x":1}`, dpop.ErrJWK},
		{"no x", `{"kty":"OKP","crv":"Ed25519"}`, dpop.ErrJWK},
		{"X25519", `{"kty":"OKP","crv":"X25519","x":"` + x + `"}`, dpop.ErrJWK},
		{"P-384", `{"kty":"EC","crv":"P-384","x":"` + ecX + `","y":"` + ecY + `"}`, dpop.ErrJWK},
		{"y in OKP", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","y":"` + x + `"}`, dpop.ErrJWK},
		{"no y in EC", `{"kty":"EC","crv":"P-256","x":"` + ecX + `"}`, dpop.ErrJWK},
		{"x short", `{"kty":"OKP","crv":"Ed25519","x":"` + x[:40] + `"}`, dpop.ErrJWK},
		{"x padded", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `="}`, dpop.ErrJWK},
		{"x with a newline", `{"kty":"OKP","crv":"Ed25519","x":"` + x[:20] + `\n` + x[20:] + `"}`, dpop.ErrJWK},
		{"EC point off the curve", `{"kty":"EC","crv":"P-256","x":"` + ecX + `","y":"` + ecX + `"}`, dpop.ErrJWK},
		{"EC x leading zeros dropped", `{"kty":"EC","crv":"P-256","x":"` + ecX[:42] + `","y":"` + ecY + `"}`, dpop.ErrJWK},
		{"Ed25519 identity", `{"kty":"OKP","crv":"Ed25519","x":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, dpop.ErrJWK},
		{"key_ops sign", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","key_ops":["verify","sign"]}`, dpop.ErrJWK},
		{"ext a string", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","ext":"true"}`, dpop.ErrJWK},
		{"use enc", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","use":"enc"}`, dpop.ErrJWK},
		{"alg of another kty", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","alg":"ES256"}`, dpop.ErrJWK},
		{"not an object", `["OKP"]`, dpop.ErrJWK},
		{"null", `null`, dpop.ErrJWK},
		{"trailing data", `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"} {}`, dpop.ErrJWK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k, err := dpop.ParseJWK([]byte(tc.jwk)); !errors.Is(err, tc.want) {
				t.Fatalf("ParseJWK = %+v, %v; want %v", k, err, tc.want)
			}
		})
	}
}

// TestThumbprintOfMadeJWK checks a JWK made by a program rather than by
// ParseJWK: its members are escaped as JSON, never spliced in.
func TestThumbprintOfMadeJWK(t *testing.T) {
	k := dpop.JWK{Kty: "OKP", Crv: `Ed25519","x":"`, X: "\xff"}
	if got, want := k.Thumbprint(), sha256B64(`{"crv":"Ed25519\",\"x\":\"","kty":"OKP","x":"`+"\ufffd"+`"}`); got != want {
		t.Fatalf("Thumbprint = %q, want %q", got, want)
	}
}

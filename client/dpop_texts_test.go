package client_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
)

// TestDPoPRefusalTexts: the middleware tells a client what was wrong with
// its DPoP proof in the protocol's terms (dpop.Reason), as the issuer does,
// not a phrase that names no claim ("required claim missing or malformed")
// nor a library's words; and a service with DPoP off names no field of its
// Go options.
func TestDPoPRefusalTexts(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := newFakeJWKS(t)
	v := localValidator(t, f, now, client.Options{DPoP: client.DPoP{PublicURL: publicURL}})
	h := v.Middleware(middlewaretest.Echo, "orders:read")

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	jwk := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(pub) + `"}`
	key, err := dpop.ParseJWK([]byte(jwk))
	if err != nil {
		t.Fatal(err)
	}
	cl := f.claims(now, "orders:read")
	cl.Confirmation.JKT = key.Thumbprint()
	tok := f.sign(t, cl)
	signed := func(header, claims string) string {
		input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(claims))
		return input + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(input)))
	}
	header := `{"typ":"dpop+jwt","alg":"EdDSA","jwk":` + jwk + `}`
	claims := func(iat string) string {
		return fmt.Sprintf(`{"jti":%q,"htm":"GET","htu":%q,"iat":%s,"ath":%q}`, rand.Text(), publicURL+"/orders", iat, dpop.AccessTokenHash(tok))
	}

	for name, tc := range map[string]struct {
		proof, want string
	}{
		"iat a string":    {signed(header, claims(`"`+fmt.Sprint(now.Unix())+`"`)), "DPoP proof: claim iat is not a number"},
		"claims not JSON": {signed(header, `{"jti":`), "DPoP proof: the claims set is not valid JSON"},
		"typ JWT":         {signed(strings.Replace(header, "dpop+jwt", "JWT", 1), claims(fmt.Sprint(now.Unix()))), `DPoP proof: typ is "JWT", not dpop+jwt`},
		"too old":         {signed(header, claims(fmt.Sprint(now.Add(-time.Hour).Unix()))), "DPoP proof: iat"},
	} {
		rec := serve(h, "GET", "/orders", "DPoP "+tok, tc.proof)
		wantRefused(t, name, rec, "invalid_dpop_proof")
		if d := description(t, rec.Body.Bytes()); !strings.HasPrefix(d, tc.want) {
			t.Errorf("%s: error_description %q, want %q", name, d, tc.want)
		}
	}

	off := localValidator(t, f, now, client.Options{}).Middleware(middlewaretest.Echo)
	rec := serve(off, "GET", "/orders", "DPoP "+tok, signed(header, claims(fmt.Sprint(now.Unix()))))
	if d := description(t, rec.Body.Bytes()); d != "this service does not accept DPoP tokens" {
		t.Errorf("DPoP off: error_description %q, want %q (no Go option's name)", d, "this service does not accept DPoP tokens")
	}
}

// description is an error body's error_description.
func description(tb testing.TB, body []byte) string {
	tb.Helper()
	var b struct {
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		tb.Fatalf("error body %q: %v", body, err)
	}
	return b.Description
}

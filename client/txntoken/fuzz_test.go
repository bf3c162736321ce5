package txntoken_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/txntoken"
)

// FuzzParse: whatever the header and claims, Parse never panics, and what
// it accepts is signed by the key, of typ txntoken+jwt, for the trust
// domain, live, with every required claim.
func FuzzParse(f *testing.F) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	keys := func(kid string) (ed25519.PublicKey, error) {
		if kid != "k1" {
			return nil, txntoken.ErrInvalid
		}
		return pub, nil
	}
	now := time.Unix(1_800_000_000, 0)
	opts := txntoken.ParseOptions{TrustDomain: "d", Now: func() time.Time { return now }}
	f.Add(`{"alg":"EdDSA","kid":"k1","typ":"txntoken+jwt"}`, `{"iat":1800000000,"exp":1800000060,"aud":"d","txn":"1","sub":"s","scope":"a","req_wl":"w"}`)
	f.Add(`{"alg":"EdDSA","kid":"k1","typ":"at+jwt"}`, `{"iat":1800000000,"exp":1800000060,"aud":"d","txn":"1","sub":"s","scope":"a","req_wl":"w"}`)
	f.Add(`{"alg":"none","typ":"txntoken+jwt"}`, `{"iat":1e9,"iat":2,"tctx":{"act":{"act":null}}}`)
	f.Fuzz(func(t *testing.T, header, payload string) {
		raw := sign(key, header, payload)
		c, err := txntoken.Parse(raw, keys, opts)
		if err != nil {
			return
		}
		typ, _ := txntoken.HeaderType(raw)
		if !strings.EqualFold(strings.TrimPrefix(strings.ToLower(typ), "application/"), txntoken.Type) ||
			c.Audience != "d" || c.ExpiresAt < now.Unix() || c.Check() != nil {
			t.Errorf("accepted %q %q: %+v", header, payload, c)
		}
	})
}

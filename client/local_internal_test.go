package client

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/jwk"
)

// presetKeys gives v a key cache that knows pub as kid and fetches
// nothing from the network: its fetch answers that one key, at once.
func presetKeys(tb testing.TB, v *Validator, kid string, pub ed25519.PublicKey) *keyCache {
	tb.Helper()
	set, err := jwk.ParseSet([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"`+kid+`","x":"`+base64.RawURLEncoding.EncodeToString(pub)+`"}]}`), jwk.EdDSA)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := jwk.NewCache(jwk.CacheOptions{TTL: v.opts.JWKSMaxAge, MinRefresh: v.opts.JWKSMinInterval, MaxStale: jwk.Forever, Now: v.opts.Now},
		func(context.Context, string) (*jwk.Set, time.Duration, error) { return set, 0, nil })
	if err != nil {
		tb.Fatal(err)
	}
	return &keyCache{url: "preset", cache: c}
}

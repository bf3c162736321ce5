package client

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// TestLocalKeysFollowMaxAge: with JWKSMaxAge left zero, the issuer's
// Cache-Control max-age says when its keys are fetched again; a JWKS with
// private key material is refused (ErrUnavailable), not skipped over.
func TestLocalKeysFollowMaxAge(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	key := `{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	var mu sync.Mutex
	hits, doc := 0, `{"keys":[`+key+`]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hits++
		w.Header().Set("Cache-Control", "public, max-age=30")
		_, _ = w.Write([]byte(doc))
	}))
	defer srv.Close()
	now := time.Unix(1_700_000_000, 0)
	v, err := New(Options{IssuerURL: srv.URL, Mode: Local, RevocationCheck: Skip, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	fetches := func() int { mu.Lock(); defer mu.Unlock(); return hits }
	for _, step := range []struct {
		at   time.Duration
		want int
	}{{0, 1}, {29 * time.Second, 1}, {30 * time.Second, 2}, {59 * time.Second, 2}, {60 * time.Second, 3}} {
		now = time.Unix(1_700_000_000, 0).Add(step.at)
		if _, err := v.keys.key(t.Context(), "k1"); err != nil {
			t.Fatalf("at %v: %v", step.at, err)
		}
		if got := fetches(); got != step.want {
			t.Fatalf("at %v: %d fetches, want %d", step.at, got, step.want)
		}
	}
	mu.Lock()
	doc = `{"keys":[` + strings.Replace(key, "{", `{"d":"AA",`, 1) + `]}`
	mu.Unlock()
	v.keys.cache.Forget(v.keys.url)
	if _, err := v.keys.key(t.Context(), "k1"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, jwk.ErrPrivateKey) {
		t.Fatalf("a JWKS with a private member: %v, want ErrUnavailable (jwk.ErrPrivateKey)", err)
	}
}

package token_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/refusal"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// TestRetiredKeyDropped shows a retired key verifying, and published, until
// every token it can have signed has expired, then neither. The token is
// one the retired key signed with a lifetime far past any a Service gives,
// so that only the key's drop can fail it; the verified-token cache is off,
// as it would keep such a token (Service.verifies).
func TestRetiredKeyDropped(t *testing.T) {
	e := newEnv(t, Options{CacheSize: CacheOff})
	old, cur := e.keys.Signer(), MustKey(t)
	issued := e.issue(t, e.svc, "svc", IssueRequest{})
	v := mustValidate(t, e.svc, issued.AccessToken)
	long := v.Claims()
	long.ExpiresAt = jwt.NewNumericDate(e.clock.Now().Add(100 * 24 * time.Hour))
	raw := signed(t, old, map[string]any{"kid": old.ID, "typ": "at+jwt"}, long)

	retired := e.clock.Now()
	ks, err := NewRetiredKeySet(cur, old, retired)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := e.svc.WithKeys(ks)
	if err != nil {
		t.Fatal(err)
	}
	published := func() bool {
		for _, k := range svc.JWKS().Keys {
			if k.Kid == old.ID {
				return true
			}
		}
		return false
	}
	drop := retired.Add(keyset.Propagation + svc.Options().MaxTTL + svc.Options().Leeway)

	e.clock.Set(drop.Add(-time.Second))
	mustValidate(t, svc, raw)
	if !published() {
		t.Error("the retired key left the JWKS before its tokens expired")
	}
	e.clock.Set(drop)
	if _, err := svc.Validate(t.Context(), raw); !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrRevoked) {
		t.Errorf("Validate after the drop = %v, want ErrInvalidToken for the key", err)
	}
	if published() {
		t.Error("the retired key is still in the JWKS after every token it signed expired")
	}
	// Revoking such a token does nothing and is no error (RFC 7009: not a
	// live token of ours), unlike a token of a kid not yet loaded.
	if jti, err := svc.Revoke(t.Context(), e.clients["svc"], raw); jti != "" || err != nil {
		t.Errorf("Revoke of a token of a dropped key = %q, %v; want nothing revoked and no error", jti, err)
	}
	mustValidate(t, e.svc, raw) // the same clock, where the key is active: never dropped
}

// TestWithKeys shows a reload's new service signing with the new active key
// while the one it was made from is unchanged, and the cache not carried
// over: a token the old service verified is checked again with the new keys.
func TestWithKeys(t *testing.T) {
	e := newEnv(t, Options{})
	tok := e.issue(t, e.svc, "svc", IssueRequest{})
	mustValidate(t, e.svc, tok.AccessToken) // cached by e.svc

	other := MustKey(t)
	ks, err := keyset.New(other)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := e.svc.WithKeys(ks)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeSegment(t, e.issue(t, svc, "svc", IssueRequest{}).AccessToken, 0)["kid"]; got != other.ID {
		t.Errorf("the new service signs with %v, want %v", got, other.ID)
	}
	if got := decodeSegment(t, e.issue(t, e.svc, "svc", IssueRequest{}).AccessToken, 0)["kid"]; got != e.keys.Signer().ID {
		t.Errorf("the old service signs with %v after WithKeys, want its own %v", got, e.keys.Signer().ID)
	}
	if _, err := svc.Validate(t.Context(), tok.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a set without the old key validated its token (from the old cache?): err = %v", err)
	}
	mustValidate(t, e.svc, tok.AccessToken)
}

// TestRevokeUnknownKid: revoking a token whose kid the set does not hold is
// 200 (nil) when the kid is a dropped key's tombstone, whatever else, and
// when the set is known current (read from a keys directory whose
// keys.json is still the file it was read from); ErrUnavailable with
// ErrKeysUndecided only when it cannot be told: a plain list, a set made in
// memory, a keys.json changed (a reload pending or refused) or unreadable.
func TestRevokeUnknownKid(t *testing.T) {
	e := newEnv(t, Options{CacheSize: CacheOff})
	now := e.clock.Now()
	f := keysettest.NewDir(t, now)
	gone := MustKey(t)
	f.Manifest.Dropped = []keyset.DroppedKey{{Kid: gone.ID, Dropped: now.Add(-time.Hour)}}
	dir := f.Write(t)
	ks, err := keyset.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	svc := mustWithKeys(t, e.svc, ks)
	claims := mustValidate(t, e.svc, e.issue(t, e.svc, "svc", IssueRequest{}).AccessToken).Claims()
	dropped := signed(t, gone, map[string]any{"kid": gone.ID, "typ": "at+jwt"}, claims)
	// issuedAgo is claims issued age before now.
	issuedAgo := func(age time.Duration) Claims {
		c := claims
		c.IssuedAt = jwt.NewNumericDate(now.Add(-age))
		return c
	}
	// Past keyset.Propagation, a key that signed a token has reached every
	// replica; past MaxTTL, every token of it has expired.
	pastPropagation := issuedAgo(keyset.Propagation + e.svc.Options().Leeway + time.Second)
	pastTTL := issuedAgo(e.svc.Options().MaxTTL + e.svc.Options().Leeway + time.Second)
	madeUp := signed(t, MustKey(t), map[string]any{"kid": "made-up", "typ": "at+jwt"}, pastPropagation)
	noKid := signed(t, MustKey(t), map[string]any{"typ": "at+jwt"}, pastPropagation)
	madeUpNew := signed(t, MustKey(t), map[string]any{"kid": "made-up", "typ": "at+jwt"}, claims)
	madeUpExpired := signed(t, MustKey(t), map[string]any{"kid": "made-up", "typ": "at+jwt"}, pastTTL)
	noIat := issuedAgo(0)
	noIat.IssuedAt = nil
	madeUpNoIat := signed(t, MustKey(t), map[string]any{"kid": "made-up", "typ": "at+jwt"}, noIat)
	revoke := func(t *testing.T, svc *Service, raw string) error {
		t.Helper()
		jti, err := svc.Revoke(t.Context(), e.clients["svc"], raw)
		if jti != "" {
			t.Errorf("Revoke revoked %s: a token of no key of the set was acted on", jti)
		}
		return err
	}
	wantRevoked := func(t *testing.T, svc *Service, raws ...string) {
		t.Helper()
		for _, raw := range raws {
			if err := revoke(t, svc, raw); err != nil {
				t.Errorf("Revoke = %v, want nil (RFC 7009: no token of ours)", err)
			}
		}
	}
	wantUndecided := func(t *testing.T, svc *Service, raw string) {
		t.Helper()
		if err := revoke(t, svc, raw); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrKeysUndecided) {
			t.Errorf("Revoke = %v, want ErrUnavailable and ErrKeysUndecided", err)
		}
	}

	t.Run("current keys directory", func(t *testing.T) {
		if err := ks.Current(); err != nil {
			t.Fatalf("Current = %v", err)
		}
		wantRevoked(t, svc, dropped, madeUp, noKid, madeUpExpired, madeUpNoIat)
		// A key made active at once, with no next stage, may still be on
		// its way here: a token issued within keyset.Propagation is undecided.
		wantUndecided(t, svc, madeUpNew)
		if _, err := svc.Validate(t.Context(), dropped); !errors.Is(err, ErrInvalidToken) || !strings.Contains(description(err), "expired") {
			t.Errorf("Validate of a dropped key's token = %v, want ErrInvalidToken, expired", err)
		}
	})
	t.Run("plain list and set in memory", func(t *testing.T) {
		p, err := e.keys.Signer().MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "k.pem")
		if err := os.WriteFile(file, p, 0o600); err != nil {
			t.Fatal(err)
		}
		list, err := keyset.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range []*keyset.Set{list, e.keys} {
			wantUndecided(t, mustWithKeys(t, e.svc, set), madeUp)
			// Expired wherever its key is; not ours without an iat.
			wantRevoked(t, mustWithKeys(t, e.svc, set), madeUpExpired, madeUpNoIat)
		}
	})
	t.Run("keys.json changed: reload pending or refused", func(t *testing.T) {
		path := filepath.Join(dir, keyset.ManifestFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, ' '), 0o600); err != nil {
			t.Fatal(err)
		}
		wantUndecided(t, svc, madeUp)
		wantRevoked(t, svc, dropped) // a tombstone needs no current set
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		wantUndecided(t, svc, madeUp)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		wantRevoked(t, svc, madeUp)
	})
}

// mustWithKeys is svc.WithKeys(ks) or fails the test.
func mustWithKeys(tb testing.TB, svc *Service, ks *keyset.Set) *Service {
	tb.Helper()
	n, err := svc.WithKeys(ks)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// description is the description Describe gave err, or its text.
func description(err error) string {
	if d, ok := refusal.Description(err); ok {
		return d
	}
	return err.Error()
}

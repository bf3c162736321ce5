package client

import (
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testFeed is a feed that knows one key (kid k1, no fetch) and has applied
// a snapshot of epoch e1 with horizon, on the clock *now.
func testFeed(t *testing.T, now *time.Time, horizon int64) (*feed, ed25519.PrivateKey) {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	clock := func() time.Time { return *now }
	v := &Validator{opts: Options{Issuer: "https://issuer.test", Leeway: DefaultLeeway, FeedThreshold: DefaultFeedThreshold,
		JWKSMaxAge: 100 * time.Hour, JWKSMinInterval: 100 * time.Hour, Now: clock, Logger: slog.New(slog.DiscardHandler)}}
	v.keys = &keyCache{v: v, keys: map[string]ed25519.PublicKey{"k1": pub}, loaded: *now, tried: *now}
	fd := newFeed(v, "http://issuer.test")
	fd.synced, fd.epoch, fd.last, fd.horizon = true, "e1", "e1-0-0", horizon
	fd.tokens, fd.subjects, fd.clients = map[string]int64{}, map[string]int64{}, map[string]int64{}
	return fd, key
}

func signTest(t *testing.T, key ed25519.PrivateKey, typ string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"], tok.Header["typ"] = "k1", typ
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHeartbeatReplayRefused checks that a heartbeat seen before (a proxy
// replaying it, or the same one after a reconnection) does not make the
// state fresh again, and that one newer does, for FeedThreshold less its
// age.
func TestHeartbeatReplayRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, key := testFeed(t, &now, 0)
	beat := func(ms int64) string {
		return signTest(t, key, typeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test", "iat": now.Unix(),
			"iat_ms": ms, "epoch": "e1", "last": "e1-0-0", "age_ms": 50})
	}
	c := &Claims{JTI: "1", IssuedAt: now}
	hb := beat(now.UnixMilli())
	if err := fd.applyHeartbeat(t.Context(), hb); err != nil || fd.decide(c) != live {
		t.Fatalf("first heartbeat: %v, %v", err, fd.decide(c))
	}
	now = now.Add(DefaultFeedThreshold - 50*time.Millisecond) // its age counts against it
	if fd.decide(c) != unknown {
		t.Fatal("fresh past FeedThreshold less the heartbeat's age")
	}
	if err := fd.applyHeartbeat(t.Context(), hb); err != nil || fd.decide(c) != unknown {
		t.Fatalf("the same heartbeat again made the state fresh (%v)", err)
	}
	if err := fd.applyHeartbeat(t.Context(), beat(now.UnixMilli())); err != nil || fd.decide(c) != live {
		t.Fatalf("a newer heartbeat: %v, %v", err, fd.decide(c))
	}
}

// TestDecide checks the rules of decide on a fresh state: revoked jti,
// a subject's and a client's revocation before, after and within the
// leeway of a token's iat, and the horizon.
func TestDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	iat := now.Add(-time.Minute)
	horizon := iat.Add(-time.Hour).UnixMilli()
	fd, key := testFeed(t, &now, horizon)
	if err := fd.applyHeartbeat(t.Context(), signTest(t, key, typeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test",
		"iat": now.Unix(), "iat_ms": now.UnixMilli(), "epoch": "e1", "last": "e1-0-0", "age_ms": 0})); err != nil {
		t.Fatal(err)
	}
	ms := func(d time.Duration) int64 { return iat.Add(d).UnixMilli() }
	fd.tokens["revoked"] = 0
	fd.subjects["before"] = ms(-10 * time.Second) // revoked before the token: it is live
	fd.subjects["after"] = ms(10 * time.Second)   // revoked after the token was issued
	fd.subjects["near"] = ms(2 * time.Second)     // within the leeway
	fd.clients["cut"] = ms(10 * time.Second)
	fd.clients["old"] = ms(-10 * time.Second)
	for _, tc := range []struct {
		name, jti, sub, client string
		iat                    time.Time
		want                   verdict
	}{
		{"untouched", "1", "x", "y", iat, live},
		{"jti revoked", "revoked", "x", "y", iat, revoked},
		{"subject revoked before it", "1", "before", "y", iat, live},
		{"subject revoked after it", "1", "after", "y", iat, revoked},
		{"subject within the leeway", "1", "near", "y", iat, unknown},
		{"client cut after it", "1", "x", "cut", iat, revoked},
		{"client cut before it", "1", "x", "old", iat, live},
		{"client cut, subject near", "1", "near", "cut", iat, revoked},
		{"before the horizon", "1", "x", "y", time.UnixMilli(horizon).Add(-time.Second), unknown},
		{"within the leeway of the horizon", "1", "x", "y", time.UnixMilli(horizon).Add(time.Second), unknown},
	} {
		if got := fd.decide(&Claims{JTI: tc.jti, Subject: tc.sub, ClientID: tc.client, IssuedAt: tc.iat}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	now = now.Add(time.Second) // stale: a revoked token stays revoked, the rest cannot be told
	if got := fd.decide(&Claims{JTI: "revoked", IssuedAt: iat}); got != revoked {
		t.Errorf("stale, jti revoked: %v", got)
	}
	if got := fd.decide(&Claims{JTI: "1", Subject: "x", ClientID: "y", IssuedAt: iat}); got != unknown {
		t.Errorf("stale, untouched: %v", got)
	}
}

package token_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// TestSubjectRevocationSurvivesEviction fills a real redis-server past its
// maxmemory after revoking subjects, so that real eviction takes whatever the
// policy picks, and checks that no revoked token validates again: a lost
// record or a lost subject marker may log a token out, never bring it back.
// Each subject has a JWT and an opaque token.
func TestSubjectRevocationSurvivesEviction(t *testing.T) {
	for _, policy := range []string{"allkeys-random", "allkeys-lru", "volatile-lru", "volatile-random", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.NewConfiguredServer(t, "--maxmemory-policy", policy)
			rdb := srv.Client()
			e := newEnvOn(t, &redistest.Redis{Client: rdb, Prefix: "st:"}, Options{})
			ctx := t.Context()

			const subjects = 150
			var revoked []string
			for i := range subjects {
				sub := "user" + strconv.Itoa(i)
				toks := []string{e.issue(t, e.svc, "gateway", IssueRequest{Subject: sub}).AccessToken,
					e.issue(t, e.svc, "ogateway", IssueRequest{Subject: sub}).AccessToken}
				if err := e.svc.RevokeSubject(ctx, sub); err != nil {
					t.Fatal(err)
				}
				for _, raw := range toks {
					wantRevoked(t, e.svc, raw)
				}
				revoked = append(revoked, toks...)
			}
			fillPastMaxmemory(t, rdb)

			back := 0
			for i, raw := range revoked {
				if _, err := e.svc.Validate(ctx, raw); err == nil {
					back++
				} else if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("token %d: %v, want ErrInvalidToken", i, err)
				}
			}
			if back > 0 {
				t.Errorf("%d of %d revoked tokens validate again after eviction", back, len(revoked))
			}
		})
	}
}

// fillPastMaxmemory caps the server's memory a little above what it uses
// now and writes keys with a TTL (which every policy may evict) until it
// has evicted a few thousand keys or refuses writes.
func fillPastMaxmemory(tb testing.TB, rdb *redis.Client) {
	tb.Helper()
	ctx := context.Background()
	used := infoInt(tb, rdb, "memory", "used_memory")
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+256<<10, 10)).Err(); err != nil {
		tb.Fatal(err)
	}
	value := strings.Repeat("x", 512)
	for i := 0; infoInt(tb, rdb, "stats", "evicted_keys") < 2000; i++ {
		pipe := rdb.Pipeline()
		for j := range 100 {
			pipe.Set(ctx, fmt.Sprintf("junk:%d:%d", i, j), value, time.Hour)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			if redis.HasErrorPrefix(err, "OOM") {
				return
			}
			tb.Fatal(err)
		}
		if i > 10_000 {
			tb.Fatal("no eviction after a million writes")
		}
	}
}

// infoInt returns one integer field of INFO section.
func infoInt(tb testing.TB, rdb *redis.Client, section, field string) int64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("no %s in INFO %s", field, section)
	return 0
}

// TestSecondSubjectRevokeAfterLoss: when a subject's marker is lost, the
// next revocation must not make it read as it once did, and no token issued
// before the loss may validate.
func TestSecondSubjectRevokeAfterLoss(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	first := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	if err := e.svc.RevokeSubject(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	between := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	mustValidate(t, e.svc, between.AccessToken)

	// The marker is lost (evicted, expired early, a failover that missed it).
	if err := e.redis.Client.Del(ctx, e.markerKey("alice")).Err(); err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{"revoked": first.AccessToken, "issued between": between.AccessToken} {
		if _, err := e.svc.Validate(ctx, raw); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s, marker lost: Validate err = %v, want ErrInvalidToken (fail closed)", name, err)
		}
	}
	if err := e.svc.RevokeSubject(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{"revoked": first.AccessToken, "issued between": between.AccessToken} {
		if _, err := e.svc.Validate(ctx, raw); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s, marker lost, revoked again: Validate err = %v, want ErrInvalidToken", name, err)
		}
	}
	// A new token after all that is valid.
	mustValidate(t, e.svc, e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"}).AccessToken)
}

// TestSubjectRevokeByReplicaWithShorterMaxTTL: the marker must outlive every
// token it covers, whatever the revoking replica's own maximum lifetime.
func TestSubjectRevokeByReplicaWithShorterMaxTTL(t *testing.T) {
	e := newEnv(t, Options{MaxTTL: time.Hour})
	short := e.newService(t, e.keys, e.ids, Options{TTL: time.Second, MaxTTL: time.Second, Leeway: NoLeeway})
	ctx := t.Context()
	iss := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice", ExpiresIn: time.Hour})
	if err := short.RevokeSubject(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	wantRevoked(t, e.svc, iss.AccessToken)

	marker, err := e.redis.Client.PTTL(ctx, e.markerKey("alice")).Result()
	if err != nil {
		t.Fatal(err)
	}
	record, err := e.redis.Client.PTTL(ctx, e.sessionKey("alice", iss.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if marker < record {
		t.Errorf("marker PTTL = %v, below the PTTL %v of the record it revokes", marker, record)
	}
	if e.redis.Mini != nil {
		e.redis.Mini.FastForward(2 * time.Second)
		wantRevoked(t, e.svc, iss.AccessToken)
	}
}

// TestRevokeIsRealOrAnError: a revoke that cannot delete the record is an
// error the client retries, never a success; time claims do not stop it.
func TestRevokeIsRealOrAnError(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	otherKey := keysettest.MustKey(t)
	replica := func(t *testing.T, keys *keyset.Set, now func() time.Time) *Service {
		t.Helper()
		svc, err := NewService(keys, e.store, e.ids, Options{Issuer: testIssuer, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}

	t.Run("clock 10s behind the issuer", func(t *testing.T) {
		iss := e.issue(t, e.svc, "svc", IssueRequest{})
		behind := replica(t, e.keys, func() time.Time { return e.clock.Now().Add(-10 * time.Second) })
		if _, err := behind.Validate(ctx, iss.AccessToken); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("the skewed replica validates the token (%v): the test does not skew enough", err)
		}
		if _, err := behind.Revoke(ctx, e.clients["svc"], iss.AccessToken); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		wantRevoked(t, e.svc, iss.AccessToken)
	})
	t.Run("expired", func(t *testing.T) {
		iss := e.issue(t, e.svc, "svc", IssueRequest{ExpiresIn: time.Hour})
		later := replica(t, e.keys, func() time.Time { return e.clock.Now().Add(2 * time.Hour) })
		if _, err := later.Revoke(ctx, e.clients["svc"], iss.AccessToken); err != nil {
			t.Fatalf("Revoke of an expired token: %v", err)
		}
		wantRevoked(t, e.svc, iss.AccessToken)
	})
	t.Run("replica without the signing key", func(t *testing.T) {
		iss := e.issue(t, e.svc, "svc", IssueRequest{})
		oldKeys, err := keyset.New(otherKey)
		if err != nil {
			t.Fatal(err)
		}
		old := replica(t, oldKeys, e.clock.Now)
		if _, err := old.Revoke(ctx, e.clients["svc"], iss.AccessToken); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Revoke on a replica that lacks the key: %v, want ErrUnavailable", err)
		}
		mustValidate(t, e.svc, iss.AccessToken)
		// Once it has the key, the same request succeeds.
		both, err := keyset.New(otherKey, e.keys.Signer())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replica(t, both, e.clock.Now).Revoke(ctx, e.clients["svc"], iss.AccessToken); err != nil {
			t.Fatalf("Revoke once the replica has the key: %v", err)
		}
		wantRevoked(t, e.svc, iss.AccessToken)
	})
	t.Run("forged signature", func(t *testing.T) {
		iss := e.issue(t, e.svc, "svc", IssueRequest{})
		parts := strings.Split(iss.AccessToken, ".")
		sig := []byte(parts[2])
		sig[len(sig)/2] ^= 1
		forged := parts[0] + "." + parts[1] + "." + string(sig)
		if _, err := e.svc.Revoke(ctx, e.clients["svc"], forged); err != nil {
			t.Fatalf("Revoke of a forged token: %v, want nil (RFC 7009)", err)
		}
		mustValidate(t, e.svc, iss.AccessToken)
	})
	t.Run("redis down", func(t *testing.T) {
		srv := redistest.NewServer(t)
		store := newStore(t, srv.Client(), "st:", false)
		svc, err := NewService(e.keys, store, e.ids, Options{Issuer: testIssuer, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		iss, err := svc.Issue(ctx, e.clients["svc"], IssueRequest{})
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		if _, err := svc.Revoke(ctx, e.clients["svc"], iss.AccessToken); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Revoke with Redis down: %v, want ErrUnavailable", err)
		}
	})
}

// TestRevokeClient: every live token of a client, whatever its subject,
// ends at once; other clients' tokens do not; the client's tokens issued
// after the leeway are valid; a second, earlier revocation moves nothing back.
func TestRevokeClient(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := t.Context()
	// IDs on the test's clock, so that it can move past the leeway.
	ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 8, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	svc := e.newService(t, e.keys, ids, Options{})
	var gateway []string
	for _, sub := range []string{"alice", "bob", "gateway"} {
		gateway = append(gateway, e.issue(t, svc, "gateway", IssueRequest{Subject: sub}).AccessToken)
	}
	other := e.issue(t, svc, "svc", IssueRequest{}).AccessToken

	if err := svc.RevokeClient(ctx, "gateway"); err != nil {
		t.Fatal(err)
	}
	for _, raw := range gateway {
		wantRevoked(t, svc, raw)
	}
	mustValidate(t, svc, other)
	// Within the leeway a new token of the client would be revoked too (the
	// cutoff allows for clock skew): Issue refuses it (TestIssueAfterRevokeClient);
	// after it, new tokens are valid.
	e.clock.Add(DefaultLeeway + time.Millisecond)
	after := e.issue(t, svc, "gateway", IssueRequest{Subject: "alice"}).AccessToken
	mustValidate(t, svc, after)

	// A replica whose clock is behind revokes again: the time stays.
	behind, err := NewService(e.keys, e.store, ids, Options{Issuer: testIssuer, Now: func() time.Time { return e.clock.Now().Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := behind.RevokeClient(ctx, "gateway"); err != nil {
		t.Fatal(err)
	}
	for _, raw := range gateway {
		wantRevoked(t, svc, raw)
	}
	mustValidate(t, svc, after)

	if err := svc.RevokeClient(ctx, "bad name}"); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("RevokeClient of a bad name: %v, want ErrInvalidRequest", err)
	}
}

// TestIssueAfterRevokeClient: right after a client's tokens are revoked,
// its cutoff (the revoker's clock plus the leeway) covers the IDs this
// replica draws for a few seconds. Issue never hands out such a token: it
// fails with ErrUnavailable and ErrClientRevoking, and a wait (RetryAfter)
// after which a token is past the cutoff; every token it does hand out
// validates. On a single Redis's paths and a Cluster's, JWT and opaque.
func TestIssueAfterRevokeClient(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 9, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		svc := e.newService(t, e.keys, ids, Options{})
		for _, client := range []string{"gateway", "ogateway"} {
			t.Run(client, func(t *testing.T) {
				old := e.issue(t, svc, client, IssueRequest{Subject: "alice"}).AccessToken
				if err := svc.RevokeClient(t.Context(), client); err != nil {
					t.Fatal(err)
				}
				wantRevoked(t, svc, old)
				refused, handed := 0, 0
				// Every 500 ms for 8 s: the window is the leeway (5 s).
				for i := range 16 {
					iss, err := svc.Issue(t.Context(), e.clients[client], IssueRequest{Subject: "alice"})
					switch {
					case err == nil:
						handed++
						if _, err := svc.Validate(t.Context(), iss.AccessToken); err != nil {
							t.Fatalf("token %d handed out %v after the revocation does not validate: %v", i, time.Duration(i)*500*time.Millisecond, err)
						}
					case errors.Is(err, ErrUnavailable) && errors.Is(err, ErrClientRevoking):
						refused++
						var r interface{ RetryAfter() time.Duration }
						if !errors.As(err, &r) || r.RetryAfter() <= 0 || r.RetryAfter() > DefaultLeeway+time.Second {
							t.Fatalf("refusal %d: %v, want a RetryAfter within the leeway", i, err)
						}
					default:
						t.Fatalf("Issue %d: %v", i, err)
					}
					e.clock.Add(500 * time.Millisecond)
				}
				if refused == 0 || handed == 0 {
					t.Errorf("%d refused, %d handed out: want both (the window, then valid tokens)", refused, handed)
				}
				wantRevoked(t, svc, old)
			})
		}
	})
}

// TestRevokeClientSurvivesEviction: the client's revocation has no TTL, so
// no policy the service accepts evicts it; filled past maxmemory under
// volatile-lru, the revoked tokens stay revoked.
func TestRevokeClientSurvivesEviction(t *testing.T) {
	srv := redistest.NewConfiguredServer(t, "--maxmemory-policy", "volatile-lru")
	rdb := srv.Client()
	e := newEnvOn(t, &redistest.Redis{Client: rdb, Prefix: "st:"}, Options{})
	var toks []string
	for i := range 100 {
		toks = append(toks, e.issue(t, e.svc, "gateway", IssueRequest{Subject: "user" + strconv.Itoa(i)}).AccessToken)
	}
	if err := e.svc.RevokeClient(t.Context(), "gateway"); err != nil {
		t.Fatal(err)
	}
	fillPastMaxmemory(t, rdb)
	for i, raw := range toks {
		if _, err := e.svc.Validate(t.Context(), raw); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("token %d of the revoked client after eviction: %v, want ErrInvalidToken", i, err)
		}
	}
	if n, err := rdb.Exists(t.Context(), "st:client:{gateway}").Result(); err != nil || n != 1 {
		t.Errorf("the client's revocation after eviction: exists %d, %v", n, err)
	}
}

// TestClientKeyUnreadable: a client's revocation key that does not hold a
// time (written by hand, or by another program) fails the client's tokens
// closed, never open.
func TestClientKeyUnreadable(t *testing.T) {
	e := newEnv(t, Options{})
	iss := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	other := e.issue(t, e.svc, "svc", IssueRequest{})
	if err := e.redis.Client.Set(t.Context(), e.redis.Prefix+"client:{gateway}", "not a time", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantRevoked(t, e.svc, iss.AccessToken)
	mustValidate(t, e.svc, other.AccessToken)
}

// TestIssueAfterScriptFlush: a Redis that lost the scripts (restarted,
// SCRIPT FLUSH) is sent the create script's source again, and the client's
// revocation time read with it (in its pipeline on a Cluster) still comes
// back: before a revocation a token, right after it ErrClientRevoking.
func TestIssueAfterScriptFlush(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		flush := func() {
			if err := e.redis.Client.ScriptFlush(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, client := range []string{"gateway", "ogateway"} {
			flush()
			mustValidate(t, e.svc, e.issue(t, e.svc, client, IssueRequest{Subject: "alice"}).AccessToken)
			if err := e.svc.RevokeClient(t.Context(), client); err != nil {
				t.Fatal(err)
			}
			flush()
			if _, err := e.svc.Issue(t.Context(), e.clients[client], IssueRequest{Subject: "alice"}); !errors.Is(err, ErrClientRevoking) {
				t.Errorf("%s: Issue right after the revocation, scripts flushed: %v, want ErrClientRevoking", client, err)
			}
		}
	})
}

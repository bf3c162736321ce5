package token

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"snowtoken/internal/redistest"
)

// TestSubjectRevocationSurvivesEviction fills a real redis-server past its
// maxmemory after revoking subjects, so that real eviction takes whatever the
// policy picks, and checks that no revoked token validates again: a lost
// record or a lost subject marker may log a token out, never bring it back.
func TestSubjectRevocationSurvivesEviction(t *testing.T) {
	for _, policy := range []string{"allkeys-random", "allkeys-lru", "volatile-lru", "volatile-random", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.NewConfiguredServer(t, "--maxmemory-policy", policy)
			rdb := srv.Client()
			e := newEnvOn(t, &redistest.Redis{Client: rdb, Prefix: "st:"}, Options{})
			ctx := t.Context()

			const subjects = 150
			revoked := make([]string, subjects)
			for i := range revoked {
				sub := "user" + strconv.Itoa(i)
				revoked[i] = e.issue(t, e.svc, "gateway", IssueRequest{Subject: sub}).AccessToken
				if err := e.svc.RevokeSubject(ctx, sub); err != nil {
					t.Fatal(err)
				}
				wantRevoked(t, e.svc, revoked[i])
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
				t.Errorf("%d of %d revoked tokens validate again after eviction", back, subjects)
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
	short := e.newService(t, e.keys, e.ids, Options{TTL: time.Second, MaxTTL: time.Second, Leeway: -1})
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

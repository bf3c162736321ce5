package handlers_test

import (
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// wantUnavailable checks a 503 that tells the client when to come back.
func wantUnavailable(tb testing.TB, r *response, minRetry int) {
	tb.Helper()
	wantError(tb, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < minRetry {
		tb.Errorf("Retry-After %q, want a number of seconds >= %d", r.Header.Get("Retry-After"), minRetry)
	}
}

// newStoppableEnv returns an env on a Redis server of its own, for the
// test to stop, with a client that gives up on it quickly.
func newStoppableEnv(t *testing.T) (*redistest.Server, *env) {
	t.Helper()
	srv := redistest.NewServer(t)
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, PoolTimeout: 300 * time.Millisecond,
	})
	t.Cleanup(func() { rdb.Close() })
	return srv, newEnv(t, withRedis(rdb, "down:"))
}

// TestRedisDown: while Redis is down nothing is issued and nothing validates,
// and every answer is a 503 with Retry-After; after a restart that lost the
// sessions, old tokens fail closed and new ones work.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv, e := newStoppableEnv(t)

	validated := e.issue(t, e.Normal, nil).AccessToken
	if r := e.validate(t, validated); r.Status != http.StatusOK { // in the verified cache from now on
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	unseen := e.issue(t, e.Normal, nil).AccessToken

	srv.Stop()

	t.Run("issue", func(t *testing.T) {
		wantUnavailable(t, e.post(t, "/token", &e.Normal, url.Values{"grant_type": {"client_credentials"}}), 1)
	})
	t.Run("validate", func(t *testing.T) {
		for _, tok := range []string{validated, unseen} {
			r := e.validate(t, tok)
			wantUnavailable(t, r, 1)
			if h := r.Header.Get("X-Auth-Subject"); h != "" {
				t.Errorf("X-Auth-Subject %q on a 503", h)
			}
		}
	})
	t.Run("validate garbage", func(t *testing.T) {
		// A token that is bad anyway needs no Redis to be refused.
		wantError(t, e.validate(t, "garbage"), http.StatusUnauthorized, "invalid_token")
	})
	t.Run("introspect", func(t *testing.T) {
		r := e.post(t, "/token/introspect", &e.Normal, url.Values{"token": {validated}})
		wantUnavailable(t, r, 1)
		if strings.Contains(string(r.Body), "active") {
			t.Errorf("an outage answered as an introspection: %s", r.Body)
		}
	})
	t.Run("revoke", func(t *testing.T) {
		wantUnavailable(t, e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {validated}}), 1)
	})
	t.Run("revoke subject", func(t *testing.T) {
		r := e.do(t, http.MethodDelete, "/subjects/"+e.Normal.ID+"/tokens", nil, http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}})
		wantUnavailable(t, r, 1)
	})
	t.Run("readyz", func(t *testing.T) {
		r := e.do(t, http.MethodGet, "/readyz", nil, nil)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if reason, _ := r.object(t)["reason"].(string); !strings.Contains(reason, "redis") {
			t.Errorf("reason %q, want one naming redis", reason)
		}
	})
	t.Run("healthz", func(t *testing.T) {
		if r := e.do(t, http.MethodGet, "/healthz", nil, nil); r.Status != http.StatusOK {
			t.Errorf("liveness must not depend on Redis: status %d", r.Status)
		}
	})

	srv.Start() // empty: the sessions are gone
	if _, err := exec.LookPath("redis-server"); err != nil {
		// The miniredis fallback keeps its data across Stop and Start,
		// unlike the redis-server it stands in for: lose it the same way.
		if err := srv.Client().FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("after restart", func(t *testing.T) {
		if r := e.do(t, http.MethodGet, "/readyz", nil, nil); r.Status != http.StatusOK {
			t.Fatalf("readyz: status %d: %s", r.Status, r.Body)
		}
		tok := e.issue(t, e.Normal, nil).AccessToken
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Fatalf("new token: status %d: %s", r.Status, r.Body)
		}
		for _, old := range []string{validated, unseen} {
			r := e.validate(t, old)
			wantError(t, r, http.StatusUnauthorized, "invalid_token")
			wantBearerChallenge(t, r, "invalid_token")
		}
	})
}

// TestClockRollback: a clock a little behind the last ID makes issuing fail
// fast with Retry-After while the instance stays ready; far behind, the
// instance is not ready either; once the clock catches up, all is well.
func TestClockRollback(t *testing.T) {
	t.Parallel()
	idClock := clocktest.New(time.Now())
	e := newEnv(t, withIDClock(idClock.Now))
	grant := url.Values{"grant_type": {"client_credentials"}}
	ready := func(t *testing.T) *response {
		t.Helper()
		return e.do(t, http.MethodGet, "/readyz", nil, nil)
	}

	tok := e.issue(t, e.Normal, nil).AccessToken
	issuedAt := idClock.Now()

	t.Run("2s back", func(t *testing.T) {
		idClock.Set(issuedAt.Add(-2 * time.Second))
		wantUnavailable(t, e.post(t, "/token", &e.Normal, grant), 2)
		if r := ready(t); r.Status != http.StatusOK {
			t.Errorf("readyz: status %d: %s, want 200 (a short rollback heals by itself)", r.Status, r.Body)
		}
		// Validation needs no new ID.
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Errorf("validate: status %d: %s", r.Status, r.Body)
		}
	})
	t.Run("1h back", func(t *testing.T) {
		idClock.Set(issuedAt.Add(-time.Hour))
		wantUnavailable(t, e.post(t, "/token", &e.Normal, grant), 1)
		r := ready(t)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("readyz: status %d: %s, want 503", r.Status, r.Body)
		}
		if reason, _ := r.object(t)["reason"].(string); !strings.Contains(reason, "behind") {
			t.Errorf("reason %q, want one saying the clock is behind", reason)
		}
	})
	t.Run("caught up", func(t *testing.T) {
		idClock.Set(issuedAt.Add(time.Second))
		if r := ready(t); r.Status != http.StatusOK {
			t.Errorf("readyz: status %d: %s", r.Status, r.Body)
		}
		next := e.issue(t, e.Normal, nil)
		if r := e.validate(t, next.AccessToken); r.Status != http.StatusOK {
			t.Errorf("validate: status %d: %s", r.Status, r.Body)
		}
	})
}

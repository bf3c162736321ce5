package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// TestReadyzWhileRedisRefusesWrites puts a real redis-server in each state
// in which it answers reads but refuses writes — full under noeviction, a
// read-only replica, writes stopped after a failed snapshot — and checks
// that /readyz fails with Redis's own reason while it lasts and recovers
// by itself, and that POST /token never answers a false success.
func TestReadyzWhileRedisRefusesWrites(t *testing.T) {
	srv := redistest.NewConfiguredServer(t, "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	e := newEnv(t, withRedis(rdb, "st:"))
	ctx := t.Context()
	wantReady := func(t *testing.T, want int, reason string) {
		t.Helper()
		r := e.do(t, http.MethodGet, "/readyz", nil, nil)
		got, _ := r.object(t)["reason"].(string)
		if r.Status != want || !strings.Contains(got, reason) {
			t.Fatalf("/readyz %d %q, want %d with %q", r.Status, got, want, reason)
		}
		// Issuing answers 503, or a token whose session Redis stored (a Lua
		// script without flags may still write on a full Redis): never a
		// token without its session.
		grant := url.Values{"grant_type": {"client_credentials"}}
		r = e.post(t, "/token", &e.Normal, grant)
		switch {
		case r.Status == http.StatusOK:
			tok, _ := r.object(t)["access_token"].(string)
			if v := e.validate(t, tok); v.Status != http.StatusOK {
				t.Fatalf("POST /token answered 200 with a token that does not validate: %d %s", v.Status, v.Body)
			}
		case want == http.StatusOK:
			t.Fatalf("POST /token while ready: %d %s", r.Status, r.Body)
		default:
			wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
		}
	}
	wantReady(t, http.StatusOK, "")

	t.Run("full", func(t *testing.T) {
		fillRedis(t, rdb)
		wantReady(t, http.StatusServiceUnavailable, "OOM")
		if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
		wantReady(t, http.StatusOK, "")
	})

	t.Run("read-only replica", func(t *testing.T) {
		master := redistest.NewConfiguredServer(t)
		if err := rdb.Do(ctx, "REPLICAOF", "127.0.0.1", fmt.Sprint(master.Port())).Err(); err != nil {
			t.Fatal(err)
		}
		wantReady(t, http.StatusServiceUnavailable, "READONLY")
		if err := rdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		wantReady(t, http.StatusOK, "")
	})

	t.Run("snapshot failed", func(t *testing.T) {
		dir := srv.Dir()
		if err := rdb.ConfigSet(ctx, "save", "3600 1").Err(); err != nil {
			t.Fatal(err)
		}
		// The snapshot's directory goes away: BGSAVE fails, and Redis stops
		// writes (stop-writes-on-bgsave-error, its default).
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := rdb.BgSave(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return rdb.Set(ctx, "probe", "1", time.Minute).Err() != nil })
		wantReady(t, http.StatusServiceUnavailable, "MISCONF")
		// The operator turns snapshots off (Redis cannot get its deleted
		// working directory back without a restart): writes resume.
		if err := rdb.ConfigSet(ctx, "save", "").Err(); err != nil {
			t.Fatal(err)
		}
		wantReady(t, http.StatusOK, "")
	})
}

// fillRedis fills rdb, a redis-server of the test's own under noeviction:
// real data fills the memory, and maxmemory ends up below it, the state of
// a store whose ceiling was reached. Set maxmemory to 0 to end it.
func fillRedis(tb testing.TB, rdb *redis.Client) {
	tb.Helper()
	ctx := tb.Context()
	value := strings.Repeat("x", 4096)
	for i := range 512 {
		if err := rdb.Set(ctx, fmt.Sprintf("junk:%d", i), value, 0).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var used int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			fmt.Sscan(v, &used)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", fmt.Sprint(used-(1<<20))).Err(); err != nil {
		tb.Fatal(err)
	}
	if err := rdb.Set(ctx, "one-more", "x", 0).Err(); !redis.HasErrorPrefix(err, "OOM") {
		tb.Fatalf("SET on the full Redis: %v, want OOM", err)
	}
}

// waitFor polls cond until it holds; a deadline for a hung test only.
func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatal("condition not reached in 10s")
		}
	}
}

// TestReadyzShowsRefusedReloads: a source whose reload was refused shows in
// /readyz's config.refused, with its reason and since when, and does not
// fail readiness (the set in force serves); when something else does, the
// 503 shows it too. Nothing refused: no config.refused.
func TestReadyzShowsRefusedReloads(t *testing.T) {
	since := time.Date(2026, 11, 25, 18, 40, 2, 0, time.UTC)
	var refused atomic.Pointer[map[string]handlers.Refusal]
	var notReady atomic.Bool
	e := newEnv(t,
		withRefused(func() map[string]handlers.Refusal {
			if m := refused.Load(); m != nil {
				return *m
			}
			return nil
		}),
		withReady(func(context.Context) error {
			if notReady.Load() {
				return errors.New("unsafe redis settings")
			}
			return nil
		}))
	config := func(want int) map[string]any {
		t.Helper()
		r := e.do(t, http.MethodGet, "/readyz", nil, nil)
		if r.Status != want {
			t.Fatalf("/readyz %d %s, want %d", r.Status, r.Body, want)
		}
		c, _ := r.object(t)["config"].(map[string]any)
		return c
	}
	if c := config(http.StatusOK); c["refused"] != nil || c["clients"] == nil {
		t.Errorf("config %v with nothing refused, want clients, keys and no refused", c)
	}
	refused.Store(&map[string]handlers.Refusal{"keys": {Reason: "keys.json: unexpected end of JSON input", Since: since}})
	want := `map[keys:map[since:2026-11-25T18:40:02Z]]` // never the reason: it names files and clients
	if c := config(http.StatusOK); fmt.Sprint(c["refused"]) != want {
		t.Errorf("config.refused %v, want %s", c["refused"], want)
	}
	notReady.Store(true)
	if c := config(http.StatusServiceUnavailable); fmt.Sprint(c["refused"]) != want {
		t.Errorf("config.refused %v when not ready, want %s", c["refused"], want)
	}
}

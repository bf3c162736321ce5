package redisconf

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

func TestEvaluate(t *testing.T) {
	base := map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "appendfsync": "everysec", "save": ""}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		cfg  map[string]string
		want []string // settings with a problem
	}{
		{"aof everysec, noeviction", base, nil},
		{"aof always", with("appendfsync", "always"), nil},
		{"aof and snapshots", with("save", "3600 1"), nil},
		{"no persistence at all", with("appendonly", "no"), nil},
		{"volatile-lru", with("maxmemory-policy", "volatile-lru"), nil},
		{"volatile-ttl", with("maxmemory-policy", "volatile-ttl"), nil},
		{"allkeys-lru", with("maxmemory-policy", "allkeys-lru"), []string{SettingPolicy}},
		{"allkeys-random", with("maxmemory-policy", "allkeys-random"), []string{SettingPolicy}},
		{"snapshots only", with("appendonly", "no", "save", "3600 1 300 100"), []string{SettingPersistence}},
		{"aof fsync no", with("appendfsync", "no"), []string{SettingPersistence}},
		{"both", with("maxmemory-policy", "allkeys-lfu", "appendonly", "no", "save", "60 1"), []string{SettingPolicy, SettingPersistence}},
		{"nothing answered", map[string]string{}, []string{SettingPolicy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range Evaluate(tc.cfg) {
				got = append(got, p.Setting)
				if p.Safe == "" || p.Why == "" || !strings.Contains(p.String(), p.Setting) {
					t.Errorf("problem %+v does not name the setting, the safe values and why", p)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Evaluate(%v) = %v, want %v", tc.cfg, got, tc.want)
			}
		})
	}
}

// TestCheckRealRedis changes a real redis-server's settings as an operator
// would and checks what Check says.
func TestCheckRealRedis(t *testing.T) {
	srv := redistest.NewConfiguredServer(t)
	rdb := srv.Client()
	ctx := t.Context()
	set := func(kv ...string) {
		t.Helper()
		for i := 0; i+1 < len(kv); i += 2 {
			if err := rdb.ConfigSet(ctx, kv[i], kv[i+1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var log bytes.Buffer
	strict, err := New(rdb, Options{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	lenient, err := New(rdb, Options{Accept: []string{SettingPolicy}, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}

	// The test server has no persistence at all: safe.
	set("maxmemory-policy", "noeviction")
	if err := strict.Check(ctx); err != nil {
		t.Fatalf("noeviction, no persistence: %v", err)
	}
	set("maxmemory-policy", "allkeys-lru")
	err = strict.Check(ctx)
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "maxmemory-policy is allkeys-lru") ||
		!strings.Contains(err.Error(), "noeviction") || !strings.Contains(err.Error(), "SNOWTOKEN_REDIS_ACCEPT_RISK") {
		t.Fatalf("allkeys-lru: %v; want ErrUnsafe naming the setting, the safe values and the override", err)
	}
	for range 2 {
		if err := lenient.Check(ctx); err != nil {
			t.Fatalf("allkeys-lru, accepted: %v", err)
		}
	}
	if n := strings.Count(log.String(), "unsafe setting is accepted"); n != 1 {
		t.Errorf("the accepted setting was logged %d times, want once:\n%s", n, log.String())
	}
	set("save", "3600 1")
	if err := lenient.Check(ctx); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "RDB snapshots only") {
		t.Fatalf("snapshots only, policy accepted: %v; want ErrUnsafe for persistence", err)
	}
	set("appendonly", "yes", "appendfsync", "everysec", "maxmemory-policy", "volatile-lru")
	if err := strict.Check(ctx); err != nil {
		t.Fatalf("aof everysec, volatile-lru: %v", err)
	}

	// An error reaching Redis is not a verdict on its settings.
	srv.Stop()
	if err := strict.Check(ctx); err == nil || errors.Is(err, ErrUnsafe) {
		t.Errorf("Redis down: %v; want a connection error", err)
	}
}

// TestCheckConfigNotAllowed: a Redis that refuses CONFIG (here miniredis,
// which has no such command) is noted once and passes.
func TestCheckConfigNotAllowed(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	var log bytes.Buffer
	c, err := New(rdb, Options{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Check(t.Context()); err != nil {
			t.Fatalf("Check: %v", err)
		}
	}
	if n := strings.Count(log.String(), "CONFIG GET is not allowed"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, log.String())
	}
}

func TestNewRejectsUnknownAccept(t *testing.T) {
	if _, err := New(nil, Options{Accept: []string{"maxmemory"}}); err == nil {
		t.Error("New accepted an unknown setting name")
	}
}

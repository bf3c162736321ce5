package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/internal/timingtest"
	"github.com/snowtoken/snowtoken/lease"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// gathered is what reg exports: the value of each series, by name and
// labels as the text format writes them (name{a="x"}); a histogram by its
// _count.
func gathered(tb testing.TB, reg *prometheus.Registry) map[string]float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			default:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestRedisMetrics runs the Redis metrics against a real redis-server with a
// maxmemory: round trips timed, the pool's connections, INFO's memory and
// evictions, and snowtoken_redis_up 0 while the server is frozen (SIGSTOP),
// within the INFO timeout, and 1 again once it goes on.
func TestRedisMetrics(t *testing.T) {
	s := redistest.NewConfiguredServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction")
	// As config makes the issuer's clients: a context deadline cuts a
	// command short.
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: 5 * time.Second, ContextTimeoutEnabled: true})
	defer rdb.Close()
	m := newRedisMetrics(rdb)
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	// The round trips alone, read without a scrape (which sends INFO).
	trips := prometheus.NewRegistry()
	trips.MustRegister(m.roundTrip)
	roundTrips := func() uint64 {
		t.Helper()
		mfs, err := trips.Gather()
		if err != nil || len(mfs) != 1 {
			t.Fatalf("gathering the round trips: %v", err)
		}
		return mfs[0].GetMetric()[0].GetHistogram().GetSampleCount()
	}
	ctx := t.Context()
	pipeline := func() {
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range 10 {
				p.Get(ctx, "k")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Connections set up now (their HELLO and CLIENT SETINFO are timed
	// too), for commands and for pipelines.
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pipeline()
	before := roundTrips()
	if err := rdb.Get(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	if n := roundTrips() - before; n != 1 {
		t.Errorf("a command: %d round trips timed, want 1", n)
	}
	before = roundTrips()
	pipeline()
	if n := roundTrips() - before; n != 1 {
		t.Errorf("a pipeline of ten commands: %d round trips timed, want 1", n)
	}
	got := gathered(t, reg)
	for name, want := range map[string]float64{
		"snowtoken_redis_up":                               1,
		"snowtoken_redis_memory_max_bytes":                 64 << 20,
		"snowtoken_redis_evicted_keys_total":               0,
		`snowtoken_redis_pool_connections{state="in_use"}`: 0,
		"snowtoken_redis_pool_waits_total":                 0,
		"snowtoken_redis_pool_timeouts_total":              0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported: %t), want %v", name, v, ok, want)
		}
	}
	if idle := got[`snowtoken_redis_pool_connections{state="idle"}`]; idle < 1 {
		t.Errorf("idle connections: %v, want the ones used above", idle)
	}
	if used := got["snowtoken_redis_memory_used_bytes"]; used <= 0 || used >= 64<<20 {
		t.Errorf("snowtoken_redis_memory_used_bytes = %v, want some, below maxmemory", used)
	}

	s.Signal(syscall.SIGSTOP)
	defer s.Signal(syscall.SIGCONT)
	start := time.Now()
	got = gathered(t, reg)
	timingtest.Within(t, "a scrape of a frozen Redis", time.Since(start), 2*infoTimeout)
	if v, ok := got["snowtoken_redis_up"]; !ok || v != 0 {
		t.Errorf("frozen: snowtoken_redis_up = %v (exported: %t), want 0", v, ok)
	}
	if _, ok := got["snowtoken_redis_memory_used_bytes"]; ok {
		t.Error("frozen: snowtoken_redis_memory_used_bytes exported, want none: INFO did not answer")
	}
	s.Signal(syscall.SIGCONT)
	// The connection whose INFO timed out is dropped; the next scrape dials.
	if v := gathered(t, reg)["snowtoken_redis_up"]; v != 1 {
		t.Errorf("going on again: snowtoken_redis_up = %v, want 1", v)
	}
}

// TestRedisMemoryOfAClusterOrARefusal: INFO refused (an ACL) is an answer
// without memory series; in a Cluster the node nearest its limit is
// reported and evictions are summed (parseInfo and fuller, as redisMemory
// folds the masters).
func TestRedisMemoryOfAClusterOrARefusal(t *testing.T) {
	m := miniredis.RunT(t) // its INFO has no memory section
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	mem, up := redisMemory(t.Context(), rdb)
	if !up || mem.known {
		t.Errorf("INFO without memory: up %t, known %t; want up, not known", up, mem.known)
	}

	a := parseInfo("# Memory\r\nused_memory:100\r\nmaxmemory:1000\r\n# Stats\r\nevicted_keys:3\r\n")
	b := parseInfo("used_memory:600\r\nmaxmemory:1000\r\nevicted_keys:4\r\n")
	c := parseInfo("used_memory:5000\r\nmaxmemory:0\r\nevicted_keys:0\r\n")
	if !a.known || a.used != 100 || a.max != 1000 || a.evicted != 3 {
		t.Errorf("parseInfo = %+v", a)
	}
	if !fuller(b, a) || fuller(a, b) || !fuller(a, c) || fuller(c, a) {
		t.Error("fuller: want the higher used/max first, and any limit before none")
	}
	if p := parseInfo("used_memory:1\r\n"); p.known {
		t.Errorf("parseInfo of a partial INFO: known, want not known")
	}
}

// TestLeaseMetrics: the worker ID, its TTL and the time left, which a
// renewal moves and a loss makes 0.
func TestLeaseMetrics(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	clock := clocktest.New(time.Now())
	l, err := lease.Acquire(t.Context(), rdb, lease.Options{Candidate: 7, TTL: 3 * time.Second, PrivateStore: true, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lm := newLeaseMetrics(l)
	lm.now = clock.Now
	if err := reg.Register(lm); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	want := map[string]float64{"snowtoken_worker_id": 7, "snowtoken_worker_lease_ttl_seconds": 3, "snowtoken_worker_lease_remaining_seconds": 2}
	if got := gathered(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lease metrics %v, want %v", got, want)
	}
	clock.Add(5 * time.Second)
	if got := gathered(t, reg)["snowtoken_worker_lease_remaining_seconds"]; got != 0 {
		t.Errorf("a TTL past the last renewal: time left %v, want 0", got)
	}
}

// TestIDFailureReasons: every reason is exported at 0 from the start, and
// each failure of the generator is told apart by its error.
func TestIDFailureReasons(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := countIDFailures(nil, reg); err != nil {
		t.Fatal(err)
	}
	want := "# HELP snowtoken_id_failures_total IDs the generator could not issue, by reason: lease (no worker ID held), clock_rollback (the clock behind by more than the wait tier), clock_unhealthy (behind by more than the fail-fast tier), other.\n" +
		"# TYPE snowtoken_id_failures_total counter\n"
	for _, r := range []string{"clock_rollback", "clock_unhealthy", "lease", "other"} {
		want += `snowtoken_id_failures_total{reason="` + r + "\"} 0\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: worker 3: the lease key is gone", lease.ErrLost), idFailLease},
		{fmt.Errorf("%w: worker 3", lease.ErrReleased), idFailLease},
		{fmt.Errorf("%w: worker 3: 2s to go", lease.ErrSettling), idFailLease},
		{&snowflakealg.RollbackError{Behind: time.Second}, idFailRollback},
		{fmt.Errorf("%w: 9000 ms behind, more than 5000 ms", snowflakealg.ErrClockUnhealthy), idFailUnhealthy},
		{snowflakealg.ErrTimeOverflow, idFailOther},
	} {
		if got := idFailureReason(tc.err); got != tc.want {
			t.Errorf("idFailureReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestKeyMetrics: the keys by state from a keys directory, with when the
// active key began to sign and when the next one may; a plain list has
// states only.
func TestKeyMetrics(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	dir := t.TempDir()
	m := keyset.Manifest{}
	for i, e := range []keyset.Entry{
		{State: keyset.Retired, Published: now.Add(-48 * time.Hour), Activated: now.Add(-48 * time.Hour), Retired: now.Add(-time.Hour)},
		{State: keyset.Active, Published: now.Add(-2 * time.Hour), Activated: now.Add(-time.Hour)},
		{State: keyset.Next, Published: now.Add(-time.Minute)},
	} {
		k := keysettest.MustKey(t)
		pem, err := k.MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		e.File, e.Kid = fmt.Sprintf("k%d.pem", i), k.ID
		if err := os.WriteFile(filepath.Join(dir, e.File), pem, 0o600); err != nil {
			t.Fatal(err)
		}
		m.Keys = append(m.Keys, e)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyset.ManifestFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := keyset.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(newKeyMetrics(func() *keyset.Set { return ks })); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`snowtoken_signing_keys{state="next"}`:                    1,
		`snowtoken_signing_keys{state="active"}`:                  1,
		`snowtoken_signing_keys{state="retired"}`:                 1,
		"snowtoken_signing_key_activated_timestamp_seconds":       float64(now.Add(-time.Hour).Unix()),
		"snowtoken_signing_key_next_signs_from_timestamp_seconds": float64(now.Add(-time.Minute + keyset.PublishDelay).Unix()),
	}
	if got := gathered(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("from a keys directory: %v, want %v", got, want)
	}

	a := keysettest.MustKey(t)
	list, err := keyset.New(a)
	if err != nil {
		t.Fatal(err)
	}
	ks = list
	want = map[string]float64{`snowtoken_signing_keys{state="next"}`: 0, `snowtoken_signing_keys{state="active"}`: 1, `snowtoken_signing_keys{state="retired"}`: 0}
	if got := gathered(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("from a plain list: %v, want %v", got, want)
	}
}

// BenchmarkRoundTripHook is what timing a Redis command costs: the hook
// around a command that does nothing, against the command alone. A round
// trip to Redis takes tens of microseconds at least.
func BenchmarkRoundTripHook(b *testing.B) {
	bare := redis.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	cmd := redis.NewStatusCmd(context.Background(), "ping")
	for name, process := range map[string]redis.ProcessHook{
		"bare":  bare,
		"timed": newRedisMetrics(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})).hook().ProcessHook(bare),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = process(context.Background(), cmd)
			}
		})
	}
}

package config

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// secret is every password of these tests: no error may show it.
const secret = "hunter2"

// writeFile writes content to a file of tb's own and returns its path.
func writeFile(tb testing.TB, name, content string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// redisSummary is what a test checks of a Redis deployment.
type redisSummary struct {
	Topology                           string // standalone, cluster or sentinel
	Addrs                              string
	Master                             string
	DB                                 int
	Username, Password                 string
	SentinelUsername, SentinelPassword string
	TLS, CA                            bool
}

func summarize(r Redis) redisSummary {
	switch {
	case r.Standalone != nil:
		o := r.Standalone
		return redisSummary{Topology: "standalone", Addrs: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password,
			TLS: o.TLSConfig != nil, CA: o.TLSConfig != nil && o.TLSConfig.RootCAs != nil}
	case r.Cluster != nil:
		o := r.Cluster
		return redisSummary{Topology: "cluster", Addrs: strings.Join(o.Addrs, ","), Username: o.Username, Password: o.Password,
			TLS: o.TLSConfig != nil, CA: o.TLSConfig != nil && o.TLSConfig.RootCAs != nil}
	case r.Failover != nil:
		o := r.Failover
		return redisSummary{Topology: "sentinel", Addrs: strings.Join(o.SentinelAddrs, ","), Master: o.MasterName, DB: o.DB,
			Username: o.Username, Password: o.Password, SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			TLS: o.TLSConfig != nil, CA: o.TLSConfig != nil && o.TLSConfig.RootCAs != nil}
	}
	return redisSummary{}
}

func TestLoadRedis(t *testing.T) {
	pwFile := writeFile(t, "pw", secret+"\n")
	crlfFile := writeFile(t, "pw-crlf", secret+"\r\n")
	twoNewlines := writeFile(t, "pw-2", secret+"\n\n")
	ca := redistest.NewTLSFiles(t).CA
	for _, tc := range []struct {
		name string
		env  map[string]string
		want redisSummary
	}{
		{"none: dev mode embeds a Redis", nil, redisSummary{}},
		{"standalone, ACL user", map[string]string{"SNOWTOKEN_REDIS_URL": "redis://app:" + secret + "@redis.internal:6380/2"},
			redisSummary{Topology: "standalone", Addrs: "redis.internal:6380", DB: 2, Username: "app", Password: secret}},
		{"standalone, TLS with a CA", map[string]string{"SNOWTOKEN_REDIS_URL": "rediss://redis.internal", "SNOWTOKEN_REDIS_TLS_CA_FILE": ca},
			redisSummary{Topology: "standalone", Addrs: "redis.internal:6379", TLS: true, CA: true}},
		{"standalone, TLS with the system's CAs", map[string]string{"SNOWTOKEN_REDIS_URL": "rediss://redis.internal"},
			redisSummary{Topology: "standalone", Addrs: "redis.internal:6379", TLS: true}},
		{"standalone, password file", map[string]string{"SNOWTOKEN_REDIS_URL": "redis://app@redis.internal/0", "SNOWTOKEN_REDIS_PASSWORD_FILE": pwFile},
			redisSummary{Topology: "standalone", Addrs: "redis.internal:6379", Username: "app", Password: secret}},
		{"password file with CRLF", map[string]string{"SNOWTOKEN_REDIS_URL": "redis://redis.internal/0", "SNOWTOKEN_REDIS_PASSWORD_FILE": crlfFile},
			redisSummary{Topology: "standalone", Addrs: "redis.internal:6379", Password: secret}},
		{"password file: one newline dropped", map[string]string{"SNOWTOKEN_REDIS_URL": "redis://redis.internal/0", "SNOWTOKEN_REDIS_PASSWORD_FILE": twoNewlines},
			redisSummary{Topology: "standalone", Addrs: "redis.internal:6379", Password: secret + "\n"}},
		{"cluster URL", map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": "rediss://app:" + secret + "@n1:7000?addr=n2:7001&addr=n3:7002", "SNOWTOKEN_REDIS_TLS_CA_FILE": ca},
			redisSummary{Topology: "cluster", Addrs: "n1:7000,n2:7001,n3:7002", Username: "app", Password: secret, TLS: true, CA: true}},
		{"cluster addresses, password file", map[string]string{"SNOWTOKEN_REDIS_CLUSTER_ADDRS": "n1:7000, n2:7001,", "SNOWTOKEN_REDIS_PASSWORD_FILE": pwFile},
			redisSummary{Topology: "cluster", Addrs: "n1:7000,n2:7001", Password: secret}},
		{"sentinel URL", map[string]string{
			"SNOWTOKEN_REDIS_SENTINEL_URL":  "rediss://watch:" + secret + "@s1:26379/3?master_name=mymaster&addr=s2:26380&username=app",
			"SNOWTOKEN_REDIS_PASSWORD_FILE": pwFile, "SNOWTOKEN_REDIS_TLS_CA_FILE": ca},
			redisSummary{Topology: "sentinel", Addrs: "s1:26379,s2:26380", Master: "mymaster", DB: 3, Username: "app", Password: secret,
				SentinelUsername: "watch", SentinelPassword: secret, TLS: true, CA: true}},
		{"sentinel addresses, password files", map[string]string{
			"SNOWTOKEN_REDIS_SENTINEL_MASTER": "mymaster", "SNOWTOKEN_REDIS_SENTINEL_ADDRS": "s1:26379,s2:26380",
			"SNOWTOKEN_REDIS_PASSWORD_FILE": crlfFile, "SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE": pwFile},
			redisSummary{Topology: "sentinel", Addrs: "s1:26379,s2:26380", Master: "mymaster", Password: secret, SentinelPassword: secret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, withProduction(tc.env))
			if got := summarize(c.Redis); got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if got, want := c.RedisConfigured(), tc.want != (redisSummary{}); got != want {
				t.Errorf("RedisConfigured() = %v, want %v", got, want)
			}
		})
	}
}

// TestLoadRedisTimeout checks that every topology's options carry the
// timeout, and the caller's deadline cutting it short.
func TestLoadRedisTimeout(t *testing.T) {
	for _, deployment := range []map[string]string{
		{"SNOWTOKEN_REDIS_URL": "redis://redis.internal/0"},
		{"SNOWTOKEN_REDIS_URL": "redis://redis.internal/0?max_retries=5"},
		{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://n1:7000?addr=n2:7001"},
		{"SNOWTOKEN_REDIS_CLUSTER_ADDRS": "n1:7000,n2:7001"},
		{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://s1:26379?master_name=m"},
		{"SNOWTOKEN_REDIS_SENTINEL_MASTER": "m", "SNOWTOKEN_REDIS_SENTINEL_ADDRS": "s1:26379"},
	} {
		for _, tc := range []struct {
			value string
			want  time.Duration
		}{
			{"", 2 * time.Second},
			{"750ms", 750 * time.Millisecond},
			{"1m", time.Minute},
		} {
			env := maps.Clone(deployment)
			env["SNOWTOKEN_REDIS_TIMEOUT"] = tc.value
			c := mustLoad(t, withProduction(env))
			if c.RedisTimeout != tc.want {
				t.Errorf("%v: RedisTimeout = %v, want %v", env, c.RedisTimeout, tc.want)
			}
			// The options struct by reflection, not by Redis.fields, which is under test.
			var opts reflect.Value
			for i := range reflect.ValueOf(c.Redis).NumField() {
				if f := reflect.ValueOf(c.Redis).Field(i); !f.IsNil() {
					opts = f.Elem()
				}
			}
			if !opts.IsValid() {
				t.Fatalf("%v: no Redis options", env)
			}
			for _, name := range []string{"DialTimeout", "ReadTimeout", "WriteTimeout"} {
				if got := time.Duration(opts.FieldByName(name).Int()); got != tc.want {
					t.Errorf("%v: %s %s = %v, want %v", env, opts.Type(), name, got, tc.want)
				}
			}
			if !opts.FieldByName("ContextTimeoutEnabled").Bool() {
				t.Errorf("%v: %s ContextTimeoutEnabled = false, want true", env, opts.Type())
			}
		}
	}
}

// TestNewRedisClientDeadline checks that every command and pipeline of the
// client has a deadline no later than the timeout, and keeps an earlier one.
func TestNewRedisClientDeadline(t *testing.T) {
	const timeout = time.Hour // far from the test's own durations
	if c := mustLoad(t, nil); c.NewRedisClient() != nil {
		t.Error("NewRedisClient in dev mode: a client, want nil")
	}
	for _, env := range []map[string]string{
		{"SNOWTOKEN_REDIS_URL": "redis://127.0.0.1:1/0"},
		{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://127.0.0.1:1?addr=127.0.0.1:2"},
		{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://127.0.0.1:1?master_name=m"},
	} {
		env["SNOWTOKEN_REDIS_TIMEOUT"] = timeout.String()
		rdb := mustLoad(t, withProduction(env)).NewRedisClient()
		rec := &deadlineRecorder{}
		rdb.AddHook(rec) // runs inside the client's own hooks, and stops there
		background := context.Background()
		earlier, cancel := context.WithTimeout(background, timeout/2)
		defer cancel()
		later, cancel := context.WithTimeout(background, 2*timeout)
		defer cancel()
		for _, tc := range []struct {
			name string
			ctx  context.Context
			want func(start time.Time, d time.Time) bool
		}{
			{"no deadline", background, func(start, d time.Time) bool { return d.After(start) && !d.After(time.Now().Add(timeout)) }},
			{"a later deadline", later, func(start, d time.Time) bool { return d.After(start) && !d.After(time.Now().Add(timeout)) }},
			{"an earlier deadline", earlier, func(_, d time.Time) bool { e, _ := earlier.Deadline(); return d.Equal(e) }},
		} {
			for _, call := range []struct {
				what string
				do   func(context.Context) error
			}{
				{"command", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
				{"pipeline", func(ctx context.Context) error {
					_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
					return err
				}},
			} {
				rec.ok = false
				start := time.Now()
				if err := call.do(tc.ctx); err != nil {
					t.Fatalf("%v: %s: %v", env, call.what, err)
				}
				if !rec.ok || !tc.want(start, rec.deadline) {
					t.Errorf("%v: %s with %s: deadline %v (set %v), want at most %v from now", env, call.what, tc.name, rec.deadline, rec.ok, timeout)
				}
			}
		}
		rdb.Close()
	}
}

// deadlineRecorder is a hook that records the context's deadline and ends
// the command there, before the network.
type deadlineRecorder struct {
	deadline time.Time
	ok       bool
}

func (r *deadlineRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *deadlineRecorder) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, _ redis.Cmder) error {
		r.deadline, r.ok = ctx.Deadline()
		return nil
	}
}

func (r *deadlineRecorder) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, _ []redis.Cmder) error {
		r.deadline, r.ok = ctx.Deadline()
		return nil
	}
}

func TestLoadRedisRejects(t *testing.T) {
	pwFile := writeFile(t, "pw", secret)
	empty := writeFile(t, "empty", "\n")
	notPEM := writeFile(t, "ca", secret)
	ca := redistest.NewTLSFiles(t).CA
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		env  map[string]string
		name string // the variable the error must name
	}{
		{map[string]string{"SNOWTOKEN_REDIS_URL": "http://user:" + secret + "@redis.internal"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "unix://:" + secret + "@/run/redis.sock"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "127.0.0.1:6379"}, "SNOWTOKEN_REDIS_URL"},
		// url.Parse errors quote the whole URL, password included.
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://user:" + secret + "@redis.internal:port/0"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://user:" + secret + "%zz@redis.internal/0"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://user:" + secret + "/x@redis.internal/0"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://user:" + secret + "@redis.internal/0/1"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://user:" + secret + "@redis.internal/0?no_such_option=1"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://user:" + secret + "@n1:x"}, "SNOWTOKEN_REDIS_CLUSTER_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://user:" + secret + "@n1:7000?addr=n2"}, "SNOWTOKEN_REDIS_CLUSTER_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": "n1:7000,n2:7001"}, "SNOWTOKEN_REDIS_CLUSTER_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://:" + secret + "@s1:26379"}, "SNOWTOKEN_REDIS_SENTINEL_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://s1:26379?master_name=m&password=" + secret + "%zz"}, "SNOWTOKEN_REDIS_SENTINEL_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_SENTINEL_MASTER": "m"}, "SNOWTOKEN_REDIS_SENTINEL_ADDRS"},
		{map[string]string{"SNOWTOKEN_REDIS_SENTINEL_ADDRS": "s1:26379"}, "SNOWTOKEN_REDIS_SENTINEL_ADDRS"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://r/0", "SNOWTOKEN_REDIS_CLUSTER_ADDRS": "n1:7000"}, "SNOWTOKEN_REDIS_CLUSTER_ADDRS"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://n1:7000", "SNOWTOKEN_REDIS_SENTINEL_URL": "redis://s1?master_name=m"}, "SNOWTOKEN_REDIS_SENTINEL_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://r/0", "SNOWTOKEN_REDIS_PASSWORD_FILE": missing}, "SNOWTOKEN_REDIS_PASSWORD_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://r/0", "SNOWTOKEN_REDIS_PASSWORD_FILE": empty}, "SNOWTOKEN_REDIS_PASSWORD_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://:" + secret + "@r/0", "SNOWTOKEN_REDIS_PASSWORD_FILE": pwFile}, "SNOWTOKEN_REDIS_PASSWORD_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_PASSWORD_FILE": pwFile}, "SNOWTOKEN_REDIS_PASSWORD_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_ADDRS": "n1:7000", "SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE": pwFile}, "SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://:" + secret + "@s1?master_name=m", "SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE": pwFile}, "SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://r/0", "SNOWTOKEN_REDIS_TLS_CA_FILE": ca}, "SNOWTOKEN_REDIS_TLS_CA_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_ADDRS": "n1:7000", "SNOWTOKEN_REDIS_TLS_CA_FILE": ca}, "SNOWTOKEN_REDIS_TLS_CA_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_TLS_CA_FILE": ca}, "SNOWTOKEN_REDIS_TLS_CA_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "rediss://r/0", "SNOWTOKEN_REDIS_TLS_CA_FILE": notPEM}, "SNOWTOKEN_REDIS_TLS_CA_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "rediss://r/0", "SNOWTOKEN_REDIS_TLS_CA_FILE": missing}, "SNOWTOKEN_REDIS_TLS_CA_FILE"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "rediss://:" + secret + "@r/0?skip_verify=true"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_SENTINEL_URL": "rediss://s1?master_name=m&skip_verify=true"}, "SNOWTOKEN_REDIS_SENTINEL_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "redis://:" + secret + "@r/0?read_timeout=5s"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://n1:7000?dial_timeout=1"}, "SNOWTOKEN_REDIS_CLUSTER_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_TIMEOUT": "0s"}, "SNOWTOKEN_REDIS_TIMEOUT"},
		{map[string]string{"SNOWTOKEN_REDIS_TIMEOUT": "-1s"}, "SNOWTOKEN_REDIS_TIMEOUT"},
		{map[string]string{"SNOWTOKEN_REDIS_TIMEOUT": "2"}, "SNOWTOKEN_REDIS_TIMEOUT"},
	} {
		if err := mustReject(t, tc.env, tc.name); err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("Load(%v): err = %q shows the password", tc.env, err)
		}
	}
}

// TestLoadRedisProductionRequires checks that a malformed Redis setting is
// the only error about Redis: not also "required".
func TestLoadRedisProductionRequires(t *testing.T) {
	_, err := Load(envOf(map[string]string{"SNOWTOKEN_ENV": "production", "SNOWTOKEN_REDIS_CLUSTER_URL": "redis://n1:x"}))
	if err == nil || strings.Contains(err.Error(), "SNOWTOKEN_REDIS_URL") {
		t.Errorf("err = %v, want one naming SNOWTOKEN_REDIS_CLUSTER_URL only", err)
	}
	for _, env := range []map[string]string{
		{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://n1:7000"},
		{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://s1:26379?master_name=m"},
	} {
		env["SNOWTOKEN_ENV"] = "production"
		if _, err := Load(envOf(env)); err == nil || strings.Contains(err.Error(), "SNOWTOKEN_REDIS") {
			t.Errorf("Load(%v): err = %v, want one that does not ask for Redis", env, err)
		}
	}
}

// withProduction adds the other settings production requires to a Redis
// configuration (any Redis deployment implies production).
func withProduction(env map[string]string) map[string]string {
	if len(env) == 0 {
		return env
	}
	m := map[string]string{
		"SNOWTOKEN_SIGNING_KEYS": "/k/signing.pem",
		"SNOWTOKEN_CLIENTS_FILE": "/etc/snowtoken/clients.json",
		"SNOWTOKEN_ISSUER":       "https://auth.example.com",
	}
	for k, v := range env {
		m[k] = v
	}
	return m
}

package config

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// envOf returns a getenv that reads m.
func envOf(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// mustLoad loads m or fails the test.
func mustLoad(tb testing.TB, m map[string]string) Config {
	tb.Helper()
	c, err := Load(envOf(m))
	if err != nil {
		tb.Fatalf("Load(%v): %v", m, err)
	}
	return c
}

// documented returns the Default column of Vars for name.
func documented(tb testing.TB, name string) string {
	tb.Helper()
	for _, v := range Vars {
		if v.Name == name {
			return v.Default
		}
	}
	tb.Fatalf("%s is not in Vars", name)
	return ""
}

func TestLoadDefaults(t *testing.T) {
	c := mustLoad(t, nil)
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"Addr", c.Addr, ":8080"},
		{"MetricsAddr", c.MetricsAddr, "127.0.0.1:9464"},
		{"MaxConns", c.MaxConns, 0},
		{"FeedMaxSubscribers", c.FeedMaxSubscribers, 0},
		{"FeedMaxPerClient", c.FeedMaxPerClient, 0},
		{"Production", c.Production, false},
		{"RedisURL", c.RedisURL, ""},
		{"Issuer", c.Issuer, "http://localhost:8080"},
		{"IssuerDefaulted", c.IssuerDefaulted, true},
		{"Audience", c.Audience, ""},
		{"TokenTTL", c.TokenTTL, time.Hour},
		{"MaxTokenTTL", c.MaxTokenTTL, 24 * time.Hour},
		{"ClientsFile", c.ClientsFile, ""},
		{"SigningKeys", len(c.SigningKeys), 0},
		{"WorkerIDSet", c.WorkerIDSet, false},
		{"Epoch", c.Epoch, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"Bits", c.Bits.String(), "41/10/12"},
		{"LogLevel", c.LogLevel, slog.LevelInfo},
		{"LocalURL", c.LocalURL(), "http://127.0.0.1:8080"},
		{"RedisConfigured", c.RedisConfigured(), false},
		{"RedisTimeout", c.RedisTimeout, 2 * time.Second},
		{"AuthFailures", c.AuthFailures, 10},
		{"AuthWindow", c.AuthWindow, time.Minute},
		{"AuthIPv4Prefix", c.AuthIPv4Prefix, 32},
		{"AuthIPv6Prefix", c.AuthIPv6Prefix, 64},
		{"TrustedProxies", len(c.TrustedProxies), 0},
		{"DPoPForwarders", len(c.DPoPForwarders), 0},
		{"DPoPForwardersDefaulted", c.DPoPForwardersDefaulted, false},
		{"RevlogThreshold", c.RevlogThreshold, 100 * time.Millisecond},
		{"RevlogPeriod", c.RevlogPeriod, 25 * time.Millisecond},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	// The defaults are the ones -h documents: setting a variable to its
	// documented default changes nothing.
	for _, name := range []string{
		"SNOWTOKEN_ADDR", "SNOWTOKEN_METRICS_ADDR", "SNOWTOKEN_ENV", "SNOWTOKEN_ISSUER", "SNOWTOKEN_TOKEN_TTL",
		"SNOWTOKEN_MAX_TOKEN_TTL", "SNOWTOKEN_EPOCH", "SNOWTOKEN_BITS", "SNOWTOKEN_LOG_LEVEL", "SNOWTOKEN_REDIS_TIMEOUT",
		"SNOWTOKEN_AUTH_FAILURES", "SNOWTOKEN_CACHE_SIZE", "SNOWTOKEN_PPROF",
		"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX", "SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX",
	} {
		doc := documented(t, name)
		got, err := Load(envOf(map[string]string{name: doc}))
		if err != nil {
			t.Errorf("the documented default %s=%s does not load: %v", name, doc, err)
			continue
		}
		if !equalConfig(got, c) {
			t.Errorf("%s=%s (documented default) loads %+v, but the default is %+v", name, doc, got, c)
		}
	}
}

// equalConfig compares two configs, Bits by layout and Epoch as an instant.
// IssuerDefaulted is left out: it says whether the issuer was set, not what it is.
func equalConfig(a, b Config) bool {
	if a.Bits.String() != b.Bits.String() || !a.Epoch.Equal(b.Epoch) {
		return false
	}
	a.Bits, b.Bits = nil, nil
	a.Epoch, b.Epoch = time.Time{}, time.Time{}
	a.IssuerDefaulted, b.IssuerDefaulted = false, false
	return reflect.DeepEqual(a, b)
}

func TestLoadValues(t *testing.T) {
	c := mustLoad(t, map[string]string{
		"SNOWTOKEN_ADDR":             "0.0.0.0:9000",
		"SNOWTOKEN_METRICS_ADDR":     ":9100",
		"SNOWTOKEN_PPROF":            "true",
		"SNOWTOKEN_MAX_CONNS":        "500",
		"SNOWTOKEN_ENV":              "Production",
		"SNOWTOKEN_REDIS_URL":        "rediss://:pw@redis.internal:6380/2",
		"SNOWTOKEN_ISSUER":           "https://auth.example.com",
		"SNOWTOKEN_AUDIENCE":         "https://api.example.com",
		"SNOWTOKEN_TOKEN_TTL":        "15m",
		"SNOWTOKEN_REVLOG_THRESHOLD": "250ms",
		"SNOWTOKEN_REVLOG_HEARTBEAT": "50ms",
		"SNOWTOKEN_MAX_TOKEN_TTL":    "2h",
		"SNOWTOKEN_CLIENTS_FILE":     "/etc/snowtoken/clients.json",
		"SNOWTOKEN_SIGNING_KEYS":     " /k/new.pem, /k/old.pem ,,",
		"SNOWTOKEN_WORKER_ID":        "0",
		"SNOWTOKEN_WORKER_IP":        "10.0.0.7",
		"SNOWTOKEN_WORKER_INTERFACE": "eth0",
		"SNOWTOKEN_EPOCH":            "2025-06-01T00:00:00+02:00",
		"SNOWTOKEN_BITS":             "39/8/16",
		"SNOWTOKEN_LOG_LEVEL":        "DEBUG",
		"SNOWTOKEN_REDIS_TIMEOUT":    "750ms",
		"SNOWTOKEN_AUTH_FAILURES":    "3/90s",
		"SNOWTOKEN_TRUSTED_PROXIES":  "10.0.0.5, 172.16.0.0/12,fd00::/8",
		"SNOWTOKEN_DPOP_FORWARDERS":  "10.0.0.5,10.0.1.0/24",
		"SNOWTOKEN_DPOP_NONCE":       "true",

		"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX": "24",
		"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX": "48",
		"SNOWTOKEN_FEED_MAX_SUBSCRIBERS":      "200",
		"SNOWTOKEN_FEED_MAX_PER_CLIENT":       "16",
	})
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"Addr", c.Addr, "0.0.0.0:9000"},
		{"MetricsAddr", c.MetricsAddr, ":9100"},
		{"Pprof", c.Pprof, true},
		{"MaxConns", c.MaxConns, 500},
		{"FeedMaxSubscribers", c.FeedMaxSubscribers, 200},
		{"FeedMaxPerClient", c.FeedMaxPerClient, 16},
		{"Production", c.Production, true},
		{"RedisURL", c.RedisURL, "rediss://:pw@redis.internal:6380/2"},
		{"Issuer", c.Issuer, "https://auth.example.com"},
		{"IssuerDefaulted", c.IssuerDefaulted, false},
		{"Audience", c.Audience, "https://api.example.com"},
		{"TokenTTL", c.TokenTTL, 15 * time.Minute},
		{"MaxTokenTTL", c.MaxTokenTTL, 2 * time.Hour},
		{"ClientsFile", c.ClientsFile, "/etc/snowtoken/clients.json"},
		{"SigningKeys", strings.Join(c.SigningKeys, "|"), "/k/new.pem|/k/old.pem"},
		{"WorkerID", c.WorkerID, int64(0)},
		{"WorkerIDSet", c.WorkerIDSet, true},
		{"WorkerIP", c.WorkerIP, "10.0.0.7"},
		{"WorkerInterface", c.WorkerInterface, "eth0"},
		{"Epoch", c.Epoch.UTC(), time.Date(2025, 5, 31, 22, 0, 0, 0, time.UTC)},
		{"Bits", c.Bits.String(), "39/8/16"},
		{"LogLevel", c.LogLevel, slog.LevelDebug},
		{"LocalURL", c.LocalURL(), "http://127.0.0.1:9000"},
		{"RedisTimeout", c.RedisTimeout, 750 * time.Millisecond},
		{"AuthFailures", c.AuthFailures, 3},
		{"AuthWindow", c.AuthWindow, 90 * time.Second},
		{"AuthIPv4Prefix", c.AuthIPv4Prefix, 24},
		{"AuthIPv6Prefix", c.AuthIPv6Prefix, 48},
		{"TrustedProxies", strings.Join(c.TrustedProxies, "|"), "10.0.0.5|172.16.0.0/12|fd00::/8"},
		{"DPoPForwarders", strings.Join(c.DPoPForwarders, "|"), "10.0.0.5|10.0.1.0/24"},
		{"DPoPForwardersDefaulted", c.DPoPForwardersDefaulted, false},
		{"RevlogThreshold", c.RevlogThreshold, 250 * time.Millisecond},
		{"RevlogPeriod", c.RevlogPeriod, 50 * time.Millisecond},
		{"DPoPNonce", c.DPoPNonce, true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	for _, off := range []string{"off", "OFF"} {
		if got := mustLoad(t, map[string]string{"SNOWTOKEN_METRICS_ADDR": off}).MetricsAddr; got != "" {
			t.Errorf("MetricsAddr with SNOWTOKEN_METRICS_ADDR=%s = %q, want none", off, got)
		}
	}
	for v, want := range map[string]string{"": "", "off": "", "OFF": "", ":9191": ":9191", "10.0.0.7:9191": "10.0.0.7:9191"} {
		if got := mustLoad(t, map[string]string{"SNOWTOKEN_EXTAUTHZ_ADDR": v}).ExtAuthzAddr; got != want {
			t.Errorf("ExtAuthzAddr with SNOWTOKEN_EXTAUTHZ_ADDR=%q = %q, want %q", v, got, want)
		}
	}
	if got, want := mustLoad(t, map[string]string{"SNOWTOKEN_ADDR": "127.0.0.1:0"}).Issuer, "http://localhost:0"; got != want {
		t.Errorf("Issuer with SNOWTOKEN_ADDR=127.0.0.1:0 = %q, want %q", got, want)
	}
	if got, want := mustLoad(t, map[string]string{"SNOWTOKEN_ENV": "dev"}).Production, false; got != want {
		t.Errorf("SNOWTOKEN_ENV=dev: Production = %v, want %v", got, want)
	}
}

// TestRevlogThresholdOff: off is the named value that turns the follower
// off, whatever the heartbeat; unset is the default and on.
func TestRevlogThresholdOff(t *testing.T) {
	for _, v := range []string{"off", "OFF"} {
		c := mustLoad(t, map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": v, "SNOWTOKEN_REVLOG_HEARTBEAT": "1s"})
		if !c.RevlogOff {
			t.Errorf("SNOWTOKEN_REVLOG_THRESHOLD=%s: RevlogOff = false", v)
		}
	}
	if c := mustLoad(t, nil); c.RevlogOff || c.RevlogThreshold != 100*time.Millisecond {
		t.Errorf("unset: RevlogOff = %v, RevlogThreshold = %v; want on, 100ms", c.RevlogOff, c.RevlogThreshold)
	}
}

func TestLoadRejects(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		name string // the variable the error must name
	}{
		{map[string]string{"SNOWTOKEN_TOKEN_TTL": "abc"}, "SNOWTOKEN_TOKEN_TTL"},
		{map[string]string{"SNOWTOKEN_DPOP_NONCE": "yes"}, "SNOWTOKEN_DPOP_NONCE"},
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "fast"}, "SNOWTOKEN_REVLOG_THRESHOLD"},
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "10ms"}, "SNOWTOKEN_REVLOG_THRESHOLD"},
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "1m"}, "SNOWTOKEN_REVLOG_THRESHOLD"},
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "0s"}, "SNOWTOKEN_REVLOG_THRESHOLD"}, // off is named
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "0"}, "SNOWTOKEN_REVLOG_THRESHOLD"},
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "-100ms"}, "SNOWTOKEN_REVLOG_THRESHOLD"},
		{map[string]string{"SNOWTOKEN_REVLOG_THRESHOLD": "none"}, "SNOWTOKEN_REVLOG_THRESHOLD"},
		{map[string]string{"SNOWTOKEN_REVLOG_HEARTBEAT": "-1ms"}, "SNOWTOKEN_REVLOG_HEARTBEAT"},
		{map[string]string{"SNOWTOKEN_REVLOG_HEARTBEAT": "0s"}, "SNOWTOKEN_REVLOG_HEARTBEAT"},
		{map[string]string{"SNOWTOKEN_REVLOG_HEARTBEAT": "30ms"}, "SNOWTOKEN_REVLOG_HEARTBEAT"},
		{map[string]string{"SNOWTOKEN_TOKEN_TTL": "500ms"}, "SNOWTOKEN_TOKEN_TTL"},
		{map[string]string{"SNOWTOKEN_TOKEN_TTL": "-1h"}, "SNOWTOKEN_TOKEN_TTL"},
		{map[string]string{"SNOWTOKEN_MAX_TOKEN_TTL": "abc"}, "SNOWTOKEN_MAX_TOKEN_TTL"},
		{map[string]string{"SNOWTOKEN_CACHE_SIZE": "-1"}, "SNOWTOKEN_CACHE_SIZE"},
		{map[string]string{"SNOWTOKEN_AUDIENCE": "orders api"}, "SNOWTOKEN_AUDIENCE"},
		{map[string]string{"SNOWTOKEN_AUDIENCE": strings.Repeat("a", 257)}, "SNOWTOKEN_AUDIENCE"},
		{map[string]string{"SNOWTOKEN_CACHE_SIZE": "lots"}, "SNOWTOKEN_CACHE_SIZE"},
		{map[string]string{"SNOWTOKEN_MAX_TOKEN_TTL": "30m"}, "SNOWTOKEN_MAX_TOKEN_TTL"},
		{map[string]string{"SNOWTOKEN_TOKEN_TTL": "2h", "SNOWTOKEN_MAX_TOKEN_TTL": "1h"}, "SNOWTOKEN_MAX_TOKEN_TTL"},
		{map[string]string{"SNOWTOKEN_BITS": "41/10/13"}, "SNOWTOKEN_BITS"},
		{map[string]string{"SNOWTOKEN_BITS": "41-10-12"}, "SNOWTOKEN_BITS"},
		{map[string]string{"SNOWTOKEN_BITS": "63/0/0"}, "SNOWTOKEN_BITS"},
		{map[string]string{"SNOWTOKEN_WORKER_ID": "5000"}, "SNOWTOKEN_WORKER_ID"},
		{map[string]string{"SNOWTOKEN_WORKER_ID": "-1"}, "SNOWTOKEN_WORKER_ID"},
		{map[string]string{"SNOWTOKEN_WORKER_ID": "seven"}, "SNOWTOKEN_WORKER_ID"},
		{map[string]string{"SNOWTOKEN_BITS": "45/6/12", "SNOWTOKEN_WORKER_ID": "100"}, "SNOWTOKEN_WORKER_ID"},
		{map[string]string{"SNOWTOKEN_EPOCH": "yesterday"}, "SNOWTOKEN_EPOCH"},
		{map[string]string{"SNOWTOKEN_EPOCH": "2026-01-01"}, "SNOWTOKEN_EPOCH"},
		{map[string]string{"SNOWTOKEN_LOG_LEVEL": "loud"}, "SNOWTOKEN_LOG_LEVEL"},
		{map[string]string{"SNOWTOKEN_METRICS_ADDR": "9090"}, "SNOWTOKEN_METRICS_ADDR"},
		{map[string]string{"SNOWTOKEN_METRICS_ADDR": "none"}, "SNOWTOKEN_METRICS_ADDR"},
		{map[string]string{"SNOWTOKEN_EXTAUTHZ_ADDR": "9191"}, "SNOWTOKEN_EXTAUTHZ_ADDR"},
		{map[string]string{"SNOWTOKEN_EXTAUTHZ_ADDR": "on"}, "SNOWTOKEN_EXTAUTHZ_ADDR"},
		{map[string]string{"SNOWTOKEN_PPROF": "yes please"}, "SNOWTOKEN_PPROF"},
		{map[string]string{"SNOWTOKEN_PPROF": "true", "SNOWTOKEN_METRICS_ADDR": "off"}, "SNOWTOKEN_PPROF"},
		{map[string]string{"SNOWTOKEN_MAX_CONNS": "0"}, "SNOWTOKEN_MAX_CONNS"},
		{map[string]string{"SNOWTOKEN_MAX_CONNS": "-5"}, "SNOWTOKEN_MAX_CONNS"},
		{map[string]string{"SNOWTOKEN_MAX_CONNS": "many"}, "SNOWTOKEN_MAX_CONNS"},
		{map[string]string{"SNOWTOKEN_FEED_MAX_SUBSCRIBERS": "0"}, "SNOWTOKEN_FEED_MAX_SUBSCRIBERS"},
		{map[string]string{"SNOWTOKEN_FEED_MAX_PER_CLIENT": "a few"}, "SNOWTOKEN_FEED_MAX_PER_CLIENT"},
		{map[string]string{"SNOWTOKEN_ENV": "staging"}, "SNOWTOKEN_ENV"},
		{map[string]string{"SNOWTOKEN_REDIS_ACCEPT_RISK": "maxmemory-policy,eviction"}, "SNOWTOKEN_REDIS_ACCEPT_RISK"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "http://x"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_REDIS_URL": "127.0.0.1:6379"}, "SNOWTOKEN_REDIS_URL"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES": "10"}, "SNOWTOKEN_AUTH_FAILURES"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES": "0/1m"}, "SNOWTOKEN_AUTH_FAILURES"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES": "-1/1m"}, "SNOWTOKEN_AUTH_FAILURES"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES": "10/500ms"}, "SNOWTOKEN_AUTH_FAILURES"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES": "ten/1m"}, "SNOWTOKEN_AUTH_FAILURES"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES": "10/minute"}, "SNOWTOKEN_AUTH_FAILURES"},
		{map[string]string{"SNOWTOKEN_TRUSTED_PROXIES": "nginx"}, "SNOWTOKEN_TRUSTED_PROXIES"},
		{map[string]string{"SNOWTOKEN_TRUSTED_PROXIES": "10.0.0.0/33"}, "SNOWTOKEN_TRUSTED_PROXIES"},
		{map[string]string{"SNOWTOKEN_DPOP_FORWARDERS": "consumer-dpop"}, "SNOWTOKEN_DPOP_FORWARDERS"},
		{map[string]string{"SNOWTOKEN_DPOP_FORWARDERS": "10.0.0.5,none"}, "SNOWTOKEN_DPOP_FORWARDERS"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX": "15"}, "SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX": "33"}, "SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX": "0"}, "SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX": "/32"}, "SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX": "31"}, "SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX": "129"}, "SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX": "-64"}, "SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX"},
		{map[string]string{"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX": "64 "}, "SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX"},
		{map[string]string{"SNOWTOKEN_ISSUER": "auth.example.com"}, "SNOWTOKEN_ISSUER"},
		{map[string]string{"SNOWTOKEN_ISSUER": "ftp://auth.example.com"}, "SNOWTOKEN_ISSUER"},
		{map[string]string{"SNOWTOKEN_ISSUER": "https://"}, "SNOWTOKEN_ISSUER"},
		{map[string]string{"SNOWTOKEN_ISSUER": "https://auth.example.com/?tenant=1"}, "SNOWTOKEN_ISSUER"},
		{map[string]string{"SNOWTOKEN_ISSUER": "https://auth.example.com/#"}, "SNOWTOKEN_ISSUER"},
		{map[string]string{"SNOWTOKEN_ISSUER": "https://admin@auth.example.com"}, "SNOWTOKEN_ISSUER"},
	} {
		mustReject(t, tc.env, tc.name)
	}
}

// mustReject checks that Load(env) fails with ErrConfig naming name, and
// returns the error.
func mustReject(tb testing.TB, env map[string]string, name string) error {
	tb.Helper()
	_, err := Load(envOf(env))
	if !errors.Is(err, ErrConfig) {
		tb.Errorf("Load(%v): err = %v, want ErrConfig", env, err)
		return err
	}
	if !strings.Contains(err.Error(), name) {
		tb.Errorf("Load(%v): err = %q, want it to name %s", env, err, name)
	}
	return err
}

func TestLoadHidesRedisURL(t *testing.T) {
	const url = "http://user:hunter2@redis.internal"
	_, err := Load(envOf(map[string]string{"SNOWTOKEN_REDIS_URL": url}))
	if err == nil {
		t.Fatal("Load accepted an http:// Redis URL")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the Redis password: %q", err)
	}
}

func TestLoadProductionRequires(t *testing.T) {
	required := []string{"SNOWTOKEN_REDIS_URL", "SNOWTOKEN_SIGNING_KEYS", "SNOWTOKEN_CLIENTS_FILE", "SNOWTOKEN_ISSUER"}
	_, err := Load(envOf(map[string]string{"SNOWTOKEN_ENV": "production"}))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("Load in production with nothing set: err = %v, want ErrConfig", err)
	}
	for _, name := range required {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("err = %q, want it to name %s", err, name)
		}
	}

	full := map[string]string{
		"SNOWTOKEN_ENV":          "production",
		"SNOWTOKEN_REDIS_URL":    "redis://redis:6379/0",
		"SNOWTOKEN_SIGNING_KEYS": "/k/signing.pem",
		"SNOWTOKEN_CLIENTS_FILE": "/etc/clients.json",
		"SNOWTOKEN_ISSUER":       "https://auth.example.com",
	}
	if c := mustLoad(t, full); !c.Production {
		t.Error("SNOWTOKEN_ENV=production: Production = false")
	}
	// Each one missing alone is named alone.
	for _, name := range required {
		env := maps.Clone(full)
		delete(env, name)
		_, err := Load(envOf(env))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("production without %s: err = %v, want ErrConfig naming it", name, err)
			continue
		}
		for _, other := range required {
			if other != name && strings.Contains(err.Error(), other) {
				t.Errorf("production without %s: err = %q also names %s, which is set", name, err, other)
			}
		}
	}
	// Dev mode needs none of them.
	mustLoad(t, map[string]string{"SNOWTOKEN_ENV": "development"})
}

// TestVarsAreRead checks that Vars lists exactly the variables Load reads.
func TestVarsAreRead(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range Vars {
		if listed[v.Name] {
			t.Errorf("%s is listed twice in Vars", v.Name)
		}
		listed[v.Name] = true
		if !strings.HasPrefix(v.Name, "SNOWTOKEN_") || v.Default == "" || v.Help == "" {
			t.Errorf("Vars entry %+v: want a SNOWTOKEN_ name, a default and help", v)
		}
	}
	// Production mode and set values take every branch that reads a variable.
	for _, env := range []map[string]string{
		nil,
		{"SNOWTOKEN_ENV": "production", "SNOWTOKEN_BITS": "41/10/12", "SNOWTOKEN_WORKER_ID": "1",
			"SNOWTOKEN_EPOCH": "2026-01-01T00:00:00Z", "SNOWTOKEN_LOG_LEVEL": "warn"},
	} {
		read := map[string]bool{}
		_, _ = Load(func(name string) string {
			read[name] = true
			return env[name]
		})
		for name := range read {
			if !listed[name] {
				t.Errorf("Load reads %s, which Vars does not list", name)
			}
		}
		for name := range listed {
			if !read[name] {
				t.Errorf("Vars lists %s, which Load never reads (env %v)", name, env)
			}
		}
	}
}

func TestUsageListsEveryVar(t *testing.T) {
	var buf bytes.Buffer
	Usage(&buf)
	for _, v := range Vars {
		if !strings.Contains(buf.String(), v.Name) || !strings.Contains(buf.String(), v.Help) {
			t.Errorf("Usage does not show %s and its help:\n%s", v.Name, buf.String())
		}
	}
}

func FuzzLoad(f *testing.F) {
	f.Add("1h", "24h", "41/10/12", "7", "2026-01-01T00:00:00Z", "production")
	f.Add("abc", "500ms", "41/10/13", "5000", "yesterday", "staging")
	f.Add("", "", "", "", "", "")
	f.Add("9223372036s", "-1s", "1/1/61", "-9223372036854775808", "0000-01-01T00:00:00Z", "DEV")
	f.Fuzz(func(t *testing.T, ttl, maxTTL, bits, worker, epoch, env string) {
		c, err := Load(envOf(map[string]string{
			"SNOWTOKEN_TOKEN_TTL":     ttl,
			"SNOWTOKEN_MAX_TOKEN_TTL": maxTTL,
			"SNOWTOKEN_BITS":          bits,
			"SNOWTOKEN_WORKER_ID":     worker,
			"SNOWTOKEN_EPOCH":         epoch,
			"SNOWTOKEN_ENV":           env,
		}))
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Load: err = %v, want ErrConfig", err)
			}
			return
		}
		if c.TokenTTL < time.Second || c.MaxTokenTTL < c.TokenTTL {
			t.Fatalf("Load accepted TTL %v, max %v", c.TokenTTL, c.MaxTokenTTL)
		}
		if c.Bits == nil {
			t.Fatal("Load returned no layout")
		}
		if err := c.Bits.CheckWorker(c.WorkerID); err != nil {
			t.Fatalf("Load accepted worker %d for layout %s: %v", c.WorkerID, c.Bits, err)
		}
		if c.Production {
			t.Fatal("Load accepted production mode with no Redis, keys, clients or issuer")
		}
	})
}

// TestLoadNoHalfDevMode checks that dev mode, which generates the Redis, the
// signing key and the clients, applies only when none of them is configured:
// one production setting makes every required one required, named each.
func TestLoadNoHalfDevMode(t *testing.T) {
	const (
		redisURL = "SNOWTOKEN_REDIS_URL"
		keys     = "SNOWTOKEN_SIGNING_KEYS"
		clients  = "SNOWTOKEN_CLIENTS_FILE"
		issuer   = "SNOWTOKEN_ISSUER"
	)
	full := map[string]string{
		redisURL: "redis://redis:6379/0",
		keys:     "/k/signing.pem",
		clients:  "/etc/clients.json",
		issuer:   "https://auth.example.com",
	}
	// Without SNOWTOKEN_ENV, a full production configuration is production.
	if c := mustLoad(t, full); !c.Production {
		t.Errorf("Load(%v): Production = false, want true", full)
	}

	for _, tc := range []struct {
		name    string
		env     map[string]string
		missing []string
	}{
		{"the clients file missing", map[string]string{redisURL: full[redisURL], keys: full[keys], issuer: full[issuer]}, []string{clients}},
		{"the keys missing", map[string]string{redisURL: full[redisURL], clients: full[clients], issuer: full[issuer]}, []string{keys}},
		{"the issuer missing", map[string]string{redisURL: full[redisURL], keys: full[keys], clients: full[clients]}, []string{issuer}},
		{"Redis only", map[string]string{redisURL: full[redisURL]}, []string{keys, clients, issuer}},
		{"Redis Cluster only", map[string]string{"SNOWTOKEN_REDIS_CLUSTER_ADDRS": "r1:6379,r2:6379"}, []string{keys, clients, issuer}},
		{"Redis Sentinel only", map[string]string{"SNOWTOKEN_REDIS_SENTINEL_MASTER": "m", "SNOWTOKEN_REDIS_SENTINEL_ADDRS": "s1:26379"}, []string{keys, clients, issuer}},
		{"keys only", map[string]string{keys: full[keys]}, []string{redisURL, clients, issuer}},
		{"clients file only", map[string]string{clients: full[clients]}, []string{redisURL, keys, issuer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(envOf(tc.env))
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Load(%v): Production %v, err = %v; want ErrConfig", tc.env, c.Production, err)
			}
			for _, name := range tc.missing {
				if !strings.Contains(err.Error(), name+" is required") {
					t.Errorf("Load(%v): err = %q, want it to say %s is required", tc.env, err, name)
				}
			}
			// The same with SNOWTOKEN_ENV=development is a contradiction.
			dev := maps.Clone(tc.env)
			dev["SNOWTOKEN_ENV"] = "development"
			if _, err := Load(envOf(dev)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "SNOWTOKEN_ENV=development") {
				t.Errorf("Load(%v): err = %v, want ErrConfig naming SNOWTOKEN_ENV=development", dev, err)
			}
		})
	}
}

func TestLoadEnvUnknownNames(t *testing.T) {
	for _, tc := range []struct {
		name, suggest string // suggest: "" for none
	}{
		{"SNOWTOKEN_CLIENT_FILE", "SNOWTOKEN_CLIENTS_FILE"},
		{"SNOWTOKEN_REDIS_ULR", "SNOWTOKEN_REDIS_URL"},
		{"SNOWTOKEN_SIGNING_KEY", "SNOWTOKEN_SIGNING_KEYS"},
		{"SNOWTOKEN_TOKENTTL", "SNOWTOKEN_TOKEN_TTL"},
		{"snowtoken_env", "SNOWTOKEN_ENV"},
		{"Snowtoken_Issuer", "SNOWTOKEN_ISSUER"},
		{"SNOWTOKEN_XYZZY_PLUGH", ""},
	} {
		_, err := LoadEnv(map[string]string{tc.name: "", "PATH": "/bin"})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("LoadEnv with %s: err = %v, want ErrConfig naming it", tc.name, err)
			continue
		}
		if tc.suggest != "" && !strings.Contains(err.Error(), "did you mean "+tc.suggest+"?") {
			t.Errorf("LoadEnv with %s: err = %q, want it to suggest %s", tc.name, err, tc.suggest)
		}
		if tc.suggest == "" && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("LoadEnv with %s: err = %q, want no suggestion", tc.name, err)
		}
	}

	// The review's case: a production configuration with the clients file's
	// variable misspelt names both the misspelling and the missing variable.
	_, err := LoadEnv(map[string]string{
		"SNOWTOKEN_REDIS_URL":    "redis://redis:6379/0",
		"SNOWTOKEN_SIGNING_KEYS": "/k/signing.pem",
		"SNOWTOKEN_ISSUER":       "https://auth.example.com",
		"SNOWTOKEN_CLIENT_FILE":  "/etc/clients.json",
	})
	for _, want := range []string{"SNOWTOKEN_CLIENT_FILE", "did you mean SNOWTOKEN_CLIENTS_FILE?", "SNOWTOKEN_CLIENTS_FILE is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadEnv with SNOWTOKEN_CLIENT_FILE for SNOWTOKEN_CLIENTS_FILE: err = %v, want it to say %q", err, want)
		}
	}

	// Every listed variable, variables of other programs and the test suite's
	// own SNOWTOKEN_TEST_ variables pass.
	env := map[string]string{"PATH": "/bin", "GOGC": "100", "SNOWTOKENS": "x", "SNOWTOKEN_TEST_REDIS_URL": "redis://127.0.0.1:7000/0"}
	for _, v := range Vars {
		env[v.Name] = ""
	}
	if _, err := LoadEnv(env); err != nil {
		t.Errorf("LoadEnv(%v): %v", env, err)
	}
}

// TestLoadCacheSize: SNOWTOKEN_CACHE_SIZE is token.Options.CacheSize, off
// a named value (token.CacheOff); 0, which meant off, is refused naming
// off rather than silently meaning the default.
func TestLoadCacheSize(t *testing.T) {
	for v, want := range map[string]int{"": token.DefaultCacheSize, "off": token.CacheOff, "500": 500} {
		if got := mustLoad(t, map[string]string{"SNOWTOKEN_CACHE_SIZE": v}).CacheSize; got != want {
			t.Errorf("SNOWTOKEN_CACHE_SIZE=%q: CacheSize %d, want %d", v, got, want)
		}
	}
	if _, err := Load(envOf(map[string]string{"SNOWTOKEN_CACHE_SIZE": "0"})); err == nil || !strings.Contains(err.Error(), "SNOWTOKEN_CACHE_SIZE=off") {
		t.Errorf("SNOWTOKEN_CACHE_SIZE=0: %v, want an error naming SNOWTOKEN_CACHE_SIZE=off", err)
	}
}

// TestIssuerCanonical: SNOWTOKEN_ISSUER is taken in the canonical form that
// clients derive too (jwtpolicy.Issuer), and the spelling as set is kept
// for start-up's warning when it differs.
func TestIssuerCanonical(t *testing.T) {
	for _, tc := range []struct{ set, issuer, asSet string }{
		{"https://auth.example.com", "https://auth.example.com", ""},
		{"https://auth.example.com/", "https://auth.example.com", "https://auth.example.com/"},
		{"http://host:8080//", "http://host:8080", "http://host:8080//"},
		{"HTTPS://Auth.Example.com/Tenant/", "https://auth.example.com/Tenant", "HTTPS://Auth.Example.com/Tenant/"},
		{"http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080", "http://[2001:DB8::1]:8080/"},
	} {
		c := mustLoad(t, map[string]string{"SNOWTOKEN_ISSUER": tc.set})
		if c.Issuer != tc.issuer || c.IssuerAsSet != tc.asSet || c.IssuerDefaulted {
			t.Errorf("SNOWTOKEN_ISSUER=%s: Issuer %q, IssuerAsSet %q, want %q and %q", tc.set, c.Issuer, c.IssuerAsSet, tc.issuer, tc.asSet)
		}
	}
}

// TestDPoPForwarders: SNOWTOKEN_DPOP_FORWARDERS is apart from
// SNOWTOKEN_TRUSTED_PROXIES; unset, it is the trusted proxies (an upgrade
// keeps a gateway that does both working, and is told so); none is no one.
func TestDPoPForwarders(t *testing.T) {
	for _, tc := range []struct {
		name                string
		trusted, forwarders string
		want                string
		defaulted           bool
	}{
		{"neither", "", "", "", false},
		{"unset: the trusted proxies", "10.0.0.5,10.0.0.6", "", "10.0.0.5|10.0.0.6", true},
		{"none", "10.0.0.5", "none", "", false},
		{"apart", "10.0.0.5", "10.0.0.6, 10.1.0.0/16", "10.0.0.6|10.1.0.0/16", false},
		{"forwarders alone", "", "10.0.0.6", "10.0.0.6", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(func(name string) string {
				return map[string]string{"SNOWTOKEN_TRUSTED_PROXIES": tc.trusted, "SNOWTOKEN_DPOP_FORWARDERS": tc.forwarders}[name]
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.DPoPForwarders, "|"); got != tc.want || c.DPoPForwardersDefaulted != tc.defaulted {
				t.Errorf("DPoPForwarders %q (defaulted %v), want %q (%v)", got, c.DPoPForwardersDefaulted, tc.want, tc.defaulted)
			}
			if got := strings.Join(c.TrustedProxies, ","); got != tc.trusted {
				t.Errorf("TrustedProxies %q, want %q", got, tc.trusted)
			}
		})
	}
}

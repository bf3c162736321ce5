package handlers_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/logtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// commandCount counts the commands a Redis client sends.
type commandCount struct{ n atomic.Int64 }

func (h *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// limitedEnv is an issuer whose failed-authentication limit (failures per
// minute) keeps its counts in a redis-server of its own, whose commands
// are counted, and whose log is kept; opts configure it further.
type limitedEnv struct {
	*env
	limitRedis *redistest.Server
	commands   *commandCount
	log        *logtest.Buffer
}

func newLimitedEnv(tb testing.TB, failures int, opts ...envOption) *limitedEnv {
	tb.Helper()
	le := &limitedEnv{limitRedis: redistest.NewServer(tb), commands: new(commandCount), log: new(logtest.Buffer)}
	rdb := le.limitRedis.Client()
	rdb.AddHook(le.commands)
	l, err := authlimit.New(rdb, authlimit.Settings{Failures: failures})
	if err != nil {
		tb.Fatal(err)
	}
	le.env = newEnv(tb, append([]envOption{withAuthLimiter(l), withLogger(slog.New(slog.NewJSONHandler(le.log, nil)))}, opts...)...)
	return le
}

// fromAddress returns an HTTP client whose connections come from ip.
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestBruteForceLimit guesses a client's secret as fast as it can, on each
// route that authenticates a client and each way of sending credentials:
// after the allowed failures every guess is 429 with Retry-After, even the
// right secret; one audit line and the counters say so; the limited key is
// refused from memory; and a client at another address, as a good client
// before the attack, costs the limiter no Redis command.
func TestBruteForceLimit(t *testing.T) {
	t.Parallel()
	const failures, tries = 5, 20
	for _, tc := range []struct {
		name   string
		method string
		path   string
		// send makes the request with id and secret.
		send func(e *env, tb testing.TB, id, secret string) *response
	}{
		{"token, HTTP Basic", http.MethodPost, "/token", func(e *env, tb testing.TB, id, secret string) *response {
			return e.post(tb, "/token", &client{id, secret}, url.Values{"grant_type": {"client_credentials"}})
		}},
		{"introspect, form", http.MethodPost, "/token/introspect", func(e *env, tb testing.TB, id, secret string) *response {
			return e.post(tb, "/token/introspect", nil, url.Values{"client_id": {id}, "client_secret": {secret}, "token": {"x"}})
		}},
		{"admin revoke, HTTP Basic", http.MethodDelete, "/subjects/alice/tokens", func(e *env, tb testing.TB, id, secret string) *response {
			return e.do(tb, http.MethodDelete, "/subjects/alice/tokens", nil, http.Header{"Authorization": {basic(id, secret)}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newLimitedEnv(t, failures)
			victim := e.Admin // may use every route
			if r := tc.send(e.env, t, victim.ID, victim.Secret); r.Status >= 300 {
				t.Fatalf("the good client before the attack: status %d, body %s", r.Status, r.Body)
			}
			if n := e.commands.n.Load(); n != 0 {
				t.Fatalf("a successful authentication sent %d commands to the limiter's Redis, want 0", n)
			}

			var limited int
			var afterFirst429 int64
			for i := range tries {
				r := tc.send(e.env, t, victim.ID, "wrong-secret-guess-"+strconv.Itoa(i))
				wantNoEcho(t, r, "wrong-secret-guess-"+strconv.Itoa(i))
				if i < failures {
					wantError(t, r, http.StatusUnauthorized, "invalid_client")
					continue
				}
				wantError(t, r, http.StatusTooManyRequests, "temporarily_unavailable")
				if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
					t.Errorf("guess %d: Retry-After %q, want a number of seconds", i, r.Header.Get("Retry-After"))
				}
				limited++
				if i == failures {
					afterFirst429 = e.commands.n.Load()
				}
			}
			if got := e.commands.n.Load(); got != afterFirst429 {
				t.Errorf("the limited key cost %d Redis commands after its first 429, want 0: refused from memory", got-afterFirst429)
			}
			r := tc.send(e.env, t, victim.ID, victim.Secret)
			wantError(t, r, http.StatusTooManyRequests, "temporarily_unavailable")
			limited++

			// Another address, another client: unaffected, no Redis command.
			before := e.commands.n.Load()
			other := *e.env
			other.HTTP = fromAddress("127.0.0.2")
			if r := tc.send(&other, t, e.Gateway.ID, e.Gateway.Secret); r.Status == http.StatusTooManyRequests || r.Status >= 500 {
				t.Errorf("a good client at another address during the attack: status %d, body %s", r.Status, r.Body)
			}
			if got := e.commands.n.Load(); got != before {
				t.Errorf("a good client at another address cost the limiter %d Redis commands, want 0", got-before)
			}

			events := e.log.Events(t, "auth.rate_limited")
			if len(events) != 1 {
				t.Fatalf("%d auth.rate_limited events, want 1 for the window; log:\n%s", len(events), e.log)
			}
			ev := events[0]
			if ev["client_id"] != victim.ID || ev["addr"] != "127.0.0.1" || ev["limited_by"] == nil {
				t.Errorf("event %v, want client_id %q, addr 127.0.0.1 and limited_by", ev, victim.ID)
			}
			if strings.Contains(e.log.String(), "wrong-secret-guess") || strings.Contains(e.log.String(), victim.Secret) {
				t.Errorf("the log holds a secret:\n%s", e.log)
			}
			m := e.metrics(t)
			if got, want := m[`snowtoken_auth_failures_total`], strconv.Itoa(failures+1); got != want {
				t.Errorf("snowtoken_auth_failures_total = %q, want %q", got, want)
			}
			var got int
			for _, by := range []string{authlimit.Client, authlimit.Address} {
				n, _ := strconv.Atoi(m[`snowtoken_auth_rate_limited_total{limited_by="`+by+`"}`])
				got += n
			}
			if got != limited {
				t.Errorf("snowtoken_auth_rate_limited_total = %d, want %d (every 429)", got, limited)
			}
		})
	}
}

// TestBruteForceLimitOutage: while the limiter's Redis is down, a failed
// authentication is 503 (the failing path fails closed), and a good client
// still gets its token.
func TestBruteForceLimitOutage(t *testing.T) {
	t.Parallel()
	e := newLimitedEnv(t, 5)
	e.limitRedis.Stop()
	r := e.post(t, "/token", &client{e.Normal.ID, "wrong"}, url.Values{"grant_type": {"client_credentials"}})
	wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on the 503")
	}
	e.issue(t, e.Normal, nil)
}

package e2e

// The tests in this file take from a real redis-server what operators lose
// in production — its whole data set, its memory, its responsiveness — while
// real snowtoken processes run, and check the promises: no two tokens share
// an ID, a revoked token never validates, every request ends in bounded time.

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/internal/timingtest"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// TestFlushAllUnderLoadNoDuplicateIDs runs replica a on worker 11 under
// load, flushes Redis just after a renewed its lease (so that a goes on
// issuing for up to a renewal interval before it notices), and starts
// replica b on worker 11 at once, strict, as an operator's or an
// orchestrator's fixed worker ID would. Both stay loaded until a has issued
// flushMinBefore tokens before the flush and b flushMinAfter after it, a
// having issued some on worker 11 after the flush too (the window that
// matters): no ID may repeat among them all.
// It asserts counts, never a rate (a loaded machine issues slowly): the load
// goes on for as long as tokens keep coming, and the test fails only when
// none has come for stallLimit.
func TestFlushAllUnderLoadNoDuplicateIDs(t *testing.T) {
	const (
		flushMinBefore = 2_000
		flushMinAfter  = 5_000
		conns          = 8 // per replica
		stallLimit     = 3 * fleetWait
	)
	redisURL, rdb := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	// A lease of 6 s is renewed every 2 s: a wide window for a to issue after
	// the flush, which b's start-up (slow on a loaded machine) does not use up.
	redisEnv := map[string]string{"SNOWTOKEN_REDIS_URL": redisURL, "SNOWTOKEN_WORKER_LEASE_TTL": "6s"}
	a := fleet{bin, creds}.start(t, replica{name: "replica a", ip: "127.0.0.11", redis: redisEnv})

	var (
		issued   [2]atomic.Int64 // by a, by b
		flushed  atomic.Bool
		window   atomic.Int64 // a's tokens of worker 11 issued after the flush
		refused  [2]atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      []snowflakealg.ID
		firstErr error
	)
	load := func(r int, p *issuer) {
		for c := range conns {
			wg.Go(func() {
				// A subject of each connection's own: a duplicate ID then
				// lands on two session keys, and SET NX cannot catch it.
				conn := newFleetSubjectConn(p.addr, creds.svc, fmt.Sprintf("user-%d-%d", r, c))
				defer conn.close()
				var mine []snowflakealg.ID
				defer func() {
					mu.Lock()
					ids = append(ids, mine...)
					mu.Unlock()
				}()
				for !stop.Load() {
					id, err := conn.issue()
					switch {
					case err == nil:
						mine = append(mine, id)
						issued[r].Add(1)
						if r == 0 && flushed.Load() && fleetIDWorker(id) == 11 {
							window.Add(1)
						}
					case errors.Is(err, errFleetRetry):
						refused[r].Add(1)
						time.Sleep(time.Millisecond)
					default:
						mu.Lock()
						firstErr = firstError(firstErr, fmt.Errorf("%s: %w", p.name, err))
						mu.Unlock()
						stop.Store(true)
					}
				}
			})
		}
	}
	total := func() int64 { return issued[0].Load() + issued[1].Load() }
	// waitFor waits until done() holds, for as long as tokens keep being
	// issued: it fails only when none has been for stallLimit.
	waitFor := func(what string, done func() bool) {
		t.Helper()
		last, lastAt := total(), time.Now()
		for ; !done(); time.Sleep(time.Millisecond) {
			if stop.Load() {
				t.Fatalf("waiting for %s: %v", what, firstErr)
			}
			if n := total(); n != last {
				last, lastAt = n, time.Now()
			} else if time.Since(lastAt) > stallLimit {
				stop.Store(true)
				t.Fatalf("waiting for %s: no token issued in %v (a %d, b %d; 503s: a %d, b %d)",
					what, stallLimit, issued[0].Load(), issued[1].Load(), refused[0].Load(), refused[1].Load())
			}
		}
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	load(0, a)
	waitFor(fmt.Sprintf("replica a's first %d tokens", flushMinBefore), func() bool { return issued[0].Load() >= flushMinBefore })

	// Just after a's renewal, every key is lost.
	_, hwKey := workerKeys(11)
	ctx := t.Context()
	before, err := rdb.HGet(ctx, hwKey, "until").Result()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(fleetWait); ; time.Sleep(time.Millisecond) {
		now, err := rdb.HGet(ctx, hwKey, "until").Result()
		if err != nil {
			t.Fatal(err)
		}
		if now != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica a did not renew its lease")
		}
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	flushed.Store(true)
	aBefore, flushedAt := issued[0].Load(), time.Now()
	b := fleet{bin, creds}.launch(t, replica{name: "replica b", ip: "127.0.0.12", redis: redisEnv, env: []string{"SNOWTOKEN_WORKER_ID", "11", "SNOWTOKEN_WORKER_ID_STRICT", "true"}})
	b.waitLog(t, "listening")
	bListening := time.Since(flushedAt)
	load(1, b)
	waitFor(fmt.Sprintf("replica b's first %d tokens", flushMinAfter), func() bool { return issued[1].Load() >= flushMinAfter })
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	slices.Sort(ids)
	dups := 0
	for i := range ids {
		if i > 0 && ids[i] == ids[i-1] {
			dups++
		}
	}
	t.Logf("%d tokens: a %d before the flush and %d after it (%d of them on worker 11), b %d; b listening %v after the flush; 503s: a %d, b %d; duplicate IDs %d",
		len(ids), aBefore, issued[0].Load()-aBefore, window.Load(), issued[1].Load(), bListening.Round(time.Millisecond), refused[0].Load(), refused[1].Load(), dups)
	if dups != 0 {
		t.Fatalf("%d duplicate token IDs among %d", dups, len(ids))
	}
	if window.Load() == 0 {
		t.Error("replica a issued nothing on worker 11 after the flush: the window this test is about was not exercised")
	}
	if a.findLog("lease: lost worker id") == nil {
		t.Error("replica a did not log that it lost worker 11")
	}
	if b.findLog(leaseSettlingLog) == nil {
		t.Error("replica b did not log its wait for a previous holder")
	}
}

// leaseSettlingLog is what a replica logs when it waits out a previous holder.
const leaseSettlingLog = "lease: worker id has no high-water mark: it was never used, or its state was lost; " +
	"waiting one lease ttl, until any previous holder has stopped, before issuing"

// firstError returns the first non-nil error.
func firstError(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestUnsafeRedisSettingsNotReady runs a replica on a Redis configured as a
// cache with RDB snapshots (what a shared cache Redis has): it starts, but
// /readyz fails naming both settings until the operator either fixes them
// (live, with CONFIG SET) or accepts the risk by name.
func TestUnsafeRedisSettingsNotReady(t *testing.T) {
	srv := redistest.NewConfiguredServer(t, "--maxmemory-policy", "allkeys-lru", "--save", "3600 1")
	rdb := srv.Client()
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	redisEnv := map[string]string{"SNOWTOKEN_REDIS_URL": srv.URL(), "SNOWTOKEN_WORKER_LEASE_TTL": "1s"}
	p := fleet{bin, creds}.launch(t, replica{name: "replica", ip: "127.0.0.11", redis: redisEnv})
	p.waitLog(t, "listening")
	if r := p.waitLog(t, "redis settings: not ready until they are fixed or accepted"); !strings.Contains(fmt.Sprint(r["err"]), "allkeys-lru") {
		t.Errorf("start-up log %v does not name the policy", r)
	}
	readyz := func() (int, string) {
		t.Helper()
		status, _, body := fleetCall(t, http.MethodGet, p.url("/readyz"), nil, "", nil)
		return status, string(body)
	}
	// Not ready, for as long as it lasts (past the lease's own wait).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		status, body := readyz()
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "maxmemory-policy is allkeys-lru") {
			t.Fatalf("/readyz on an unsafe Redis: %d %s; want 503 naming the setting", status, body)
		}
	}
	_, body := readyz()
	if !strings.Contains(body, "RDB snapshots only") || !strings.Contains(body, "noeviction") {
		t.Errorf("/readyz %s: want the persistence problem and the safe values too", body)
	}
	// The operator fixes the settings live: ready without a restart.
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"appendonly", "yes"}} {
		if err := rdb.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, p.url("/readyz"), fleetWait)

	// Or accepts the risk by name, and only that risk.
	if err := rdb.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	q := fleet{bin, creds}.start(t, replica{name: "replica accepting", ip: "127.0.0.12", redis: redisEnv, env: []string{"SNOWTOKEN_REDIS_ACCEPT_RISK", "maxmemory-policy"}})
	if q.findLog("redis: an unsafe setting is accepted by SNOWTOKEN_REDIS_ACCEPT_RISK") == nil {
		t.Error("the accepted risk is not logged")
	}
}

// TestRedisFrozenRequestsBounded freezes a real redis-server (SIGSTOP: its
// connections stay open and nothing answers) under a replica and sends
// every kind of request at once: each must answer within the store timeout
// plus 10%, with a 503 and Retry-After (or, for /readyz, 503), never hang.
// After SIGCONT everything works again.
func TestRedisFrozenRequestsBounded(t *testing.T) {
	const timeout = 2 * time.Second // the default store timeout
	srv := redistest.NewConfiguredServer(t)
	p := startIssuer(t, issuerOpts{ip: "127.0.0.11", redis: srv.URL(), env: []string{"SNOWTOKEN_WORKER_LEASE_TTL", "5s"}})
	creds := p.creds
	tok := p.issue(t, creds.svc, "")
	p.mustValidate(t, tok, 11)

	srv.Signal(syscall.SIGSTOP)
	frozen := true
	t.Cleanup(func() {
		if frozen {
			srv.Signal(syscall.SIGCONT)
		}
	})
	// Validation decides from the revocation log in memory until the
	// replica's follower goes stale, SNOWTOKEN_REVLOG_THRESHOLD (100 ms)
	// after its last heartbeat: from then on it reads Redis.
	for end := time.Now().Add(fleetWait); ; time.Sleep(5 * time.Millisecond) {
		status, _, _ := fleetCall(t, http.MethodGet, p.url("/token/validate"), nil, tok.AccessToken, nil)
		if status == http.StatusServiceUnavailable {
			break
		}
		if status != http.StatusOK || time.Now().After(end) {
			t.Fatalf("validate with Redis frozen: %d, want 200 from memory and then 503", status)
		}
	}
	type call struct {
		name string
		do   func() (int, http.Header, []byte)
	}
	calls := []call{
		{"issue", func() (int, http.Header, []byte) {
			return fleetCall(t, http.MethodPost, p.url("/token"), &creds.svc, "", url.Values{"grant_type": {"client_credentials"}})
		}},
		{"validate", func() (int, http.Header, []byte) {
			return fleetCall(t, http.MethodGet, p.url("/token/validate"), nil, tok.AccessToken, nil)
		}},
		{"introspect", func() (int, http.Header, []byte) {
			return fleetCall(t, http.MethodPost, p.url("/token/introspect"), &creds.svc, "", url.Values{"token": {tok.AccessToken}})
		}},
		{"revoke", func() (int, http.Header, []byte) {
			return fleetCall(t, http.MethodPost, p.url("/token/revoke"), &creds.svc, "", url.Values{"token": {tok.AccessToken}})
		}},
		{"revoke subject", func() (int, http.Header, []byte) {
			return fleetCall(t, http.MethodDelete, p.url("/subjects/alice/tokens"), &creds.admin, "", nil)
		}},
		{"readyz", func() (int, http.Header, []byte) { return fleetCall(t, http.MethodGet, p.url("/readyz"), nil, "", nil) }},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for round := range 3 {
		for _, c := range calls {
			wg.Go(func() {
				start := time.Now()
				status, h, body := c.do()
				took := time.Since(start)
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
				timingtest.Within(t, fmt.Sprintf("round %d, %s with Redis frozen", round, c.name), took, timeout+timeout/10)
				if status != http.StatusServiceUnavailable {
					t.Errorf("round %d, %s with Redis frozen: %d %s, want 503", round, c.name, status, body)
				} else if c.name != "readyz" && h.Get("Retry-After") == "" {
					t.Errorf("round %d, %s: 503 without Retry-After", round, c.name)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("slowest answer with Redis frozen: %v (timeout %v)", slowest.Round(time.Millisecond), timeout)

	srv.Signal(syscall.SIGCONT)
	frozen = false
	waitReady(t, p.url("/readyz"), fleetWait)
	p.mustValidate(t, p.issue(t, creds.svc, ""), 11)
}

package lease

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/logtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// testRedis returns a client and a key prefix of this test's own, from
// redistest (which deletes the test's keys from a shared real Redis).
func testRedis(tb testing.TB) (redis.UniversalClient, string) {
	tb.Helper()
	r := redistest.New(tb)
	return r.Client, r.Prefix
}

var t0 = time.Date(2027, 3, 4, 5, 6, 7, 890_123_456, time.UTC)

// env is one test's Redis, prefix, clock and log.
type env struct {
	rdb    redis.UniversalClient
	prefix string
	clock  *clocktest.Clock
	log    *logtest.Buffer
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	rdb, prefix := testRedis(tb)
	return &env{rdb: rdb, prefix: prefix, clock: clocktest.New(t0), log: &logtest.Buffer{}}
}

// opts returns Options on the env's prefix, clock and log. The prefix is the
// test's own, so PrivateStore: a worker with no mark was never used.
// TestClaimWithoutMarkWaits covers a shared Redis.
func (e *env) opts(candidate int64) Options {
	return Options{
		Candidate:    candidate,
		KeyPrefix:    e.prefix,
		PrivateStore: true,
		Now:          e.clock.Now,
		Logger:       slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func (e *env) acquire(tb testing.TB, o Options) *Lease {
	tb.Helper()
	l, err := Acquire(context.Background(), e.rdb, o)
	if err != nil {
		tb.Fatalf("Acquire(candidate %d): %v", o.Candidate, err)
	}
	return l
}

// savedMark returns the ms field of worker id's high-water hash.
func (e *env) savedMark(tb testing.TB, id int64) string {
	tb.Helper()
	v, err := e.rdb.HGet(context.Background(), keysFor(e.prefix, id)[1], "ms").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		tb.Fatal(err)
	}
	return v
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func TestAcquire(t *testing.T) {
	tests := []struct {
		name       string
		held       []int64 // taken by other replicas first
		maxWorker  int64
		candidate  int64
		strict     bool
		wantWorker int64
		wantErr    error
	}{
		{name: "free candidate", candidate: 5, wantWorker: 5},
		{name: "default max worker", candidate: 1023, wantWorker: 1023},
		{name: "taken candidate falls back to lowest free", held: []int64{5, 0}, candidate: 5, wantWorker: 1},
		{name: "strict refuses a taken candidate", held: []int64{5}, candidate: 5, strict: true, wantErr: ErrCandidateTaken},
		{name: "strict takes a free candidate", held: []int64{0}, candidate: 3, strict: true, wantWorker: 3},
		{name: "last free id", held: []int64{0, 1, 3}, maxWorker: 3, wantWorker: 2},
		{name: "all taken", held: []int64{0, 1, 2, 3}, maxWorker: 3, candidate: 2, wantErr: ErrNoFreeWorker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			for _, id := range tt.held {
				o := e.opts(id)
				o.MaxWorker, o.Strict = tt.maxWorker, true
				e.acquire(t, o)
			}
			o := e.opts(tt.candidate)
			o.MaxWorker, o.Strict = tt.maxWorker, tt.strict
			l, err := Acquire(context.Background(), e.rdb, o)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %v, %v; want %v", l, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := l.WorkerID(); got != tt.wantWorker {
				t.Errorf("worker: got %d, want %d", got, tt.wantWorker)
			}
			if !l.Valid() || l.Err() != nil || !l.HighWater().IsZero() {
				t.Errorf("new lease: valid %v, err %v, high water %v", l.Valid(), l.Err(), l.HighWater())
			}
		})
	}
}

func TestTwoAcquirersSameCandidate(t *testing.T) {
	e := newEnv(t)
	a := e.acquire(t, e.opts(7))
	b := e.acquire(t, e.opts(7))
	if a.WorkerID() != 7 || b.WorkerID() != 0 {
		t.Fatalf("got workers %d and %d, want 7 and 0", a.WorkerID(), b.WorkerID())
	}
	ctx := context.Background()
	for _, l := range []*Lease{a, b} {
		got, err := e.rdb.Get(ctx, keysFor(e.prefix, l.WorkerID())[0]).Result()
		if err != nil || got != l.owner || len(got) != 32 {
			t.Errorf("lease key of worker %d: got %q, %v; want the 32-hex-digit owner token", l.WorkerID(), got, err)
		}
		ttl, err := e.rdb.PTTL(ctx, keysFor(e.prefix, l.WorkerID())[0]).Result()
		if err != nil || ttl <= 0 || ttl > DefaultTTL {
			t.Errorf("lease key of worker %d: ttl %v, %v", l.WorkerID(), ttl, err)
		}
	}
	if a.owner == b.owner {
		t.Error("two leases share an owner token")
	}
	log := e.log.String()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "candidate=7 worker_id=0") {
		t.Errorf("want a warning naming candidate 7 and worker 0, got log:\n%s", log)
	}
	if strings.Contains(log, a.owner) || strings.Contains(log, b.owner) {
		t.Errorf("log contains an owner token:\n%s", log)
	}
}

func TestAcquireOptions(t *testing.T) {
	rdb, prefix := testRedis(t)
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		opts Options
	}{
		{"nil client", nil, Options{}},
		{"negative candidate", rdb, Options{Candidate: -1}},
		{"candidate above default max", rdb, Options{Candidate: 1024}},
		{"candidate above max", rdb, Options{Candidate: 4, MaxWorker: 3}},
		{"negative max", rdb, Options{MaxWorker: -1}},
		{"ttl below 1ms", rdb, Options{TTL: time.Millisecond / 2}},
		{"negative ttl", rdb, Options{TTL: -time.Second}},
		{"renew every ttl", rdb, Options{TTL: time.Second, RenewEvery: time.Second}},
		{"negative renew", rdb, Options{RenewEvery: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.KeyPrefix = prefix
			if l, err := Acquire(context.Background(), tt.rdb, tt.opts); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("got %v, %v; want ErrInvalidOptions", l, err)
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		l, err := newLease(rdb, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if l.ttl != DefaultTTL || l.renewEvery != DefaultTTL/3 || l.prefix != DefaultKeyPrefix || l.now == nil || l.log == nil {
			t.Errorf("got ttl %v, renew every %v, prefix %q", l.ttl, l.renewEvery, l.prefix)
		}
		if got, want := keysFor(DefaultKeyPrefix, 17), []string{"snowtoken:worker:{17}", "snowtoken:worker:{17}:hw"}; got[0] != want[0] || got[1] != want[1] {
			t.Errorf("keys: got %q, want %q", got, want)
		}
	})
}

func TestHighWater(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.acquire(t, e.opts(7))
	if !a.HighWater().IsZero() {
		t.Fatalf("fresh worker: high water %v, want zero", a.HighWater())
	}

	mark1 := t0.Add(1500 * time.Microsecond) // sub-millisecond part is dropped
	steps := []struct {
		name string
		mark time.Time
		want time.Time
	}{
		{"first mark", mark1, mark1},
		{"no mark keeps it", time.Time{}, mark1},
		{"lower mark keeps it", mark1.Add(-time.Second), mark1},
		{"same millisecond", mark1.Add(100 * time.Microsecond), mark1},
		{"higher mark", mark1.Add(time.Second), mark1.Add(time.Second)},
	}
	for _, st := range steps {
		e.clock.Add(time.Second)
		if err := a.renew(ctx, func() time.Time { return st.mark }); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got, want := e.savedMark(t, 7), ms(st.want); got != want {
			t.Errorf("%s: saved %s, want %s", st.name, got, want)
		}
	}

	final := mark1.Add(2*time.Second + 345*time.Microsecond)
	if err := a.Release(ctx, final); err != nil {
		t.Fatal(err)
	}
	if a.Valid() || !errors.Is(a.Err(), ErrReleased) {
		t.Fatalf("after Release: valid %v, Err %v", a.Valid(), a.Err())
	}
	if err := a.Release(ctx, final.Add(time.Hour)); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := a.renew(ctx, nil); !errors.Is(err, ErrReleased) {
		t.Fatalf("renew after Release: got %v, want ErrReleased", err)
	}
	if n, err := e.rdb.Exists(ctx, keysFor(e.prefix, 7)[0]).Result(); err != nil || n != 0 {
		t.Fatalf("lease key after Release: exists %d, %v", n, err)
	}

	b := e.acquire(t, e.opts(7))
	want := final.Truncate(time.Millisecond)
	if b.WorkerID() != 7 || !b.HighWater().Equal(want) {
		t.Fatalf("next holder: worker %d, high water %v; want 7, %v", b.WorkerID(), b.HighWater(), want)
	}

	// A lower final mark does not move it back either.
	if err := b.Release(ctx, final.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := e.savedMark(t, 7); got != ms(final) {
		t.Errorf("after a lower final mark: saved %s, want %s", got, ms(final))
	}
}

// TestClaimWithoutMarkWaits: on a shared Redis, a claim that finds no mark
// (never used, or state lost) may not issue for one TTL, so that a holder
// whose keys vanished under it, and which has not yet noticed, has stopped
// before the new holder starts. At no instant are both valid.
func TestClaimWithoutMarkWaits(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	shared := func(candidate int64) Options {
		o := e.opts(candidate)
		o.PrivateStore, o.Strict = false, true
		return o
	}
	a := e.acquire(t, shared(5))
	const ttl = DefaultTTL
	var re interface{ RetryAfter() time.Duration }
	if err := a.Err(); a.Valid() || !errors.Is(err, ErrSettling) || !errors.As(err, &re) || re.RetryAfter() != ttl {
		t.Fatalf("first claim of a worker with no mark: valid %v, Err %v; want invalid, ErrSettling with RetryAfter %v", a.Valid(), err, ttl)
	}
	if !strings.Contains(e.log.String(), "waiting one lease ttl") {
		t.Errorf("the wait is not logged; log:\n%s", e.log.String())
	}
	e.clock.Add(ttl - time.Millisecond)
	if a.Valid() {
		t.Fatal("valid a millisecond before the wait ends")
	}
	if err := a.renew(ctx, nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Millisecond)
	if !a.Valid() {
		t.Fatalf("not valid once the wait ended: %v", a.Err())
	}

	// a renews, then every key of the prefix is lost (FLUSHALL, a failover
	// that missed them); a has not noticed, and b claims worker 5.
	if err := a.renew(ctx, nil); err != nil {
		t.Fatal(err)
	}
	lost := a.state.Load().renewed
	if err := e.rdb.Del(ctx, keysFor(e.prefix, 5)...).Err(); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second)
	b := e.acquire(t, shared(5))
	if b.WorkerID() != 5 {
		t.Fatalf("b took worker %d, want 5", b.WorkerID())
	}
	for step := time.Duration(0); step <= ttl+time.Second; step += 100 * time.Millisecond {
		if a.Valid() && b.Valid() {
			t.Fatalf("%v after the loss both holders of worker 5 may issue", e.clock.Now().Sub(lost))
		}
		if step%time.Second == 0 { // b's Run renews; a's does not come round
			if err := b.renew(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Add(100 * time.Millisecond)
	}
	if a.Valid() || !b.Valid() {
		t.Fatalf("a TTL after the loss: a valid %v, b valid %v; want only b", a.Valid(), b.Valid())
	}
	if err := a.renew(ctx, nil); !errors.Is(err, ErrLost) {
		t.Errorf("a's renewal after b claimed: %v, want ErrLost", err)
	}

	// A worker whose mark survived (released cleanly) is claimed without a wait.
	if err := b.Release(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	c := e.acquire(t, shared(5))
	if !c.Valid() {
		t.Errorf("claim of a released worker with its mark: %v, want valid at once", c.Err())
	}
}

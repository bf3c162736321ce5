package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// creeping returns a clock that reads c and moves it on by a microsecond at
// every reading, as a real clock would: NextID spins past a used-up
// millisecond by reading the clock until it moves.
func creeping(c *clocktest.Clock) func() time.Time {
	return func() time.Time {
		c.Add(time.Microsecond)
		return c.Now()
	}
}

// sleeps records the waits of a generator and moves its fake clock by them.
type sleeps struct {
	mu    sync.Mutex
	n     int
	total time.Duration
}

func (s *sleeps) on(c *clocktest.Clock) func(context.Context, time.Duration) error {
	return func(_ context.Context, d time.Duration) error {
		s.mu.Lock()
		s.n++
		s.total += d
		s.mu.Unlock()
		c.Add(d)
		return nil
	}
}

func (s *sleeps) count() (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.total
}

// mustIssue returns the parts of g's next ID, which must be issued under worker.
func mustIssue(tb testing.TB, g *Generator, worker int64, what string) snowflakealg.Parts {
	tb.Helper()
	id, err := g.NextID(context.Background())
	if err != nil {
		tb.Fatalf("%s: NextID: %v", what, err)
	}
	p, err := g.Decompose(id)
	if err != nil {
		tb.Fatalf("%s: Decompose(%d): %v", what, id, err)
	}
	if p.Worker != worker {
		tb.Fatalf("%s: ID %d has worker %d, want the leased %d", what, id, p.Worker, worker)
	}
	return p
}

// TestGeneratorFollowsTheLease walks a generator through the lease's life: it
// issues while held, fails with ErrLost once a renewal finds the key gone,
// issues again after the worker is claimed again, and when another holder
// issued ahead in between, its first ID is after that holder's mark.
func TestGeneratorFollowsTheLease(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	l := e.acquire(t, e.opts(3))
	var slept sleeps
	g, err := NewGenerator(l, snowflakealg.Settings{Now: creeping(e.clock), Sleep: slept.on(e.clock)})
	if err != nil {
		t.Fatal(err)
	}
	if g.WorkerID() != 3 {
		t.Fatalf("generator worker %d, want the leased 3", g.WorkerID())
	}

	var last snowflakealg.Parts
	issue := func(what string) snowflakealg.Parts {
		t.Helper()
		p := mustIssue(t, g, 3, what)
		if p.ID <= last.ID {
			t.Fatalf("%s: ID %d is not after the previous %d", what, p.ID, last.ID)
		}
		last = p
		return p
	}
	for range 100 {
		issue("held lease")
	}
	if err := g.Health(); err != nil {
		t.Fatalf("Health while held: %v", err)
	}
	if err := l.renew(ctx, g.HighWater); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if got, want := e.savedMark(t, 3), ms(last.Time); got != want {
		t.Fatalf("saved mark after a renewal: got %s, want the last ID's %s", got, want)
	}

	// The lease key disappears (an operator, an eviction, a failover).
	lost := func(what string) {
		t.Helper()
		if err := e.rdb.Del(ctx, l.keys[0]).Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.renew(ctx, g.HighWater); !errors.Is(err, ErrLost) {
			t.Fatalf("%s: renew with the key gone: got %v, want ErrLost", what, err)
		}
		assertLost(t, g, what)
	}
	lost("first loss")

	// Claimed again, nobody in between: it issues again, after its own IDs.
	if err := l.renew(ctx, g.HighWater); err != nil {
		t.Fatalf("re-claim: %v", err)
	}
	issue("after the re-claim")
	if err := g.Health(); err != nil {
		t.Fatalf("Health after the re-claim: %v", err)
	}

	// Lost again; after our lease's end another replica takes worker 3 and
	// releases it with a mark ahead of our last ID and of the clock.
	lost("second loss")
	e.clock.Add(DefaultTTL + time.Second)
	o := e.opts(3)
	o.Strict = true
	other := e.acquire(t, o)
	if !other.HighWater().After(last.Time) {
		t.Fatalf("the other holder starts after %v, not after our last ID at %v", other.HighWater(), last.Time)
	}
	if err := l.renew(ctx, g.HighWater); !errors.Is(err, ErrLost) {
		t.Fatalf("re-claim while another replica holds the worker: got %v, want ErrLost", err)
	}
	assertLost(t, g, "while another replica holds the worker")
	ahead := e.clock.Now().Add(3 * time.Millisecond)
	if err := other.Release(ctx, ahead); err != nil {
		t.Fatal(err)
	}

	if err := l.renew(ctx, g.HighWater); err != nil {
		t.Fatalf("re-claim after the other replica released: %v", err)
	}
	mark := ahead.Truncate(time.Millisecond)
	if !l.HighWater().Equal(mark) {
		t.Fatalf("lease mark after the re-claim: got %v, want the other holder's %v", l.HighWater(), mark)
	}
	p := issue("first ID after the other holder")
	if !p.Time.After(mark) {
		t.Fatalf("first ID after the re-claim is at %v, not after the other holder's mark %v", p.Time, mark)
	}
	if n, d := slept.count(); n == 0 || d > 3*time.Millisecond {
		t.Errorf("NextID waited %d times for %v in all, want it to wait out the mark 3ms ahead", n, d)
	}
	if err := g.Health(); err != nil {
		t.Fatalf("Health after the second re-claim: %v", err)
	}
}

// assertLost checks that g refuses to issue and is unhealthy, with ErrLost.
func assertLost(tb testing.TB, g *Generator, what string) {
	tb.Helper()
	if id, err := g.NextID(context.Background()); !errors.Is(err, ErrLost) {
		tb.Fatalf("%s: NextID = %d, %v; want an error wrapping ErrLost", what, id, err)
	}
	if err := g.Health(); !errors.Is(err, ErrLost) {
		tb.Fatalf("%s: Health = %v, want an error wrapping ErrLost", what, err)
	}
}

// TestGeneratorRestartBehindTheMark restarts a worker on a clock behind the
// mark its previous run saved: no ID at or below the mark, whatever the tier.
func TestGeneratorRestartBehindTheMark(t *testing.T) {
	tests := []struct {
		name    string
		ahead   time.Duration // how far the previous run's clock was ahead
		wantErr error         // of the first NextID; nil: it waits
	}{
		{"3ms ahead is waited out", 3 * time.Millisecond, nil},
		{"2s ahead fails fast", 2 * time.Second, snowflakealg.ErrClockRollback},
		{"1h ahead is unhealthy", time.Hour, snowflakealg.ErrClockUnhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)

			// The previous run, on a clock tt.ahead ahead, issues and releases.
			prev := e.acquire(t, e.opts(5))
			prevClock := clocktest.New(t0.Add(tt.ahead))
			pg, err := NewGenerator(prev, snowflakealg.Settings{Now: creeping(prevClock)})
			if err != nil {
				t.Fatal(err)
			}
			var lastPrev snowflakealg.Parts
			for range 10 {
				lastPrev = mustIssue(t, pg, 5, "previous run")
			}
			if err := prev.Release(ctx, pg.HighWater()); err != nil {
				t.Fatal(err)
			}

			// The restart, on the clock the lease uses, behind the mark.
			l := e.acquire(t, e.opts(5))
			if l.WorkerID() != 5 || !l.HighWater().Equal(lastPrev.Time) {
				t.Fatalf("restart: worker %d, mark %v; want 5, the previous run's last ID %v", l.WorkerID(), l.HighWater(), lastPrev.Time)
			}
			clock := clocktest.New(t0)
			var slept sleeps
			g, err := NewGenerator(l, snowflakealg.Settings{Now: creeping(clock), Sleep: slept.on(clock)})
			if err != nil {
				t.Fatal(err)
			}
			id, err := g.NextID(ctx)
			switch {
			case tt.wantErr == nil:
				if err != nil {
					t.Fatalf("NextID %v behind the mark: %v, want it to wait", tt.ahead, err)
				}
				if n, _ := slept.count(); n == 0 {
					t.Errorf("NextID did not wait")
				}
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("NextID %v behind the mark = %d, %v; want %v", tt.ahead, id, err, tt.wantErr)
			case errors.Is(err, snowflakealg.ErrClockRollback):
				var re *snowflakealg.RollbackError
				if !errors.As(err, &re) || re.Behind < tt.ahead-time.Millisecond || re.Behind > tt.ahead+time.Millisecond {
					t.Errorf("rollback error %v: want one %v behind", err, tt.ahead)
				}
				if err := g.Health(); err != nil {
					t.Errorf("Health in the fail-fast tier: %v, want nil", err)
				}
			default:
				if err := g.Health(); !errors.Is(err, snowflakealg.ErrClockUnhealthy) {
					t.Errorf("Health %v behind: %v, want ErrClockUnhealthy", tt.ahead, err)
				}
			}
			if tt.wantErr != nil {
				clock.Add(tt.ahead) // the clock catches up
				id, err = g.NextID(ctx)
				if err != nil {
					t.Fatalf("NextID once the clock caught up: %v", err)
				}
			}
			p, err := g.Decompose(id)
			if err != nil {
				t.Fatal(err)
			}
			if p.Worker != 5 || !p.Time.After(lastPrev.Time) || p.ID <= lastPrev.ID {
				t.Fatalf("first ID of the restart: %+v; want worker 5, after the previous run's last ID %+v", p, lastPrev)
			}
			if err := g.Health(); err != nil {
				t.Errorf("Health once issuing: %v", err)
			}
		})
	}
}

// TestGeneratorsOfTwoAcquiresSameCandidate: two replicas with the same
// candidate get different workers, so their generators never collide even
// when they issue in the same millisecond with the same sequences; strict
// mode refuses a third and leaves the holder alone.
func TestGeneratorsOfTwoAcquiresSameCandidate(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.acquire(t, e.opts(7))
	b := e.acquire(t, e.opts(7))
	if a.WorkerID() != 7 || b.WorkerID() == a.WorkerID() {
		t.Fatalf("workers %d and %d, want 7 and another", a.WorkerID(), b.WorkerID())
	}

	clock := clocktest.New(t0) // one clock: both issue in the same milliseconds
	const perGen = 5000
	gens := make([]*Generator, 2)
	for i, l := range []*Lease{a, b} {
		g, err := NewGenerator(l, snowflakealg.Settings{Now: creeping(clock)})
		if err != nil {
			t.Fatal(err)
		}
		gens[i] = g
	}
	ids := make([][]snowflakealg.ID, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, g := range gens {
		wg.Go(func() {
			for range perGen {
				id, err := g.NextID(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				ids[i] = append(ids[i], id)
			}
		})
	}
	wg.Wait()
	seen := make(map[snowflakealg.ID]int, 2*perGen)
	for i, g := range gens {
		if errs[i] != nil {
			t.Fatalf("generator of worker %d: %v", g.WorkerID(), errs[i])
		}
		for _, id := range ids[i] {
			p, err := g.Decompose(id)
			if err != nil || p.Worker != g.WorkerID() {
				t.Fatalf("ID %d of worker %d decodes to %+v, %v", id, g.WorkerID(), p, err)
			}
			if j, dup := seen[id]; dup {
				t.Fatalf("ID %d issued by both generators %d and %d", id, j, i)
			}
			seen[id] = i
		}
	}
	// The test shows something only if the two issued the same time and
	// sequence, told apart by the worker field alone.
	twins := 0
	for _, id := range ids[0] {
		p, _ := gens[0].Decompose(id)
		twin, err := gens[0].Allocator().Allocate(p.Time.Sub(gens[0].Epoch()).Milliseconds(), b.WorkerID(), p.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		if seen[snowflakealg.ID(twin)] == 1 {
			twins++
		}
	}
	if twins == 0 {
		t.Errorf("the generators never issued the same time and sequence; the test shows nothing")
	}

	o := e.opts(7)
	o.Strict = true
	if l, err := Acquire(ctx, e.rdb, o); !errors.Is(err, ErrCandidateTaken) {
		t.Fatalf("strict Acquire of a held candidate = %v, %v; want ErrCandidateTaken", l, err)
	}
	if got, err := e.rdb.Get(ctx, a.keys[0]).Result(); err != nil || got != a.owner {
		t.Errorf("lease key of worker 7 after a refused strict Acquire: %q, %v; want a's owner", got, err)
	}
	if !a.Valid() {
		t.Error("a refused strict Acquire invalidated the holder")
	}
}

// TestGeneratorWaitsWhileSettling: NextID refuses, with a RetryAfter the
// HTTP layer turns into Retry-After, until the lease may issue.
func TestGeneratorWaitsWhileSettling(t *testing.T) {
	e := newEnv(t)
	o := e.opts(9)
	o.PrivateStore = false
	l := e.acquire(t, o)
	g, err := NewGenerator(l, snowflakealg.Settings{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.NextID(context.Background())
	var re interface{ RetryAfter() time.Duration }
	if !errors.Is(err, ErrSettling) || !errors.As(err, &re) || re.RetryAfter() != DefaultTTL {
		t.Fatalf("NextID while settling: %v; want ErrSettling with RetryAfter %v", err, DefaultTTL)
	}
	if err := g.Health(); !errors.Is(err, ErrSettling) {
		t.Errorf("Health while settling: %v, want ErrSettling", err)
	}
	e.clock.Add(DefaultTTL / 2)
	if err := l.renew(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(DefaultTTL / 2)
	mustIssue(t, g, 9, "after the wait")
}

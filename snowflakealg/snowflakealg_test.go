package snowflakealg

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/internal/clocktest"
)

var t0 = time.Date(2027, 3, 4, 5, 6, 7, 0, time.UTC)

func newFake(tb testing.TB, s Settings) (*SnowFlakeAlg, *clocktest.Clock) {
	tb.Helper()
	clock := clocktest.New(t0)
	s.Now, s.Sleep = clock.Now, clock.Sleep
	g, err := New(s)
	if err != nil {
		tb.Fatal(err)
	}
	return g, clock
}

func mustNext(tb testing.TB, g *SnowFlakeAlg) ID {
	tb.Helper()
	id, err := g.NextID(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func TestZeroSettings(t *testing.T) {
	g, err := New(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	a, b := mustNext(t, g), mustNext(t, g)
	after := time.Now()
	if a <= 0 || b <= a {
		t.Fatalf("got %d then %d, want positive and increasing", a, b)
	}
	p, err := g.Decompose(b)
	if err != nil {
		t.Fatal(err)
	}
	// The ID's millisecond is one the calls ran in.
	if p.Time.Before(before.Truncate(time.Millisecond)) || p.Time.After(after) {
		t.Errorf("decoded time %v, want between %v and %v, when it was issued", p.Time, before, after)
	}
	if p.Worker != 0 {
		t.Errorf("worker: got %d, want 0", p.Worker)
	}
}

func TestNewRejects(t *testing.T) {
	small, _ := bitsalloc.New(50, 1, 12)
	tests := []struct {
		name string
		s    Settings
		want error
	}{
		{"epoch in the future", Settings{Epoch: t0.Add(time.Hour)}, ErrEpochInFuture},
		{"epoch too old for 41 bits", Settings{Epoch: t0.AddDate(-70, 0, 0)}, ErrTimeOverflow},
		{"worker too big", Settings{WorkerID: 1024}, bitsalloc.ErrWorkerRange},
		{"worker too big for 1 bit", Settings{Allocator: small, WorkerID: 2}, bitsalloc.ErrWorkerRange},
		{"negative worker", Settings{WorkerID: -1}, bitsalloc.ErrWorkerRange},
		{"random start too big", Settings{RandomSequenceStart: 2049}, ErrSequenceStart},
		{"random start negative", Settings{RandomSequenceStart: -1}, ErrSequenceStart},
		{"fail below wait", Settings{MaxRollbackWait: time.Second, MaxRollbackFail: time.Millisecond}, ErrRollbackPolicy},
		{"wait negative, not NoRollbackWait", Settings{MaxRollbackWait: -time.Second}, ErrRollbackPolicy},
		{"fail negative", Settings{MaxRollbackFail: -time.Second}, ErrRollbackPolicy},
		{"start after overflows", Settings{StartAfter: t0.AddDate(100, 0, 0)}, ErrTimeOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(t0)
			tt.s.Now = clock.Now
			if _, err := New(tt.s); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestIDsAreTimeOrderedAndCarryTheirFields(t *testing.T) {
	g, clock := newFake(t, Settings{WorkerID: 77})
	first := mustNext(t, g)
	second := mustNext(t, g)
	clock.Add(3 * time.Millisecond)
	third := mustNext(t, g)
	a := g.Allocator()
	for i, tc := range []struct {
		id  ID
		ms  time.Duration
		seq int64
	}{{first, 0, 0}, {second, 0, 1}, {third, 3 * time.Millisecond, 0}} {
		if got, want := tc.id.Time(a, g.Epoch()), t0.Add(tc.ms); !got.Equal(want) {
			t.Errorf("id %d: time %v, want %v", i, got, want)
		}
		if got := tc.id.Worker(a); got != 77 {
			t.Errorf("id %d: worker %d, want 77", i, got)
		}
		if got := tc.id.Sequence(a); got != tc.seq {
			t.Errorf("id %d: sequence %d, want %d", i, got, tc.seq)
		}
	}
	if !(first < second && second < third) {
		t.Errorf("not increasing: %d %d %d", first, second, third)
	}
}

func TestSequenceExhaustionWaitsForNextMillisecond(t *testing.T) {
	g, clock := newFake(t, Settings{})
	a := g.Allocator()
	var last ID
	for i := int64(0); i <= a.MaxSequence(); i++ {
		last = mustNext(t, g)
	}
	if got := last.Sequence(a); got != a.MaxSequence() {
		t.Fatalf("last sequence %d, want %d", got, a.MaxSequence())
	}
	done := make(chan ID)
	go func() { done <- mustNext(t, g) }()
	for g.Stats().Waits == 0 { // NextID is spinning on the used-up millisecond
		select {
		case id := <-done:
			t.Fatalf("got %d (seq %d) without waiting", id, id.Sequence(a))
		default:
		}
	}
	clock.Add(time.Millisecond)
	next := <-done
	if next <= last || next.Sequence(a) != 0 || !next.Time(a, g.Epoch()).Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("after waiting got %v, want seq 0 of the next ms", mustParts(t, g, next))
	}

	// A caller that gives up while waiting gets its context's error.
	for i := int64(1); i <= a.MaxSequence(); i++ {
		mustNext(t, g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.NextID(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: got %v", err)
	}
}

// TestWaitersParkWhileAMillisecondIsUsedUp: while a millisecond is used up,
// one caller spins on the clock and every other one waits parked, taking no
// CPU and no scheduler time. When every waiter spun with runtime.Gosched, 16
// goroutines on 2 cores spent most of their CPU on the scheduler's run-queue
// lock, and the generator lost milliseconds (BENCHMARKS.md, IDs). The
// goroutine dump says what a goroutine waits for: a parked waiter is in
// [sync.Mutex.Lock] in NextID, and not on the fake clock's own mutex.
func TestWaitersParkWhileAMillisecondIsUsedUp(t *testing.T) {
	const waiters = 8
	g, clock := newFake(t, Settings{})
	a := g.Allocator()
	for i := int64(0); i <= a.MaxSequence(); i++ {
		mustNext(t, g)
	}
	ids := make(chan ID, waiters)
	for range waiters {
		go func() {
			id, err := g.NextID(context.Background())
			if err != nil {
				t.Error(err)
			}
			ids <- id
		}()
	}
	// Fail rather than hang: waiters that never park are what this test finds.
	deadline := time.Now().Add(10 * time.Second)
	for parkedWaiters() < waiters-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters parked, want %d: the others spin", parkedWaiters(), waiters, waiters-1)
		}
		runtime.Gosched()
	}
	clock.Add(time.Millisecond)
	var seqs []int64
	for range waiters {
		id := <-ids
		if !id.Time(a, g.Epoch()).Equal(t0.Add(time.Millisecond)) {
			t.Fatalf("got %v, want an ID of the next ms", mustParts(t, g, id))
		}
		seqs = append(seqs, id.Sequence(a))
	}
	slices.Sort(seqs)
	if want := []int64{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(seqs, want) {
		t.Fatalf("sequences %v, want %v", seqs, want)
	}
}

// parkedWaiters counts the goroutines parked on a sync.Mutex in NextID, not
// on the fake clock's mutex.
func parkedWaiters() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, stack := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(stack, "[sync.Mutex.Lock") && strings.Contains(stack, "(*SnowFlakeAlg).NextID") &&
			!strings.Contains(stack, "clocktest") {
			n++
		}
	}
	return n
}

func mustParts(tb testing.TB, g *SnowFlakeAlg, id ID) Parts {
	tb.Helper()
	p, err := g.Decompose(id)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestClockRollbackTiers(t *testing.T) {
	tests := []struct {
		name       string
		back       time.Duration
		wantErr    error
		wantHealth error
	}{
		{"short rollback is waited out", 3 * time.Millisecond, nil, nil},
		{"rollback at the wait threshold is waited out", DefaultMaxRollbackWait, nil, nil},
		{"medium rollback fails fast", 2 * time.Second, ErrClockRollback, nil},
		{"rollback at the fail threshold fails fast", DefaultMaxRollbackFail, ErrClockRollback, nil},
		{"long rollback makes the generator unhealthy", 10 * time.Second, ErrClockUnhealthy, ErrClockUnhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, clock := newFake(t, Settings{})
			clock.Add(time.Minute)
			before := mustNext(t, g)
			clock.Add(-tt.back)
			id, err := g.NextID(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NextID: got %v, want %v", err, tt.wantErr)
			}
			if err == nil && id <= before {
				t.Fatalf("after waiting out the rollback got %d, not above %d", id, before)
			}
			var re *RollbackError
			if errors.Is(tt.wantErr, ErrClockRollback) {
				if !errors.As(err, &re) || re.Behind != tt.back || re.RetryAfter() <= tt.back {
					t.Fatalf("want a *RollbackError of %v, got %#v", tt.back, err)
				}
			}
			if err := g.Health(); !errors.Is(err, tt.wantHealth) {
				t.Fatalf("Health: got %v, want %v", err, tt.wantHealth)
			}
			if got := g.Stats().Rollbacks; got != 1 {
				t.Errorf("Rollbacks: got %d, want 1", got)
			}
			// Once the clock catches up the generator heals and issues above before.
			clock.Add(tt.back + time.Millisecond)
			if err := g.Health(); err != nil {
				t.Fatalf("Health after catching up: %v", err)
			}
			if id := mustNext(t, g); id <= before {
				t.Fatalf("after catching up got %d, not above %d", id, before)
			}
		})
	}
}

func TestRollbackThresholdsAreConfigurable(t *testing.T) {
	g, clock := newFake(t, Settings{MaxRollbackWait: NoRollbackWait, MaxRollbackFail: 10 * time.Millisecond})
	mustNext(t, g)
	clock.Add(-time.Millisecond)
	if _, err := g.NextID(context.Background()); !errors.Is(err, ErrClockRollback) {
		t.Fatalf("with waiting disabled a 1 ms rollback: got %v, want ErrClockRollback", err)
	}
	clock.Add(-20 * time.Millisecond)
	if _, err := g.NextID(context.Background()); !errors.Is(err, ErrClockUnhealthy) {
		t.Fatalf("beyond a 10 ms fail tier: got %v, want ErrClockUnhealthy", err)
	}
}

func TestStartAfterHighWaterMark(t *testing.T) {
	tests := []struct {
		name    string
		ahead   time.Duration
		wantErr error
	}{
		{"mark in the past", -time.Hour, nil},
		{"mark equal to now: its millisecond counts as used", 0, nil},
		{"mark slightly ahead is waited out", 4 * time.Millisecond, nil},
		{"mark ahead fails fast", time.Second, ErrClockRollback},
		{"mark far ahead is unhealthy", time.Hour, ErrClockUnhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mark := t0.Add(tt.ahead)
			clock := clocktest.New(t0)
			clock.SetStep(100 * time.Microsecond)
			g, err := New(Settings{StartAfter: mark, Now: clock.Now, Sleep: clock.Sleep})
			if err != nil {
				t.Fatal(err)
			}
			id, err := g.NextID(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err == nil && !id.Time(g.Allocator(), g.Epoch()).After(mark) {
				t.Fatalf("issued %v at or below the mark %v", mustParts(t, g, id).Time, mark)
			}
		})
	}
}

func TestTimestampOverflow(t *testing.T) {
	a, err := bitsalloc.New(20, 21, 22) // 2^20 ms: about 17 minutes
	if err != nil {
		t.Fatal(err)
	}
	g, clock := newFake(t, Settings{Allocator: a, Epoch: t0.Add(-time.Minute)})
	mustNext(t, g)
	clock.Add(time.Duration(a.MaxDelta()) * time.Millisecond)
	if _, err := g.NextID(context.Background()); !errors.Is(err, ErrTimeOverflow) {
		t.Fatalf("got %v, want ErrTimeOverflow", err)
	}
}

func TestRandomSequenceStart(t *testing.T) {
	const bound = 64
	g, clock := newFake(t, Settings{RandomSequenceStart: bound})
	seen := map[int64]bool{}
	for range 200 {
		id := mustNext(t, g)
		s := id.Sequence(g.Allocator())
		if s < 0 || s >= bound {
			t.Fatalf("first sequence %d outside [0, %d)", s, bound)
		}
		seen[s] = true
		clock.Add(time.Millisecond)
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct first sequences in 200 ms: not random", len(seen))
	}
	// The rest of a millisecond counts up from the random start, still unique.
	prev := mustNext(t, g)
	for range 100 {
		id := mustNext(t, g)
		if id != prev+1 {
			t.Fatalf("got %d after %d", id, prev)
		}
		prev = id
	}
}

// TestConcurrentUniqueAndOrdered runs 8 goroutines × 500k IDs on the real clock.
func TestConcurrentUniqueAndOrdered(t *testing.T) {
	const goroutines, perG = 8, 500_000
	g, err := New(Settings{WorkerID: 5})
	if err != nil {
		t.Fatal(err)
	}
	results := make([][]ID, goroutines)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			ids := make([]ID, perG)
			for j := range ids {
				id, err := g.NextID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[j] = id
			}
			results[i] = ids
		})
	}
	wg.Wait()
	all := make([]ID, 0, goroutines*perG)
	for i, ids := range results {
		if !slices.IsSorted(ids) {
			t.Fatalf("goroutine %d saw IDs out of order", i)
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != goroutines*perG {
		t.Fatalf("got %d distinct IDs of %d", n, goroutines*perG)
	}
}

func TestNextIDDoesNotAllocate(t *testing.T) {
	g, err := New(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(10_000, func() { _, _ = g.NextID(ctx) }); allocs != 0 {
		t.Fatalf("got %v allocations per ID, want 0", allocs)
	}
}

func TestAdvanceTo(t *testing.T) {
	g, clock := newFake(t, Settings{})
	first := mustNext(t, g)
	if err := g.AdvanceTo(t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if id := mustNext(t, g); id != first+1 {
		t.Fatalf("a mark in the past changed the sequence: got %d after %d", id, first)
	}
	mark := t0.Add(3 * time.Millisecond)
	if err := g.AdvanceTo(mark); err != nil {
		t.Fatal(err)
	}
	if !g.HighWater().Equal(mark) {
		t.Fatalf("HighWater: got %v, want %v", g.HighWater(), mark)
	}
	clock.Add(3 * time.Millisecond) // now equals the mark: its millisecond is used up
	clock.SetStep(100 * time.Microsecond)
	if id := mustNext(t, g); !id.Time(g.Allocator(), g.Epoch()).After(mark) {
		t.Fatalf("issued %v, not after the mark %v", mustParts(t, g, id).Time, mark)
	}
	if err := g.AdvanceTo(t0.AddDate(100, 0, 0)); !errors.Is(err, ErrTimeOverflow) {
		t.Fatalf("mark beyond the layout: got %v", err)
	}
}

// TestOldEpochWideLayout issues IDs more than 292 years after the epoch, beyond
// what time.Duration holds, which a 44-bit timestamp field allows: the IDs carry
// the right time, and a generator started after the high-water mark of another
// issues above its IDs.
func TestOldEpochWideLayout(t *testing.T) {
	a, err := bitsalloc.Parse("44/7/12") // 2^44 ms: about 557 years
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	g, _ := newFake(t, Settings{Allocator: a, Epoch: epoch})
	first := mustNext(t, g)
	if got := first.Time(a, epoch); !got.Equal(t0) {
		t.Fatalf("first ID's time: got %v, want %v", got, t0)
	}
	if got := g.HighWater(); !got.Equal(t0) {
		t.Fatalf("HighWater: got %v, want %v", got, t0)
	}

	mark := t0.Add(time.Hour)
	next, _ := newFake(t, Settings{Allocator: a, Epoch: epoch, StartAfter: mark, MaxRollbackFail: 2 * time.Hour})
	if got := next.HighWater(); !got.Equal(mark) {
		t.Fatalf("HighWater after StartAfter %v: got %v", mark, got)
	}
	if err := next.AdvanceTo(epoch.AddDate(558, 0, 0)); !errors.Is(err, ErrTimeOverflow) {
		t.Fatalf("a mark beyond 44 bits: got %v, want ErrTimeOverflow", err)
	}
}

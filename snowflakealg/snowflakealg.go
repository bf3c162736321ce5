// Package snowflakealg generates unique, time-ordered 64-bit Snowflake IDs.
//
// An ID is laid out by a bitsalloc.BitsAllocator (41/10/12 by default):
//
//	+---+---------------------------------+-----------------+----------------+
//	| 0 | ms since Epoch (41 bits, ~69 y) | worker (10 bits) | sequence (12)  |
//	+---+---------------------------------+-----------------+----------------+
//
// With a 12-bit sequence one worker issues at most 4096 IDs per millisecond,
// 4,096,000 per second. When a millisecond is used up, NextID waits for the
// next one: one caller spins on the clock, any others park until it has seen
// the next millisecond. It never hands out the same ID twice.
//
// Time is read once as wall time when the generator starts and from then on as
// monotonic time elapsed since that reading, so stepping the wall clock of a
// running process cannot reorder IDs. The clock can still be behind the last
// issued time: after a restart on a clock that went backwards, or when a saved
// high-water mark (Settings.StartAfter) is ahead of now. That is handled in tiers:
//
//   - up to Settings.MaxRollbackWait (default 5 ms): NextID waits it out;
//   - up to Settings.MaxRollbackFail (default 5 s): NextID fails at once with a
//     *RollbackError that says how long to wait (HTTP: 503 with Retry-After);
//   - beyond: the generator is unhealthy (Health fails, readiness fails) until
//     the clock has caught up.
//
// An ID is predictable (time, worker, counter). It identifies; it never
// authorises anything on its own.
package snowflakealg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowtoken/snowtoken/bitsalloc"
)

// DefaultEpoch is the epoch used when Settings.Epoch is zero: 2026-01-01 UTC, a
// date before snowtoken's first release. With 41 timestamp bits IDs run out in 2095.
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Default thresholds of the clock-rollback tiers.
const (
	DefaultMaxRollbackWait = 5 * time.Millisecond
	// NoRollbackWait, as Settings.MaxRollbackWait, waits out no rollback:
	// the named value of none, since zero is the default.
	NoRollbackWait         time.Duration = -1
	DefaultMaxRollbackFail               = 5 * time.Second
)

// Errors returned by New and NextID.
var (
	ErrEpochInFuture  = errors.New("snowflakealg: epoch is in the future")
	ErrSequenceStart  = errors.New("snowflakealg: random sequence start must leave room in the sequence")
	ErrRollbackPolicy = errors.New("snowflakealg: rollback thresholds must satisfy 0 <= wait <= fail")
	ErrTimeOverflow   = errors.New("snowflakealg: timestamp field exhausted: the epoch is too old for this layout")
	ErrBeforeEpoch    = errors.New("snowflakealg: clock is before the epoch")
	ErrClockRollback  = errors.New("snowflakealg: clock moved backwards")
	ErrClockUnhealthy = errors.New("snowflakealg: clock is far behind the last issued id")
	ErrInvalidID      = errors.New("snowflakealg: not a snowflake id")
)

// Settings configures a SnowFlakeAlg. The zero value is valid: layout 41/10/12,
// DefaultEpoch, worker 0, the system clock, default rollback tiers and sequences
// that start at 0 in every millisecond.
type Settings struct {
	// Allocator lays out the fields. Nil means bitsalloc.Default() (41/10/12).
	Allocator *bitsalloc.BitsAllocator

	// Epoch is the time the timestamp field counts from. Zero means DefaultEpoch.
	// An epoch after the current time is rejected.
	Epoch time.Time

	// WorkerID goes into every ID. It must fit the worker field; zero is worker 0.
	// The caller chooses it: explicitly, with WorkerIDFromIPv4, or through a lease.
	WorkerID int64

	// StartAfter is a high-water mark: no ID is issued at or below this
	// millisecond. Zero means none. A mark ahead of the clock is a rollback and
	// goes through the tiers below.
	StartAfter time.Time

	// MaxRollbackWait is the largest rollback NextID waits out. Zero means
	// DefaultMaxRollbackWait; NoRollbackWait means never wait; any other
	// negative is an error (ErrRollbackPolicy).
	MaxRollbackWait time.Duration

	// MaxRollbackFail is the largest rollback that fails fast with a
	// *RollbackError; beyond it the generator is unhealthy. Zero means
	// DefaultMaxRollbackFail.
	MaxRollbackFail time.Duration

	// RandomSequenceStart, when above zero, starts every millisecond's sequence
	// at a random number in [0, RandomSequenceStart) instead of 0 (as Meituan
	// Leaf does), so that IDs issued at low traffic are not all multiples of
	// 4096 and `id % N` sharding stays even. The cost: on average
	// RandomSequenceStart/2 fewer IDs per millisecond. It must be at most half
	// the sequence range (2048 with 12 bits).
	RandomSequenceStart int64

	// Now reads the clock. Nil means time.Now. Tests inject a fake clock.
	Now func() time.Time

	// Sleep waits for d or until ctx ends. Nil means a timer. It is used only to
	// wait out a short rollback; a used-up millisecond is waited out by spinning.
	Sleep func(ctx context.Context, d time.Duration) error
}

// SnowFlakeAlg issues IDs for one worker. It is safe for concurrent use.
type SnowFlakeAlg struct {
	alloc     *bitsalloc.BitsAllocator
	epoch     time.Time
	worker    int64
	now       func() time.Time
	sysClock  bool // now is time.Now: elapsedMs reads the monotonic clock alone
	sleep     func(context.Context, time.Duration) error
	start     time.Time     // clock reading at New, with its monotonic part
	startMs   int64         // whole ms from the epoch to start, from wall time
	startRest time.Duration // and the rest of that span, under 1 ms
	waitMax   int64         // ms
	failMax   int64         // ms
	randStart int64
	seqBits   int
	seqMask   int64

	// state packs the last issued millisecond and sequence as ms<<seqBits | seq,
	// so that NextID is a single compare-and-swap.
	state atomic.Int64

	// spinMu is held by the one caller that spins on the clock while a
	// millisecond is used up; see awaitNextMs.
	spinMu sync.Mutex

	unhealthyBehind atomic.Int64 // ms the clock was behind when it went unhealthy; 0 when healthy

	waits     atomic.Uint64
	rollbacks atomic.Uint64
}

// New returns a generator built from s.
func New(s Settings) (*SnowFlakeAlg, error) {
	g := &SnowFlakeAlg{
		alloc:     s.Allocator,
		epoch:     s.Epoch,
		worker:    s.WorkerID,
		now:       s.Now,
		sleep:     s.Sleep,
		randStart: s.RandomSequenceStart,
	}
	if g.alloc == nil {
		g.alloc = bitsalloc.Default()
	}
	if g.epoch.IsZero() {
		g.epoch = DefaultEpoch
	}
	if g.now == nil {
		g.now, g.sysClock = time.Now, true
	}
	if g.sleep == nil {
		g.sleep = sleepContext
	}
	if err := g.alloc.CheckWorker(g.worker); err != nil {
		return nil, err
	}
	wait, fail := s.MaxRollbackWait, s.MaxRollbackFail
	switch {
	case wait < 0 && wait != NoRollbackWait, fail < 0:
		return nil, fmt.Errorf("%w: wait %v, fail %v: zero means the default, NoRollbackWait no wait; any other negative is an error", ErrRollbackPolicy, wait, fail)
	case wait == 0:
		wait = DefaultMaxRollbackWait
	case wait == NoRollbackWait:
		wait = 0
	}
	if fail == 0 {
		fail = DefaultMaxRollbackFail
	}
	if fail < wait {
		return nil, fmt.Errorf("%w: wait %v, fail %v", ErrRollbackPolicy, wait, fail)
	}
	g.waitMax, g.failMax = wait.Milliseconds(), fail.Milliseconds()
	if g.randStart < 0 || g.randStart > (g.alloc.MaxSequence()+1)/2 {
		return nil, fmt.Errorf("%w: %d not in [0, %d]", ErrSequenceStart, g.randStart, (g.alloc.MaxSequence()+1)/2)
	}
	g.seqBits = g.alloc.SequenceBits()
	g.seqMask = g.alloc.MaxSequence()

	g.start = g.now()
	if g.epoch.After(g.start) {
		return nil, fmt.Errorf("%w: %s", ErrEpochInFuture, g.epoch.Format(time.RFC3339))
	}
	g.startMs, g.startRest = sinceEpoch(g.epoch, g.start.Round(0))
	if g.elapsedMs() > g.alloc.MaxDelta() {
		return nil, fmt.Errorf("%w: epoch %s", ErrTimeOverflow, g.epoch.Format(time.RFC3339))
	}
	if !s.StartAfter.IsZero() {
		if err := g.AdvanceTo(s.StartAfter); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// elapsedMs returns milliseconds since the epoch: the wall-clock offset read at
// New plus the monotonic time elapsed since. On the system clock that is
// time.Since, which reads the monotonic clock alone: time.Now reads the wall
// clock too, and was two thirds of the cost of an ID.
func (g *SnowFlakeAlg) elapsedMs() int64 {
	var d time.Duration
	if g.sysClock {
		d = time.Since(g.start)
	} else {
		d = g.now().Sub(g.start)
	}
	return g.startMs + floorDiv(int64(g.startRest+d), int64(time.Millisecond))
}

// NextID returns a new ID, unique for this worker and larger than every ID it
// returned before. It waits when the current millisecond is used up and when
// the clock is behind by no more than the wait tier; see the package doc for
// larger rollbacks.
func (g *SnowFlakeAlg) NextID(ctx context.Context) (ID, error) {
	waited, rolled := false, false
	for {
		old := g.state.Load()
		last, seq := old>>g.seqBits, old&g.seqMask
		now := g.elapsedMs()
		var next int64
		switch {
		case now > last:
			if now > g.alloc.MaxDelta() {
				return 0, ErrTimeOverflow
			}
			if now < 0 {
				return 0, ErrBeforeEpoch
			}
			next = now<<g.seqBits | g.firstSequence()
		case now == last && seq < g.seqMask:
			next = old + 1
		case now == last:
			// This millisecond is used up: wait for the next one.
			if !waited {
				waited = true
				g.waits.Add(1)
			}
			if err := g.awaitNextMs(ctx, last); err != nil {
				return 0, err
			}
			continue
		default:
			if !rolled {
				rolled = true
				g.rollbacks.Add(1)
			}
			if err := g.rolledBack(ctx, last-now); err != nil {
				return 0, err
			}
			continue
		}
		if g.state.CompareAndSwap(old, next) {
			g.unhealthyBehind.Store(0)
			id, err := g.alloc.Allocate(next>>g.seqBits, g.worker, next&g.seqMask)
			return ID(id), err
		}
	}
}

// awaitNextMs returns once the clock has left millisecond ms, or with ctx's
// error. One caller at a time spins on the clock, holding spinMu, and sees the
// next millisecond within a clock read of its start; every other caller whose
// millisecond is used up parks on spinMu meanwhile and, once it holds it, finds
// the clock moved on (so it notices ctx ending only then, within the same
// millisecond). Parked callers cost no CPU and leave the scheduler alone. When
// every waiter spun with runtime.Gosched instead, 16 goroutines sharing a
// generator on 2 cores spent half or more of their CPU in the scheduler,
// contending for its run-queue lock, and issued 0.88–0.91 of the limit where
// bwmarrin/snowflake, which spins under its mutex, issued 0.99 (BENCHMARKS.md,
// IDs). A timer would not do: it fires up to a millisecond late. The wait is
// bounded by the rest of a millisecond of the monotonic clock; a clock that
// moves back (only an injected one can) ends it too, and NextID's rollback
// tiers take over.
func (g *SnowFlakeAlg) awaitNextMs(ctx context.Context, ms int64) error {
	g.spinMu.Lock()
	defer g.spinMu.Unlock()
	for g.elapsedMs() == ms {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// firstSequence returns where a new millisecond's sequence starts.
func (g *SnowFlakeAlg) firstSequence() int64 {
	if g.randStart == 0 {
		return 0
	}
	return rand.Int64N(g.randStart)
}

// rolledBack handles a clock that is behind the last issued millisecond by
// behind ms, following the tiers in the package doc.
func (g *SnowFlakeAlg) rolledBack(ctx context.Context, behind int64) error {
	switch {
	case behind <= g.waitMax:
		return g.sleep(ctx, time.Duration(behind)*time.Millisecond)
	case behind <= g.failMax:
		return &RollbackError{Behind: time.Duration(behind) * time.Millisecond}
	default:
		g.unhealthyBehind.Store(behind)
		return fmt.Errorf("%w: %d ms behind, more than %d ms", ErrClockUnhealthy, behind, g.failMax)
	}
}

// RollbackError reports a clock that is behind the last issued ID by more than
// the wait tier: the caller should retry after Behind (plus a millisecond).
// It matches ErrClockRollback with errors.Is.
type RollbackError struct {
	Behind time.Duration
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("%v: %v behind, retry later", ErrClockRollback, e.Behind)
}

// Is makes errors.Is(err, ErrClockRollback) true.
func (e *RollbackError) Is(target error) bool { return target == ErrClockRollback }

// RetryAfter returns how long to wait before NextID can succeed again.
func (e *RollbackError) RetryAfter() time.Duration { return e.Behind + time.Millisecond }

// Health returns nil while the generator can issue IDs, and an error wrapping
// ErrClockUnhealthy while the clock is behind the last ID by more than the
// fail-fast tier. It recovers by itself once the clock catches up.
func (g *SnowFlakeAlg) Health() error {
	if g.unhealthyBehind.Load() == 0 {
		return nil
	}
	last := g.state.Load() >> g.seqBits
	behind := last - g.elapsedMs()
	if behind <= g.failMax {
		g.unhealthyBehind.Store(0)
		return nil
	}
	return fmt.Errorf("%w: %d ms behind, more than %d ms", ErrClockUnhealthy, behind, g.failMax)
}

// Stats counts the events an operator wants to see.
type Stats struct {
	Waits     uint64 // NextID calls that waited for a used-up millisecond to end
	Rollbacks uint64 // NextID calls that found the clock behind the last ID
}

// Stats returns the counters since New.
func (g *SnowFlakeAlg) Stats() Stats {
	return Stats{Waits: g.waits.Load(), Rollbacks: g.rollbacks.Load()}
}

// HighWater returns the newest millisecond an ID has been issued in (or the
// StartAfter mark), as a time. A lease saves it so that whoever takes the worker
// next never issues at or below it.
func (g *SnowFlakeAlg) HighWater() time.Time {
	return addMillis(g.epoch, g.state.Load()>>g.seqBits)
}

// AdvanceTo makes sure that no ID at or below mark's millisecond is issued
// from now on, as if that millisecond had been used up. A mark at or below the
// last issued millisecond changes nothing. A lease calls it with the mark saved
// by the worker's previous holder.
func (g *SnowFlakeAlg) AdvanceTo(mark time.Time) error {
	ms, _ := sinceEpoch(g.epoch, mark)
	if ms > g.alloc.MaxDelta() {
		return fmt.Errorf("%w: mark %s", ErrTimeOverflow, mark.Format(time.RFC3339))
	}
	for {
		old := g.state.Load()
		if old>>g.seqBits >= ms || g.state.CompareAndSwap(old, ms<<g.seqBits|g.seqMask) {
			return nil
		}
	}
}

// WorkerID returns the worker this generator issues for.
func (g *SnowFlakeAlg) WorkerID() int64 { return g.worker }

// Epoch returns the epoch IDs count from.
func (g *SnowFlakeAlg) Epoch() time.Time { return g.epoch }

// Allocator returns the layout of the IDs.
func (g *SnowFlakeAlg) Allocator() *bitsalloc.BitsAllocator { return g.alloc }

// Decompose splits id into its parts using this generator's layout and epoch.
func (g *SnowFlakeAlg) Decompose(id ID) (Parts, error) {
	return id.Parts(g.alloc, g.epoch)
}

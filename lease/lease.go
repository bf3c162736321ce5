// Package lease holds a Snowflake worker ID in Redis, so that two issuer
// replicas never issue under the same worker ID, and so that whoever holds a
// worker ID next starts after the last millisecond the previous holder may have
// issued in.
//
// # Redis keys
//
// For worker N with the default KeyPrefix "snowtoken:worker:":
//
//	snowtoken:worker:{N}      string  owner token (32 hex digits)          PX TTL
//	snowtoken:worker:{N}:hw   hash    ms     newest Unix ms issued         no TTL
//	                                  until  Unix ms the holder may issue
//	                                         until (its lease end)
//	                                  owner  the holder that wrote until
//
// The lease key says who holds worker N and disappears when the holder stops
// renewing it. The high-water hash outlives the lease, its expiry and its
// release: it is at most MaxWorker+1 small keys per prefix, so it never
// expires (delete the keys by hand when a prefix is retired). The {N} hash tag
// puts both keys of a worker in one Redis Cluster slot, so every script
// touches a single slot.
//
// # Scripts
//
// Three Lua scripts do every change atomically (EVALSHA, falling back to EVAL):
//
//	claim    if GET lease is nil or ours: SET lease owner PX ttl; fold a
//	         previous holder's until into ms; write our until and owner;
//	         return ms                    (SET NX PX, plus re-entry for Run)
//	renew    if GET lease == owner: PEXPIRE lease ttl; raise ms and until
//	release  if GET lease == owner: raise ms; HDEL until, owner; DEL lease
//
// "Raise" means the stored value becomes the larger of the two: a mark never
// moves backwards.
//
// # The high-water mark
//
// The mark a new holder receives, Lease.HighWater, is the later of the saved
// ms and, if the previous holder did not release the worker (it crashed or
// lost Redis), that holder's until. The holder stops issuing (Valid turns
// false) no later than until by its own clock, so a new holder that starts
// after the mark cannot repeat one of its IDs, even if the last IDs it issued
// were never saved and even if the two clocks disagree. After a clean Release
// until is gone and the mark is exactly the last millisecond issued. Pass the
// mark as snowflakealg.Settings.StartAfter.
//
// # Lost state
//
// The mark protects the next holder only while Redis keeps it. When a claim
// finds no mark at all (neither ms nor until), either the worker was never
// used, or its state was lost: FLUSHALL, a failover to a replica that had not
// received it, a restart without persistence. Then a previous holder may still
// be issuing under the worker, until its next renewal finds the lease key gone
// (up to RenewEvery) and in any case no longer than TTL after its last
// renewal. So such a claim holds the worker but does not issue (Valid is false,
// Err wraps ErrSettling) for one TTL, by which time any previous holder has
// stopped; it says so in the log. Only a Redis that no other process can have
// used (Options.PrivateStore: the dev mode's embedded one) skips the wait.
//
// # Lifecycle
//
//	Acquire ──▶ held ──renew──▶ held          (Run, every RenewEvery)
//	              │
//	              │ key gone, another owner, or no renewal for TTL
//	              ▼
//	            lost ──claim the same ID──▶ held  (OnChange(true), new HighWater)
//
//	Release: held or lost ──▶ released (final mark saved if still the owner)
//
// Valid is false from the moment a renewal has not succeeded for TTL, by the
// injected clock, even if Run has not noticed yet: measured from the moment the
// last successful renewal was sent, which is no later than when Redis started
// the key's TTL.
//
// # Use
//
//	l, err := lease.Acquire(ctx, rdb, lease.Options{Candidate: id, MaxWorker: alloc.MaxWorker()})
//	gen, err := snowflakealg.New(snowflakealg.Settings{Allocator: alloc,
//		WorkerID: l.WorkerID(), StartAfter: l.HighWater()})
//	go l.Run(runCtx, gen.HighWater)
//	// for every ID: if !l.Valid() { fail with 503 }; id, err := gen.NextID(ctx)
//	// on OnChange(true): a new generator, StartAfter the later of
//	//                    l.HighWater() and the old gen.HighWater()
//	// at shutdown: stop issuing, cancel runCtx, wait for Run,
//	//              l.Release(ctx, gen.HighWater())
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/bitsalloc"
)

// Defaults for the zero values of Options.
const (
	DefaultTTL       = 10 * time.Second
	DefaultKeyPrefix = "snowtoken:worker:"
)

// Errors returned by Acquire, Err and Release.
var (
	ErrInvalidOptions = errors.New("lease: invalid options")
	ErrCandidateTaken = errors.New("lease: candidate worker id is held by another replica")
	ErrNoFreeWorker   = errors.New("lease: every worker id is held")
	ErrLost           = errors.New("lease: lost")
	ErrReleased       = errors.New("lease: released")
	ErrSettling       = errors.New("lease: waiting out a previous holder whose state may have been lost")
)

// Options configures Acquire. The zero value takes worker 0 (or the lowest free
// one) of 1024, with a 10 s TTL renewed every 3.33 s.
type Options struct {
	// Candidate is the preferred worker ID, in [0, MaxWorker].
	Candidate int64
	// MaxWorker is the largest valid worker ID, as the allocator's MaxWorker
	// says. Zero means that of the default 41/10/12 layout, 1023 (a worker field
	// has at least one bit, so 0 is never a real maximum).
	MaxWorker int64
	// Strict, when the candidate is held by a live replica, makes Acquire fail
	// with ErrCandidateTaken instead of taking the lowest free ID.
	Strict bool
	// TTL is how long the lease lives without renewal. Zero means DefaultTTL;
	// it must be at least a millisecond and is cut to whole milliseconds.
	TTL time.Duration
	// RenewEvery is how often Run renews the lease. Zero means TTL/3; it must be
	// below TTL.
	RenewEvery time.Duration
	// KeyPrefix starts every Redis key. Empty means DefaultKeyPrefix.
	KeyPrefix string
	// Now reads the clock. Nil means time.Now. Tests inject a fake clock.
	Now func() time.Time
	// Logger receives state changes. Nil means slog.Default(). The owner token
	// is never logged.
	Logger *slog.Logger
	// PrivateStore says that no other process can have used this Redis (an
	// embedded one, new with this process), so a worker with no high-water
	// mark was never used and may issue at once. Leave it false for any
	// Redis another replica can reach: there a missing mark may mean lost
	// state, and the claim waits one TTL before issuing (see Lost state).
	PrivateStore bool
	// OnChange, if set, is called by Run after the lease is lost (false) and
	// after Run has claimed the same worker again (true), in that order, from
	// Run's goroutine. On true, HighWater holds the mark read at the new claim:
	// build a new generator with StartAfter set to the later of it and the old
	// generator's HighWater, because another replica may have issued under the
	// worker in between. It is not called for Release.
	OnChange func(valid bool)
}

// Lease is a worker ID held in Redis. Its methods are safe for concurrent use.
type Lease struct {
	rdb        redis.UniversalClient
	prefix     string
	worker     int64    // set by Acquire, then fixed
	keys       []string // lease key and high-water key of worker
	owner      string   // random token; kept out of logs and of the API
	ttl        time.Duration
	renewEvery time.Duration
	now        func() time.Time
	log        *slog.Logger
	onChange   func(bool)
	private    bool

	mu    sync.Mutex // serialises renewal, re-claim and release
	state atomic.Pointer[state]
}

// state is one immutable snapshot, swapped whole so that readers never see a
// half-made change.
type state struct {
	err       error     // nil while held; wraps ErrLost or ErrReleased otherwise
	released  bool      // Release has finished
	renewed   time.Time // when the last successful claim or renewal was sent
	highWater time.Time // mark read at the last claim
	issueFrom time.Time // no ID before this: the claim found no mark (see Lost state)
}

// releasing reports whether Release has been called: the lease is done.
func (s *state) releasing() bool { return errors.Is(s.err, ErrReleased) }

// Acquire claims the candidate worker ID or, unless opts.Strict, the lowest
// free one, and returns the lease with the high-water mark saved for it. Start
// Run to keep it.
func Acquire(ctx context.Context, rdb redis.UniversalClient, opts Options) (*Lease, error) {
	l, err := newLease(rdb, opts)
	if err != nil {
		return nil, err
	}
	maxWorker := opts.MaxWorker
	if maxWorker == 0 {
		maxWorker = bitsalloc.Default().MaxWorker()
	}
	if maxWorker < 0 || opts.Candidate < 0 || opts.Candidate > maxWorker {
		return nil, fmt.Errorf("%w: candidate %d not in [0, %d]", ErrInvalidOptions, opts.Candidate, maxWorker)
	}
	ok, err := l.take(ctx, opts.Candidate)
	if err != nil {
		return nil, err
	}
	if ok {
		l.log.Info("lease: acquired worker id", "worker_id", l.worker, "high_water", l.HighWater())
		return l, nil
	}
	if opts.Strict {
		return nil, fmt.Errorf("%w: worker %d", ErrCandidateTaken, opts.Candidate)
	}
	for id := int64(0); id <= maxWorker; id++ {
		if id == opts.Candidate {
			continue
		}
		ok, err := l.take(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			l.log.Warn("lease: candidate worker id is held, took the lowest free one",
				"candidate", opts.Candidate, "worker_id", l.worker, "high_water", l.HighWater())
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: all of [0, %d]", ErrNoFreeWorker, maxWorker)
}

func newLease(rdb redis.UniversalClient, opts Options) (*Lease, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOptions)
	}
	l := &Lease{
		rdb:        rdb,
		owner:      newOwner(),
		ttl:        opts.TTL,
		renewEvery: opts.RenewEvery,
		now:        opts.Now,
		log:        opts.Logger,
		onChange:   opts.OnChange,
		private:    opts.PrivateStore,
	}
	if l.ttl == 0 {
		l.ttl = DefaultTTL
	}
	if l.ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: ttl %v is below 1ms", ErrInvalidOptions, l.ttl)
	}
	l.ttl = l.ttl.Truncate(time.Millisecond) // what PX keeps: never trust more than Redis does
	if l.renewEvery == 0 {
		l.renewEvery = l.ttl / 3
	}
	if l.renewEvery <= 0 || l.renewEvery >= l.ttl {
		return nil, fmt.Errorf("%w: renew every %v is not in (0, ttl %v)", ErrInvalidOptions, l.renewEvery, l.ttl)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.prefix = opts.KeyPrefix
	if l.prefix == "" {
		l.prefix = DefaultKeyPrefix
	}
	return l, nil
}

// newOwner returns 16 random bytes in hex.
func newOwner() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails; it crashes the program if the system has no randomness
	return hex.EncodeToString(b)
}

// WorkerID returns the worker ID the lease holds.
func (l *Lease) WorkerID() int64 { return l.worker }

// HighWater returns the mark read when the worker was last claimed (zero if
// none): no ID of this worker may be issued at or below its millisecond. Pass
// it as snowflakealg.Settings.StartAfter.
func (l *Lease) HighWater() time.Time { return l.state.Load().highWater }

// Valid reports whether IDs may be issued under the worker now: the lease is
// held, its last renewal succeeded less than TTL ago, and it is not waiting
// out a previous holder (see Lost state). Check it before issuing.
func (l *Lease) Valid() bool {
	s := l.state.Load()
	now := l.now()
	return s.err == nil && now.Sub(s.renewed) < l.ttl && !now.Before(s.issueFrom)
}

// Expires returns when the lease stops being valid unless a renewal
// succeeds first: when the last successful claim or renewal was sent, plus
// the TTL. It is zero while the lease is lost or released. (A claim that
// waits out a previous holder, see Lost state, is held and has an Expires
// while it does not issue yet.)
func (l *Lease) Expires() time.Time {
	s := l.state.Load()
	if s.err != nil {
		return time.Time{}
	}
	return s.renewed.Add(l.ttl)
}

// TTL returns how long the lease lives without renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Err returns nil while Valid is true, and otherwise why not: an error wrapping
// ErrLost or ErrReleased.
func (l *Lease) Err() error {
	s := l.state.Load()
	if s.err != nil {
		return s.err
	}
	now := l.now()
	if since := now.Sub(s.renewed); since >= l.ttl {
		return fmt.Errorf("%w: worker %d: no successful renewal for %v (ttl %v)", ErrLost, l.worker, since, l.ttl)
	}
	if wait := s.issueFrom.Sub(now); wait > 0 {
		return &settlingError{worker: l.worker, wait: wait}
	}
	return nil
}

// settlingError is Err while a claim waits out a previous holder.
type settlingError struct {
	worker int64
	wait   time.Duration
}

func (e *settlingError) Error() string {
	return fmt.Sprintf("%v: worker %d: %v to go", ErrSettling, e.worker, e.wait.Round(time.Millisecond))
}

func (e *settlingError) Unwrap() error { return ErrSettling }

// RetryAfter returns how long until the lease may issue.
func (e *settlingError) RetryAfter() time.Duration { return e.wait }

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
	"strconv"
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

// keysFor returns the lease key and the high-water key of worker id.
func keysFor(prefix string, id int64) []string {
	lease := prefix + "{" + strconv.FormatInt(id, 10) + "}"
	return []string{lease, lease + ":hw"}
}

// claimScript claims KEYS[1] for ARGV[1] with a TTL of ARGV[2] ms if it is free
// or already ours, and returns {1, mark, found} ({0} if held by another
// owner). The mark is the saved ms, or a previous holder's unreleased until if
// later; found is 0 when the hash had neither (never used, or lost). ARGV[3]
// is our own until.
var claimScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then
  return {0}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local hw = redis.call('HMGET', KEYS[2], 'ms', 'until', 'owner')
local ms, untl, by = hw[1], hw[2], hw[3]
if untl and by ~= ARGV[1] and (not ms or tonumber(untl) > tonumber(ms)) then
  ms = untl
  redis.call('HSET', KEYS[2], 'ms', ms)
end
local found = 1
if not ms and not untl then found = 0 end
redis.call('HSET', KEYS[2], 'until', ARGV[3], 'owner', ARGV[1])
return {1, ms or '', found}
`)

// raiseLua sets a hash field to a number unless it holds a larger one. The
// number is written as the caller sent it, never through Lua's tostring.
const raiseLua = `
local function raise(key, field, v)
  if v == '' then return end
  local cur = redis.call('HGET', key, field)
  if not cur or tonumber(v) > tonumber(cur) then
    redis.call('HSET', key, field, v)
  end
end
`

// renewScript extends KEYS[1] to ARGV[2] ms if ARGV[1] owns it and raises the
// saved mark to ARGV[3] and our until to ARGV[4]. It returns 1 when renewed, 0
// when the key is gone and -1 when another owner holds it.
var renewScript = redis.NewScript(raiseLua + `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if cur ~= ARGV[1] then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
raise(KEYS[2], 'ms', ARGV[3])
raise(KEYS[2], 'until', ARGV[4])
return 1
`)

// releaseScript, if ARGV[1] owns KEYS[1], raises the saved mark to ARGV[2],
// drops our until (we have stopped issuing) and deletes the lease. It returns
// 1 when released and 0 when not the owner.
var releaseScript = redis.NewScript(raiseLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
raise(KEYS[2], 'ms', ARGV[2])
redis.call('HDEL', KEYS[2], 'until', 'owner')
redis.call('DEL', KEYS[1])
return 1
`)

// take claims worker id for Acquire and makes it the lease's worker.
func (l *Lease) take(ctx context.Context, id int64) (bool, error) {
	keys := keysFor(l.prefix, id)
	ok, st, err := l.claim(ctx, id, keys)
	if err != nil || !ok {
		return false, err
	}
	l.worker, l.keys = id, keys
	l.state.Store(st)
	return true, nil
}

// claim runs claimScript for worker id. It reports false if another owner
// holds the worker, and on success returns the new state.
func (l *Lease) claim(ctx context.Context, id int64, keys []string) (bool, *state, error) {
	start := l.now()
	res, err := claimScript.Run(ctx, l.rdb, keys, l.owner, l.ttl.Milliseconds(), untilMs(start, l.ttl)).Slice()
	if err != nil {
		return false, nil, fmt.Errorf("lease: claiming worker %d: %w", id, err)
	}
	if len(res) != 3 || res[0] != int64(1) {
		return false, nil, nil
	}
	st := &state{renewed: start}
	if res[2] == int64(0) && !l.private {
		st.issueFrom = start.Add(l.ttl)
		l.log.Warn("lease: worker id has no high-water mark: it was never used, or its state was lost; "+
			"waiting one lease ttl, until any previous holder has stopped, before issuing",
			"worker_id", id, "wait", l.ttl.String())
	}
	if s, _ := res[1].(string); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return false, nil, fmt.Errorf("lease: worker %d: bad high-water mark %q in %s", id, s, keys[1])
		}
		st.highWater = time.UnixMilli(ms).UTC()
	}
	return true, st, nil
}

// markMs returns t as Unix ms, or "" for the zero time (no mark).
func markMs(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// untilMs returns the lease end, start+ttl, as Unix ms rounded up.
func untilMs(start time.Time, ttl time.Duration) string {
	return strconv.FormatInt(start.Add(ttl+time.Millisecond-1).UnixMilli(), 10)
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

// Run keeps the lease until ctx ends or Release is called. Every RenewEvery it
// renews the lease and saves highWater() (nil or a zero time saves nothing);
// after a failed renewal it retries four times as often. When the lease is
// lost it calls OnChange(false) and from then on tries to claim the same
// worker ID again, calling OnChange(true) once it has. It never releases the
// lease: call Release after Run has returned and the last ID is issued.
func (l *Lease) Run(ctx context.Context, highWater func() time.Time) {
	retry := max(l.renewEvery/4, time.Millisecond)
	delay := l.renewEvery - l.now().Sub(l.state.Load().renewed)
	t := time.NewTimer(min(max(delay, 0), l.renewEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, l.renewEvery)
		err := l.renew(sctx, highWater)
		cancel()
		switch {
		case errors.Is(err, ErrReleased):
			return
		case err != nil:
			t.Reset(retry)
		default:
			t.Reset(l.renewEvery)
		}
	}
}

// renew does one step of Run: it renews a held lease, or marks it lost, or
// claims a lost lease's worker again. It returns nil when the lease is held
// afterwards.
func (l *Lease) renew(ctx context.Context, highWater func() time.Time) error {
	l.mu.Lock()
	changed, err := l.step(ctx, highWater)
	l.mu.Unlock()
	if changed && l.onChange != nil {
		l.onChange(err == nil)
	}
	return err
}

// step is renew under l.mu; changed reports a change of validity.
func (l *Lease) step(ctx context.Context, highWater func() time.Time) (changed bool, err error) {
	s := l.state.Load()
	if s.releasing() {
		return false, s.err
	}
	if s.err != nil {
		ok, st, err := l.claim(ctx, l.worker, l.keys)
		if err != nil {
			l.log.Debug("lease: claiming lost worker id again failed", "worker_id", l.worker, "err", err)
			return false, err
		}
		if !ok {
			return false, s.err
		}
		l.state.Store(st)
		l.log.Info("lease: claimed lost worker id again", "worker_id", l.worker, "high_water", l.HighWater())
		return true, nil
	}
	start := l.now()
	if since := start.Sub(s.renewed); since >= l.ttl {
		return true, l.lose(s, fmt.Sprintf("no successful renewal for %v (ttl %v)", since, l.ttl))
	}
	var mark string
	if highWater != nil {
		mark = markMs(highWater())
	}
	res, err := renewScript.Run(ctx, l.rdb, l.keys, l.owner, l.ttl.Milliseconds(), mark, untilMs(start, l.ttl)).Int64()
	switch {
	case err != nil:
		l.log.Warn("lease: renewal failed", "worker_id", l.worker, "err", err)
		return false, fmt.Errorf("lease: renewing worker %d: %w", l.worker, err)
	case res == 0:
		return true, l.lose(s, "the lease key is gone")
	case res < 0:
		return true, l.lose(s, "another owner holds the lease key")
	}
	l.state.Store(&state{renewed: start, highWater: s.highWater, issueFrom: s.issueFrom})
	return false, nil
}

// lose marks the lease lost for the given reason and returns the error Err
// reports from now on.
func (l *Lease) lose(s *state, reason string) error {
	err := fmt.Errorf("%w: worker %d: %s", ErrLost, l.worker, reason)
	l.state.Store(&state{err: err, renewed: s.renewed, highWater: s.highWater, issueFrom: s.issueFrom})
	l.log.Warn("lease: lost worker id", "worker_id", l.worker, "reason", reason)
	return err
}

// Release saves highWater (the newest millisecond issued, such as the
// generator's HighWater; zero saves nothing) and deletes the lease, if this
// lease still owns the worker; otherwise it changes nothing in Redis. Valid is
// false from the call on. Stop issuing before reading highWater: an ID issued
// after it is not covered. Release is idempotent; after an error it may be
// called again.
func (l *Lease) Release(ctx context.Context, highWater time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state.Load()
	if s.released {
		return nil
	}
	if !s.releasing() {
		// Stop issuing first (and stop Run from claiming again), then tell Redis.
		s = &state{err: fmt.Errorf("%w: worker %d", ErrReleased, l.worker), renewed: s.renewed, highWater: s.highWater}
		l.state.Store(s)
	}
	res, err := releaseScript.Run(ctx, l.rdb, l.keys, l.owner, markMs(highWater)).Int64()
	if err != nil {
		return fmt.Errorf("lease: releasing worker %d: %w", l.worker, err)
	}
	l.state.Store(&state{err: s.err, released: true, renewed: s.renewed, highWater: s.highWater})
	if res == 1 {
		l.log.Info("lease: released worker id", "worker_id", l.worker, "high_water", highWater)
	} else {
		l.log.Warn("lease: not released: another owner holds the worker id or its key is gone", "worker_id", l.worker)
	}
	return nil
}

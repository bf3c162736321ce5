package revlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/token"
)

// Options configures a Follower. Zero values mean the documented defaults.
type Options struct {
	// Threshold is how long after the read that brought its last heartbeat
	// the follower's state counts as fresh. Zero means DefaultThreshold.
	Threshold time.Duration
	// BlockTimeout is how long one XREAD waits; a read that brings nothing
	// in that time (no heartbeat at all) is a fault: resync. Zero means
	// DefaultBlockTimeout.
	BlockTimeout time.Duration
	// Leeway is how long after its exp a revoked token is still remembered
	// (it validates until exp plus the validators' leeway). Zero means
	// token.DefaultLeeway.
	Leeway time.Duration
	// Retention is how long a revoked token whose entry has no exp is
	// remembered, from its entry's time. Zero means
	// token.LogRetention(token.DefaultMaxTTL, token.DefaultLeeway).
	Retention time.Duration
	// Now is the clock: its monotonic reading times heartbeats (pass the
	// same clock's readings to Fresh), its wall time expires tokens. Nil
	// means time.Now.
	Now func() time.Time
	// Registerer, if set, receives the follower's metrics; see metrics.go.
	Registerer prometheus.Registerer
	// Logger receives resyncs and read failures (at most one a second). Nil
	// means slog.Default().
	Logger *slog.Logger
	// Redo, if set, is called when the follower finds that the log lost
	// entries it had applied (reason loss: a failover to a replica that
	// lacked them, an AOF that lost its last second), for each event it
	// keeps after the log's last ID, before it rotates the epoch: it must
	// revoke again (serve's revokes through redisstore.Store), so that every
	// replica, and Redis's records, hear of it again. Nil: the follower
	// keeps them for itself.
	Redo func(ctx context.Context, ev revocation.Event) error
}

// Reasons for a resync, the label of the resyncs metric.
const (
	ReasonStart     = "start"     // the first full read
	ReasonEpoch     = "epoch"     // a heartbeat's epoch is not the snapshot's
	ReasonUnapplied = "unapplied" // a heartbeat names a log ID not applied
	ReasonTrimmed   = "trimmed"   // entries were removed before they were read
	ReasonError     = "error"     // a read failed
	ReasonQuiet     = "quiet"     // nothing came for BlockTimeout, and a stream is behind the follower
	ReasonEntry     = "entry"     // an entry that does not parse
)

// ReasonLoss: entries Redis had acknowledged are gone while the epoch
// stayed (a failover to a replica that lacked them, an AOF everysec crash,
// the log deleted): the follower rotates the epoch, so that every follower
// resyncs and moves its horizon past the loss, then resyncs.
const ReasonLoss = "loss"

// ReasonBacklog: more entries came without a heartbeat than a follower
// keeps track of (maxRecent); it reads the log afresh.
const ReasonBacklog = "backlog"

// maxRecent bounds the entries applied since the last heartbeat.
const maxRecent = 1 << 16

// Follower keeps in memory what the revocation log says is revoked; see the
// package doc. Its query methods are safe for concurrent use with Run.
type Follower struct {
	rdb  redis.UniversalClient
	keys keys
	opts Options
	met  *metrics

	memory
	heardAt time.Time // Options.Now when the last heartbeat was accepted
	// lostAfter is the log's last ID when a loss was found: the events
	// after it are gone from the log. Written and read by Run's goroutine.
	lostAfter revocation.StreamID
}

// memory is what a Follower and a Local share: the state under its lock,
// and what reads it: validation (Mark, Decide) and the feed (Status,
// Since, Snapshot, Changed).
type memory struct {
	mu      sync.RWMutex
	st      *state
	changed chan struct{} // closed and replaced at every change (Changed)
	// version is Status.Version: incremented, under mu, by whatever
	// changes what Snapshot holds.
	version uint64
}

// state is what the log says (the core's State: what is revoked, the
// marks, freshness), the latest events for the feed, and how far the
// streams were read.
type state struct {
	core   *revocation.State
	ring   revocation.Ring
	count  int64  // the log's entries-added up to the last applied
	base   mark   // the last heartbeat's l and n, or the snapshot's
	recent []mark // entries applied since base
	hbPos  string // the last heartbeat read
}

// mark is a log ID and the log's entries-added up to it.
type mark struct {
	id    revocation.StreamID
	count int64
}

// New returns a follower of the log logKey (redisstore.Store.LogKey) on rdb, a
// client of its own: Run holds one of its connections in XREAD BLOCK.
// Leeway and Retention must be the service's (token.Options.Leeway, and
// token.LogRetention of its MaxTTL and Leeway): serve passes both.
func New(rdb redis.UniversalClient, logKey string, opts Options) (*Follower, error) {
	if opts.BlockTimeout < 0 {
		return nil, fmt.Errorf("%w: a negative duration", ErrOptions)
	}
	if err := withDefaults(&opts.Threshold, &opts.Leeway, &opts.Retention, &opts.Now); err != nil {
		return nil, err
	}
	if opts.BlockTimeout == 0 {
		opts.BlockTimeout = DefaultBlockTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Follower{rdb: rdb, keys: keysFor(logKey), opts: opts}
	f.changed = make(chan struct{})
	var err error
	if f.st, err = f.newState("", 0); err != nil {
		return nil, err
	}
	f.met = newMetrics(f)
	if opts.Registerer != nil {
		if err := f.met.register(opts.Registerer); err != nil {
			return nil, err
		}
	}
	return f, nil
}

var _ token.LocalRevocations = (*Follower)(nil)

// withDefaults checks the options a Follower and a Local share and gives
// their zero values the defaults: Threshold, Leeway, Retention, Now.
func withDefaults(threshold, leeway, retention *time.Duration, now *func() time.Time) error {
	if *threshold < 0 || *leeway < 0 || *retention < 0 {
		return fmt.Errorf("%w: a negative duration", ErrOptions)
	}
	if *threshold == 0 {
		*threshold = DefaultThreshold
	}
	if *leeway == 0 {
		*leeway = token.DefaultLeeway
	}
	if *retention == 0 {
		*retention = token.LogRetention(token.DefaultMaxTTL, token.DefaultLeeway)
	}
	if *now == nil {
		*now = time.Now
	}
	return nil
}

// newState returns an empty state of epoch, begun at horizon (Unix ms);
// swap gives it its marks.
func (f *Follower) newState(epoch string, horizon int64) (*state, error) {
	core, err := revocation.NewState(revocation.Options{Leeway: f.opts.Leeway, Retention: f.opts.Retention}, epoch, horizon)
	if err != nil {
		return nil, err
	}
	return &state{core: core}, nil
}

// notify wakes Changed's waiters. Under m.mu (write).
func (m *memory) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change: an entry applied, a
// heartbeat accepted, a full read begun or done.
func (m *memory) Changed() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

// Run follows the log until ctx ends, then returns ctx's error: a full
// read, then XREAD BLOCK, and a full read again after every fault. A fault
// before any heartbeat was accepted since the last full read (Redis down, a
// resync that does not hold) waits first, from 10 ms doubling up to a
// second: the follower never spins. go-redis does not interrupt a blocked
// read when ctx ends: Run returns within BlockTimeout of it. A frozen Redis
// or a half-open connection holds a read for BlockTimeout and a second more
// on a client with ContextTimeoutEnabled (else go-redis's 10 s more); Fresh
// is false from Threshold after the last heartbeat meanwhile.
func (f *Follower) Run(ctx context.Context) error {
	reason, backoff := ReasonStart, time.Duration(0)
	var logged time.Time
	rotating := false // a rotation owed, until it succeeds (a read error may come between)
	for {
		var err error
		if reason == ReasonLoss {
			f.redo(ctx)
		}
		if rotating = rotating || lost(reason); rotating {
			if err = f.rotate(ctx); err == nil {
				rotating = false
			}
		}
		var sent time.Time
		if err == nil {
			sent, err = f.sync(ctx, reason)
		}
		switch {
		case errors.Is(err, errLoss):
			reason = ReasonLoss
		case err == nil:
			reason, err = f.follow(ctx, sent)
		default:
			reason = ReasonError
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(logged) >= time.Second {
			logged = time.Now()
			f.opts.Logger.Warn("revocation log follower resyncs", "reason", reason, "err", errString(err))
		}
		if !f.lastHeartbeat().IsZero() {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// lost reports whether a resync's reason means that entries are gone
// that this follower may not have applied: a loss, or entries removed
// before it read them (trimmed, unapplied). Trimming by the retention
// removes only entries of expired tokens, which a follower that keeps up
// has read long before; anything else (XTRIM or XDEL by hand, a follower
// that fell more than the retention behind) may have removed a revocation
// no state holds. So the follower rotates the epoch first: every follower
// resyncs with a new horizon, and tokens issued before it are decided by
// Redis's records again.
func lost(reason string) bool {
	return reason == ReasonLoss || reason == ReasonTrimmed || reason == ReasonUnapplied
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

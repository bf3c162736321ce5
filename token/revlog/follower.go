package revlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

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
	// revoke again (serve's revokes through token.Store), so that every
	// replica, and Redis's records, hear of it again. Nil: the follower
	// keeps them for itself.
	Redo func(ctx context.Context, ev Event) error
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

// Sizes of what a Follower keeps.
const (
	// maxRecent bounds the entries applied since the last heartbeat.
	maxRecent = 1 << 16
	// ringSize is how many recent events Since can resume from (at least;
	// up to twice as many are kept).
	ringSize = 4096
)

// Follower keeps in memory what the revocation log says is revoked; see the
// package doc. Its query methods are safe for concurrent use with Run.
type Follower struct {
	rdb  redis.UniversalClient
	keys keys
	opts Options
	met  *metrics

	mu      sync.RWMutex
	st      *state
	fresh   freshness
	heardAt time.Time // Options.Now when the last heartbeat was accepted
	// lostAfter is the log's last ID when a loss was found: the events
	// after it are gone from the log. Written and read by Run's goroutine.
	lostAfter streamID
	changed   chan struct{} // closed and replaced at every change (Changed)
}

// state is what the log says, and how far it was read.
type state struct {
	tokens   map[string]int64 // jti -> Unix s after which it is forgotten
	subjects map[string]subjectEntry
	clients  map[string]clientEntry
	epoch    string
	horizon  int64    // Unix ms when the epoch began
	applied  streamID // the last log entry applied
	count    int64    // the log's entries-added up to applied
	base     mark     // the last heartbeat's l and n, or the snapshot's
	recent   []mark   // entries applied since base
	hbPos    string   // the last heartbeat read
	forgotAt int64    // Unix s of the last forget
	// start is the first mark of this state, seq the last: marks below
	// start were taken of an earlier state (token.LogMark).
	start, seq token.LogMark
	// events are the latest events applied, oldest first; every entry
	// after ringFrom is among them.
	events   []Event
	ids      []streamID
	ringFrom streamID
}

// subjectEntry is the latest entry of a subject.
type subjectEntry struct {
	marker string
	at     int64         // Unix ms, the entry's ID
	seq    token.LogMark // the mark it was applied at
	local  bool          // SubjectRevokedHere's, until the entry comes
}

// clientEntry is the latest cutoff of a client.
type clientEntry struct {
	cutoff int64 // Unix ms; math.MaxInt64 when it did not parse
	at     int64 // Unix ms, the entry's ID
}

// mark is a log ID and the log's entries-added up to it.
type mark struct {
	id    streamID
	count int64
}

// freshness is when the last heartbeat was accepted.
type freshness struct {
	at     time.Time // the send time of the read before the one that brought it; zero: none since the last snapshot
	synced bool
}

// New returns a follower of the log logKey (token.Store.LogKey) on rdb, a
// client of its own: Run holds one of its connections in XREAD BLOCK.
// Leeway and Retention must be the service's (token.Options.Leeway, and
// token.LogRetention of its MaxTTL and Leeway): serve passes both.
func New(rdb redis.UniversalClient, logKey string, opts Options) (*Follower, error) {
	if opts.Threshold < 0 || opts.BlockTimeout < 0 || opts.Leeway < 0 || opts.Retention < 0 {
		return nil, fmt.Errorf("%w: a negative duration", ErrOptions)
	}
	if opts.Threshold == 0 {
		opts.Threshold = DefaultThreshold
	}
	if opts.BlockTimeout == 0 {
		opts.BlockTimeout = DefaultBlockTimeout
	}
	if opts.Leeway == 0 {
		opts.Leeway = token.DefaultLeeway
	}
	if opts.Retention == 0 {
		opts.Retention = token.LogRetention(token.DefaultMaxTTL, token.DefaultLeeway)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Follower{rdb: rdb, keys: keysFor(logKey), opts: opts, st: newState(), changed: make(chan struct{})}
	f.met = newMetrics(f)
	if opts.Registerer != nil {
		if err := f.met.register(opts.Registerer); err != nil {
			return nil, err
		}
	}
	return f, nil
}

var _ token.LocalRevocations = (*Follower)(nil)

// newState returns an empty state; swap gives it its marks.
func newState() *state {
	return &state{tokens: map[string]int64{}, subjects: map[string]subjectEntry{}, clients: map[string]clientEntry{},
		start: 1, seq: 1}
}

// notify wakes Changed's waiters. Under f.mu (write).
func (f *Follower) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change: an entry applied, a
// heartbeat accepted, a full read begun or done.
func (f *Follower) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

// TokenRevokedHere records that this replica revoked the token jti,
// whose exp is exp (Unix s; 0 unknown: remembered for the retention), as
// its log entry will (token.LocalRevocations).
func (f *Follower) TokenRevokedHere(jti string, exp int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.opts.Now()
	until := now.Add(f.opts.Retention).Unix()
	if exp > 0 {
		until = exp + int64(f.opts.Leeway/time.Second) + 1
	}
	if until > now.Unix() {
		f.st.tokens[jti] = max(f.st.tokens[jti], until)
	}
}

// SubjectRevokedHere records, until the log's entry comes, that this
// replica revoked subject: every check marked before now is void for its
// tokens (token.LocalRevocations).
func (f *Follower) SubjectRevokedHere(subject string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	st.seq++
	at := f.opts.Now().UnixMilli()
	if cur, ok := st.subjects[subject]; ok {
		at = max(at, cur.at)
	}
	st.subjects[subject] = subjectEntry{at: at, seq: st.seq, local: true}
}

// ClientRevokedHere records, until the log's entry comes, that this
// replica revoked client's tokens up to cutoff, Unix ms
// (token.LocalRevocations).
func (f *Follower) ClientRevokedHere(client string, cutoff int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.st.clients[client]; !ok || cutoff > cur.cutoff {
		f.st.clients[client] = clientEntry{cutoff: cutoff, at: f.opts.Now().UnixMilli()}
	}
}

// Mark returns the follower's position (token.Revocations).
func (f *Follower) Mark() token.LogMark {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.seq
}

// Decide tells what the log says of a token at now (token.Revocations,
// whose doc gives the rule).
func (f *Follower) Decide(now time.Time, q token.LogQuery) token.LogVerdict {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.isFresh(now) {
		return token.LogUnknown
	}
	st := f.st
	if _, ok := st.tokens[q.JTI]; ok {
		return token.LogRevoked
	}
	if c, ok := st.clients[q.Client]; ok && q.Issued <= c.cutoff {
		return token.LogRevoked
	}
	s, ok := st.subjects[q.Subject]
	switch {
	case q.Checked >= st.start:
		if ok && s.seq > q.Checked {
			return token.LogUnknown // the subject was revoked since Redis said live
		}
		return token.LogLive
	case ok:
		return token.LogUnknown // only Redis's markers tell which of its tokens are before the entry
	case q.Issued <= st.horizon+f.opts.Leeway.Milliseconds():
		return token.LogUnknown // a revocation of it may predate the log
	}
	return token.LogLive
}

// TokenRevoked reports whether the log revoked the token jti.
func (f *Follower) TokenRevoked(jti string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.st.tokens[jti]
	return ok
}

// SubjectMarker is the latest marker the log gave sub.
func (f *Follower) SubjectMarker(sub string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.subjects[sub]
	return s.marker, ok
}

// ClientCutoff is the latest time (Unix ms) up to which the log revoked
// client's tokens; math.MaxInt64 when an entry's time did not parse (all
// of them: fail closed).
func (f *Follower) ClientCutoff(client string) (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.st.clients[client]
	return c.cutoff, ok
}

// Fresh reports whether the state may be decided on at now (a reading of
// Options.Now): see the package doc.
func (f *Follower) Fresh(now time.Time) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.isFresh(now)
}

// isFresh is Fresh, under f.mu.
func (f *Follower) isFresh(now time.Time) bool {
	return f.fresh.synced && !f.fresh.at.IsZero() && now.Sub(f.fresh.at) < f.opts.Threshold
}

// Heard reports whether the follower accepted a heartbeat within the
// last d (WriterOptions.Heard).
func (f *Follower) Heard(d time.Duration) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return !f.heardAt.IsZero() && f.opts.Now().Sub(f.heardAt) < d
}

// lastHeartbeat is when the last heartbeat was accepted (zero: none).
func (f *Follower) lastHeartbeat() time.Time {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.fresh.at
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

// redo gives Options.Redo every event of the state whose ID is after the
// log's last ID (f.lostAfter), as the loss left it; a failure is logged
// (the rotation that follows still sends every replica to Redis for the
// older tokens).
func (f *Follower) redo(ctx context.Context) {
	if f.opts.Redo == nil {
		return
	}
	f.mu.RLock()
	after := f.lostAfter
	var evs []Event
	for i, id := range f.st.ids {
		if after.less(id) {
			evs = append(evs, f.st.events[i])
		}
	}
	f.mu.RUnlock()
	for _, ev := range evs {
		if err := f.opts.Redo(ctx, ev); err != nil {
			f.opts.Logger.Error("a revocation the revocation log lost could not be written again", "kind", ev.Kind, "event", ev.ID, "err", err.Error())
		}
	}
	if len(evs) > 0 {
		f.opts.Logger.Warn("revocations the revocation log lost written again", "events", len(evs))
	}
}

// errLoss: the log holds fewer entries, or an earlier last ID, than the
// state applied in the same epoch.
var errLoss = errors.New("revlog: entries applied earlier are gone from the log")

// rotate replaces the epoch the state holds with a new one, unless another
// follower did already.
func (f *Follower) rotate(ctx context.Context) error {
	f.mu.RLock()
	epoch := f.st.epoch
	f.mu.RUnlock()
	if err := rotateScript.Run(ctx, f.rdb, []string{f.keys.epoch}, epoch, newToken()).Err(); err != nil {
		return fmt.Errorf("revlog: rotate the epoch: %w", err)
	}
	return nil
}

// snapshotLua, with KEYS log, hb, epoch and ARGV a new epoch: the epoch,
// the log's last ID and entries-added, and the heartbeat stream's last ID.
var snapshotScript = redis.NewScript(infoLua + `
local hb = '0-0'
local r = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #r > 0 then hb = r[1][1] end
return {e, last, tostring(n), hb}
`)

// snapshot is what snapshotScript read.
type snapshot struct {
	epoch, lastID, hbID string
	last, hb            streamID
	count, horizon      int64
}

func (f *Follower) snapshot(ctx context.Context) (snapshot, error) {
	r, err := snapshotScript.Run(ctx, f.rdb, []string{f.keys.log, f.keys.hb, f.keys.epoch}, newToken()).StringSlice()
	if err != nil {
		return snapshot{}, fmt.Errorf("revlog: snapshot: %w", err)
	}
	if len(r) != 4 {
		return snapshot{}, fmt.Errorf("%w: snapshot %q", ErrEntry, r)
	}
	sn := snapshot{epoch: r[0], lastID: r[1], hbID: r[3]}
	var err1, err2, err3, err4 error
	sn.last, err1 = parseID(r[1])
	sn.hb, err2 = parseID(r[3])
	sn.count, err3 = strconv.ParseInt(r[2], 10, 64)
	sn.horizon, err4 = horizonOf(r[0])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return snapshot{}, fmt.Errorf("%w: snapshot %q: %w", ErrEntry, r, err)
	}
	return sn, nil
}

// sync counts a full read for reason, makes the follower unfresh, reads the whole log up to the
// snapshot's last ID, and swaps the state in, with what the state before
// it held merged in (a revocation is never undone). It returns when the
// snapshot was sent: every heartbeat a read from the snapshot's brings was
// written after. errLoss when the log is behind what the state before
// it applied in the same epoch.
func (f *Follower) sync(ctx context.Context, reason string) (time.Time, error) {
	f.mu.Lock()
	// Counted with the reset of freshness, under the lock: whoever sees
	// the count sees the state unfresh until this read is done.
	f.met.resyncs.WithLabelValues(reason).Inc()
	f.fresh = freshness{}
	f.met.resynced(f.opts.Now())
	prev := f.st
	f.notify()
	f.mu.Unlock()
	sent := f.opts.Now()
	sn, err := f.snapshot(ctx)
	if err != nil {
		return sent, err
	}
	if sn.epoch == prev.epoch && (sn.count < prev.count || sn.last.less(prev.applied)) {
		f.mu.Lock()
		f.lostAfter = sn.last
		f.mu.Unlock()
		return sent, fmt.Errorf("%w: applied %s (%d added), the log is at %s (%d added)", errLoss, prev.applied, prev.count, sn.last, sn.count)
	}
	st := newState()
	st.epoch, st.horizon, st.hbPos, st.applied, st.count = sn.epoch, sn.horizon, sn.hbID, sn.last, sn.count
	st.base = mark{st.applied, st.count}
	now := f.opts.Now()
	for start := "-"; sn.last != (streamID{}); {
		msgs, err := f.rdb.XRangeN(ctx, f.keys.log, start, sn.lastID, pageSize).Result()
		if err != nil {
			return sent, fmt.Errorf("revlog: full read: %w", err)
		}
		for _, m := range msgs {
			if err := f.applyEntry(st, m, now); err != nil {
				return sent, err
			}
		}
		if len(msgs) < pageSize {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	// Up to the last ID Redis generated, read or not: an entry deleted
	// since (XDEL, or trimmed) is not there to read, and a heartbeat names
	// the last generated.
	st.applied = sn.last
	st.forget(now, f.opts.Retention)
	f.swap(st, now)
	return sent, nil
}

// swap puts st, a full read's, in force. Every mark taken of the state
// before, even one that a local note (SubjectRevokedHere) moved past st's
// start while the read ran, stays below st's start; and every subject
// entry of st counts as of the full read.
func (f *Follower) swap(st *state, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The state in force as it is now, with the local notes taken while
	// the read ran (they write it under f.mu).
	st.merge(f.st, now)
	st.start = max(st.start, f.st.seq+1)
	st.seq = st.start
	for sub, e := range st.subjects {
		e.seq = st.start
		st.subjects[sub] = e
	}
	f.st, f.fresh.synced = st, true
	f.notify()
}

// merge adds to st what prev knew and st does not: its tokens not yet
// forgotten, a later entry of a subject (at st's start: Redis checks taken
// since saw it), a later cutoff of a client.
func (st *state) merge(prev *state, now time.Time) {
	for jti, until := range prev.tokens {
		if until > now.Unix() && until > st.tokens[jti] {
			st.tokens[jti] = until
		}
	}
	for sub, e := range prev.subjects {
		if cur, ok := st.subjects[sub]; !ok || e.at > cur.at {
			e.seq = st.start
			st.subjects[sub] = e
		}
	}
	for c, e := range prev.clients {
		if cur, ok := st.clients[c]; !ok || e.cutoff > cur.cutoff {
			st.clients[c] = e
		}
	}
}

// readSlack is how much longer than BlockTimeout a read may take: the
// deadline of its context, which a client with ContextTimeoutEnabled (as
// package config builds them) holds the connection to. Without it go-redis
// waits BlockTimeout and 10 s more.
const readSlack = time.Second

// follow reads both streams until a fault, which it returns as a reason.
// since is when the read before was sent whose reply left no heartbeat
// unread (at first, the snapshot): a heartbeat the next read brings was
// written after since, so since is its freshness stamp, never the later
// send time of the read that brought it (which a heartbeat written long
// before, left unread by a full page, would make look new).
func (f *Follower) follow(ctx context.Context, since time.Time) (string, error) {
	for {
		f.mu.RLock()
		pos, hbPos := f.st.applied.String(), f.st.hbPos
		f.mu.RUnlock()
		sent := f.opts.Now()
		rctx, cancel := context.WithTimeout(ctx, f.opts.BlockTimeout+readSlack)
		res, err := f.rdb.XRead(rctx, &redis.XReadArgs{Streams: []string{f.keys.log, f.keys.hb, pos, hbPos},
			Count: pageSize, Block: f.opts.BlockTimeout}).Result()
		cancel()
		if errors.Is(err, redis.Nil) {
			if reason, err := f.quiet(ctx); reason != "" {
				return reason, err
			}
			since = sent
			continue
		}
		if err != nil {
			return ReasonError, err
		}
		full, reason, err := f.apply(res, since)
		if reason != "" {
			return reason, err
		}
		if !full {
			since = sent
		}
	}
}

// quiet checks, when a read brought nothing in BlockTimeout, that reading
// on can still bring something: that the epoch is the same and neither
// stream is behind the IDs read from (a Redis restarted with a clock behind
// adds entries a read from them never returns). Without a writer this is
// one snapshot script a BlockTimeout, never a full read.
func (f *Follower) quiet(ctx context.Context) (string, error) {
	sn, err := f.snapshot(ctx)
	if err != nil {
		return ReasonError, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	hb, err := parseID(f.st.hbPos)
	switch {
	case err != nil:
		return ReasonEntry, err
	case sn.epoch != f.st.epoch:
		return ReasonEpoch, nil
	case sn.count < f.st.count || sn.last.less(f.st.applied):
		f.lostAfter = sn.last // under f.mu's read lock: only this goroutine writes it
		return ReasonLoss, nil
	case sn.hb.less(hb):
		return ReasonQuiet, nil
	}
	return "", nil
}

// apply applies one XREAD reply: its log entries, then, unless the log
// part is a full page (more may follow: full), its heartbeats, stamped
// fresh as of since (see follow). It returns a reason to resync, or "".
func (f *Follower) apply(res []redis.XStream, since time.Time) (full bool, reason string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, now := f.st, f.opts.Now()
	var hbs []redis.XMessage
	for _, s := range res {
		if s.Stream == f.keys.hb {
			hbs = s.Messages
			continue
		}
		for _, m := range s.Messages {
			if err := f.applyEntry(st, m, now); err != nil {
				return false, ReasonEntry, err
			}
			st.count++
			st.recent = append(st.recent, mark{st.applied, st.count})
		}
		full = len(s.Messages) == pageSize
	}
	f.notify()
	if len(st.recent) > maxRecent {
		return full, ReasonBacklog, nil
	}
	if full {
		return true, "", nil // the heartbeats are read again with the rest
	}
	for _, m := range hbs {
		if reason, err := f.applyHeartbeat(st, m); reason != "" {
			return false, reason, err
		}
	}
	if len(hbs) > 0 {
		f.met.accepted(since, now)
		f.fresh.at, f.heardAt = since, now
		st.forget(now, f.opts.Retention)
	}
	return false, "", nil
}

// applyHeartbeat checks one heartbeat against the state and moves the base
// to it; see the package doc.
func (f *Follower) applyHeartbeat(st *state, m redis.XMessage) (string, error) {
	st.hbPos = m.ID
	e, _ := m.Values["e"].(string)
	ls, _ := m.Values["l"].(string)
	ns, _ := m.Values["n"].(string)
	l, err := parseID(ls)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	if err != nil || err2 != nil {
		return ReasonEntry, fmt.Errorf("%w: heartbeat %s %v", ErrEntry, m.ID, m.Values)
	}
	if e != st.epoch {
		return ReasonEpoch, nil
	}
	if st.applied.less(l) {
		return ReasonUnapplied, nil
	}
	if l.less(st.base.id) {
		f.lostAfter = l
		return ReasonLoss, nil // older than what we read: entries we applied are gone
	}
	if hb, err := parseID(m.ID); err == nil && l.less(st.applied) && hb.ms > st.applied.ms {
		// Appended after the last entry applied (Redis's clock, a later
		// millisecond), yet it does not name it: the log lost it.
		f.lostAfter = l
		return ReasonLoss, nil
	}
	at, i := st.base.count, 0
	for ; i < len(st.recent) && !l.less(st.recent[i].id); i++ {
		at = st.recent[i].count
	}
	switch {
	case n < at:
		f.lostAfter = l
		return ReasonLoss, nil // fewer entries added than we applied
	case n > at:
		return ReasonTrimmed, nil // some were removed before we read them
	}
	st.base, st.recent = mark{l, n}, append(st.recent[:0], st.recent[i:]...)
	return "", nil
}

// applyEntry applies one log entry to st and makes it the last applied.
func (f *Follower) applyEntry(st *state, m redis.XMessage, now time.Time) error {
	id, err := parseID(m.ID)
	if err != nil {
		return err
	}
	k, _ := m.Values["k"].(string)
	i, _ := m.Values["i"].(string)
	v, _ := m.Values["v"].(string)
	at := int64(id.ms)
	ev := Event{ID: st.epoch + "-" + m.ID, Kind: k, Key: i, At: at}
	st.seq++
	switch k {
	case KindToken:
		until := at/1000 + int64(f.opts.Retention/time.Second)
		if exp, err := strconv.ParseInt(v, 10, 64); err == nil && exp > 0 {
			until, ev.Exp = exp+int64(f.opts.Leeway/time.Second)+1, exp
		}
		if until > now.Unix() {
			st.tokens[i] = max(st.tokens[i], until)
		}
	case KindSubject:
		if cur, ok := st.subjects[i]; !ok || cur.local || at >= cur.at {
			st.subjects[i] = subjectEntry{marker: v, at: at, seq: st.seq}
		}
	case KindClient:
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			c = math.MaxInt64
		}
		if cur, ok := st.clients[i]; !ok || c > cur.cutoff {
			st.clients[i] = clientEntry{cutoff: c, at: at}
		}
		ev.Cutoff = c
	default:
		return fmt.Errorf("%w: log entry %s of kind %q", ErrEntry, m.ID, k)
	}
	st.applied = id
	st.record(ev, id)
	f.met.applied.Inc()
	return nil
}

// record keeps ev among the latest events, dropping the oldest half when
// twice ringSize are kept.
func (st *state) record(ev Event, id streamID) {
	if len(st.events) >= 2*ringSize {
		n := len(st.events) - ringSize
		st.ringFrom = st.ids[n-1]
		st.events = append([]Event(nil), st.events[n:]...)
		st.ids = append([]streamID(nil), st.ids[n:]...)
	}
	st.events, st.ids = append(st.events, ev), append(st.ids, id)
}

// forget drops the tokens whose time is over, and the subjects and
// clients whose latest entry is older than retention (every token it
// covers has expired): a scan of the maps, at most once a second of now.
func (st *state) forget(now time.Time, retention time.Duration) {
	if now.Unix() <= st.forgotAt {
		return
	}
	st.forgotAt = now.Unix()
	for jti, until := range st.tokens {
		if until <= now.Unix() {
			delete(st.tokens, jti)
		}
	}
	old := now.Add(-retention).UnixMilli()
	for sub, e := range st.subjects {
		if e.at < old {
			delete(st.subjects, sub)
		}
	}
	for c, e := range st.clients {
		if e.at < old && e.cutoff < old {
			delete(st.clients, c)
		}
	}
}

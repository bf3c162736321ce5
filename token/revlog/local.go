package revlog

import (
	"context"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/token"
)

// LocalOptions configures a Local. Zero values mean the documented defaults.
type LocalOptions struct {
	// Period is how often Run beats (the state counts as fresh from each
	// beat for Threshold). Zero means DefaultPeriod.
	Period time.Duration
	// Threshold is how long after a beat the state counts as fresh. Zero
	// means DefaultThreshold.
	Threshold time.Duration
	// Leeway and Retention are Options's: the service's leeway and
	// token.LogRetention of its MaxTTL and leeway. Zero means their
	// defaults.
	Leeway, Retention time.Duration
	// Horizon is when the log begins: no revocation before it is missing
	// from it. Zero means when NewLocal runs. Dev mode passes its start
	// less the leeway and a second: its embedded Redis and its signing key
	// are new with the process, so no revocation predates it and no token
	// of its key was issued before it (the rules leave a token issued
	// within the leeway after the horizon undecided, a consumer's to the
	// second of its iat).
	Horizon time.Time
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Local is a revocation log of one replica's own, in process, with no
// Redis: what the dev mode (the embedded Redis, which cannot carry the
// log's heartbeats) decides from and serves on the feed. Each revocation
// this replica makes (token.LocalRevocations) is appended as an event of
// its own epoch, begun when the Local was made (the horizon), and applied
// to the revocation core's State at once; Run beats, in process, so that
// the state counts as fresh while the process runs. Validation and the
// feed read it as they read a Follower. It is safe for concurrent use.
//
//	NewLocal ──▶ epoch <32 hex>.<now ms>, horizon Horizon, an empty State, synced
//	*RevokedHere ──▶ event <epoch>-<now ms>-<seq> ──▶ State.Apply, Ring.Record ──▶ Changed
//	Run: every Period ──▶ State.Heard(now, Threshold), Forget ──▶ Changed
type Local struct {
	opts LocalOptions
	memory
}

// NewLocal returns a Local whose epoch begins now.
func NewLocal(opts LocalOptions) (*Local, error) {
	if opts.Period < 0 {
		return nil, fmt.Errorf("%w: a negative duration", ErrOptions)
	}
	if err := withDefaults(&opts.Threshold, &opts.Leeway, &opts.Retention, &opts.Now); err != nil {
		return nil, err
	}
	if opts.Period == 0 {
		opts.Period = DefaultPeriod
	}
	now := opts.Now()
	if opts.Horizon.IsZero() {
		opts.Horizon = now
	}
	epoch := fmt.Sprintf("%s.%d", newToken(), now.UnixMilli())
	core, err := revocation.NewState(revocation.Options{Leeway: opts.Leeway, Retention: opts.Retention}, epoch, opts.Horizon.UnixMilli())
	if err != nil {
		return nil, err
	}
	core.Adopt(nil, now)
	l := &Local{opts: opts}
	l.st, l.changed = &state{core: core}, make(chan struct{})
	return l, nil
}

var _ token.LocalRevocations = (*Local)(nil)

// Run beats every Period until ctx ends, then returns ctx's error.
func (l *Local) Run(ctx context.Context) error {
	t := time.NewTicker(l.opts.Period)
	defer t.Stop()
	for {
		l.beat()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// beat makes the state fresh from now, and forgets what is past.
func (l *Local) beat() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	l.st.core.Heard(now, l.opts.Threshold)
	if l.st.core.Forget(now) {
		l.version++
	}
	l.notify()
}

// TokenRevokedHere appends the revocation of the token jti, whose exp is
// exp (Unix s; 0 unknown), to the log (token.LocalRevocations).
func (l *Local) TokenRevokedHere(jti string, exp int64) {
	l.append(revocation.Event{Kind: revocation.KindToken, Key: jti, Exp: exp})
}

// SubjectRevokedHere appends the revocation of subject's tokens to the
// log (token.LocalRevocations).
func (l *Local) SubjectRevokedHere(subject string) {
	l.append(revocation.Event{Kind: revocation.KindSubject, Key: subject})
}

// ClientRevokedHere appends the revocation of client's tokens up to
// cutoff, Unix ms, to the log (token.LocalRevocations).
func (l *Local) ClientRevokedHere(client string, cutoff int64) {
	l.append(revocation.Event{Kind: revocation.KindClient, Key: client, Cutoff: cutoff})
}

// append gives ev the next ID of the epoch (now's ms, or the last's when
// the clock has not moved past it) and its time, and applies it.
func (l *Local) append(ev revocation.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	id := l.st.core.Last()
	if ms := uint64(max(now.UnixMilli(), 0)); ms > id.MS {
		id.StreamID = revocation.StreamID{MS: ms}
	} else {
		id.Seq++
	}
	ev.ID, ev.At = id.String(), int64(id.MS)
	if err := l.st.core.Apply(ev, now); err != nil {
		panic(err) // the ID follows the last and the kind is ours: never
	}
	l.st.ring.Record(ev, id.StreamID)
	l.version++
	l.notify()
}

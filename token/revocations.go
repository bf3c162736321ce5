package token

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Revocations is what Verdict needs from a follower of the revocation log
// (the log every revocation of a Store appends to; revlog.Follower is one)
// to decide on a token from memory, with no Redis command. A nil
// Revocations (Options.Revocations) means every validation reads Redis, as
// before the log existed.
//
// How Verdict uses it:
//
//	verdict := Decide(now, LogQuery{jti, sub, client, issued, checked: the mark stored with the cached token,
//	                                parents: an exchanged token's, each with its jti, client and ID's time})
//	LogRevoked ─▶ refused (ErrInvalidToken, ErrRevoked), no Redis
//	LogLive    ─▶ accepted, no Redis
//	LogUnknown ─▶ m := Mark(); the Redis check (Store.Session, or Store.Sessions of the token and its
//	              parents, and SessionLive on each; or the opaque record);
//	              live ─▶ m stored with the cached token, so the next Decide may say LogLive
//
// The rule a Revocations must keep: LogLive only while the state is fresh
// (every entry Redis acknowledged more than its threshold ago is applied),
// the token's jti has no entry, its client's cutoff is before issued, and
// either a Redis check at Checked (a mark of the current full read) said
// live and no entry of the subject was applied after it, or the subject has
// no entry at all and the token was issued after the log's horizon (when
// its epoch began) by more than the leeway, so that no revocation of it can
// predate the log. LogRevoked only for an entry that covers the token.
// With parents (an exchanged token's), the token and each parent are held
// to that rule, each on its own issued time, and combined: any LogRevoked
// is LogRevoked, else any LogUnknown LogUnknown (revocation's cascade).
type Revocations interface {
	// Mark returns the follower's position: every entry applied so far. A
	// Redis check whose request is sent after Mark returned sees at least
	// what those entries wrote.
	Mark() LogMark
	// Decide tells what the log says of a token at now, a reading of the
	// clock Options.Now (whose monotonic part times freshness).
	Decide(now time.Time, q LogQuery) LogVerdict
}

// LogMark is a position in a follower's state (revocation.Mark): it grows
// with every entry applied and jumps past every earlier mark at every full
// read, so a mark taken before a full read never vouches for the state
// after it. Zero is no mark.
type LogMark = revocation.Mark

// LogQuery is one token, as Decide needs it (revocation.Query): Issued is
// the time of the token's ID, Unix ms; Checked the mark taken before the
// last Redis check that found the token (and its parents) live, or zero;
// Parents an exchanged token's, each Issued its ID's time.
type LogQuery = revocation.Query

// LogVerdict is Decide's answer (revocation.Verdict).
type LogVerdict = revocation.Verdict

// Verdicts of Decide, the core's (revocation.State.DecideLog is the rule).
const (
	LogUnknown = revocation.Unknown // not fresh, or the log alone cannot tell: check Redis
	LogLive    = revocation.Live    // nothing in the log covers the token
	LogRevoked = revocation.Revoked // an entry covers the token
)

// LocalRevocations is a Revocations that takes this replica's own
// revocations at once, before their entries come back through the log, so
// that the replica that revoked refuses at once (read your own writes),
// even a token it has never validated. What it is told is what the entry
// will say: a token's jti and exp (Unix s), a subject (whose tokens then
// go to Redis), a client's cutoff as written.
type LocalRevocations interface {
	Revocations
	TokenRevokedHere(jti string, exp int64)
	SubjectRevokedHere(subject string)
	ClientRevokedHere(client string, cutoff int64)
}

// errLogRevoked is a token that the revocation log, or an earlier answer of
// Redis (markRevoked), revokes; made once: refusing costs no allocation.
var errLogRevoked = refusal.Describe(fmt.Errorf("%w: %w: the token was revoked", ErrInvalidToken, ErrRevoked), "the token was revoked")

// fromLog is what Options.Revocations says of v at now: done, with a nil
// error for a live token and errLogRevoked for a revoked one, or not done,
// with the mark to record if the Redis check that must follow finds the
// token live (0 without Revocations).
func (s *Service) fromLog(v *Verified, now time.Time) (m LogMark, done bool, err error) {
	r := s.opts.Revocations
	if r == nil {
		s.stats.noLog.Add(1)
		return 0, false, nil
	}
	checked := v.mark.Load()
	var parents []revocation.Parent
	if v.lineage != nil {
		parents = v.lineage.parents
	}
	if checked == markRevoked {
		s.stats.revoked.Add(1)
		return 0, true, errLogRevoked
	}
	switch r.Decide(now, LogQuery{JTI: v.claims.ID, Subject: v.claims.Subject, Client: v.claims.ClientID,
		Issued: v.parts.Time.UnixMilli(), Checked: LogMark(checked), Parents: parents}) {
	case LogLive:
		s.stats.live.Add(1)
		return 0, true, nil
	case LogRevoked:
		s.stats.revoked.Add(1)
		return 0, true, errLogRevoked
	}
	s.stats.unknown.Add(1)
	return r.Mark(), false, nil // before Redis is read
}

// checked records on v what Redis answered (err) of it after the mark m,
// when there is a log to decide from: live, m, for the next Decide;
// revoked, markRevoked, which nothing replaces.
func (s *Service) checked(v *Verified, m LogMark, err error) {
	var mark uint64
	switch {
	case s.opts.Revocations == nil:
		return
	case err == nil:
		mark = uint64(m)
	case errors.Is(err, ErrRevoked):
		mark = markRevoked
	default:
		return
	}
	for {
		old := v.mark.Load()
		if old == markRevoked || v.mark.CompareAndSwap(old, mark) {
			return
		}
	}
}

// LogStats counts the validations of a service (and of every service
// WithKeys made from it) by how their session was decided. Counts only
// grow.
type LogStats struct {
	// Live and Revoked were decided in memory, with no Redis command: by
	// Options.Revocations, or (Revoked) by an earlier answer of Redis.
	Live, Revoked uint64
	// Unknown read Redis because Options.Revocations could not tell;
	// Uncached because an opaque token not in the cache has its claims in
	// Redis only; NoLog because there is no Options.Revocations.
	Unknown, Uncached, NoLog uint64
}

// logCounters are LogStats, counted.
type logCounters struct {
	live, revoked, unknown, uncached, noLog atomic.Uint64
}

// LogStats returns the counts so far.
func (s *Service) LogStats() LogStats {
	c := s.stats
	return LogStats{Live: c.live.Load(), Revoked: c.revoked.Load(), Unknown: c.unknown.Load(),
		Uncached: c.uncached.Load(), NoLog: c.noLog.Load()}
}

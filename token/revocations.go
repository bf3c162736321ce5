package token

import "time"

// Revocations is what Validate needs from a follower of the revocation log
// (Store.LogKey; revlog.Follower is one) to decide on a token from memory,
// with no Redis command. A nil Revocations (Options.Revocations) means
// every validation reads Redis, as before the log existed.
//
// How Validate uses it:
//
//	verdict := Decide(now, LogQuery{jti, sub, client, issued, checked: the mark stored with the cached token})
//	LogRevoked ─▶ refused (ErrInvalidToken, ErrRevoked), no Redis
//	LogLive    ─▶ accepted, no Redis
//	LogUnknown ─▶ m := Mark(); the Redis check of today (Store.Check, or the opaque record);
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
type Revocations interface {
	// Mark returns the follower's position: every entry applied so far. A
	// Redis check whose request is sent after Mark returned sees at least
	// what those entries wrote.
	Mark() LogMark
	// Decide tells what the log says of a token at now, a reading of the
	// clock Options.Now (whose monotonic part times freshness).
	Decide(now time.Time, q LogQuery) LogVerdict
}

// LogMark is a position in a follower's state: it grows with every entry
// applied and jumps past every earlier mark at every full read, so a mark
// taken before a full read never vouches for the state after it. Zero is
// no mark.
type LogMark uint64

// LogQuery is one token, as Decide needs it.
type LogQuery struct {
	JTI, Subject, Client string
	// Issued is the time of the token's ID, Unix ms.
	Issued int64
	// Checked is the mark taken before the last Redis check that found the
	// token live, or zero.
	Checked LogMark
}

// LogVerdict is Decide's answer.
type LogVerdict int8

// Verdicts of Decide.
const (
	LogUnknown LogVerdict = iota // not fresh, or the log alone cannot tell: check Redis
	LogLive                      // nothing in the log covers the token
	LogRevoked                   // an entry covers the token
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

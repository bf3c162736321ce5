// Package revocation is the revocation core: the vocabulary of the
// revocation log and its feed, and the state that answers "is this token
// revoked?", for the issuer and for consuming services alike. It does no
// I/O: no network, no Redis, no goroutine, no clock of its own (time is a
// parameter). The readers and writers around it are thin: the issuer's
// Redis store writes entries of its Kinds, the issuer's follower (package
// revlog) reads the log from Redis into a State, the feed (package revfeed)
// signs its messages, and client.Follow verifies them into a State of its
// own.
//
//	kind.go     Kind (t, s, c) and each one's SET event URI
//	eventid.go  StreamID and EventID: parse, print, order
//	event.go    Event (one entry), Status and Snapshot (what the feed serves)
//	claims.go   each feed message: its JWT typ and its claims (SET, stream, heartbeat, snapshot, poll)
//	state.go    State: Apply, local notes, freshness, Forget, Adopt, FromSnapshot
//	decide.go   Verdict, Mark, Query, Parent, the cascade, and the two rules: DecideLog (issuer), DecideFeed (consumer)
//	ring.go     Ring: the latest events, which a consumer resumes from
//
// # Identifiers
//
//	stream ID   <ms>-<seq>              a Redis stream entry's: its position in the log, its time on Redis's clock
//	epoch       <32 hex>.<Unix ms>      the log's epoch and when it began (the horizon)
//	event ID    <epoch>-<ms>-<seq>      an event of the feed: ordered within its epoch, never across
//
// # Lifecycle of a State
//
//	NewState(epoch, horizon) ──▶ Apply(event)… (a full read; each after the last)
//	  ──▶ Adopt(state in force)   issuer: merges what it knew, marks start past its marks; synced
//	  or FromSnapshot(snapshot)   consumer: the feed's whole state; synced
//	  ──▶ Heard(stamp, within) ──▶ fresh until stamp+within ──▶ DecideLog / DecideFeed
//	  ──▶ Apply(event)… Note*(…) (the issuer's own revocations)… Forget(now) at most once a second
//	  ──▶ Stale() at a resync ──▶ a new State, adopted
//
// # The two rules
//
// Both read one state. The issuer's (DecideLog) answers Live only while
// fresh, and leaves to Redis's records what the log alone cannot tell: a
// subject with an entry (its marker tells which tokens are before it,
// unless a Redis check marked since says live) and a token issued near the
// horizon. A consumer has no Redis to ask: its rule (DecideFeed) decides a
// subject's and a client's revocation by time, to the second of the
// token's iat, within the leeway either way, and keeps a revocation true
// when the state goes stale. The table in cases_test.go runs both.
//
// # The cascade
//
// An exchanged token (RFC 8693) carries its parents: the token it was
// exchanged from, then that one's parents, at most jwtpolicy.MaxChain, all
// of the same subject. Both rules judge the token and each parent alike,
// each on its own issued time, and combine:
//
//	token ──▶ parent ──▶ grandparent …        each: its jti, its client's cutoff, the subject
//	  │         │           │                  (each against its OWN issued time)
//	  ▼         ▼           ▼
//	Live / Unknown / Revoked ──▶ any Revoked: Revoked; else any Unknown: Unknown; else Live
//
// So revoking a token, its subject or its client ends every token exchanged
// from it wherever the state is followed, with no Redis command for a
// token the state decides. A parent judged on its own time (not the
// child's) closes the race of a revocation that lands between an
// exchange's check of its subject token and the minting of the child.
package revocation

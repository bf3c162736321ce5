package revocation

import "time"

// Event is one entry of the revocation log, as a state applies it and as
// the feed serves it (a SET's EventPayload).
type Event struct {
	// ID is the event's EventID, <epoch>-<ms>-<seq>: the SSE id, and what
	// a consumer resumes after.
	ID string
	// Kind is what it revokes.
	Kind Kind
	// Key is the jti, the subject or the client.
	Key string
	// At is the entry's time, Unix ms on Redis's clock (its stream ID's).
	At int64
	// Exp (KindToken) is the token's exp, Unix s; 0 when unknown (then it is
	// remembered for the retention from At).
	Exp int64
	// Cutoff (KindClient) is the client's revocation time, Unix ms: its
	// tokens whose ID's time is at or before it are revoked.
	Cutoff int64
	// Marker (KindSubject) is the subject's new marker in Redis: the
	// issuer's log only, never on the feed.
	Marker string
}

// Status is what the issuer's follower knows of its own state: what a
// heartbeat of the feed says.
type Status struct {
	// Fresh is State.Fresh(now).
	Fresh bool
	// Age is how long ago the read that vouches for the state was sent
	// (the freshness stamp); meaningless when not Fresh.
	Age time.Duration
	// Epoch is the epoch of the state.
	Epoch string
	// Last is the ID of the last entry applied (an EventID; the epoch and
	// "0-0" for none): everything up to it is in the state.
	Last string
	// Horizon is when the epoch began, Unix ms on Redis's clock: no
	// revocation before it is in the log.
	Horizon int64
	// Version grows at every change of what Snapshot holds (an entry
	// applied, a revocation noted here or forgotten, a resync) and at no
	// other: the feed builds its snapshot once per Version.
	Version uint64
}

// Snapshot is a whole state as the feed serves it: every token it
// remembers, the latest entry of each subject and of each client.
type Snapshot struct {
	Status
	Tokens, Subjects, Clients []Event
}

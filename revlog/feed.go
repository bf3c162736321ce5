package revlog

import "time"

// Event is one log entry a Follower applied, as the feed (package revfeed)
// serves it to consumers that follow the log over HTTP.
type Event struct {
	// ID is the epoch, a "-", and the entry's stream ID (epoch-ms-seq):
	// the SSE id, and what Since resumes after.
	ID string
	// Kind is KindToken, KindSubject or KindClient.
	Kind string
	// Key is the jti, the subject or the client.
	Key string
	// At is the entry's time, Unix ms on Redis's clock (its stream ID's).
	At int64
	// Exp (KindToken) is the token's exp, Unix s; 0 when unknown (then it is
	// remembered for the log's retention from At).
	Exp int64
	// Cutoff (KindClient) is the client's revocation time, Unix ms: its
	// tokens whose ID's time is at or before it are revoked.
	Cutoff int64
}

// Kinds of Event.
const (
	KindToken   = "t"
	KindSubject = "s"
	KindClient  = "c"
)

// Status is what a Follower knows of its own state.
type Status struct {
	// Fresh is Fresh(now).
	Fresh bool
	// Age is how long ago the read that vouches for the state was sent
	// (the freshness stamp); meaningless when not Fresh.
	Age time.Duration
	// Epoch is the epoch of the state.
	Epoch string
	// Last is the ID of the last entry applied (an Event.ID; the epoch and
	// "0-0" for none): everything up to it is in the state.
	Last string
	// Horizon is when the epoch began, Unix ms on Redis's clock: no
	// revocation before it is in the log.
	Horizon int64
}

// Snapshot is a Follower's whole state: every token it remembers, the
// latest entry of each subject and of each client.
type Snapshot struct {
	Status
	Tokens, Subjects, Clients []Event
}

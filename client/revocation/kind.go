package revocation

// Kind is what an entry of the revocation log, and an event of the feed,
// revokes: the k field of a log entry, the kind of a SET's event.
type Kind string

// Kinds of entry and event.
const (
	// KindToken revokes one token: the key is its jti, the entry's value
	// its exp (Unix s; empty when unknown).
	KindToken Kind = "t"
	// KindSubject revokes every token of a subject issued before it: the
	// key is the subject, the entry's value its new marker in Redis.
	KindSubject Kind = "s"
	// KindClient revokes every token of a client whose ID's time is at or
	// before a cutoff: the key is the client, the entry's value the
	// cutoff (Unix ms).
	KindClient Kind = "c"
)

// SET event URIs, one for each Kind (RFC 8417 §2.2: the one member of a
// SET's events).
const (
	EventTokenRevoked   = "https://snowtoken.dev/secevent/token-revoked"
	EventSubjectRevoked = "https://snowtoken.dev/secevent/subject-revoked"
	EventClientRevoked  = "https://snowtoken.dev/secevent/client-revoked"
)

// URI is the SET event URI of k; false for a kind that is none of ours.
func (k Kind) URI() (string, bool) {
	switch k {
	case KindToken:
		return EventTokenRevoked, true
	case KindSubject:
		return EventSubjectRevoked, true
	case KindClient:
		return EventClientRevoked, true
	}
	return "", false
}

// Valid reports whether k is one of the three kinds.
func (k Kind) Valid() bool {
	_, ok := k.URI()
	return ok
}

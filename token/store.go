package token

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Store is what a Service needs from a session store: what it holds on a
// token (Session), written when the token is issued, and the revocation log
// that every revocation appends to. The domain declares it in its own
// terms: a JWT's session is named by its SessionRef, an opaque token's by
// its jti, and an opaque token's record is an OpaqueRecord; how they are
// kept (key names, the record's bytes) is the store's business. Package
// redisstore implements it on Redis, and its package doc draws the keys,
// the record, the scripts and what happens when a key disappears. The
// verdicts on what a store holds are the domain's (SessionLive,
// SessionCreated), so that every store decides alike.
type Store interface {
	// Handle returns the store's handle on the session of the JWT ref
	// (its JTI, Subject and Client), for Session: made once per token and
	// kept with it, so that reading the session again finds it at no cost.
	Handle(ref SessionRef) SessionHandle
	// Create writes the session record of a new JWT, ref, for ttl, and
	// returns SessionCreated's verdict on it.
	Create(ctx context.Context, ref SessionRef, ttl time.Duration) error
	// Session returns what the store holds on the JWT of h (a Handle of
	// this store's), for SessionLive.
	Session(ctx context.Context, h SessionHandle) (Session, error)
	// OpaqueHandle is Handle for the opaque token ref.JTI, whose record
	// Session reads as a session of ref.Subject and ref.Client: its marker
	// if the record names both, none ("") if it does not read or names
	// others. An exchanged token's opaque parent is read so (Sessions).
	OpaqueHandle(ref SessionRef) SessionHandle
	// Sessions is Session for each of hs, in order, in one round trip
	// where the store can: an exchanged token's and its parents'.
	Sessions(ctx context.Context, hs []SessionHandle) ([]Session, error)
	// CreateOpaque writes rec, the record of a new opaque token jti whose
	// ID's time is issued, for ttl, with its subject's marker, and returns
	// SessionCreated's verdict on it.
	CreateOpaque(ctx context.Context, jti string, issued time.Time, ttl time.Duration, rec OpaqueRecord) error
	// ReadOpaque returns the record of the opaque token jti and what the
	// store holds on the token, for SessionLive: the marker the record
	// holds, and its subject's marker and its client's revocation time,
	// read by the names the record holds. No record is a zero record and
	// an empty Session.Marker; a record that does not read (another
	// layout, edited by hand) is ErrUnreadableRecord, never misread.
	ReadOpaque(ctx context.Context, jti string) (OpaqueRecord, Session, error)
	// GetOpaque returns the record of the opaque token jti, and ok false
	// when there is none; ErrUnreadableRecord as ReadOpaque.
	GetOpaque(ctx context.Context, jti string) (rec OpaqueRecord, ok bool, err error)
	// RevokeToken removes the session record of the JWT ref (its JTI and
	// Subject), whose exp (Unix s) is exp (0: unknown), and logs the
	// revocation.
	RevokeToken(ctx context.Context, ref SessionRef, exp int64) error
	// RevokeOpaque is RevokeToken for the opaque token jti.
	RevokeOpaque(ctx context.Context, jti string, exp int64) error
	// RevokeSubject makes every live token of subject fail SessionLive,
	// and logs it.
	RevokeSubject(ctx context.Context, subject string) error
	// RevokeClient makes every token of client whose ID's time is at or
	// before before fail SessionLive, and logs it.
	RevokeClient(ctx context.Context, client string, before time.Time) error
	// Ready checks that the store answers and accepts writes.
	Ready(ctx context.Context) error
	// LogRetention is how long the revocation log keeps an entry: at least
	// LogRetention of the service's MaxTTL and Leeway (NewService checks).
	LogRetention() time.Duration
	// Leeway is the largest leeway of the services on the store, which
	// RevokeToken keeps a token's revocation logged for after its exp: at
	// least the service's (NewService checks).
	Leeway() time.Duration
}

// SessionRef names the session of one JWT as the domain knows the token:
// its jti, subject and client, and the time of its ID, which the client's
// revocation time is compared with (SessionCreated, SessionLive).
type SessionRef struct {
	JTI, Subject, Client string
	Issued               time.Time
}

// SessionHandle is a Store's handle on the session of one JWT
// (Store.Handle): whatever the store needs to find the session again
// (Redis key names), made once when the token is verified and kept in the
// verified-token cache, so that a validation that reads the session builds
// nothing. The domain keeps it and hands it back to Store.Session; it never
// reads it. The zero SessionHandle is no store's: a Store refuses it.
type SessionHandle struct{ v any }

// NewSessionHandle returns a handle that holds v, for a Store to make its
// handles with.
func NewSessionHandle(v any) SessionHandle { return SessionHandle{v} }

// Value is what the Store put in the handle (NewSessionHandle), nil for
// the zero handle.
func (h SessionHandle) Value() any { return h.v }

// OpaqueRecord is what a store keeps of an opaque token, which carries
// nothing but its ID and secret: the secret's SHA-256, and every claim.
// The subject's marker at issue is kept with it, but is the store's to
// write (CreateOpaque) and is read as Session.Marker (ReadOpaque).
type OpaqueRecord struct {
	// SecretSum is the SHA-256 of the token's secret, never the secret.
	SecretSum [sha256.Size]byte
	// Subject and Client are the token's sub and client_id: names
	// (syntax.CheckName), whose marker and revocation time decide.
	Subject, Client string
	// Scope is the token's scope claim, its scopes separated by spaces
	// ("" for none); Audience its aud (nil for none).
	Scope    string
	Audience []string
	// IssuedAt and ExpiresAt are the token's iat and exp, Unix s.
	IssuedAt, ExpiresAt int64
	// JKT is the thumbprint (cnf.jkt) of the key a DPoP-bound token is
	// bound to; "" for a bearer token.
	JKT string
	// Chain is an exchanged token's act and parents, as the domain
	// encodes them (JSON members, no newline; decodeChain reads them);
	// "" for a token that was not exchanged. A store keeps it as given.
	Chain string
}

// Session is what a store holds on one token, as the domain reads it:
//
//	record ── Marker ──┐
//	subject ── SubjectMarker ──┴─ equal: the subject was not revoked since
//	client ── ClientCutoff ─── after the token's ID: the client was not revoked since
//
// A revocation of the subject replaces its marker, one of the client
// moves its cutoff; SessionLive is the rule.
type Session struct {
	// Marker is the subject's marker the token's record holds: "" when
	// there is no record (revoked, expired or never written).
	Marker string
	// SubjectMarker is the subject's marker now: "" when it is missing
	// (lost: evicted, or a failover or restart that did not keep it).
	SubjectMarker string
	// ClientCutoff is the client's revocation time, Unix ms: the tokens
	// whose ID's time is at or before it are revoked. Zero is none;
	// CutoffUnreadable, a time the store holds that does not read.
	ClientCutoff int64
}

// CutoffUnreadable, as Session.ClientCutoff, is a client revocation time
// that does not read: it covers every token (fail closed), and a new
// token's session is refused as ErrUnavailable (SessionCreated).
const CutoffUnreadable int64 = math.MaxInt64

// revokedByClient reports whether cutoff, a client's revocation time (zero
// for none), covers a token whose ID's time is issued (Unix ms).
func revokedByClient(issued, cutoff int64) bool { return cutoff != 0 && issued <= cutoff }

// LogRetention is how long the revocation log must keep an entry for the
// tokens of a service whose longest lifetime is maxTTL and leeway leeway:
// three leeways more than maxTTL. One because a token validates until its exp
// plus the leeway; one because a client's revocation covers the IDs of the
// leeway after it (RevokeClient), whose tokens expire that much later; one
// because the entries' IDs and the trimming floor are Redis's clock, and a
// token's exp its issuing replica's, which may be ahead of Redis's by as
// much as clocks may differ.
func LogRetention(maxTTL, leeway time.Duration) time.Duration {
	return maxTTL + 3*max(leeway, 0)
}

// SessionCreated is the verdict on a new session record, for a Store's
// Create and CreateOpaque: written says whether it was (not:
// ErrDuplicateID, wrapped in ErrUnavailable), cutoff is the client's
// revocation time as the store holds it (Session.ClientCutoff), issued the
// Unix ms of the token's ID. A cutoff that covers the token is
// ErrClientRevoking with the wait until a token would be past it, or, when
// it does not read (SessionLive fails all the client's tokens closed),
// ErrUnavailable.
func SessionCreated(written bool, issued, cutoff int64) error {
	switch {
	case !written:
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrDuplicateID)
	case !revokedByClient(issued, cutoff):
		return nil
	case cutoff == CutoffUnreadable:
		return fmt.Errorf("%w: the store's revocation time of the client does not read", ErrUnavailable)
	}
	return &revokingError{wait: time.Duration(cutoff-issued+1) * time.Millisecond}
}

// revokingError is ErrClientRevoking with the wait until a new token's ID
// is past the client's revocation time.
type revokingError struct{ wait time.Duration }

func (e *revokingError) Error() string {
	return fmt.Sprintf("%v: %v: a token issued now would not validate; retry in %v", ErrUnavailable, ErrClientRevoking, e.wait)
}

func (e *revokingError) Unwrap() []error { return []error{ErrUnavailable, ErrClientRevoking} }

// RetryAfter is how long until a token issued is past the revocation.
func (e *revokingError) RetryAfter() time.Duration { return e.wait }

// SessionLive is the rule on what a store holds for a token whose ID's time
// is issued (Unix ms): nil when it is live, else ErrRevoked, saying why.
// It is the Redis side's revoked-or-not rule, for a Store's JWT sessions
// and opaque records alike; the revocation log's is
// revocation.State.DecideLog. In order:
//
//	ClientCutoff covers issued        revoked: all tokens of the client
//	no record (Marker "")             revoked: no session
//	SubjectMarker "" (lost)           revoked, ErrMarkerLost (fail closed), told as no session
//	Marker != SubjectMarker           revoked: all tokens of the subject
//	otherwise                         live
func SessionLive(issued int64, s Session) error {
	switch {
	case revokedByClient(issued, s.ClientCutoff):
		return refusal.New(ErrRevoked, "all tokens of the client were revoked")
	case s.Marker == "":
		return refusal.New(ErrRevoked, "no session")
	case s.SubjectMarker == "":
		// A client hears what the others hear of a session that is gone.
		return refusal.Describe(fmt.Errorf("%w: %w", ErrRevoked, ErrMarkerLost), "no session")
	case s.Marker != s.SubjectMarker:
		return refusal.New(ErrRevoked, "all tokens of the subject were revoked")
	}
	return nil
}

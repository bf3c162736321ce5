package token

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Store is what a Service needs from a session store: the records that
// decide whether a token is live, and the revocation log that every
// revocation appends to. The domain declares it; package redisstore
// implements it on Redis, and its package doc draws the keys, the scripts
// and what happens when a key disappears. The verdicts on what a store
// holds are the domain's (SessionLive, SessionCreated), so that every store
// decides alike.
type Store interface {
	// Keys returns the keys that decide whether the token jti of subject
	// and client, whose ID's time is issued, is live.
	Keys(subject, client, jti string, issued time.Time) SessionKeys
	// OpaqueKey is the key of the record of the opaque token jti.
	OpaqueKey(jti string) string
	// Create writes the session record of a new JWT for ttl; see SessionCreated.
	Create(ctx context.Context, k SessionKeys, ttl time.Duration) error
	// CreateOpaque writes the record of a new opaque token (k.Session, an
	// OpaqueKey): head, the subject's marker, tail; see SessionCreated.
	CreateOpaque(ctx context.Context, k SessionKeys, ttl time.Duration, head, tail string) error
	// Check is SessionLive's verdict on what the store holds for k.
	Check(ctx context.Context, k SessionKeys) error
	// ReadOpaque returns the record key holds, the marker of the subject
	// and the revocation time of the client it names, each nil when
	// missing (the last two also when the record is, or does not read).
	ReadOpaque(ctx context.Context, key string) (rec, gen, client any, err error)
	// GetOpaque returns the record key holds, or "" when it has none.
	GetOpaque(ctx context.Context, key string) (string, error)
	// RevokeToken removes the record key of the token jti, whose exp (Unix
	// s) is exp (0: unknown), and logs the revocation.
	RevokeToken(ctx context.Context, key, jti string, exp int64) error
	// RevokeSubject makes every live token of subject fail Check, and logs it.
	RevokeSubject(ctx context.Context, subject string) error
	// RevokeClient makes every token of client whose ID's time is at or
	// before before fail Check, and logs it.
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

// SessionKeys are the keys of a Store that decide whether one token is
// live, and the time its ID carries, which the client's revocation is
// compared with. A Store makes them (Store.Keys); a verified token keeps
// them, so that a validation builds no key.
type SessionKeys struct {
	Session, Gen, Client string
	Issued               int64 // Unix ms of the token's ID
}

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
// ErrDuplicateID, wrapped in ErrUnavailable), cut is the client's
// revocation time as Redis holds it, a string of Unix ms or nil for none
// (clientCutoff), issued the Unix ms of the token's ID.
func SessionCreated(written bool, issued int64, cut any) error {
	if !written {
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrDuplicateID)
	}
	return clientCutoff(issued, cut)
}

// clientCutoff is Create's verdict on a new token issued at issued (Unix
// ms) whose client's revocation time is client (a string, or nil): nil
// when the revocation does not cover it, else ErrClientRevoking with the
// wait until a token would be past it, or, when the time does not read
// (Check fails all the client's tokens closed), ErrUnavailable.
func clientCutoff(issued int64, client any) error {
	cutoff, revoked := revokedByClient(issued, client)
	switch {
	case !revoked:
		return nil
	case cutoff == 0:
		return fmt.Errorf("%w: redis: the client's revocation time %.32q does not read", ErrUnavailable, client)
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

// SessionLive is the verdict on what the store holds for a token issued at
// issued (Unix ms), for a Store's Check and for an opaque token's record:
// the marker its record holds, the subject's marker and the client's
// revocation time, each a string, or nil for a missing key. See Store.
func SessionLive(issued int64, rec, gen, client any) error {
	if _, revoked := revokedByClient(issued, client); revoked {
		return refusal.New(ErrRevoked, "all tokens of the client were revoked")
	}
	r, ok := rec.(string)
	if !ok {
		return refusal.New(ErrRevoked, "no session")
	}
	g, ok := gen.(string)
	switch {
	case !ok:
		// A client hears what the others hear of a session that is gone.
		return refusal.Describe(fmt.Errorf("%w: %w", ErrRevoked, ErrMarkerLost), "no session")
	case r != g:
		return refusal.New(ErrRevoked, "all tokens of the subject were revoked")
	}
	return nil
}

// revokedByClient reports whether the client's revocation time client (a
// string of Unix ms, or nil for none) covers a token issued at issued (Unix
// ms), and the time; a time that does not read covers every token (fail
// closed), with cutoff 0.
func revokedByClient(issued int64, client any) (cutoff int64, revoked bool) {
	v, ok := client.(string)
	if !ok {
		return 0, false
	}
	cutoff, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true
	}
	return cutoff, issued <= cutoff
}

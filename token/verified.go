package token

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Verified is a token whose signature, claims and session have been
// checked, and, as Verdict returns it, its client's standing, binding,
// audience and scopes for the request too. One Verified is shared by every
// validation of the same token through the verified-token cache, so it is
// read through accessors only: nothing a caller holds can change what the
// next request is told. What may change (the log's mark) is the
// package's own, atomic.
type Verified struct {
	claims Claims
	id     snowflakealg.ID
	parts  snowflakealg.Parts
	scopes []string

	session    SessionHandle // the store's, for Store.Session
	lineage    *lineage      // an exchanged token's parents (parents.go); nil for none
	cacheUntil time.Time
	// mark is the LogMark taken before the last Redis check that found
	// the token live (0: none), or markRevoked once Redis found it
	// revoked; shared by the validations that hit the cache.
	mark atomic.Uint64
}

// markRevoked is Verified.mark once Redis answered that the token is
// revoked: revocation in Redis is for good (a record is never written
// again, a marker never comes back, a client's time never moves back), so
// the token is refused from then on without asking the log, whose follower
// may not have applied the entry yet.
const markRevoked = ^uint64(0)

// Subject is the token's sub.
func (v *Verified) Subject() string { return v.claims.Subject }

// ClientID is the token's client_id.
func (v *Verified) ClientID() string { return v.claims.ClientID }

// Scope is the token's scope claim, its scopes separated by spaces.
func (v *Verified) Scope() string { return v.claims.Scope }

// Issuer is the token's iss.
func (v *Verified) Issuer() string { return v.claims.Issuer }

// JTI is the token's jti: its Snowflake ID in decimal.
func (v *Verified) JTI() string { return v.claims.ID }

// ID is the token's Snowflake ID.
func (v *Verified) ID() snowflakealg.ID { return v.id }

// Parts are the parts of the token's ID: its time, worker and sequence.
func (v *Verified) Parts() snowflakealg.Parts { return v.parts }

// IssuedAt is the token's iat.
func (v *Verified) IssuedAt() time.Time { return v.claims.IssuedAt.Time }

// ExpiresAt is the token's exp.
func (v *Verified) ExpiresAt() time.Time { return v.claims.ExpiresAt.Time }

// JKT is the RFC 7638 thumbprint of the key a DPoP-bound token is bound
// to (cnf.jkt), or "" for a bearer token.
func (v *Verified) JKT() string { return v.claims.Confirmation.JKT }

// AppendAudience appends the token's aud to dst and returns the result:
// a copy, which a caller may keep on its stack (dst of capacity
// MaxAudiences) at no allocation.
func (v *Verified) AppendAudience(dst []string) []string { return append(dst, v.claims.Audience...) }

// ForAudience reports whether the token's aud holds a.
func (v *Verified) ForAudience(a string) bool { return slices.Contains(v.claims.Audience, a) }

// Scopes returns a copy of the token's scopes.
func (v *Verified) Scopes() []string { return slices.Clone(v.scopes) }

// HasScopes reports whether the token carries every scope in want.
func (v *Verified) HasScopes(want []string) bool { return syntax.ContainsAll(v.scopes, want) }

// MissingScopes returns the scopes of want the token does not carry, or nil.
func (v *Verified) MissingScopes(want []string) []string { return syntax.Missing(v.scopes, want) }

// Claims returns a copy of the token's claims, its aud, dates, actors and
// parents copied too: for a caller that needs them whole (a test, a log
// line), off the hot path.
func (v *Verified) Claims() Claims {
	c := v.claims
	c.Audience = slices.Clone(c.Audience)
	if c.IssuedAt != nil {
		iat := *c.IssuedAt
		c.IssuedAt = &iat
	}
	if c.ExpiresAt != nil {
		exp := *c.ExpiresAt
		c.ExpiresAt = &exp
	}
	if c.NotBefore != nil {
		nbf := *c.NotBefore
		c.NotBefore = &nbf
	}
	c.Act, c.MayAct, c.Parents = c.Act.Clone(), c.MayAct.Clone(), slices.Clone(c.Parents)
	return c
}

// Act returns a copy of the token's act (RFC 8693 §4.1), nil for none: the
// outermost actor is the one acting now, the one that counts.
func (v *Verified) Act() *jwtpolicy.Actor { return v.claims.Act.Clone() }

// ActorSubject is the sub of the token's outermost act, "" for none: who
// acts for the subject now.
func (v *Verified) ActorSubject() string {
	if v.claims.Act == nil {
		return ""
	}
	return v.claims.Act.Subject
}

// Parents returns a copy of the token's parents: the tokens it was
// exchanged from, nearest first.
func (v *Verified) Parents() []jwtpolicy.Parent { return slices.Clone(v.claims.Parents) }

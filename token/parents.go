package token

import (
	"context"
	"fmt"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// The cascade, on the issuer's side: an exchanged token (RFC 8693) names
// its parents (jwtpolicy.Claims.Parents: the token it was exchanged from,
// then that one's, all of its subject), and is revoked when it or any of
// them is, each parent judged as a token of its own on its own ID's time
// (revocation's package doc draws the rule):
//
//	the log     fromLog passes the parents in the LogQuery (DecideLog judges each)
//	Redis       sessionLive reads the token's keys and each parent's in one
//	            round trip (Store.Sessions) and judges each by SessionLive:
//	              JWT parent     the session record of its jti, under the subject and its client
//	              opaque parent  the opaque record of its jti (Store.OpaqueHandle), which
//	                             must name the same subject and client
//
// A parent whose record is gone is revoked: an exchange makes a token that
// expires no later than its subject token. What a verified token needs of
// its parents is worked out once, when it is verified, and kept with it,
// so that deciding from the log costs no allocation.

// lineage is what a verified token with parents keeps of them: each as
// the log decides on it, and the store's handles of the token then of each
// parent, as sessionLive reads them. A token without parents has none
// (nil), which costs its cache entry a pointer.
type lineage struct {
	parents []revocation.Parent
	handles []SessionHandle
}

// lineageOf returns the lineage of the verified claims c, whose own
// session's handle is own, nil for claims without parents: each parent's jti a Snowflake
// ID this service can decompose, its client_id a name as Issue writes it
// (it becomes a key).
func (s *Service) lineageOf(c *Claims, own SessionHandle) (*lineage, error) {
	if len(c.Parents) == 0 {
		return nil, nil
	}
	l := &lineage{parents: make([]revocation.Parent, len(c.Parents)), handles: make([]SessionHandle, 1, 1+len(c.Parents))}
	l.handles[0] = own
	for i, p := range c.Parents {
		id, err := snowflakealg.ParseID(p.ID)
		if err != nil {
			return nil, refusal.New(ErrInvalidToken, "parents: jti: %w", err)
		}
		parts, err := s.ids.Decompose(id)
		if err != nil {
			return nil, refusal.New(ErrInvalidToken, "parents: jti: %w", err)
		}
		if err := syntax.CheckName(p.ClientID); err != nil {
			return nil, refusal.New(ErrInvalidToken, "parents: client_id: %w", err)
		}
		l.parents[i] = revocation.Parent{JTI: p.ID, Client: p.ClientID, Issued: parts.Time.UnixMilli()}
		ref := SessionRef{JTI: p.ID, Subject: c.Subject, Client: p.ClientID, Issued: parts.Time}
		h := s.store.Handle(ref)
		if p.Opaque {
			h = s.store.OpaqueHandle(ref)
		}
		l.handles = append(l.handles, h)
	}
	return l, nil
}

// errParentRevoked is what a client is told of a token whose parent is
// revoked.
const errParentRevoked = "a token it was exchanged from was revoked"

// sessionLive is the Redis side of validate: what the store holds on v,
// and on each of its parents in the same round trip, judged by SessionLive
// (the cascade): nil when all are live, else the token's refusal or the
// first revoked parent's, wrapping ErrRevoked; a failure of the store is
// its error.
func (s *Service) sessionLive(ctx context.Context, v *Verified) error {
	issued := v.parts.Time.UnixMilli()
	if v.lineage == nil {
		sess, err := s.store.Session(ctx, v.session)
		if err != nil {
			return err
		}
		return SessionLive(issued, sess)
	}
	sessions, err := s.store.Sessions(ctx, v.lineage.handles)
	if err != nil {
		return err
	}
	if len(sessions) != len(v.lineage.handles) {
		return fmt.Errorf("%w: the store answered %d sessions for %d", ErrUnavailable, len(sessions), len(v.lineage.handles))
	}
	if err := SessionLive(issued, sessions[0]); err != nil {
		return err
	}
	return v.parentsLive(sessions[1:])
}

// parentsLive judges v's parents by what the store holds on them
// (sessions, in the order of its parents claim), each by SessionLive on
// its own ID's time: nil when all are live, else the first revoked one's
// refusal, wrapping ErrRevoked.
func (v *Verified) parentsLive(sessions []Session) error {
	for i, p := range v.claims.Parents {
		if err := SessionLive(v.lineage.parents[i].Issued, sessions[i]); err != nil {
			return refusal.Describe(fmt.Errorf("parent %.24s: %w", p.ID, err), errParentRevoked)
		}
	}
	return nil
}

// opaqueParentsLive is sessionLive's cascade for an opaque token v whose
// own record was read already (readOpaque): its lineage, and what the
// store holds on each of its parents, in a second round trip.
func (s *Service) opaqueParentsLive(ctx context.Context, v *Verified) error {
	own := s.store.OpaqueHandle(SessionRef{JTI: v.claims.ID, Subject: v.claims.Subject, Client: v.claims.ClientID, Issued: v.parts.Time})
	lin, err := s.lineageOf(&v.claims, own)
	if err != nil || lin == nil {
		return err
	}
	v.lineage = lin
	sessions, err := s.store.Sessions(ctx, lin.handles[1:])
	if err != nil {
		return err
	}
	if len(sessions) != len(lin.parents) {
		return fmt.Errorf("%w: the store answered %d sessions for %d", ErrUnavailable, len(sessions), len(lin.parents))
	}
	return v.parentsLive(sessions)
}

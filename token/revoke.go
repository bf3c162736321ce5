package token

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Revoke ends the session of a token at once (RFC 7009).
//
// It needs only a signature by one of the service's keys: the time claims do
// not matter, since revoking an expired or not yet valid token is harmless,
// so a replica whose clock is off revokes all the same. What is not a token
// of ours (malformed, forged, a signature that does not verify, a key
// retired and dropped once all its tokens had expired) is no error, as
// RFC 7009 asks, and its claims are never acted on: IDs are guessable.
// The same holds for a kid the key set does not hold when the token
// validates nowhere (unknownKidUndecided: issued too long ago for any key
// to be still on its way here, or expired), and a made-up kid costs no
// more than a bad signature. Otherwise (a plain list of key files, a reload
// pending or refused, a token issued within keyset.Propagation) this replica
// cannot tell it from a token of a key it has yet to load: ErrUnavailable
// with ErrKeysUndecided, for the client to retry. A token whose record it cannot delete (Redis) cannot be revoked
// here: ErrUnavailable, never a success that deleted nothing. A client
// may revoke only its own tokens, unless it is an
// admin: ErrForbidden. It returns the revoked token's jti, for the audit
// trail, and "" for what is not a token of ours. An opaque token is
// revoked only once its secret matches its record (revokeOpaque).
func (s *Service) Revoke(ctx context.Context, caller *clients.Client, raw string) (jti string, err error) {
	if isOpaque(raw) {
		return s.revokeOpaque(ctx, caller, raw)
	}
	claims, err := s.signedClaims(raw)
	if errors.Is(err, errUnknownKid) {
		if why := s.unknownKidUndecided(raw); why != nil {
			return "", fmt.Errorf("%w: %w: %w: %w", ErrUnavailable, ErrKeysUndecided, err, why)
		}
		return "", nil
	}
	if err != nil {
		return "", nil
	}
	if claims.ClientID != caller.ID && !caller.Admin {
		return "", refusal.New(ErrForbidden, "the token was issued to another client")
	}
	var exp int64
	if claims.ExpiresAt != nil {
		exp = claims.ExpiresAt.Unix()
	}
	if err := s.store.RevokeToken(ctx, SessionRef{JTI: claims.ID, Subject: claims.Subject, Client: claims.ClientID}, exp); err != nil {
		return "", err
	}
	s.revokedHere(raw, claims.ID, exp)
	return claims.ID, nil
}

// revokedHere marks raw revoked in this replica's cache, if it is there,
// and tells the follower (LocalRevocations), once its revocation is
// written: this replica refuses it from then on, before its follower
// applies the log entry (read your own writes). The other replicas refuse
// it within their threshold.
func (s *Service) revokedHere(raw, jti string, exp int64) {
	sum := sha256.Sum256(bytesOf(raw))
	if v := s.cache.get(&sum, s.opts.Now()); v != nil {
		v.mark.Store(markRevoked)
	}
	if r, ok := s.opts.Revocations.(LocalRevocations); ok {
		r.TokenRevokedHere(jti, exp)
	}
}

// unknownKidUndecided returns nil when a token whose kid the key set does
// not hold validates nowhere, so that a revoke of it is done; otherwise why
// this replica cannot tell. It reads the token's iat unverified, and only
// for this: a forged iat earns its forger no more than a 503 that no
// unavailability metric counts. A token validates nowhere when
//   - it has no iat (every token Issue signs has one): no token of ours;
//   - it was issued more than MaxTTL + Leeway ago: expired, wherever its
//     key is;
//   - the set is known current (keyset.Set.Current) and the token was issued
//     more than keyset.Propagation + Leeway ago: a key that signed it, even one
//     made active at once in an emergency rather than published as next
//     first, has reached every replica by then, and this one does not have
//     it.
//
// So no revoke answers 503 for longer than MaxTTL + Leeway, and within
// keyset.Propagation of a key's activation none answers 200 for a token of a
// key that may still be on its way here.
func (s *Service) unknownKidUndecided(raw string) error {
	var c Claims
	if _, _, err := jwt.NewParser().ParseUnverified(raw, &c); err != nil || c.IssuedAt == nil {
		return nil
	}
	age := s.opts.Now().Sub(c.IssuedAt.Time)
	if age > s.opts.MaxTTL+s.opts.Leeway {
		return nil
	}
	if err := s.keys.Current(); err != nil {
		return err
	}
	if age > keyset.Propagation+s.opts.Leeway {
		return nil
	}
	return fmt.Errorf("issued %s ago: a key made active at once takes up to %s to reach every replica", age.Round(time.Second), keyset.Propagation)
}

// signedClaims returns the claims of a token signed by one of the service's
// keys, with typ at+jwt, sub, client_id and a Snowflake jti, whatever its
// time claims say. A token validate has cached passed all that already.
func (s *Service) signedClaims(raw string) (*Claims, error) {
	_, v, err := s.cached(raw, s.opts.Now())
	switch {
	case err != nil:
		return nil, err
	case v != nil:
		return &v.claims, nil
	}
	claims, _, err := s.parse(s.sigOnly, raw)
	return claims, err
}

// RevokeClient ends every live token of the client at once, in O(1) Redis
// work: every token whose ID's time is at or before now plus the leeway.
//
// What the skew rule needs: the revocation must cover every token handed
// out before it, and a token's only time is its Snowflake ID's, read on the
// clock of the replica that issued it. A replica whose clock is up to the
// leeway ahead of this one may have handed out, just before, a token whose
// ID is up to the leeway in this clock's future: hence the leeway, the one
// bound on the skew between replicas the service has (as for exp and iat).
// A replica cannot tell from an ID how skewed its issuer's clock was (the
// worker in the ID names the replica, not its clock), so the leeway cannot
// be narrowed per token. The price is that the revocation also covers the
// IDs replicas draw for up to the leeway (twice it, with a clock behind)
// after it. Issue never hands out such a token: the script that writes its
// record reads the client's revocation time in the same round trip, and
// Issue answers ErrClientRevoking with the wait until its IDs are past it,
// never a token that SessionLive refuses. The comparison is the one it makes,
// of the same two numbers, so it needs no assumption on clocks. A subject's
// revocation has no such window: it replaces the subject's marker, which
// records written after it hold, with no clock involved.
func (s *Service) RevokeClient(ctx context.Context, client string) error {
	cutoff := s.opts.Now().Add(s.opts.Leeway)
	if err := s.store.RevokeClient(ctx, client, cutoff); err != nil {
		return err
	}
	if r, ok := s.opts.Revocations.(LocalRevocations); ok {
		r.ClientRevokedHere(client, cutoff.UnixMilli())
	}
	return nil
}

// RevokeSubject ends every live session of subject at once, in O(1) Redis work.
func (s *Service) RevokeSubject(ctx context.Context, subject string) error {
	if err := syntax.CheckName(subject); err != nil {
		return refusal.New(ErrInvalidRequest, "subject: %w", err)
	}
	if err := s.store.RevokeSubject(ctx, subject); err != nil {
		return err
	}
	if r, ok := s.opts.Revocations.(LocalRevocations); ok {
		r.SubjectRevokedHere(subject)
	}
	return nil
}

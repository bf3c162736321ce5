package token

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Opaque tokens: what a client whose token_format is "opaque" gets instead of
// a JWT. The token is OpaquePrefix and
// the base64url (no padding) of 24 bytes, the 8-byte Snowflake ID (big
// endian) and 16 bytes from crypto/rand:
//
//	st_<32 characters of base64url>    35 characters in all
//
// It carries nothing but the ID: every claim comes from its record
// (OpaqueRecord, which the Store keeps: redisstore's package doc draws its
// key and layout), which holds the SHA-256 of the 16-byte secret, compared in constant time,
// so a token counts only when its ID has a record AND its secret matches:
// knowing an ID (they are predictable) gets nothing. Nothing is signed or
// verified, and nothing can be checked without Redis: a resource server
// cannot validate one offline.

// Values of clients.Client.TokenFormat: a JWT, or OpaquePrefix and a
// random secret.
const (
	FormatJWT    = clients.FormatJWT
	FormatOpaque = clients.FormatOpaque
)

// OpaquePrefix starts every opaque token; no JWT starts with it (a JWT
// starts with the base64url of "{", "ey").
const OpaquePrefix = jwtpolicy.OpaquePrefix

const (
	opaqueSecretLen = 16 // 128 bits from crypto/rand
	opaqueRawLen    = 8 + opaqueSecretLen
	// opaqueLen is the length of every opaque token: 24 bytes are exactly
	// 32 base64 characters, so no two strings decode to the same token.
	opaqueLen = len(OpaquePrefix) + opaqueRawLen/3*4
)

// isOpaque reports whether raw is meant as an opaque token.
func isOpaque(raw string) bool { return strings.HasPrefix(raw, OpaquePrefix) }

// parseOpaque returns the ID and the secret of an opaque token; any other
// string is ErrInvalidToken. It does not allocate.
func parseOpaque(raw string) (snowflakealg.ID, [opaqueSecretLen]byte, error) {
	var b [opaqueRawLen]byte
	var secret [opaqueSecretLen]byte
	if len(raw) != opaqueLen || !isOpaque(raw) || checkSyntax(raw) != nil {
		return 0, secret, errOpaqueMalformed
	}
	// Decode into a fixed array: no allocation. checkSyntax let only the
	// URL alphabet through (RawURLEncoding skips CR and LF).
	if n, err := base64.RawURLEncoding.Decode(b[:], []byte(raw[len(OpaquePrefix):])); err != nil || n != opaqueRawLen {
		return 0, secret, errOpaqueMalformed
	}
	copy(secret[:], b[8:])
	return snowflakealg.ID(binary.BigEndian.Uint64(b[:8])), secret, nil
}

// errOpaqueMalformed is made once: refusing costs no allocation.
var errOpaqueMalformed = refusal.New(ErrInvalidToken, "malformed opaque token")

// formatOpaque returns the token of id and secret.
func formatOpaque(id snowflakealg.ID, secret [opaqueSecretLen]byte) string {
	var b [opaqueRawLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(id))
	copy(b[8:], secret[:])
	out := make([]byte, opaqueLen)
	copy(out, OpaquePrefix)
	base64.RawURLEncoding.Encode(out[len(OpaquePrefix):], b[:])
	return string(out)
}

// issueOpaque writes the session of a new opaque token of g and returns
// the token: no signature, one script (two round trips on a Cluster).
func (s *Service) issueOpaque(ctx context.Context, id snowflakealg.ID, idTime time.Time, g *grant, ttl time.Duration) (string, error) {
	var secret [opaqueSecretLen]byte
	_, _ = rand.Read(secret[:]) // crypto/rand.Read never fails (Go 1.24)
	rec := OpaqueRecord{SecretSum: sha256.Sum256(secret[:]), Subject: g.sub, Client: g.client, Scope: g.scope,
		Audience: g.aud, IssuedAt: g.iat, ExpiresAt: g.exp, JKT: g.jkt, Chain: g.chain}
	if err := s.store.CreateOpaque(ctx, g.jti, idTime, ttl, rec); err != nil {
		return "", err
	}
	return formatOpaque(id, secret), nil
}

// errNoSession is what an opaque token without a live record, and one whose
// secret does not match its record, both fail with: the answer does not
// tell whether an ID (predictable) has a session.
var errNoSession = refusal.New(ErrRevoked, "no session")

// validateOpaque is validate for an opaque token: its ID and secret, then
// its record, marker and client's revocation time in one round trip (two on
// a Cluster). The secret is compared first, so nothing about the session
// shows to a token whose secret does not match.
//
// With Options.Revocations, a token validated once is in the verified-token
// cache until its exp and the leeway, under the SHA-256 of the token, which
// holds the secret: only a holder of the token finds the entry. A cached
// token is decided from the log as a JWT is (fromLog); Redis is read, as
// below, when the log cannot tell or the token is not in the cache (its
// claims are in its record only), and the answer refreshes the entry.
// Without Revocations nothing is cached: the claims come from the record,
// and a revoked token is refused, on every call.
func (s *Service) validateOpaque(ctx context.Context, raw string) (*Verified, error) {
	id, secret, err := parseOpaque(raw)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	var sum [sha256.Size]byte
	var m LogMark
	var hit *Verified // the cached token the log could not tell of
	if r := s.opts.Revocations; r == nil {
		s.stats.noLog.Add(1)
	} else {
		sum = sha256.Sum256(bytesOf(raw)) // no copy of the token
		if hit = s.cache.get(&sum, now); hit != nil {
			var done bool
			m, done, err = s.fromLog(hit, now)
			switch {
			case done && err != nil:
				return nil, err
			case done:
				return hit, nil
			}
		} else {
			s.stats.uncached.Add(1)
			m = r.Mark() // before Redis is read
		}
	}
	parts, err := s.ids.Decompose(id)
	if err != nil {
		return nil, refusal.New(ErrInvalidToken, "id: %w", err)
	}
	jti := id.String()
	v, err := s.readOpaque(ctx, id, jti, parts, &secret, now)
	if hit != nil {
		s.checked(hit, m, err) // a token revoked in Redis stays refused
	}
	if err != nil {
		return nil, err
	}
	if s.opts.Revocations != nil {
		s.checked(v, m, nil)
		s.cache.put(&sum, v, now)
	}
	return v, nil
}

// readOpaque reads the record of the opaque token id (jti in decimal,
// whose parts are parts), and returns the token it makes if secret matches
// it and the token is live at now.
func (s *Service) readOpaque(ctx context.Context, id snowflakealg.ID, jti string, parts snowflakealg.Parts, secret *[opaqueSecretLen]byte, now time.Time) (*Verified, error) {
	r, sess, err := s.store.ReadOpaque(ctx, jti)
	switch {
	case errors.Is(err, ErrUnreadableRecord):
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	case err != nil:
		return nil, err
	}
	if err := openRecord(&r, sess.Marker != "", secret); err != nil {
		return nil, err
	}
	exp := time.Unix(r.ExpiresAt, 0)
	if !now.Before(exp.Add(s.opts.Leeway)) {
		return nil, refusal.Describe(fmt.Errorf("%w: %w", ErrInvalidToken, jwt.ErrTokenExpired), jwtReason(jwt.ErrTokenExpired))
	}
	if err := SessionLive(parts.Time.UnixMilli(), sess); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	scopes, err := syntax.ParseScope(r.Scope)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	dates := &[2]jwt.NumericDate{{Time: time.Unix(r.IssuedAt, 0)}, {Time: exp}} // one allocation for both
	v := &Verified{
		claims: Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: s.opts.Issuer, Subject: r.Subject, Audience: r.Audience, ID: jti,
				IssuedAt: &dates[0], ExpiresAt: &dates[1],
			},
			ClientID: r.Client, Scope: r.Scope,
			Confirmation: jwtpolicy.Confirmation{JKT: r.JKT},
		},
		id: id, parts: parts, scopes: scopes,
		cacheUntil: exp.Add(s.opts.Leeway),
	}
	if r.Chain != "" { // an exchanged token: revoked with any of its parents (parents.go)
		if v.claims.Act, v.claims.Parents, err = decodeChain(r.Chain); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
		}
		switch err := s.opaqueParentsLive(ctx, v); {
		case errors.Is(err, ErrRevoked):
			return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
		case err != nil:
			return nil, err
		}
	}
	return v, nil
}

// openRecord returns nil when the store found r, the record of an opaque
// token whose secret is secret, and r holds the secret's SHA-256;
// otherwise errNoSession, wrapped in ErrInvalidToken: no record and another
// secret are told alike.
func openRecord(r *OpaqueRecord, found bool, secret *[opaqueSecretLen]byte) error {
	if !found {
		return fmt.Errorf("%w: %w", ErrInvalidToken, errNoSession)
	}
	sum := sha256.Sum256(secret[:])
	if subtle.ConstantTimeCompare(sum[:], r.SecretSum[:]) != 1 {
		return fmt.Errorf("%w: %w", ErrInvalidToken, errNoSession)
	}
	return nil
}

// revokeOpaque is Revoke for an opaque token: its record is deleted, and
// the revocation logged, only once the token's secret matches it, so a
// guessed ID revokes nothing. A token without a record is revoked all the
// same when this replica's verified-token cache holds it (its secret
// matched when it was cached); the other replicas that cached it accept it
// until its exp. What has no record and is not in the cache (never issued,
// expired, revoked already, lost and not validated here) or another secret
// is no token of ours: "", nil.
func (s *Service) revokeOpaque(ctx context.Context, caller *clients.Client, raw string) (string, error) {
	id, secret, err := parseOpaque(raw)
	if err != nil {
		return "", nil
	}
	jti := id.String()
	r, found, err := s.store.GetOpaque(ctx, jti)
	switch {
	case errors.Is(err, ErrUnreadableRecord):
		return "", nil
	case err != nil:
		return "", err
	}
	var client string
	var exp int64
	if !found {
		// No record (never issued, expired, revoked, or lost): what this
		// replica has validated is in its cache, and a validator that
		// decides from the log may accept it still, so it is revoked.
		sum := sha256.Sum256(bytesOf(raw))
		v := s.cache.get(&sum, s.opts.Now())
		if v == nil {
			return "", nil
		}
		client, exp = v.claims.ClientID, v.claims.ExpiresAt.Unix()
	} else {
		if openRecord(&r, true, &secret) != nil {
			return "", nil
		}
		client, exp = r.Client, r.ExpiresAt
	}
	if client != caller.ID && !caller.Admin {
		return "", refusal.New(ErrForbidden, "the token was issued to another client")
	}
	if err := s.store.RevokeOpaque(ctx, jti, exp); err != nil {
		return "", err
	}
	s.revokedHere(raw, jti, exp)
	return jti, nil
}

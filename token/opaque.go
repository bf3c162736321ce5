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
	"strconv"
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
// a JWT (see redisstore's package doc for the keys). The token is OpaquePrefix and
// the base64url (no padding) of 24 bytes, the 8-byte Snowflake ID (big
// endian) and 16 bytes from crypto/rand:
//
//	st_<32 characters of base64url>    35 characters in all
//
// It carries nothing but the ID: every claim comes from its Redis record,
// which holds the SHA-256 of the 16-byte secret, compared in constant time,
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
	// recordVersion starts every opaque record, so that a later layout is
	// told apart (and refused, never misread) by a replica that does not
	// know it. boundRecordVersion starts the record of a DPoP-bound token,
	// which ends with one more field, the key's thumbprint: a replica
	// that predates DPoP refuses such a token rather than take it for a
	// bearer token.
	recordVersion      = '1'
	boundRecordVersion = '2'
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

// opaqueRecord is the Redis value of an opaque token's session, one string
// (a hash would cost more memory per session, and a second parse):
//
//	'1' <SHA-256 of the secret: 32 bytes> <marker> \n <sub> \n <client_id> \n <iat> \n <exp> \n <scope> \n <aud>
//	'2' <the same> \n <jkt>      (a DPoP-bound token: the key's thumbprint)
//
// iat and exp are Unix seconds in decimal; scope and aud are space-separated
// and may be empty. Only the hash is binary, and at a fixed offset: no other
// field may hold a newline (names, scopes and audiences are printable ASCII
// without spaces or newlines). Lua reads sub and client_id from it at offset
// 34 (redisstore's validateOpaqueLua); Go reads all of it (parseOpaqueRecord).
type opaqueRecord struct {
	sum                             string // the secret's SHA-256, 32 bytes
	marker, sub, client, scope, aud string
	iat, exp                        int64
	jkt                             string // a bound token's cnf.jkt; "" for a bearer token
}

// opaqueHeadLen is the length of the record before the marker.
const opaqueHeadLen = 1 + sha256.Size

// opaqueRecordParts returns the record of a new session of g around the
// marker, which the create script puts between them.
func opaqueRecordParts(sum *[sha256.Size]byte, g *grant) (head, tail string) {
	var h [opaqueHeadLen]byte
	h[0] = recordVersion
	if g.jkt != "" {
		h[0] = boundRecordVersion
	}
	copy(h[1:], sum[:])
	n := len(g.sub) + len(g.client) + len(g.scope) + len(g.jkt) + 2*20 + 7 // two dates of at most 20 digits, seven newlines
	for _, a := range g.aud {
		n += len(a) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range [...]string{g.sub, g.client, strconv.FormatInt(g.iat, 10), strconv.FormatInt(g.exp, 10), g.scope} {
		b.WriteByte('\n')
		b.WriteString(f)
	}
	b.WriteByte('\n')
	for i, a := range g.aud {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	if g.jkt != "" {
		b.WriteByte('\n')
		b.WriteString(g.jkt)
	}
	return string(h[:]), b.String()
}

// errRecord is parseOpaqueRecord's refusal, made once.
var errRecord = errors.New("token: unreadable opaque session record")

// parseOpaqueRecord reads a record as opaqueRecordParts and the create script
// wrote it. Every field is a substring of rec: no allocation.
func parseOpaqueRecord(rec string) (opaqueRecord, error) {
	var r opaqueRecord
	if len(rec) < opaqueHeadLen || rec[0] != recordVersion && rec[0] != boundRecordVersion {
		return r, errRecord
	}
	var fields [8]string
	n := 7
	if rec[0] == boundRecordVersion {
		n = 8
	}
	r.sum, rec = rec[1:opaqueHeadLen], rec[opaqueHeadLen:]
	for i := range n - 1 {
		var ok bool
		if fields[i], rec, ok = strings.Cut(rec, "\n"); !ok {
			return r, errRecord
		}
	}
	fields[n-1] = rec
	if strings.IndexByte(rec, '\n') >= 0 {
		return r, errRecord
	}
	r.marker, r.sub, r.client, r.scope, r.aud, r.jkt = fields[0], fields[1], fields[2], fields[5], fields[6], fields[7]
	var err1, err2 error
	r.iat, err1 = strconv.ParseInt(fields[3], 10, 64)
	r.exp, err2 = strconv.ParseInt(fields[4], 10, 64)
	if err1 != nil || err2 != nil || r.marker == "" || syntax.CheckName(r.sub) != nil || syntax.CheckName(r.client) != nil ||
		n == 8 && !syntax.IsThumbprint(r.jkt) {
		return r, errRecord
	}
	return r, nil
}

// OpaqueRecordNames returns the subject and the client an opaque token's
// record names (a Store reads their keys), or an error when the record does
// not read.
func OpaqueRecordNames(rec string) (sub, client string, err error) {
	r, err := parseOpaqueRecord(rec)
	return r.sub, r.client, err
}

// audiences returns the record's aud as a list, nil for none.
func (r *opaqueRecord) audiences() []string {
	if r.aud == "" {
		return nil
	}
	return strings.Split(r.aud, " ")
}

// issueOpaque writes the session of a new opaque token of g and returns
// the token: no signature, one script (two round trips on a Cluster).
func (s *Service) issueOpaque(ctx context.Context, id snowflakealg.ID, idTime time.Time, g *grant, ttl time.Duration) (string, error) {
	var secret [opaqueSecretLen]byte
	_, _ = rand.Read(secret[:]) // crypto/rand.Read never fails (Go 1.24)
	sum := sha256.Sum256(secret[:])
	head, tail := opaqueRecordParts(&sum, g)
	k := s.store.Keys(g.sub, g.client, "", idTime)
	k.Session = s.store.OpaqueKey(g.jti)
	if err := s.store.CreateOpaque(ctx, k, ttl, head, tail); err != nil {
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
	rec, sess, err := s.store.ReadOpaque(ctx, s.store.OpaqueKey(jti))
	if err != nil {
		return nil, err
	}
	r, err := s.openRecord(rec, secret)
	if err != nil {
		return nil, err
	}
	exp := time.Unix(r.exp, 0)
	if !now.Before(exp.Add(s.opts.Leeway)) {
		return nil, refusal.Describe(fmt.Errorf("%w: %w", ErrInvalidToken, jwt.ErrTokenExpired), jwtReason(jwt.ErrTokenExpired))
	}
	sess.Marker = r.marker
	if err := SessionLive(parts.Time.UnixMilli(), sess); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	scopes, err := syntax.ParseScope(r.scope)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	dates := &[2]jwt.NumericDate{{Time: time.Unix(r.iat, 0)}, {Time: exp}} // one allocation for both
	return &Verified{
		claims: Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: s.opts.Issuer, Subject: r.sub, Audience: r.audiences(), ID: jti,
				IssuedAt: &dates[0], ExpiresAt: &dates[1],
			},
			ClientID: r.client, Scope: r.scope,
			Confirmation: jwtpolicy.Confirmation{JKT: r.jkt},
		},
		id: id, parts: parts, scopes: scopes,
		cacheUntil: exp.Add(s.opts.Leeway),
	}, nil
}

// openRecord reads rec, the record the store returned ("" for none), if
// the secret's SHA-256 is the one it holds; errNoSession if not, wrapped in
// ErrInvalidToken.
func (s *Service) openRecord(rec string, secret *[opaqueSecretLen]byte) (opaqueRecord, error) {
	if rec == "" {
		return opaqueRecord{}, fmt.Errorf("%w: %w", ErrInvalidToken, errNoSession)
	}
	r, err := parseOpaqueRecord(rec)
	if err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	sum := sha256.Sum256(secret[:])
	if subtle.ConstantTimeCompare(sum[:], []byte(r.sum)) != 1 {
		return opaqueRecord{}, fmt.Errorf("%w: %w", ErrInvalidToken, errNoSession)
	}
	return r, nil
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
	key := s.store.OpaqueKey(jti)
	rec, err := s.store.GetOpaque(ctx, key)
	if err != nil {
		return "", err
	}
	var client string
	var exp int64
	if rec == "" {
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
		r, err := s.openRecord(rec, &secret)
		if err != nil {
			return "", nil
		}
		client, exp = r.client, r.exp
	}
	if client != caller.ID && !caller.Admin {
		return "", refusal.New(ErrForbidden, "the token was issued to another client")
	}
	if err := s.store.RevokeToken(ctx, key, jti, exp); err != nil {
		return "", err
	}
	s.revokedHere(raw, jti, exp)
	return jti, nil
}

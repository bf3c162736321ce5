package redisstore

import (
	"crypto/sha256"
	"strconv"
	"strings"

	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// The record of an opaque token (st:o:<jti>) is a token.OpaqueRecord and
// the subject's marker at issue, as one string (a hash would cost more
// memory per session, and a second parse):
//
//	'1' <SHA-256 of the secret: 32 bytes> <marker> \n <sub> \n <client_id> \n <iat> \n <exp> \n <scope> \n <aud>
//	'2' <the same> \n <jkt>      (a DPoP-bound token: the key's thumbprint)
//	'3' <the same as '1'> \n <jkt or ""> \n <chain>   (an exchanged token: token.OpaqueRecord.Chain)
//
// iat and exp are Unix seconds in decimal; scope and aud are space-separated
// and may be empty. Only the hash is binary, and at a fixed offset: no other
// field may hold a newline (names, scopes and audiences are printable ASCII
// without spaces or newlines). Lua reads sub and client_id from it at
// offset 34 (validateOpaqueLua); Go reads all of it (decodeRecord).
const (
	// recordVersion starts every opaque record, so that a later layout is
	// told apart (and refused, never misread) by a replica that does not
	// know it. boundRecordVersion starts the record of a DPoP-bound token,
	// which ends with one more field, the key's thumbprint: a replica
	// that predates DPoP refuses such a token rather than take it for a
	// bearer token.
	recordVersion      = '1'
	boundRecordVersion = '2'
	// chainRecordVersion starts the record of an exchanged token, which
	// ends with two more fields, the key's thumbprint ("" for a bearer
	// token) and its act and parents (Chain): a replica that predates
	// exchange refuses such a token rather than take it for one with no
	// actor and no parent to be revoked with.
	chainRecordVersion = '3'
	// recordHeadLen is the length of the record before the marker.
	recordHeadLen = 1 + sha256.Size
)

// recordParts returns the record of rec around the subject's marker, which
// the create script (a Cluster's SET) puts between them.
func recordParts(rec *token.OpaqueRecord) (head, tail string) {
	var h [recordHeadLen]byte
	h[0] = recordVersion
	if rec.JKT != "" {
		h[0] = boundRecordVersion
	}
	if rec.Chain != "" {
		h[0] = chainRecordVersion
	}
	copy(h[1:], rec.SecretSum[:])
	n := len(rec.Subject) + len(rec.Client) + len(rec.Scope) + len(rec.JKT) + len(rec.Chain) + 2*20 + 9 // two dates of at most 20 digits, nine newlines
	for _, a := range rec.Audience {
		n += len(a) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range [...]string{rec.Subject, rec.Client, strconv.FormatInt(rec.IssuedAt, 10), strconv.FormatInt(rec.ExpiresAt, 10), rec.Scope} {
		b.WriteByte('\n')
		b.WriteString(f)
	}
	b.WriteByte('\n')
	for i, a := range rec.Audience {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	if rec.JKT != "" || rec.Chain != "" {
		b.WriteByte('\n')
		b.WriteString(rec.JKT)
	}
	if rec.Chain != "" {
		b.WriteByte('\n')
		b.WriteString(rec.Chain)
	}
	return string(h[:]), b.String()
}

// decodeRecord reads a record as recordParts and the create script wrote
// it: the token.OpaqueRecord and the marker it holds, or
// token.ErrUnreadableRecord. Every string is a substring of s: no
// allocation but the audience list's.
func decodeRecord(s string) (rec token.OpaqueRecord, marker string, err error) {
	if len(s) < recordHeadLen || s[0] != recordVersion && s[0] != boundRecordVersion && s[0] != chainRecordVersion {
		return rec, "", token.ErrUnreadableRecord
	}
	var fields [9]string
	n := 7
	switch s[0] {
	case boundRecordVersion:
		n = 8
	case chainRecordVersion:
		n = 9
	}
	copy(rec.SecretSum[:], s[1:recordHeadLen])
	s = s[recordHeadLen:]
	for i := range n - 1 {
		var ok bool
		if fields[i], s, ok = strings.Cut(s, "\n"); !ok {
			return token.OpaqueRecord{}, "", token.ErrUnreadableRecord
		}
	}
	fields[n-1] = s
	if strings.IndexByte(s, '\n') >= 0 {
		return token.OpaqueRecord{}, "", token.ErrUnreadableRecord
	}
	marker, rec.Subject, rec.Client, rec.Scope, rec.JKT, rec.Chain = fields[0], fields[1], fields[2], fields[5], fields[7], fields[8]
	var err1, err2 error
	rec.IssuedAt, err1 = strconv.ParseInt(fields[3], 10, 64)
	rec.ExpiresAt, err2 = strconv.ParseInt(fields[4], 10, 64)
	if err1 != nil || err2 != nil || marker == "" || syntax.CheckName(rec.Subject) != nil || syntax.CheckName(rec.Client) != nil ||
		n == 8 && !syntax.IsThumbprint(rec.JKT) || n == 9 && (rec.JKT != "" && !syntax.IsThumbprint(rec.JKT) || rec.Chain == "") {
		return token.OpaqueRecord{}, "", token.ErrUnreadableRecord
	}
	if aud := fields[6]; aud != "" {
		rec.Audience = strings.Split(aud, " ")
	}
	return rec, marker, nil
}

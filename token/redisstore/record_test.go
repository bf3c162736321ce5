package redisstore

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Records as the issuers before the Store spoke token.OpaqueRecord wrote
// them (token's opaqueRecordParts and the create script), byte for byte:
// the SHA-256 of "secret", then the marker and the claims.
const (
	oldBearerRecord = "1+\xb8\rS{\x1d\xa3\xe3\x8b\xd3\x03a\xaa\x85V\x86\xbd\xe0\xea\xcdqb\xfe\xf6\xa2_\xe9{\xf5'\xa2[" +
		"2305843009213693952\nalice\ngateway\n1700000000\n1700003600\nread write\nhttps://api.test https://b.test"
	oldBoundRecord = "2+\xb8\rS{\x1d\xa3\xe3\x8b\xd3\x03a\xaa\x85V\x86\xbd\xe0\xea\xcdqb\xfe\xf6\xa2_\xe9{\xf5'\xa2[" +
		"3000000000000000001\nbob\nogateway\n1700000000\n1700000060\nread\n\n0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
)

// oldRecords are the records above, what they hold and their markers.
var oldRecords = []struct {
	name, raw, marker string
	rec               token.OpaqueRecord
}{
	{"bearer", oldBearerRecord, "2305843009213693952", token.OpaqueRecord{
		SecretSum: sha256.Sum256([]byte("secret")), Subject: "alice", Client: "gateway", Scope: "read write",
		Audience: []string{"https://api.test", "https://b.test"}, IssuedAt: 1_700_000_000, ExpiresAt: 1_700_003_600,
	}},
	{"bound", oldBoundRecord, "3000000000000000001", token.OpaqueRecord{
		SecretSum: sha256.Sum256([]byte("secret")), Subject: "bob", Client: "ogateway", Scope: "read",
		IssuedAt: 1_700_000_000, ExpiresAt: 1_700_000_060, JKT: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I",
	}},
}

// sameRecord reports whether a and b hold the same.
func sameRecord(a, b token.OpaqueRecord) bool {
	return a.SecretSum == b.SecretSum && a.Subject == b.Subject && a.Client == b.Client && a.Scope == b.Scope &&
		slices.Equal(a.Audience, b.Audience) && a.IssuedAt == b.IssuedAt && a.ExpiresAt == b.ExpiresAt && a.JKT == b.JKT && a.Chain == b.Chain
}

// TestOldRecordLayout: a record written in the layout of the issuers
// before reads as what it holds, and the same record is written byte for
// byte as they wrote it, so that replicas of either kind read each
// other's records during a rolling upgrade.
func TestOldRecordLayout(t *testing.T) {
	for _, c := range oldRecords {
		t.Run(c.name, func(t *testing.T) {
			rec, marker, err := decodeRecord(c.raw)
			if err != nil || marker != c.marker || !sameRecord(rec, c.rec) {
				t.Errorf("decodeRecord = %+v, marker %q, %v; want %+v, %q", rec, marker, err, c.rec, c.marker)
			}
			head, tail := recordParts(&c.rec)
			if got := head + c.marker + tail; got != c.raw {
				t.Errorf("recordParts wrote %q, want %q", got, c.raw)
			}
		})
	}
}

// TestReadOldRecord: ReadOpaque and GetOpaque, on a single Redis's path
// and a Cluster's, read a record of the old layout that Redis holds, with
// the subject's marker and the client's revocation time it names; a
// record of a layout they do not know is token.ErrUnreadableRecord, and no
// record a zero one with no marker.
func TestReadOldRecord(t *testing.T) {
	forPaths(t, func(t *testing.T, r *redistest.Redis, s *Store) {
		ctx := t.Context()
		for i, c := range oldRecords {
			jti := strconv.Itoa(100 + i)
			k := s.keys(c.rec.Subject, c.rec.Client, "")
			if err := r.Client.Set(ctx, s.opaqueKey(jti), c.raw, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Client.Set(ctx, k.gen, "7", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Client.Set(ctx, k.client, "1700000000123", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			rec, sess, err := s.ReadOpaque(ctx, jti)
			want := token.Session{Marker: c.marker, SubjectMarker: "7", ClientCutoff: 1_700_000_000_123}
			if err != nil || sess != want || !sameRecord(rec, c.rec) {
				t.Errorf("%s: ReadOpaque = %+v, %+v, %v; want %+v, %+v", c.name, rec, sess, err, c.rec, want)
			}
			rec, ok, err := s.GetOpaque(ctx, jti)
			if err != nil || !ok || !sameRecord(rec, c.rec) {
				t.Errorf("%s: GetOpaque = %+v, %v, %v; want %+v", c.name, rec, ok, err, c.rec)
			}
		}
		if err := r.Client.Set(ctx, s.opaqueKey("200"), "3"+oldBearerRecord[1:], time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ReadOpaque(ctx, "200"); !errors.Is(err, token.ErrUnreadableRecord) {
			t.Errorf("ReadOpaque of a record of layout 3: %v, want ErrUnreadableRecord", err)
		}
		if _, _, err := s.GetOpaque(ctx, "200"); !errors.Is(err, token.ErrUnreadableRecord) {
			t.Errorf("GetOpaque of a record of layout 3: %v, want ErrUnreadableRecord", err)
		}
		if rec, sess, err := s.ReadOpaque(ctx, "201"); err != nil || sess != (token.Session{}) || !sameRecord(rec, token.OpaqueRecord{}) {
			t.Errorf("ReadOpaque of no record = %+v, %+v, %v; want zero", rec, sess, err)
		}
		if _, ok, err := s.GetOpaque(ctx, "201"); ok || err != nil {
			t.Errorf("GetOpaque of no record: ok %v, %v; want false, nil", ok, err)
		}
	})
}

// FuzzDecodeRecord feeds decodeRecord arbitrary records. A refusal is
// token.ErrUnreadableRecord; a record it accepts has names that pass
// CheckName, a marker, no newline in any field but the hash, and written
// again with recordParts it reads back the same.
func FuzzDecodeRecord(f *testing.F) {
	sum := sha256.Sum256([]byte("secret"))
	for _, aud := range [][]string{nil, {"https://api.test"}, {"a", "b"}} {
		head, tail := recordParts(&token.OpaqueRecord{SecretSum: sum, Subject: "alice", Client: "gateway", Scope: "read write", Audience: aud, IssuedAt: 1_700_000_000, ExpiresAt: 1_700_003_600})
		f.Add(head + "2305843009213693952" + tail)
	}
	bh, bt := recordParts(&token.OpaqueRecord{SecretSum: sum, Subject: "alice", Client: "gateway", Scope: "read", IssuedAt: 1, ExpiresAt: 2, JKT: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"})
	f.Add(bh + "1" + bt)
	f.Add("1" + bh[1:] + "1" + bt)    // a bound record's fields under the bearer version
	f.Add(bh + "1" + bt[:len(bt)-44]) // a bound record without its thumbprint
	chain := `"act":{"sub":"svc","client_id":"svc"},"parents":[{"jti":"2305843009213693952","client_id":"gateway","iat":1}]`
	for _, jkt := range []string{"", "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"} {
		ch, ct := recordParts(&token.OpaqueRecord{SecretSum: sum, Subject: "alice", Client: "svc", Scope: "read", IssuedAt: 1, ExpiresAt: 2, JKT: jkt, Chain: chain})
		f.Add(ch + "1" + ct)
		f.Add(ch + "1" + ct[:len(ct)-len(chain)-1]) // an exchanged token's record without its chain
		f.Add("2" + ch[1:] + "1" + ct)              // its fields under the bound version
	}
	head, tail := recordParts(&token.OpaqueRecord{SecretSum: sum, Subject: "alice", Client: "gateway", IssuedAt: 1, ExpiresAt: 2})
	for _, s := range []string{
		head + "1" + tail, "2" + head[1:] + "1" + tail, head, head + "1", head + "1\n\n\n\n\n\n", head + "\nalice\ngw\n1\n2\n\n",
		head + "1\nal{ice}\ngw\n1\n2\n\n", head + "1\nalice\ngw\n+1\n-2\n\n", head + "1\nalice\ngw\n1\n2\n\n\n", "",
		oldBearerRecord, oldBoundRecord,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, marker, err := decodeRecord(raw)
		if err != nil {
			if err != token.ErrUnreadableRecord {
				t.Fatalf("decodeRecord: %v, which is not ErrUnreadableRecord", err)
			}
			return
		}
		if syntax.CheckName(r.Subject) != nil || syntax.CheckName(r.Client) != nil || marker == "" {
			t.Fatalf("decodeRecord(%q) accepted %+v, marker %q", raw, r, marker)
		}
		if raw[0] != chainRecordVersion && (raw[0] == boundRecordVersion) != (r.JKT != "") || r.JKT != "" && !syntax.IsThumbprint(r.JKT) ||
			(raw[0] == chainRecordVersion) != (r.Chain != "") {
			t.Fatalf("decodeRecord(%q) accepted jkt %q", raw, r.JKT)
		}
		for _, field := range append([]string{marker, r.Scope, r.JKT, r.Chain}, r.Audience...) {
			if strings.IndexByte(field, '\n') >= 0 {
				t.Fatalf("decodeRecord(%q) accepted a field with a newline: %q", raw, field)
			}
		}
		head, tail := recordParts(&r)
		back, backMarker, err := decodeRecord(head + marker + tail)
		if err != nil || backMarker != marker || !sameRecord(back, r) {
			t.Fatalf("record %+v written again reads %+v, %q, %v", r, back, backMarker, err)
		}
	})
}

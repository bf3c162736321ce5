package token

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// FuzzParseOpaque feeds parseOpaque arbitrary strings. A refusal wraps
// ErrInvalidToken; a token it accepts is the one formatOpaque writes for its
// ID and secret, byte for byte: no two strings are the same token.
func FuzzParseOpaque(f *testing.F) {
	var secret [opaqueSecretLen]byte
	copy(secret[:], "0123456789abcdef")
	good := formatOpaque(snowflakealg.ID(118251258602614784), secret)
	for _, s := range []string{
		good, good + "=", good[:len(good)-1], "ST_" + good[3:], good[:10] + "+" + good[11:], good[:10] + "/" + good[11:],
		formatOpaque(0, [opaqueSecretLen]byte{}), formatOpaque(1<<63-1, secret), "st_", "", "eyJhbGciOiJFZERTQSJ9.e30.sig",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, secret, err := parseOpaque(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("parseOpaque(%q): %v, which is not ErrInvalidToken", raw, err)
			}
			return
		}
		if back := formatOpaque(id, secret); back != raw {
			t.Fatalf("parseOpaque(%q) = %v, %x, which formatOpaque writes as %q", raw, id, secret, back)
		}
	})
}

// FuzzParseOpaqueRecord feeds parseOpaqueRecord arbitrary records. A refusal
// is errRecord; a record it accepts has names that pass CheckName and no
// newline in any field but the hash, and written again with
// opaqueRecordParts it reads back the same.
func FuzzParseOpaqueRecord(f *testing.F) {
	sum := sha256.Sum256([]byte("secret"))
	for _, aud := range [][]string{nil, {"https://api.test"}, {"a", "b"}} {
		head, tail := opaqueRecordParts(&sum, &grant{sub: "alice", client: "gateway", scope: "read write", aud: aud, iat: 1_700_000_000, exp: 1_700_003_600})
		f.Add(head + "2305843009213693952" + tail)
	}
	bh, bt := opaqueRecordParts(&sum, &grant{sub: "alice", client: "gateway", scope: "read", iat: 1, exp: 2, jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"})
	f.Add(bh + "1" + bt)
	f.Add("1" + bh[1:] + "1" + bt)    // a bound record's fields under the bearer version
	f.Add(bh + "1" + bt[:len(bt)-44]) // a bound record without its thumbprint
	head, tail := opaqueRecordParts(&sum, &grant{sub: "alice", client: "gateway", iat: 1, exp: 2})
	for _, s := range []string{
		head + "1" + tail, "2" + head[1:] + "1" + tail, head, head + "1", head + "1\n\n\n\n\n\n", head + "\nalice\ngw\n1\n2\n\n",
		head + "1\nal{ice}\ngw\n1\n2\n\n", head + "1\nalice\ngw\n+1\n-2\n\n", head + "1\nalice\ngw\n1\n2\n\n\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		r, err := parseOpaqueRecord(rec)
		if err != nil {
			if err != errRecord {
				t.Fatalf("parseOpaqueRecord: %v, which is not errRecord", err)
			}
			return
		}
		if syntax.CheckName(r.sub) != nil || syntax.CheckName(r.client) != nil || len(r.sum) != sha256.Size || r.marker == "" {
			t.Fatalf("parseOpaqueRecord(%q) accepted %+v", rec, r)
		}
		if (rec[0] == boundRecordVersion) != (r.jkt != "") || r.jkt != "" && !syntax.IsThumbprint(r.jkt) {
			t.Fatalf("parseOpaqueRecord(%q) accepted jkt %q", rec, r.jkt)
		}
		for _, field := range []string{r.marker, r.scope, r.aud, r.jkt} {
			if strings.IndexByte(field, '\n') >= 0 {
				t.Fatalf("parseOpaqueRecord(%q) accepted a field with a newline: %q", rec, field)
			}
		}
		var sum [sha256.Size]byte
		copy(sum[:], r.sum)
		head, tail := opaqueRecordParts(&sum, &grant{sub: r.sub, client: r.client, scope: r.scope, aud: r.audiences(), iat: r.iat, exp: r.exp, jkt: r.jkt})
		back, err := parseOpaqueRecord(head + r.marker + tail)
		if err != nil || back != r {
			t.Fatalf("record %+v written again reads %+v, %v", r, back, err)
		}
	})
}

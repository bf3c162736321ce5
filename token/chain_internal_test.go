package token

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// chainCases are acts and parents as an exchange makes them, and with
// strings encoding/json escapes (quotes, control characters, <>&, U+2028,
// invalid UTF-8) and non-ASCII, which AppendChain must write as it does.
func chainCases() []chainClaims {
	odd := "a\"b\\c\x00\x1f\b\f\n\r\t<>&\u2028\u2029é😀\xff\xc3"
	return []chainClaims{
		{},
		{Act: &jwtpolicy.Actor{Subject: "gateway", ClientID: "gateway"}},
		{Parents: []jwtpolicy.Parent{{ID: "117811659438825472", ClientID: "web", IssuedAt: 1795314088}}},
		{Act: &jwtpolicy.Actor{Subject: "billing", ClientID: "billing", Act: &jwtpolicy.Actor{Subject: "gateway", Issuer: "https://issuer.test"}},
			Parents: []jwtpolicy.Parent{{ID: "117811659438825472", ClientID: "web", IssuedAt: 1795314088, Opaque: true}, {ID: "1", ClientID: "app"}}},
		{Act: &jwtpolicy.Actor{Subject: odd, Issuer: odd, ClientID: odd, Act: &jwtpolicy.Actor{}},
			Parents: []jwtpolicy.Parent{{ID: odd, ClientID: odd, IssuedAt: math.MinInt64}, {IssuedAt: math.MaxInt64, Opaque: true}}},
		{Parents: []jwtpolicy.Parent{}},
	}
}

// TestAppendChainMatchesEncodingJSON: AppendChain writes byte for byte the
// members encoding/json writes for the same chainClaims, and encodeChain
// them without braces, "" for neither.
func TestAppendChainMatchesEncodingJSON(t *testing.T) {
	for _, c := range chainCases() {
		lib, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		want := string(lib[1 : len(lib)-1])
		if got := string(AppendChain([]byte("prefix"), c.Act, c.Parents)); got != "prefix"+want {
			t.Errorf("AppendChain of %+v:\n got %s\nwant prefix%s", c, got, want)
		}
		if got := encodeChain(c.Act, c.Parents); got != want {
			t.Errorf("encodeChain of %+v:\n got %s\nwant %s", c, got, want)
		}
	}
}

// BenchmarkAppendChain is an exchanged token's act and parents, as
// encodeChain writes them and as encoding/json did.
func BenchmarkAppendChain(b *testing.B) {
	c := chainCases()[3]
	b.Run("encodeChain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encodeChain(c.Act, c.Parents)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _ := json.Marshal(c)
			_ = string(p[1 : len(p)-1])
		}
	})
}

package handlers

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// TestAppendJSONMatchesEncodingJSON: the hand-written bodies are byte for byte
// what encoding/json makes of the same structs.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	odd := "a\"b\\c\x00\x1f\b\f\n\r\t<>&\u2028\u2029é😀\xff\xc3"
	bodies := []jsonBody{
		&tokenResponse{AccessToken: "eyJ.eyJ.sig", TokenType: "Bearer", ExpiresIn: 3600, Scope: "orders:read orders:write", JTI: 123456789012345678},
		&tokenResponse{},
		&tokenResponse{AccessToken: odd, TokenType: odd, ExpiresIn: -1, Scope: odd, JTI: snowflakealg.ID(math.MaxInt64)},
		&claimsResponse{Active: true, Subject: "user-1", ClientID: "gateway", Scope: "orders:read", Issuer: "https://auth.example.com",
			IssuedAt: 1795000000, ExpiresAt: 1795003600, JTI: 42, WorkerID: 1023},
		&claimsResponse{Active: true, Subject: "s", ClientID: "c", Audience: []string{"orders"}, JTI: 1, TokenType: "Bearer"},
		&claimsResponse{Active: true, Subject: "s", ClientID: "c", JTI: 1, TokenType: "DPoP", Confirmation: &confirmation{JKT: "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"}},
		&claimsResponse{Subject: odd, ClientID: odd, Scope: odd, Issuer: odd, Audience: []string{odd, "", "b"},
			IssuedAt: math.MinInt64, ExpiresAt: math.MaxInt64, JTI: snowflakealg.ID(math.MaxInt64), WorkerID: -1, TokenType: odd},
		&claimsResponse{Audience: []string{}},
		&claimsResponse{Active: true, Subject: "s", ClientID: "c", JTI: 1, Act: &jwtpolicy.Actor{Subject: "gateway", ClientID: "gateway"}},
		&claimsResponse{Active: true, Subject: "s", ClientID: "c", JTI: 1, Parents: []jwtpolicy.Parent{{ID: "117811659438825472", ClientID: "web", IssuedAt: 1795314088, Opaque: true}}},
		&claimsResponse{Subject: odd, Act: &jwtpolicy.Actor{Subject: odd, Issuer: odd, ClientID: odd, Act: &jwtpolicy.Actor{Subject: "a"}},
			Parents: []jwtpolicy.Parent{{ID: odd, ClientID: odd, IssuedAt: math.MinInt64}, {ID: "2", ClientID: "b"}}},
	}
	for _, body := range bodies {
		want, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := body.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON of %+v:\n got %s\nwant %s", body, got, want)
		}
	}
}

func BenchmarkClaimsBody(b *testing.B) {
	resp := &claimsResponse{Active: true, Subject: "user-1", ClientID: "gateway", Scope: "orders:read orders:write",
		Issuer: "https://auth.example.com", IssuedAt: 1795000000, ExpiresAt: 1795003600, JTI: 123456789012345678, WorkerID: 17}
	b.Run("appendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = resp.appendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package jwtpolicy

import (
	"errors"
	"strings"
	"testing"
)

// jwsSample is the shape of an issued token: header, claims, an Ed25519
// signature's 86 characters.
var jwsSample = "eyJhbGciOiJFZERTQSIsImtpZCI6IngiLCJ0eXAiOiJhdCtqd3QifQ." + strings.Repeat("eyJpc3MiOiJ4In0", 20) + "." + strings.Repeat("A", 86)

func TestCheckSyntax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want error
	}{
		{"a.b.c", nil},
		{"eyJ-_0.eyJ9.sig_-", nil},
		{jwsSample, nil},
		{"st_" + strings.Repeat("A", 32), nil},
		{"st_" + strings.Repeat("-", 31) + "_", nil},
		{"", ErrTokenShape},
		{"abc", ErrTokenShape},
		{"a.b", ErrTokenShape},
		{"a.b.c.d", ErrTokenShape},
		{".b.c", ErrTokenShape},
		{"a..c", ErrTokenShape},
		{"a.b.", ErrTokenShape},
		{"..", ErrTokenShape},
		{"st_" + strings.Repeat("A", 31), ErrTokenShape},
		{"st_" + strings.Repeat("A", 33), ErrTokenShape},
		{"st_a.b.c", ErrTokenBytes}, // an opaque token has no dot
		{"ST_" + strings.Repeat("A", 32), ErrTokenShape},
		// Every byte outside base64url and the dots, wherever it is.
		{"a.b.c=", ErrTokenBytes},
		{"a.b.c d", ErrTokenBytes},
		{"a.b.c\n", ErrTokenBytes},
		{"\na.b.c", ErrTokenBytes},
		{"a.b\r\n.c", ErrTokenBytes},
		{jwsSample[:150] + "\r\n" + jwsSample[150:], ErrTokenBytes},
		{"a.b/.c", ErrTokenBytes},
		{"a.b+.c", ErrTokenBytes},
		{"a.b.c\x00", ErrTokenBytes},
		{"a.b.c\t", ErrTokenBytes},
		{"a.b.\xffc", ErrTokenBytes},
		{"a.b.c~", ErrTokenBytes},
		{"st_" + strings.Repeat("A", 31) + "=", ErrTokenBytes},
		{"st_" + strings.Repeat("A", 16) + "\n" + strings.Repeat("A", 16), ErrTokenBytes},
		{"st_" + strings.Repeat("A", 30) + ".A", ErrTokenBytes},
	} {
		if err := CheckSyntax(tc.raw); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("CheckSyntax(%.24q): %v, want %v", tc.raw, err, tc.want)
		}
	}
	// Every byte value: only base64url and '.' pass.
	for c := 0; c < 256; c++ {
		raw := "a.b" + string([]byte{byte(c)}) + ".c"
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if err := CheckSyntax(raw); (err == nil) != ok && c != '.' {
			t.Errorf("byte %#x: %v, want ok=%v", c, err, ok)
		}
	}
}

// TestCheckSyntaxAllocs: the check costs no allocation, accepted or refused.
func TestCheckSyntaxAllocs(t *testing.T) {
	for _, raw := range []string{jwsSample, jwsSample + "\n", "st_" + strings.Repeat("A", 32), "a..b"} {
		if n := testing.AllocsPerRun(100, func() { _ = CheckSyntax(raw) }); n != 0 {
			t.Errorf("CheckSyntax(%.16q): %v allocations, want 0", raw, n)
		}
	}
}

// BenchmarkCheckSyntax is the cost of the check on a token of the issued
// shape (about 450 bytes).
func BenchmarkCheckSyntax(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(jwsSample)))
	for b.Loop() {
		if err := CheckSyntax(jwsSample); err != nil {
			b.Fatal(err)
		}
	}
}

package jwtpolicy

import (
	"errors"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestCheckType(t *testing.T) {
	for typ, ok := range map[any]bool{
		"at+jwt": true, "AT+JWT": true, "application/at+jwt": true,
		"JWT": false, "": false, nil: false, 7: false, "at+jwt ": false,
	} {
		tok := &jwt.Token{Header: map[string]any{"typ": typ}}
		if err := CheckType(tok); (err == nil) != ok || (err != nil && !errors.Is(err, ErrType)) {
			t.Errorf("typ %#v: got %v, want ok=%v", typ, err, ok)
		}
	}
}

func TestClaimsDecoding(t *testing.T) {
	const rest = `"iss":"i","sub":"s","client_id":"c","jti":"1"`
	for _, tc := range []struct {
		in      string
		ok      bool
		iat     int64 // when ok; 0 means absent
		aud     []string
		wantErr error
	}{
		{in: `{` + rest + `,"iat":10,"exp":20}`, ok: true, iat: 10},
		{in: `{` + rest + `,"iat":10.5,"exp":20,"nbf":5}`, ok: true, iat: 10},
		{in: `{` + rest + `,"iat":10,"exp":20,"aud":"a"}`, ok: true, iat: 10, aud: []string{"a"}},
		{in: `{` + rest + `,"iat":10,"exp":20,"aud":["a","b"]}`, ok: true, iat: 10, aud: []string{"a", "b"}},
		{in: `{` + rest + `,"iat":null,"exp":20}`, ok: true},
		{in: `{` + rest + `,"exp":20}`, ok: true},
		{in: `{` + rest + `,"iat":"10","exp":20}`, wantErr: ErrDateType},
		{in: `{` + rest + `,"iat":10,"exp":"20"}`, wantErr: ErrDateType},
		{in: `{` + rest + `,"iat":10,"exp":20,"nbf":"5"}`, wantErr: ErrDateType},
		{in: `{` + rest + `,"iat":true,"exp":20}`, wantErr: ErrDateType},
		{in: `{` + rest + `,"iat":[10],"exp":20}`, wantErr: ErrDateType},
		{in: `{` + rest + `,"iat":1e400,"exp":20}`},
		{in: `{` + rest + `,"iAt":10,"exp":20}`, ok: true}, // not iat: an unknown member
		{in: `{` + rest + `,"iat":10,"iat":11,"exp":20}`},
		{in: `{` + rest + `,"iat":10,"exp":20,"sub":7}`},
		{in: `{` + rest + `,"iat":10,"exp":20,"aud":[7]}`},
		{in: `{` + rest + `,"iat":10,"exp":20} {}`, wantErr: ErrSyntax},
		{in: `[]`, wantErr: ErrSyntax},
		{in: `null`, wantErr: ErrSyntax},
		{in: `{` + rest + `,"iat":10,"exp":20,"sub":"t"}`, wantErr: ErrDuplicate},
		{in: `{` + rest + `,"iat":10,"exp":20,"x":{"y":[{"z":1,"z":2}]}}`, wantErr: ErrDuplicate},
		{in: `{` + rest + `,"iat":10,"exp":20,"x":{"y":[{"z":1},{"z":2}]},"Sub":"t"}`, ok: true, iat: 10},
		{in: `{` + rest + `,"iat":10,"exp":20,"x":"` + "\xff" + `"}`, wantErr: ErrSyntax},
		{in: `{` + rest + `,"iat":10,"exp":20,"aud":{"a":1}}`},
		{in: `{` + rest + `,"iat":10,"exp":20,"x":[1,}`},
	} {
		var c Claims
		err := c.UnmarshalJSON([]byte(tc.in)) // as json.Unmarshal calls it, less its syntax check first
		if (err == nil) != tc.ok || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
			t.Errorf("%s: got %v, want ok=%v (%v)", tc.in, err, tc.ok, tc.wantErr)
			continue
		}
		if !tc.ok {
			continue
		}
		var iat int64
		if c.IssuedAt != nil {
			iat = c.IssuedAt.Unix()
		}
		if iat != tc.iat || c.Subject != "s" || c.ClientID != "c" || !slices.Equal(c.Audience, tc.aud) {
			t.Errorf("%s: got iat %d, sub %q, client_id %q, aud %q; want iat %d, sub s, client_id c, aud %q",
				tc.in, iat, c.Subject, c.ClientID, c.Audience, tc.iat, tc.aud)
		}
		if err, want := c.Validate(), tc.iat != 0; (err == nil) != want {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.in, err, want)
		}
	}
}

// issuedClaims are the claims of a token the issuer wrote (dev mode,
// SNOWTOKEN_ISSUER=https://auth.example.com, SNOWTOKEN_AUDIENCE=https://api.example.com).
const issuedClaims = `{"iss":"https://auth.example.com","sub":"alice@example.org","aud":["https://api.example.com"],` +
	`"exp":1795428919,"iat":1795425319,"jti":"118278197786714112","client_id":"dev","scope":"read write"}`

// BenchmarkClaimsUnmarshal decodes the claims of an issued token ("issued")
// and the same claims with one more member of another issuer's ("other").
func BenchmarkClaimsUnmarshal(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"issued", issuedClaims},
		{"other", issuedClaims[:len(issuedClaims)-1] + `,"azp":"dev"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := []byte(bc.in)
			b.ReportAllocs()
			for b.Loop() {
				var c Claims
				if err := c.UnmarshalJSON(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

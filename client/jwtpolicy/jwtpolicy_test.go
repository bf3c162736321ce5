package jwtpolicy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
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

// TestCheckTypeTxnToken: a Transaction Token is refused saying what it is
// and where it goes.
func TestCheckTypeTxnToken(t *testing.T) {
	for _, typ := range []string{"txntoken+jwt", "application/TxnToken+JWT"} {
		err := CheckType(&jwt.Token{Header: map[string]any{"typ": typ}})
		if d, _ := refusal.Description(err); !errors.Is(err, ErrType) || !strings.Contains(d, "Txn-Token header") {
			t.Errorf("typ %q: %v (told %q), want ErrType naming the Txn-Token header", typ, err, d)
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

// issuedShapes are claims as the issuer writes them: with and without aud
// and scope, one audience or several, and the other forms decodeIssued
// takes (white space, a single aud string, null dates, nbf, members in
// another order, the empty object).
var issuedShapes = []string{
	issuedClaims,
	`{"iss":"https://auth.example.com","sub":"dev","aud":["https://api.example.com"],"exp":1795428919,"iat":1795425319,"jti":"118278196696195072","client_id":"dev","scope":"read"}`,
	`{"iss":"http://localhost:8080","sub":"svc","exp":1795428919,"iat":1795425319,"jti":"118278196696195072","client_id":"svc"}`,
	`{"iss":"http://localhost:8080","sub":"svc","aud":["a","urn:b","https://c.example/x"],"exp":1795428919,"iat":1795425319,"jti":"1","client_id":"svc","scope":"read"}`,
	" \t\r\n{ \"iss\" : \"i\" ,\n\"aud\":\t[ \"a\" , \"b\" ] , \"iat\" : 10 ,\"exp\":20 } \n",
	`{"aud":"a","exp":null,"iat":null,"nbf":-0,"sub":"s"}`,
	`{"nbf":999999999999999,"iat":-12,"exp":0,"aud":[],"scope":""}`,
	`{"iss":"ïß — ✓ 𝄞","sub":"` + "\u2028\x7f" + `"}`,
	`{"sub":"s","cnf":{"jkt":"0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"},"exp":20}`,
	` {"cnf" : { "jkt" : "x" } } `,
	`{}`,
}

func TestDecodeIssuedTakesIssuerShapes(t *testing.T) {
	// Also at another jwt.TimePrecision, which golang-jwt truncates dates to.
	defer func(p time.Duration) { jwt.TimePrecision = p }(jwt.TimePrecision)
	for _, p := range []time.Duration{time.Second, time.Hour} {
		jwt.TimePrecision = p
		for _, in := range issuedShapes {
			var fast, strict Claims
			if !decodeIssued([]byte(in), &fast) {
				t.Errorf("decodeIssued does not take %s", in)
				continue
			}
			if err := strict.decodeStrict([]byte(in)); err != nil || !reflect.DeepEqual(fast, strict) {
				t.Errorf("precision %v, %s:\ndecodeIssued %+v\ndecodeStrict %+v, %v", jwt.TimePrecision, in, fast, strict, err)
			}
		}
	}
}

// TestConfirmation: a cnf decodes only as an object with a non-empty jkt,
// so that no token bound by a method we do not check passes for a bearer
// token.
func TestConfirmation(t *testing.T) {
	for in, want := range map[string]string{
		`{"cnf":{"jkt":"k"}}`:                     "k",
		`{"cnf":{"jkt":"k","x5t#S256":"x"}}`:      "k",
		`{"cnf": {"jkt": "\u006b", "more": [1]}}`: "k",
	} {
		var c Claims
		if err := c.UnmarshalJSON([]byte(in)); err != nil || c.Confirmation.JKT != want {
			t.Errorf("%s: jkt %q, %v; want %q", in, c.Confirmation.JKT, err, want)
		}
	}
	for _, in := range []string{`{"cnf":{}}`, `{"cnf":{"jkt":""}}`, `{"cnf":{"x5t#S256":"x"}}`,
		`{"cnf":"k"}`, `{"cnf":null}`, `{"cnf":[]}`, `{"cnf":{"jkt":1}}`, `{"cnf":{"jkt":null}}`} {
		var c Claims
		if err := c.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("%s: decoded (jkt %q); want an error", in, c.Confirmation.JKT)
		}
	}
}

// errorClass is the sentinel of Claims' errors that err is, errOther for
// any other error, or nil.
func errorClass(err error) error {
	for _, class := range []error{ErrSyntax, ErrDuplicate, ErrDateType, ErrConfirmation, ErrActor, ErrParent, ErrChain} {
		if errors.Is(err, class) {
			return class
		}
	}
	if err != nil {
		return errOther
	}
	return nil
}

var errOther = errors.New("another error")

// FuzzClaimsDecoders holds UnmarshalJSON, fast path and all, to
// decodeStrict: for every input the same error class, and on success the
// same Claims; and decodeIssued leaves its Claims alone when it does not
// take an input.
func FuzzClaimsDecoders(f *testing.F) {
	for _, in := range issuedShapes {
		f.Add([]byte(in))
	}
	const rest = `"iss":"i","sub":"s","client_id":"c","jti":"1"`
	for _, in := range []string{
		// Numbers decodeIssued leaves to decodeStrict, and the ones it takes at its edges.
		`"iat":1e9`, `"iat":1.5`, `"iat":-0`, `"iat":1E+09`, `"iat":1e400`, `"iat":-1e400`,
		`"iat":99999999999999999999`, `"iat":1000000000000000`, `"iat":999999999999999`,
		`"iat":-999999999999999`, `"iat":9007199254740993`, `"iat":0.0`, `"iat":01`, `"iat":-`, `"iat":- 1`, `"iat":+1`,
		`"iat":10 1`, `"iat":nul`, `"iat":nulll`, `"iat":NaN`,
		// Dates of another type.
		`"iat":"10"`, `"iat":true`, `"iat":[10]`, `"iat":{}`, `"exp":null,"iat":null,"nbf":null`,
		// Names.
		`"iat":10,"iat":11`, `"iAt":10`, `"\u0069at":10`, `"iat":10,"\u0069at":11`, `"ia\"t":1`,
		`"sub":"t"`, `"x":{"y":[{"z":1,"z":2}]}`, `"x":{"y":[{"z":1},{"z":2}]}`, `"":1`,
		// Strings.
		`"scope":"a\u0020b"`, `"scope":"a\/b"`, `"scope":"` + "\x01" + `"`, `"scope":null`,
		`"scope":"` + "\xff" + `"`, `"scope":"` + "\xed\xa0\x80" + `"`, `"x":"` + "\xc3" + `"`,
		// aud.
		`"aud":[]`, `"aud":["a"]`, `"aud":["a","b","c","d","e","f","g","h"]`,
		`"aud":["a","b","c","d","e","f","g","h","i"]`, `"aud":null`, `"aud":[null]`, `"aud":[7]`,
		`"aud":"a\u0062"`, `"aud":["a",]`, `"aud":[,"a"]`, `"aud":{"a":1}`, `"aud":[["a"]]`,
		// cnf.
		`"cnf":{"jkt":"k"}`, `"cnf":{"jkt":""}`, `"cnf":{}`, `"cnf":{"x5t#S256":"k"}`, `"cnf":"k"`,
		`"cnf":null`, `"cnf":{"jkt":"k","jkt":"l"}`, `"cnf":{"jkt":"k","x":1}`, `"cnf":{"jkt":"\u006b"}`,
		`"cnf":{"jkt":1}`, `"cnf":{"JKT":"k"}`, `"cnf":{"jkt":"k"},"cnf":{"jkt":"k"}`,
		// The chain claims of an exchanged token (decodeStrict's alone).
		`"parents":[{"jti":"118278197786714112","client_id":"gw","iat":1795425319}]`,
		`"parents":[{"jti":"1","client_id":"gw","iat":9,"opaque":true},{"jti":"2","client_id":"web","iat":8}]`,
		`"parents":[{"jti":"1","client_id":"a","iat":1},{"jti":"2","client_id":"a","iat":1},{"jti":"3","client_id":"a","iat":1},{"jti":"4","client_id":"a","iat":1}]`,
		`"parents":[{"jti":"1","client_id":"a","iat":1},{"jti":"2","client_id":"a","iat":1},{"jti":"3","client_id":"a","iat":1},{"jti":"4","client_id":"a","iat":1},{"jti":"5","client_id":"a","iat":1}]`,
		`"parents":[]`, `"parents":null`, `"parents":{}`, `"parents":[{}]`, `"parents":[{"jti":"01","client_id":"a","iat":1}]`,
		`"parents":[{"jti":"1","client_id":"","iat":1}]`, `"parents":[{"jti":"1","client_id":"a","iat":"1"}]`,
		`"parents":[{"jti":"1","client_id":"a","iat":1.0}]`, `"parents":[{"jti":"1","client_id":"a","iat":1,"opaque":1}]`,
		`"parents":[{"jti":"1","jti":"1","client_id":"a","iat":1}]`, `"parents":[{"jti":"1","client_id":"a","iat":1,"x":{"y":1,"y":1}}]`,
		`"act":{"sub":"svc"}`, `"act":{"sub":"svc","iss":"i","client_id":"c","act":{"sub":"gw"}}`,
		`"act":{"sub":"1","act":{"sub":"2","act":{"sub":"3","act":{"sub":"4"}}}}`,
		`"act":{"sub":"1","act":{"sub":"2","act":{"sub":"3","act":{"sub":"4","act":{"sub":"5"}}}}}`,
		`"act":{}`, `"act":null`, `"act":"svc"`, `"act":{"sub":""}`, `"act":{"sub":"s","sub":"s"}`, `"act":{"sub":"s","amr":[1]}`,
		`"may_act":{"sub":"svc"}`, `"may_act":{"sub":"s","act":{"iss":"i"}}`, `"act":{"sub":"s"},"act":{"sub":"s"}`,
	} {
		f.Add([]byte(`{` + rest + `,` + in + `}`))
	}
	for _, in := range []string{
		"\uFEFF{" + rest + `}`, `{` + rest + `} {}`, `{` + rest + `}x`, `{` + rest + `},`,
		`{` + rest + `,}`, `{,` + rest + `}`, `{` + rest, `[]`, `null`, ``, ` `, `{"iss" "i"}`,
		`{"iss":"i""sub":"s"}`, `{"iss":"i",,"sub":"s"}`, "{\v}", `{"iss":"i"}` + "\x00",
	} {
		f.Add([]byte(in))
	}
	f.Fuzz(checkDecoders)
}

// FuzzClaimsIssuedShape is FuzzClaimsDecoders on claims in the issuer's
// shape with the fuzzer's text as string values and dates, and its white
// space between every two tokens: byte mutations of whole claims seldom keep
// the shape, so this target holds decodeIssued to decodeStrict where most
// inputs are decodeIssued's.
func FuzzClaimsIssuedShape(f *testing.F) {
	f.Add("https://auth.example.com", "alice@example.org", "https://api.example.com", "read write", "1795428919", "1795425319", "")
	f.Add("i", `s\u0073`, `a\"`, `\u00e9 \ud800`, "1.5", "-0", " \n") // JSON escapes
	f.Add("\xff", "\x7f", "\u2028", "\x01", "1e9", "01", "\t\r")
	f.Add("", "", "", "", "9007199254740993", "null", "\x00")
	f.Fuzz(func(t *testing.T, iss, sub, aud, scope, exp, iat, space string) {
		ws := []byte(space) // as JSON white space
		for i, c := range ws {
			ws[i] = " \t\n\r"[c%4]
		}
		tokens := []string{`{`, `"iss"`, `:`, `"` + iss + `"`, `,`, `"sub"`, `:`, `"` + sub + `"`,
			`,`, `"aud"`, `:`, `[`, `"` + aud + `"`, `]`, `,`, `"exp"`, `:`, exp, `,`, `"iat"`, `:`, iat,
			`,`, `"jti"`, `:`, `"1"`, `,`, `"client_id"`, `:`, `"c"`, `,`, `"scope"`, `:`, `"` + scope + `"`, `}`}
		checkDecoders(t, []byte(string(ws)+strings.Join(tokens, string(ws))+string(ws)))
	})
}

// checkDecoders fails t unless UnmarshalJSON and decodeStrict give in the
// same error class, and on success the same Claims, and unless decodeIssued
// leaves its Claims alone when it does not take in.
func checkDecoders(t *testing.T, in []byte) {
	var got, want Claims
	gotErr, wantErr := got.UnmarshalJSON(in), want.decodeStrict(in)
	if errorClass(gotErr) != errorClass(wantErr) {
		t.Fatalf("%q: UnmarshalJSON: %v; decodeStrict: %v", in, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nUnmarshalJSON %+v\ndecodeStrict  %+v", in, got, want)
	}
	untouched := Claims{ClientID: "untouched"}
	if c := untouched; !decodeIssued(in, &c) && !reflect.DeepEqual(c, untouched) {
		t.Fatalf("%q: decodeIssued did not take it but changed its Claims to %+v", in, c)
	}
}

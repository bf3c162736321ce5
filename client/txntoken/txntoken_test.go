package txntoken_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/txntoken"
)

// sign makes a compact JWS of header and payload, both raw JSON, with key.
func sign(key ed25519.PrivateKey, header, payload string) string {
	b := base64.RawURLEncoding
	in := b.EncodeToString([]byte(header)) + "." + b.EncodeToString([]byte(payload))
	return in + "." + b.EncodeToString(ed25519.Sign(key, []byte(in)))
}

// TestParseStrict: claims decode as jwtpolicy's do: exact names, no name
// twice, dates as numbers, valid UTF-8; members not known are ignored.
func TestParseStrict(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(kid string) (ed25519.PublicKey, error) {
		if kid != "k1" {
			return nil, txntoken.ErrInvalid
		}
		return pub, nil
	}
	now := time.Unix(1_800_000_000, 0)
	opts := txntoken.ParseOptions{TrustDomain: "d", Now: func() time.Time { return now }}
	const head = `{"alg":"EdDSA","kid":"k1","typ":"txntoken+jwt"}`
	const rest = `"exp":1800000060,"aud":"d","txn":"1","sub":"alice","scope":"a","req_wl":"gw"`
	for _, tc := range []struct {
		name, header, payload string
		want                  error
	}{
		{"good", head, `{"iat":1800000000,` + rest + `}`, nil},
		{"unknown members ignored", head, `{"iat":1800000000,"future":{"x":[1]},` + rest + `}`, nil},
		{"typ in another case", `{"alg":"EdDSA","kid":"k1","typ":"Application/TxnToken+JWT"}`, `{"iat":1800000000,` + rest + `}`, nil},
		{"iat twice", head, `{"iat":1800000000,"iat":1,` + rest + `}`, txntoken.ErrMalformed},
		{"IAT is not iat", head, `{"IAT":1800000000,` + rest + `}`, txntoken.ErrInvalid},
		{"a date in quotes", head, `{"iat":"1800000000",` + rest + `}`, txntoken.ErrMalformed},
		{"invalid UTF-8", head, "{\"iat\":1800000000,\"x\":\"\xff\"," + rest + `}`, txntoken.ErrMalformed},
		{"aud an array", head, `{"iat":1800000000,"exp":1800000060,"aud":["d"],"txn":"1","sub":"alice","scope":"a","req_wl":"gw"}`, txntoken.ErrMalformed},
		{"typ at+jwt", `{"alg":"EdDSA","kid":"k1","typ":"at+jwt"}`, `{"iat":1800000000,` + rest + `}`, txntoken.ErrType},
		{"alg none named", `{"alg":"none","kid":"k1","typ":"txntoken+jwt"}`, `{"iat":1800000000,` + rest + `}`, txntoken.ErrInvalid},
		{"unknown kid", `{"alg":"EdDSA","kid":"k2","typ":"txntoken+jwt"}`, `{"iat":1800000000,` + rest + `}`, txntoken.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := txntoken.Parse(sign(key, tc.header, tc.payload), keys, opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse: %v, want %v", err, tc.want)
			}
			if err == nil && (c.Subject != "alice" || c.Workload != "gw" || c.IssuedAt != now.Unix()) {
				t.Errorf("claims %+v", c)
			}
		})
	}
	if _, err := txntoken.Parse(sign(key, head, `{"iat":1800000000,`+rest+`}`), keys, txntoken.ParseOptions{}); !errors.Is(err, txntoken.ErrInvalid) {
		t.Errorf("Parse with no trust domain: %v", err)
	}
}

func TestClaimsRoundTrip(t *testing.T) {
	c := txntoken.Claims{Issuer: "i", IssuedAt: 1, ExpiresAt: 2, Audience: "d", Txn: "3", Subject: "s", Scope: "a b", Workload: "w",
		Transaction: &txntoken.TransactionContext{ClientID: "c", Actor: &txntoken.Actor{Subject: "svc", Act: &txntoken.Actor{Subject: "gw"}}},
		Request:     &txntoken.RequestContext{IP: "192.0.2.1", Transport: "https", Method: "GET", Path: "/x"}}
	b, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"iss":"i","iat":1,"exp":2,"aud":"d","txn":"3","sub":"s","scope":"a b","req_wl":"w",` +
		`"tctx":{"client_id":"c","act":{"sub":"svc","act":{"sub":"gw"}}},"rctx":{"req_ip":"192.0.2.1","transport":"https","method":"GET","path":"/x"}}`
	if string(b) != want {
		t.Errorf("JSON\n%s, want\n%s", b, want)
	}
	var back txntoken.Claims
	if err := back.UnmarshalJSON(b); err != nil || back.Transaction.Actor.Act.Subject != "gw" || *back.Request != *c.Request {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

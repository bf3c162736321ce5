package token

import (
	"crypto/ed25519"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// testIssuer is the issuer of the tests in this package (the external ones have their own).
const testIssuer = "https://issuer.test"

// ownFixture is a Service with an active key, a next key and a retired key
// already dropped (its tokens have all expired), on a fixed clock, and a
// stranger's key; parse needs neither a store nor IDs.
type ownFixture struct {
	svc                          *Service
	active, next, dropped, other keyset.Key
	now                          time.Time
}

func newOwnFixture(tb testing.TB) *ownFixture {
	tb.Helper()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f := &ownFixture{active: MustKey(tb), next: MustKey(tb), dropped: MustKey(tb), other: MustKey(tb), now: now}
	ks, err := keyset.FromMembers(
		keyset.Member{Key: f.active, State: keyset.Active}, keyset.Member{Key: f.next, State: keyset.Next},
		keyset.Member{Key: f.dropped, State: keyset.Retired, Retired: now.Add(-30 * 24 * time.Hour)},
	)
	if err != nil {
		tb.Fatal(err)
	}
	if f.svc, err = NewService(ks, nil, nil, Options{Issuer: testIssuer, Now: func() time.Time { return f.now }}); err != nil {
		tb.Fatal(err)
	}
	return f
}

// token is claims signed by signer under the header of kid, as a signer
// writes a token, whatever the claims hold.
func (f *ownFixture) token(tb testing.TB, kid string, signer keyset.Key, claims []byte) string {
	tb.Helper()
	header, err := headerSegment(kid)
	if err != nil {
		tb.Fatal(err)
	}
	input := header + "." + b64.EncodeToString(claims)
	return input + "." + b64.EncodeToString(ed25519.Sign(signer.Private, []byte(input)))
}

// issued is the claims a signer writes, at f's time.
func (f *ownFixture) issued(tb testing.TB, aud []string) []byte {
	tb.Helper()
	sg, err := newSigner(f.active, testIssuer)
	if err != nil {
		tb.Fatal(err)
	}
	raw := sg.sign(&grant{sub: "alice", client: "gateway", scope: "read write", jti: "118251258602614784", aud: aud, iat: f.now.Unix(), exp: f.now.Add(time.Hour).Unix()})
	claims, err := b64.DecodeString(strings.Split(raw, ".")[1])
	if err != nil {
		tb.Fatal(err)
	}
	return claims
}

// jwtSentinels are the errors parse's callers tell apart (jwtReason). The
// reasons a claims text is malformed (jwtpolicy.ErrSyntax and the like) are
// not among them: golang-jwt's json.Unmarshal refuses text that is not JSON
// before jwtpolicy sees it, parseOwn lets jwtpolicy refuse it, and both
// are ErrTokenMalformed.
var jwtSentinels = []error{
	jwt.ErrTokenMalformed, jwt.ErrTokenUnverifiable, jwt.ErrTokenSignatureInvalid, jwt.ErrTokenInvalidClaims,
	jwt.ErrTokenExpired, jwt.ErrTokenNotValidYet, jwt.ErrTokenUsedBeforeIssued, jwt.ErrTokenInvalidIssuer,
	jwt.ErrTokenRequiredClaimMissing, jwt.ErrTokenInvalidAudience, jwtpolicy.ErrNoIAT, errDroppedKid, errUnknownKid,
}

// sameVerdict fails tb unless parseOwn with p, where it takes raw, reaches
// golang-jwt's verdict on raw: both accept with the same claims and a typ
// CheckType takes, or both refuse with the same sentinels. It reports
// whether parseOwn took raw.
func (f *ownFixture) sameVerdict(tb testing.TB, p policy, raw string) bool {
	tb.Helper()
	var own, lib Claims
	took, ownErr := f.svc.parseOwn(p, raw, &own)
	if !took {
		return false
	}
	t, libErr := p.parser.ParseWithClaims(raw, &lib, f.svc.keyFor)
	if (ownErr == nil) != (libErr == nil) {
		tb.Fatalf("%q:\nparseOwn: %v\ngolang-jwt: %v", raw, ownErr, libErr)
	}
	for _, s := range jwtSentinels {
		if errors.Is(ownErr, s) != errors.Is(libErr, s) {
			tb.Fatalf("%q: errors.Is(_, %v): parseOwn %v (%v), golang-jwt %v (%v)", raw, s,
				errors.Is(ownErr, s), ownErr, errors.Is(libErr, s), libErr)
		}
	}
	if ownErr != nil {
		if a, b := jwtReason(ownErr), jwtReason(libErr); a != b {
			tb.Fatalf("%q: parseOwn's reason %q, golang-jwt's %q", raw, a, b)
		}
		return true
	}
	if !reflect.DeepEqual(own, lib) {
		tb.Fatalf("%q: parseOwn claims %+v, golang-jwt %+v", raw, own, lib)
	}
	if err := jwtpolicy.CheckType(t); err != nil {
		tb.Fatalf("%q: parseOwn took a token whose typ golang-jwt refuses: %v", raw, err)
	}
	return true
}

// TestParseOwnTakesIssuedTokens: parseOwn, not golang-jwt, reads the tokens
// the signer writes, with and without aud, under the active and the next
// key, and under a dropped key, which it refuses as golang-jwt does.
func TestParseOwnTakesIssuedTokens(t *testing.T) {
	f := newOwnFixture(t)
	for _, aud := range [][]string{nil, {"https://api.test"}, {"a", "b", "c"}} {
		claims := f.issued(t, aud)
		for _, k := range []keyset.Key{f.active, f.next, f.dropped} {
			raw := f.token(t, k.ID, k, claims)
			for _, p := range []policy{f.svc.full, f.svc.sigOnly} {
				if !f.sameVerdict(t, p, raw) {
					t.Errorf("parseOwn did not take a token of key %s with aud %v", k.ID, aud)
				}
			}
		}
		// Under the header of no key of ours, golang-jwt reads it.
		if f.sameVerdict(t, f.svc.full, f.token(t, f.other.ID, f.other, claims)) {
			t.Error("parseOwn took a token under a stranger's kid")
		}
	}
	if _, _, err := f.svc.parse(f.svc.full, f.token(t, f.active.ID, f.active, f.issued(t, nil))); err != nil {
		t.Fatalf("parse of an issued token: %v", err)
	}
}

// FuzzParseOwn holds parseOwn to golang-jwt's verdicts: the fuzzed claims
// signed under each of our keys' headers (by that key, or by a stranger's
// key), optionally with text appended, and the fuzzed text alone as a
// token, with the whole policy and with the signature alone.
func FuzzParseOwn(f *testing.F) {
	fx := newOwnFixture(f)
	good := fx.issued(f, []string{"https://api.test"})
	for _, claims := range []string{
		string(good), string(fx.issued(f, nil)),
		strings.Replace(string(good), `"iss":"https://issuer.test"`, `"iss":"https://evil.test"`, 1),
		strings.Replace(string(good), `"exp":`, `"exp":1,"x":`, 1),
		strings.Replace(string(good), `"iat":`, `"iat":"`, 1),
		strings.Replace(string(good), `"iat":`, `"iAt":`, 1),
		strings.Replace(string(good), `"sub":"alice"`, `"sub":"alice","sub":"bob"`, 1),
		" " + string(good) + " ", string(good) + "x", string(good) + "{}", `{}`, `[]`, `null`, "",
		`{"iss":"https://issuer.test","exp":1795435200,"iat":1795431600}`,
		`{"iss":"https://issuer.test","exp":1e10,"iat":1.5}`,
		`{"iss":"https://issuer.test","exp":17954352000,"iat":1795431600,"nbf":1795431600}`,
		"{\"iss\":\"https://issuer.test\",\"sub\":\"\xff\",\"exp\":1795435200,\"iat\":1795431600}",
	} {
		for key := range uint8(4) {
			f.Add([]byte(claims), key, "")
		}
		f.Add([]byte(claims), uint8(0), "=")
		f.Add([]byte(claims), uint8(0), ".x")
	}
	tok := fx.token(f, fx.active.ID, fx.active, good)
	head, rest, _ := strings.Cut(tok, ".")
	for _, raw := range []string{tok, head + ".", head + "..", head + "." + rest + ".", head + ".e30." + strings.Repeat("A", sigSegmentLen),
		head + ".!!!." + strings.Repeat("A", sigSegmentLen), tok[:len(tok)-1] + "B", tok[:len(tok)-1] + "=", tok + "A"} {
		f.Add([]byte(nil), uint8(0), raw)
	}
	f.Fuzz(func(t *testing.T, claims []byte, key uint8, text string) {
		for _, p := range []policy{fx.svc.full, fx.svc.sigOnly} {
			fx.sameVerdict(t, p, text)
			kid, signer := fx.active.ID, fx.active
			switch key % 4 {
			case 1:
				kid, signer = fx.next.ID, fx.next
			case 2:
				kid, signer = fx.dropped.ID, fx.dropped
			case 3:
				signer = fx.other // our header, a stranger's signature
			}
			raw := fx.token(t, kid, signer, claims) + text
			if len(text) == 0 && !fx.sameVerdict(t, p, raw) {
				t.Fatalf("parseOwn did not take %q", raw)
			}
			fx.sameVerdict(t, p, raw)
		}
	})
}

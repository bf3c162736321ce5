package dpop_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/internal/jwttest"
)

// checker returns a Checker with opts whose replay record runs on a clock
// at testNow, unless opts has one.
func checker(tb testing.TB, opts dpop.Options) *dpop.Checker {
	tb.Helper()
	if opts.Replay == nil {
		opts.Replay = dpop.NewMemoryReplay()
	}
	c, err := dpop.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func post() dpop.Request { return dpop.Request{Method: "POST", URL: testURL} }

func TestAccepts(t *testing.T) {
	ed, ec := newEd25519(t), newP256(t)
	edPriv := ed.priv.(ed25519.PrivateKey)
	for _, tc := range []struct {
		name  string
		s     *signer
		proof string
	}{
		{"EdDSA by golang-jwt", ed, ed.proof(t, claims(), nil)},
		{"ES256 by golang-jwt", ec, ec.proof(t, claims(), nil)},
		{"EdDSA by hand", ed, handProof(edPriv,
			`{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+ed.jwk["x"].(string)+`"}}`,
			`{"jti":"e1j3V_bKic8-LAEB","htm":"POST","htu":"https://issuer.example/token","iat":1800000000}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := checker(t, dpop.Options{}).Check(context.Background(), tc.proof, post(), testNow)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if p.Thumbprint != tc.s.thumb {
				t.Errorf("Thumbprint = %q, want %q", p.Thumbprint, tc.s.thumb)
			}
			if p.Algorithm != tc.s.alg || p.JTI != "e1j3V_bKic8-LAEB" || p.Method != "POST" || p.URL != testURL {
				t.Errorf("Proof = %+v", p)
			}
			if !p.IssuedAt.Equal(testNow) || !p.Until.Equal(testNow.Add(dpop.DefaultMaxAge)) {
				t.Errorf("IssuedAt, Until = %v, %v; want %v, %v", p.IssuedAt, p.Until, testNow, testNow.Add(dpop.DefaultMaxAge))
			}
			if len(p.ID) != 43 {
				t.Errorf("ID = %q, want 43 bytes", p.ID)
			}
		})
	}
}

// TestRFCExample checks the proof of RFC 9449 §4.1, made by its authors.
func TestRFCExample(t *testing.T) {
	const proof = "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6Ik" +
		"VDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCR" +
		"nMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JE" +
		"QSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIj" +
		"oiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwia" +
		"WF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4" +
		"PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
	now := time.Unix(1562262616, 0)
	c := checker(t, dpop.Options{Replay: dpop.NewMemoryReplay()})
	p, err := c.Check(context.Background(), proof, dpop.Request{Method: "POST", URL: "https://server.example.com/token"}, now)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	// RFC 9449 §6.1 gives the key's thumbprint as its tokens' cnf.jkt.
	if want := "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"; p.Thumbprint != want {
		t.Errorf("Thumbprint = %q, want %q", p.Thumbprint, want)
	}
}

// TestReplayOnTheCheckersClock: the replay record runs on the clock Check
// is given, whatever the wall clock says: a proof checked at a time long
// past (or to come) is refused the second time, with the default record.
// TestAcceptsInteropForms: what other libraries send and the RFCs allow: a
// fractional iat (a NumericDate, RFC 7519 §2), typ in another case or with
// its "application/" prefix (RFC 7515 §4.1.9).
func TestAcceptsInteropForms(t *testing.T) {
	ed := newEd25519(t)
	for name, proof := range map[string]string{
		"fractional iat":  ed.proof(t, map[string]any{"jti": "f1", "htm": "POST", "htu": testURL, "iat": float64(testNow.Unix()) + 0.75}, nil),
		"typ in capitals": ed.proof(t, map[string]any{"jti": "f2", "htm": "POST", "htu": testURL, "iat": testNow.Unix()}, func(h map[string]any) { h["typ"] = "DPoP+JWT" }),
		"typ with prefix": ed.proof(t, map[string]any{"jti": "f3", "htm": "POST", "htu": testURL, "iat": testNow.Unix()}, func(h map[string]any) { h["typ"] = "application/dpop+jwt" }),
	} {
		p, err := checker(t, dpop.Options{}).Check(t.Context(), proof, post(), testNow)
		if err != nil {
			t.Errorf("%s: %v, want accepted", name, err)
		} else if !p.IssuedAt.Equal(testNow) {
			t.Errorf("%s: IssuedAt %v, want %v", name, p.IssuedAt, testNow)
		}
	}
}

func TestReplayOnTheCheckersClock(t *testing.T) {
	ed := newEd25519(t)
	c, err := dpop.New(dpop.Options{}) // the default record
	if err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{time.Unix(1_562_262_616, 0), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)} {
		cl := claims()
		cl["iat"], cl["jti"] = now.Unix(), "replay-"+now.String()
		proof := ed.proof(t, cl, nil)
		req := dpop.Request{Method: cl["htm"].(string), URL: cl["htu"].(string)}
		if _, err := c.Check(t.Context(), proof, req, now); err != nil {
			t.Fatalf("at %v: first Check: %v", now, err)
		}
		if _, err := c.Check(t.Context(), proof, req, now.Add(dpop.DefaultMaxAge-time.Second)); !errors.Is(err, dpop.ErrReplay) {
			t.Errorf("at %v: the same proof again within MaxAge: %v, want ErrReplay", now, err)
		}
	}
}

func TestRefuses(t *testing.T) {
	ed, ec, other := newEd25519(t), newP256(t), newEd25519(t)
	edPriv := ed.priv.(ed25519.PrivateKey)
	edX := ed.jwk["x"].(string)
	goodHeader := `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"` + edX + `"}}`
	goodClaims := mustJSON(t, claims())
	with := func(k string, v any) map[string]any { c := claims(); c[k] = v; return c }
	without := func(k string) map[string]any { c := claims(); delete(c, k); return c }
	header := func(k string, v any) func(map[string]any) { return func(h map[string]any) { h[k] = v } }
	good := ed.proof(t, claims(), nil)
	parts := strings.Split(good, ".")

	// HS256 keyed with the public key's bytes: a checker that took the key
	// from the jwk and the algorithm from alg would accept it.
	hsProof := jwttest.Sign(t, jwt.SigningMethodHS256, []byte(ed.priv.Public().(ed25519.PublicKey)),
		map[string]any{"typ": "dpop+jwt", "jwk": ed.jwk}, jwt.MapClaims(claims()))
	none := func(sig string) string {
		return b64.EncodeToString([]byte(`{"typ":"dpop+jwt","alg":"none","jwk":`+mustJSON(t, ed.jwk)+`}`)) + "." + parts[1] + "." + sig
	}

	for _, tc := range []struct {
		name  string
		proof string
		req   dpop.Request
		opts  dpop.Options
		want  error
	}{
		{"another URL", ed.proof(t, with("htu", "https://issuer.example/token/validate"), nil), post(), dpop.Options{}, dpop.ErrURL},
		{"another method", ed.proof(t, with("htm", "GET"), nil), post(), dpop.Options{}, dpop.ErrMethod},
		{"method in lower case", ed.proof(t, with("htm", "post"), nil), post(), dpop.Options{}, dpop.ErrMethod},
		{"signed by another key", other.proof(t, claims(), header("jwk", ed.jwk)), post(), dpop.Options{}, dpop.ErrSignature},
		{"signature of another proof", parts[0] + "." + parts[1] + "." + strings.Split(ed.proof(t, with("jti", "x"), nil), ".")[2], post(), dpop.Options{}, dpop.ErrSignature},
		{"alg none, no signature", none(""), post(), dpop.Options{}, dpop.ErrProof},
		{"alg none, a signature", none(parts[2]), post(), dpop.Options{}, dpop.ErrAlgorithm},
		{"HS256 keyed with the public key", hsProof, post(), dpop.Options{}, dpop.ErrAlgorithm},
		{"ES256 not allowed", ec.proof(t, claims(), nil), post(), dpop.Options{Algorithms: []string{"EdDSA"}}, dpop.ErrAlgorithm},
		{"alg of another key type", ed.proof(t, claims(), header("jwk", ec.jwk)), post(), dpop.Options{}, dpop.ErrJWK},
		{"private key in jwk", handProof(edPriv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+edX+`","d":"`+b64.EncodeToString(edPriv.Seed())+`"}}`, goodClaims), post(), dpop.Options{}, dpop.ErrPrivateKey},
		{"unknown jwk member", handProof(edPriv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+edX+`","x5u":"https://evil.example/k"}}`, goodClaims), post(), dpop.Options{}, dpop.ErrJWK},
		{"no jwk", ed.proof(t, claims(), func(h map[string]any) { delete(h, "jwk") }), post(), dpop.Options{}, dpop.ErrJWK},
		{"small-order Ed25519 key", handProof(edPriv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}`, goodClaims), post(), dpop.Options{}, dpop.ErrJWK},
		{"typ JWT", ed.proof(t, claims(), header("typ", "JWT")), post(), dpop.Options{}, dpop.ErrType},
		{"no typ", ed.proof(t, claims(), func(h map[string]any) { delete(h, "typ") }), post(), dpop.Options{}, dpop.ErrType},
		{"crit", ed.proof(t, claims(), header("crit", []string{"exp"})), post(), dpop.Options{}, dpop.ErrProof},
		{"typ twice", handProof(edPriv, `{"typ":"JWT","typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+edX+`"}}`, goodClaims), post(), dpop.Options{}, dpop.ErrProof},
		{"x twice in jwk", handProof(edPriv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+other.jwk["x"].(string)+`","x":"`+edX+`"}}`, goodClaims), post(), dpop.Options{}, dpop.ErrProof},
		{"htu twice", handProof(edPriv, goodHeader, `{"jti":"a","htm":"POST","htu":"https://evil.example/token","htu":"`+testURL+`","iat":1800000000}`), post(), dpop.Options{}, dpop.ErrClaims},
		{"Typ for typ", handProof(edPriv, `{"Typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+edX+`"}}`, goodClaims), post(), dpop.Options{}, dpop.ErrType},
		{"iat a string", ed.proof(t, with("iat", "1800000000"), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"iat far past every window", ed.proof(t, with("iat", 1e300), nil), post(), dpop.Options{}, dpop.ErrIssuedAt},
		{"iat negative", ed.proof(t, with("iat", -1), nil), post(), dpop.Options{}, dpop.ErrIssuedAt},
		{"typ of another media type", ed.proof(t, claims(), header("typ", "application/jwt")), post(), dpop.Options{}, dpop.ErrType},
		{"jti a number", ed.proof(t, with("jti", 7), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"no jti", ed.proof(t, without("jti"), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"empty jti", ed.proof(t, with("jti", ""), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"jti too long", ed.proof(t, with("jti", strings.Repeat("j", dpop.MaxJTILength+1)), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"no htm", ed.proof(t, without("htm"), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"no htu", ed.proof(t, without("htu"), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"no iat", ed.proof(t, without("iat"), nil), post(), dpop.Options{}, dpop.ErrClaims},
		{"claims not an object", handProof(edPriv, goodHeader, `["jti"]`), post(), dpop.Options{}, dpop.ErrClaims},
		{"iat too old", ed.proof(t, with("iat", testNow.Unix()-61), nil), post(), dpop.Options{}, dpop.ErrIssuedAt},
		{"iat too old for MaxAge", ed.proof(t, with("iat", testNow.Unix()-11), nil), post(), dpop.Options{MaxAge: 10 * time.Second}, dpop.ErrIssuedAt},
		{"iat in the future", ed.proof(t, with("iat", testNow.Unix()+6), nil), post(), dpop.Options{}, dpop.ErrIssuedAt},
		{"iat far in the future", ed.proof(t, with("iat", int64(1)<<62), nil), post(), dpop.Options{}, dpop.ErrIssuedAt},
		{"ath of another token", ed.proof(t, with("ath", dpop.AccessTokenHash("other")), nil), dpop.Request{Method: "POST", URL: testURL, AccessToken: "token"}, dpop.Options{}, dpop.ErrAccessToken},
		{"no ath with a token", good, dpop.Request{Method: "POST", URL: testURL, AccessToken: "token"}, dpop.Options{}, dpop.ErrAccessToken},
		{"nonce not current", ed.proof(t, with("nonce", "old"), nil), post(), dpop.Options{Nonce: func(n string, _ time.Time) bool { return n == "fresh" }}, dpop.ErrUseNonce},
		{"no nonce", good, post(), dpop.Options{Nonce: func(string, time.Time) bool { return true }}, dpop.ErrUseNonce},
		{"four parts", good + ".e30", post(), dpop.Options{}, dpop.ErrProof},
		{"two parts", parts[0] + "." + parts[1], post(), dpop.Options{}, dpop.ErrProof},
		{"padding", good + "==", post(), dpop.Options{}, dpop.ErrProof},
		{"newline", parts[0] + "\n." + parts[1] + "." + parts[2], post(), dpop.Options{}, dpop.ErrProof},
		{"two proofs", good + "," + good, post(), dpop.Options{}, dpop.ErrProof},
		{"non-canonical base64", parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + "x", post(), dpop.Options{}, dpop.ErrProof},
		{"too long", ed.proof(t, with("pad", strings.Repeat("p", 100)), nil), post(), dpop.Options{MaxLength: 100}, dpop.ErrProof},
		{"request URL not absolute", good, dpop.Request{Method: "POST", URL: "/token"}, dpop.Options{}, dpop.ErrRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := checker(t, tc.opts).Check(context.Background(), tc.proof, tc.req, testNow)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Check = %+v, %v; want %v", p, err, tc.want)
			}
			reason, ok := dpop.Reason(err)
			if tc.want == dpop.ErrRequest { // the server's error, not the proof's
				if ok {
					t.Errorf("Reason(%v) = %q: a bad request description is no refusal of the proof", err, reason)
				}
				return
			}
			wantReason(t, err)
		})
	}
}

// wantReason checks that err, a refusal, has a Reason for the client that
// holds none of a library's words nor the Go error chain, outside the
// values of the proof it quotes.
func wantReason(tb testing.TB, err error) {
	tb.Helper()
	reason, ok := dpop.Reason(err)
	if !ok || !strings.HasPrefix(reason, "DPoP proof: ") {
		tb.Errorf("Reason(%v) = %q, %v; want what was wrong with the proof", err, reason, ok)
	}
	ours := quotedValue.ReplaceAllString(reason, `""`)
	for _, bad := range []string{"dpop: ", "json", "Go ", "float64", "illegal base64", "invalid character", "unexpected EOF",
		"object member name", "within", "edwards25519", "P256", "parse"} {
		if strings.Contains(ours, bad) {
			tb.Errorf("Reason(%v) = %q holds %q: a library's words or the Go error chain", err, reason, bad)
		}
	}
}

// TestAcceptsAtTheEdges checks that the refusals above are of that case
// only: the same proofs one step inside each limit are accepted.
func TestAcceptsAtTheEdges(t *testing.T) {
	ed := newEd25519(t)
	with := func(k string, v any) map[string]any { c := claims(); c[k] = v; return c }
	tok := dpop.Request{Method: "POST", URL: testURL, AccessToken: "token"}
	nonce := dpop.Options{Nonce: func(n string, _ time.Time) bool { return n == "fresh" }}
	for _, tc := range []struct {
		name  string
		proof string
		req   dpop.Request
		opts  dpop.Options
	}{
		{"iat MaxAge old", ed.proof(t, with("iat", testNow.Unix()-60), nil), post(), dpop.Options{}},
		{"iat Skew ahead", ed.proof(t, with("iat", testNow.Unix()+5), nil), post(), dpop.Options{}},
		{"jti of MaxJTILength", ed.proof(t, with("jti", strings.Repeat("j", dpop.MaxJTILength)), nil), post(), dpop.Options{}},
		{"ath of the token", ed.proof(t, with("ath", dpop.AccessTokenHash("token")), nil), tok, dpop.Options{}},
		{"ath without a token", ed.proof(t, with("ath", dpop.AccessTokenHash("token")), nil), post(), dpop.Options{}},
		{"current nonce", ed.proof(t, with("nonce", "fresh"), nil), post(), nonce},
		{"nonce not asked for", ed.proof(t, with("nonce", "any"), nil), post(), dpop.Options{}},
		{"unknown claim and header", ed.proof(t, with("x-app", 1), func(h map[string]any) { h["kid"] = "k1" }), post(), dpop.Options{}},
		{"jwk with kid, use, alg, key_ops and ext", ed.proof(t, claims(), func(h map[string]any) {
			h["jwk"] = map[string]any{"kty": "OKP", "crv": "Ed25519", "x": ed.jwk["x"], "kid": "k1", "use": "sig", "alg": "EdDSA", "key_ops": []string{"verify"}, "ext": true}
		}), post(), dpop.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := checker(t, tc.opts).Check(context.Background(), tc.proof, tc.req, testNow); err != nil {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

func TestURLNormalisation(t *testing.T) {
	ed := newEd25519(t)
	for _, tc := range []struct {
		htu, url string
		ok       bool
	}{
		{"HTTPS://ISSUER.Example/token", testURL, true},
		{testURL, "https://Issuer.EXAMPLE/token", true},
		{"https://issuer.example:443/token", testURL, true},
		{testURL, "https://issuer.example:443/token", true},
		{"http://issuer.example:80/token", "http://issuer.example/token", true},
		{testURL + "?a=b#frag", testURL, true},
		{testURL, testURL + "?code=1", true},
		{"https://issuer.example/%74oken", testURL, true},
		{"https://issuer.example/a%2fb", "https://issuer.example/a%2Fb", true},
		{"https://issuer.example", "https://issuer.example/", true},
		{"https://[::1]:443/token", "https://[::1]/token", true},
		{"https://issuer.example/tokens", testURL, false},
		{"https://issuer.example/Token", testURL, false},
		{"https://issuer.example/token/", testURL, false},
		{"https://issuer.example/a%2Fb", "https://issuer.example/a/b", false},
		{"https://issuer.example:8443/token", testURL, false},
		{"https://issuer.example:80/token", testURL, false},
		{"http://issuer.example/token", testURL, false},
		{"https://evil.example/token", testURL, false},
		{"https://user@issuer.example/token", testURL, false},
		{"/token", testURL, false},
		{"ftp://issuer.example/token", testURL, false},
		// Unicode case mapping takes İ (U+0130) and the Kelvin sign to ASCII
		// i and k: another host, which an attacker may register, is not this one.
		{"https://İssuer.example/token", testURL, false},
		{"https://%C4%B0ssuer.example/token", testURL, false},
		{"https://Key.example/token", "https://key.example/token", false},
	} {
		t.Run(tc.htu+" for "+tc.url, func(t *testing.T) {
			c := claims()
			c["htu"] = tc.htu
			_, err := checker(t, dpop.Options{}).Check(context.Background(), ed.proof(t, c, nil), dpop.Request{Method: "POST", URL: tc.url}, testNow)
			if tc.ok && err != nil {
				t.Fatalf("Check: %v, want accepted", err)
			}
			if !tc.ok && !errors.Is(err, dpop.ErrURL) {
				t.Fatalf("Check: %v, want ErrURL", err)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	ed, other := newEd25519(t), newEd25519(t)
	now := testNow
	c := checker(t, dpop.Options{Replay: dpop.NewMemoryReplay()})
	ctx := context.Background()
	proof := ed.proof(t, claims(), nil)
	p, err := c.Check(ctx, proof, post(), now)
	if err != nil {
		t.Fatalf("first Check: %v", err)
	}
	if _, err := c.Check(ctx, proof, post(), now.Add(time.Second)); !errors.Is(err, dpop.ErrReplay) {
		t.Fatalf("second Check: %v, want ErrReplay", err)
	}
	// Another proof with the same jti: the jti is unique per key.
	if _, err := c.Check(ctx, ed.proof(t, claims(), func(h map[string]any) { h["kid"] = "new" }), post(), now); !errors.Is(err, dpop.ErrReplay) {
		t.Fatalf("same key and jti: %v, want ErrReplay", err)
	}
	if _, err := c.Check(ctx, other.proof(t, claims(), nil), post(), now); err != nil {
		t.Fatalf("another key, same jti: %v, want accepted", err)
	}
	// Once its record may go, the proof is refused for its age.
	now = p.Until.Add(time.Second)
	if _, err := c.Check(ctx, proof, post(), now); !errors.Is(err, dpop.ErrIssuedAt) {
		t.Fatalf("Check after Until: %v, want ErrIssuedAt", err)
	}
}

func TestReplayConcurrent(t *testing.T) {
	ed := newEd25519(t)
	c := checker(t, dpop.Options{})
	proof := ed.proof(t, claims(), nil)
	var accepted, replayed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := c.Check(context.Background(), proof, post(), testNow)
			switch {
			case err == nil:
				accepted.Add(1)
			case errors.Is(err, dpop.ErrReplay):
				replayed.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 1 || replayed.Load() != 31 {
		t.Fatalf("accepted %d, replayed %d; want 1 and 31", accepted.Load(), replayed.Load())
	}
}

// TestReplayOnlyAfterChecks checks that a refused proof does not use up
// its jti: a forged proof cannot block the real one.
func TestReplayOnlyAfterChecks(t *testing.T) {
	ed, other := newEd25519(t), newEd25519(t)
	c := checker(t, dpop.Options{})
	forged := other.proof(t, claims(), func(h map[string]any) { h["jwk"] = ed.jwk })
	if _, err := c.Check(context.Background(), forged, post(), testNow); !errors.Is(err, dpop.ErrSignature) {
		t.Fatalf("forged: %v, want ErrSignature", err)
	}
	if _, err := c.Check(context.Background(), ed.proof(t, claims(), nil), post(), testNow); err != nil {
		t.Fatalf("real: %v, want accepted", err)
	}
}

func TestReplayStoreDown(t *testing.T) {
	down := errors.New("connection refused")
	c := checker(t, dpop.Options{Replay: failingReplay{down}})
	_, err := c.Check(context.Background(), newEd25519(t).proof(t, claims(), nil), post(), testNow)
	if !errors.Is(err, down) || !errors.Is(err, dpop.ErrReplayRecord) || errors.Is(err, dpop.ErrReplay) {
		t.Fatalf("Check: %v, want the store's error in ErrReplayRecord, not ErrReplay", err)
	}
}

// TestTooLongBoundedWork checks that a proof over MaxLength is refused
// before any decoding: refusing 4 MiB allocates a few hundred bytes, where
// decoding it would allocate 3 MiB.
func TestTooLongBoundedWork(t *testing.T) {
	c := checker(t, dpop.Options{})
	proof := strings.Repeat("a", 4<<20-4) + ".a.a" // a JWS in shape
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 100
	for range n {
		if _, err := c.Check(context.Background(), proof, post(), testNow); !errors.Is(err, dpop.ErrProof) {
			t.Fatalf("Check of 4 MiB: %v, want ErrProof", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 4096 {
		t.Fatalf("refusing 4 MiB allocates %d bytes, want at most 4096", per)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, opts := range []dpop.Options{
		{Algorithms: []string{"none"}},
		{Algorithms: []string{"HS256"}},
		{Algorithms: []string{"EdDSA", "RS256"}},
		{MaxAge: -time.Second},
		{Skew: -time.Second},
		{MaxLength: -1},
	} {
		if _, err := dpop.New(opts); !errors.Is(err, dpop.ErrOptions) {
			t.Errorf("New(%+v) = %v, want ErrOptions", opts, err)
		}
	}
}

func TestAccessTokenHash(t *testing.T) {
	// RFC 9449 §7.1: the ath of its example access token.
	const token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
	if got, want := dpop.AccessTokenHash(token), "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"; got != want {
		t.Fatalf("AccessTokenHash = %q, want %q", got, want)
	}
}

// TestHeaderCacheChecksEachProof: a header remembered from an accepted
// proof spares only its own checks: the signature of every proof that
// carries it is checked, as are its claims.
func TestHeaderCacheChecksEachProof(t *testing.T) {
	s, other := newEd25519(t), newEd25519(t)
	c := checker(t, dpop.Options{Replay: neverSeen{}})
	good := s.proof(t, claims(), nil)
	if _, err := c.Check(context.Background(), good, post(), testNow); err != nil {
		t.Fatal(err)
	}
	// s's header, signed by another key.
	forged := other.proof(t, claims(), func(h map[string]any) { h["jwk"] = s.jwk })
	if _, err := c.Check(context.Background(), forged, post(), testNow); !errors.Is(err, dpop.ErrSignature) {
		t.Errorf("a remembered header over another key's signature: %v, want ErrSignature", err)
	}
	late := claims()
	late["iat"] = testNow.Add(-time.Hour).Unix()
	if _, err := c.Check(context.Background(), s.proof(t, late, nil), post(), testNow); !errors.Is(err, dpop.ErrIssuedAt) {
		t.Errorf("a remembered header with old claims: %v, want ErrIssuedAt", err)
	}
	if p, err := c.Check(context.Background(), s.proof(t, claims(), nil), post(), testNow); err != nil || p.Thumbprint != s.thumb {
		t.Errorf("the header again: %+v, %v", p, err)
	}
}

// quotedValue matches a value a reason quotes with %q: the client's own.
var quotedValue = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

package handlers_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// signed is a proof by k whose header and claims are the JSON texts given,
// byte for byte, signed (a bad one: not a proof a library would make).
func (k *dpopKey) signed(tb testing.TB, header, claims string) string {
	tb.Helper()
	b64 := base64.RawURLEncoding
	return k.signedParts(tb, b64.EncodeToString([]byte(header)), b64.EncodeToString([]byte(claims)))
}

// signedParts is a proof by k of the header and claims parts given, as
// they are, signed.
func (k *dpopKey) signedParts(tb testing.TB, header, claims string) string {
	tb.Helper()
	b64 := base64.RawURLEncoding
	input := header + "." + claims
	sig, err := k.method.Sign(input, k.priv)
	if err != nil {
		tb.Fatal(err)
	}
	return input + "." + b64.EncodeToString(sig)
}

// notInDescriptions are what a client must never read in an
// error_description of a DPoP refusal, besides the Go error chain
// (chainTexts): the words of encoding/json and go-json-experiment, of
// encoding/base64, net/url and the curve packages, Go type names, JSON
// pointers and Go identifiers of ours.
var notInDescriptions = []string{
	"json:", "cannot unmarshal", "Go value", "Go float", "float64", "int64", "[]string", "jsontext", "reflect",
	"illegal base64", "invalid character", "unexpected EOF", "object member name", `parse "`, "edwards25519",
	"crypto/", "P256", `"/`, "Options.", "PublicURL", `client "`,
}

// wantRefusalText checks a refusal's description: it says want (what was
// wrong, in the protocol's terms) and nothing of notInDescriptions.
func wantRefusalText(tb testing.TB, r *response, want string) {
	tb.Helper()
	d, _ := r.object(tb)["error_description"].(string)
	if !strings.Contains(d, want) {
		tb.Errorf("error_description %q does not say %q", d, want)
	}
	for _, bad := range notInDescriptions {
		if strings.Contains(d, bad) {
			tb.Errorf("error_description %q holds %q: a library's words or ours, not the protocol's", d, bad)
		}
	}
}

// TestDPoPRefusalTexts drives malformed proofs through the real handlers:
// each claim and header member of the wrong type, missing, repeated; a
// header, claims or key that is not what it must be; a bad signature; a
// proof of another request, too old, replayed. Each refusal keeps its code
// (invalid_dpop_proof, 401 with the DPoP challenge at validation, 400 at the
// token endpoint) and its description says what was wrong, never in a
// library's words ("json: cannot unmarshal JSON string into Go float64
// within "/iat"", which a client was told before).
func TestDPoPRefusalTexts(t *testing.T) {
	e := newEnv(t)
	k, other := newDPoPKey(t, "EdDSA"), newDPoPKey(t, "EdDSA")
	tok := e.boundToken(t, e.Normal, k)
	now, u := e.Clock.Now(), e.URL+"/token/validate"
	jwk, err := json.Marshal(k.jwk)
	if err != nil {
		t.Fatal(err)
	}
	head := func(members string) string {
		return `{"typ":"dpop+jwt","alg":"EdDSA","jwk":` + string(jwk) + members + `}`
	}
	header := head("")
	claims := func(members string) string {
		return fmt.Sprintf(`{"jti":%q,"htm":"GET","htu":%q,"ath":%q%s}`, rand.Text(), u, dpop.AccessTokenHash(tok), members)
	}
	iat := fmt.Sprintf(`,"iat":%d`, now.Unix())
	withKey := func(key string) string { return `{"typ":"dpop+jwt","alg":"EdDSA","jwk":` + key + `}` }
	x := k.jwk["x"].(string)
	used := k.proof(t, "GET", u, tok, "", now, nil)
	if r := e.validateDPoP(t, "DPoP", tok, []string{used}, nil); r.Status != http.StatusOK {
		t.Fatalf("a good proof: %d %s", r.Status, r.Body)
	}
	good := k.signed(t, header, claims(iat))
	parts := strings.Split(good, ".")

	for name, tc := range map[string]struct {
		proof string
		want  string
	}{
		"iat a string":                 {k.signed(t, header, claims(`,"iat":"`+fmt.Sprint(now.Unix())+`"`)), "iat is not a number"},
		"iat missing":                  {k.signed(t, header, claims("")), "iat is missing"},
		"iat an object":                {k.signed(t, header, claims(`,"iat":{}`)), "iat is not a number"},
		"iat out of range":             {k.signed(t, header, claims(`,"iat":1e999`)), "iat is out of range"},
		"iat too old":                  {k.proof(t, "GET", u, tok, "", now.Add(-2*time.Minute), nil), "iat"},
		"iat in the future":            {k.proof(t, "GET", u, tok, "", now.Add(time.Minute), nil), "iat"},
		"jti a number":                 {k.signed(t, header, fmt.Sprintf(`{"jti":7,"htm":"GET","htu":%q,"ath":%q%s}`, u, dpop.AccessTokenHash(tok), iat)), "jti is not a string"},
		"jti missing":                  {k.signed(t, header, fmt.Sprintf(`{"htm":"GET","htu":%q,"ath":%q%s}`, u, dpop.AccessTokenHash(tok), iat)), "jti is missing"},
		"jti too long":                 {k.signed(t, header, fmt.Sprintf(`{"jti":%q,"htm":"GET","htu":%q,"ath":%q%s}`, strings.Repeat("j", 300), u, dpop.AccessTokenHash(tok), iat)), "jti is longer than"},
		"htm a boolean":                {k.signed(t, header, fmt.Sprintf(`{"jti":"a","htm":true,"htu":%q,"ath":%q%s}`, u, dpop.AccessTokenHash(tok), iat)), "htm is not a string"},
		"htm another method":           {k.proof(t, "POST", u, tok, "", now, nil), "htm"},
		"htu a list":                   {k.signed(t, header, fmt.Sprintf(`{"jti":"a","htm":"GET","htu":[%q],"ath":%q%s}`, u, dpop.AccessTokenHash(tok), iat)), "htu is not a string"},
		"htu another URL":              {k.proof(t, "GET", "https://api.example/orders", tok, "", now, nil), "htu"},
		"htu not a URL":                {k.proof(t, "GET", "https://[::1/x", tok, "", now, nil), "htu"},
		"ath a number":                 {k.signed(t, header, fmt.Sprintf(`{"jti":"a","htm":"GET","htu":%q,"ath":1%s}`, u, iat)), "ath is not a string"},
		"ath missing":                  {k.proof(t, "GET", u, "", "", now, nil), "ath"},
		"ath another token's":          {k.proof(t, "GET", u, "eyJ.other.token", "", now, nil), "ath"},
		"nonce a number":               {k.signed(t, header, claims(iat+`,"nonce":5`)), "nonce is not a string"},
		"claim twice":                  {k.signed(t, header, claims(iat+`,"htm":"GET"`)), `claim "htm" appears twice`},
		"claims not JSON":              {k.signed(t, header, `{"jti":`), "claims set is not valid JSON"},
		"claims an array":              {k.signed(t, header, `["jti"]`), "claims set is not a JSON object"},
		"claims and more":              {k.signed(t, header, claims(iat)+` {}`), "claims set is not valid JSON"},
		"claims not base64url":         {k.signedParts(t, parts[0], "e31"), "claims set is not base64url"},
		"typ a number":                 {k.signed(t, `{"typ":1,"alg":"EdDSA","jwk":`+string(jwk)+`}`, claims(iat)), "header member typ is not a string"},
		"typ JWT":                      {k.proof(t, "GET", u, tok, "", now, func(h, _ map[string]any) { h["typ"] = "JWT" }), "typ"},
		"typ missing":                  {k.signed(t, `{"alg":"EdDSA","jwk":`+string(jwk)+`}`, claims(iat)), "typ"},
		"typ twice":                    {k.signed(t, head(`,"typ":"dpop+jwt"`), claims(iat)), `header member "typ" appears twice`},
		"alg none, no signature":       {noneProof(t, k, u, now), "JWS"},
		"alg HS256":                    {hsProof(t, k, u, now), "alg"},
		"alg a list":                   {k.signed(t, `{"typ":"dpop+jwt","alg":["EdDSA"],"jwk":`+string(jwk)+`}`, claims(iat)), "header member alg is not a string"},
		"crit":                         {k.signed(t, head(`,"crit":["exp"]`), claims(iat)), "crit"},
		"header not JSON":              {k.signed(t, `{"typ":`, claims(iat)), "header is not valid JSON"},
		"header an array":              {k.signed(t, `[1]`, claims(iat)), "header is not a JSON object"},
		"jwk missing":                  {k.signed(t, `{"typ":"dpop+jwt","alg":"EdDSA"}`, claims(iat)), "jwk"},
		"jwk a string":                 {k.signed(t, withKey(`"key"`), claims(iat)), "jwk is not a JSON object"},
		"jwk x a number":               {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":1}`), claims(iat)), "jwk member x is not a string"},
		"jwk x not base64url":          {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x[:len(x)-1]+`!"}`), claims(iat)), "jwk member x is not base64url"},
		"jwk x not canonical":          {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x[:len(x)-1]+`B"}`), claims(iat)), "x is not"},
		"jwk x short":                  {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"AAAA"}`), claims(iat)), "x"},
		"jwk x not a point":            {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`), claims(iat)), "not a point"},
		"jwk EC not a point":           {k.signed(t, withKey(`{"kty":"EC","crv":"P-256","x":"`+strings.Repeat("A", 43)+`","y":"`+strings.Repeat("A", 43)+`"}`), claims(iat)), "not a point"},
		"jwk unknown member":           {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x+`","x5u":"https://evil.example/k"}`), claims(iat)), `jwk member "x5u" is not allowed`},
		"jwk private":                  {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x+`","d":"AAAA"}`), claims(iat)), "private"},
		"jwk member twice":             {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x+`","x":"`+x+`"}`), claims(iat)), `jwk member "x" appears twice`},
		"jwk kty wrong":                {k.signed(t, withKey(`{"kty":"RSA","crv":"Ed25519","x":"`+x+`"}`), claims(iat)), "kty"},
		"jwk crv missing":              {k.signed(t, withKey(`{"kty":"OKP","x":"`+x+`"}`), claims(iat)), "crv"},
		"jwk key_ops a string":         {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x+`","key_ops":"verify"}`), claims(iat)), "key_ops"},
		"jwk key_ops numbers":          {k.signed(t, withKey(`{"kty":"OKP","crv":"Ed25519","x":"`+x+`","key_ops":[1]}`), claims(iat)), "key_ops"},
		"another key's jwk":            {k.proof(t, "GET", u, tok, "", now, func(h, _ map[string]any) { h["jwk"] = other.jwk }), "signature"},
		"signature altered":            {parts[0] + "." + parts[1] + "." + alter(parts[2], 3), "signature"},
		"signature short":              {parts[0] + "." + parts[1] + ".AAAA", "signature"},
		"signature not canonical":      {parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + "x", "signature"},
		"not a JWS":                    {"not-a-proof", "JWS"},
		"four parts":                   {good + ".e30", "JWS"},
		"bad byte":                     {parts[0] + ".%%." + parts[2], "JWS"},
		"too long":                     {strings.Repeat("A", 9000) + "." + parts[1] + "." + parts[2], "bytes"},
		"replayed":                     {used, "used"},
		"another key than the token's": {other.proof(t, "GET", u, tok, "", now, nil), "key"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.validateDPoP(t, "DPoP", tok, []string{tc.proof}, nil)
			wantDPoPChallenge(t, r, "invalid_dpop_proof")
			wantRefusalText(t, r, tc.want)
		})
	}

	// What the request lacks or holds too much of.
	t.Run("no proof", func(t *testing.T) {
		r := e.validateDPoP(t, "DPoP", tok, nil, nil)
		wantDPoPChallenge(t, r, "invalid_dpop_proof")
		wantRefusalText(t, r, "DPoP header")
	})
	t.Run("two proofs", func(t *testing.T) {
		r := e.validateDPoP(t, "DPoP", tok, []string{good, good}, nil)
		wantDPoPChallenge(t, r, "invalid_dpop_proof")
		wantRefusalText(t, r, "DPoP headers")
	})
	t.Run("bound token as Bearer", func(t *testing.T) {
		r := e.validateDPoP(t, "Bearer", tok, nil, nil)
		wantDPoPChallenge(t, r, "invalid_token")
		wantRefusalText(t, r, "DPoP-bound")
	})

	// At the token endpoint, 400.
	for name, tc := range map[string]struct {
		c     client
		proof string
		want  string
	}{
		"a bound client without a proof": {e.Bound, "", "dpop_bound_access_tokens"},
		"iat a string":                   {e.Normal, k.signed(t, header, fmt.Sprintf(`{"jti":"a","htm":"POST","htu":%q,"iat":"%d"}`, e.URL+"/token", now.Unix())), "iat is not a number"},
		"header not JSON":                {e.Normal, k.signed(t, `{`, `{}`), "header is not valid JSON"},
		"the validation URL's":           {e.Normal, k.proof(t, "GET", u, "", "", now, nil), "htm"},
	} {
		t.Run("token endpoint: "+name, func(t *testing.T) {
			r := e.issueDPoP(t, tc.c, tc.proof)
			wantError(t, r, http.StatusBadRequest, "invalid_dpop_proof")
			wantRefusalText(t, r, tc.want)
		})
	}
}

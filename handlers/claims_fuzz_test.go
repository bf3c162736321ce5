package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// Placeholders of a claim set, replaced by the live token's values.
const (
	phJTI = "$JTI" // the live token's jti, a Snowflake ID with a session
	phIAT = "$IAT" // the service's now, in Unix seconds
	phEXP = "$EXP" // an hour later
)

// FuzzSignedClaims signs arbitrary claim sets with the service's own key
// (as a leaked key, an older release or another tool sharing the key would)
// and sends them to GET /token/validate and POST /token/introspect. However
// odd the claims, a signed token is 200 or 401 invalid_token, never a 5xx,
// and the X-Auth-* identity headers come only with a 200.
func FuzzSignedClaims(f *testing.F) {
	e := newEnv(f)
	live := e.issue(f, e.Normal, nil).AccessToken
	_, c := segments(f, live)
	jti, _ := c["jti"].(string)
	iat := e.Clock.Now().Unix()
	exp := iat + 3600

	good := `"iss":"` + testIssuer + `","aud":["` + testAudience + `"],"sub":"orders-svc","client_id":"orders-svc","scope":"orders:read orders:write","jti":"$JTI"`
	for _, s := range []string{
		`{` + good + `,"iat":$IAT,"exp":$EXP}`, // the live token's claims: 200
		`{` + good + `,"exp":$EXP}`,            // no iat
		`{` + good + `,"iat":null,"exp":$EXP}`,
		`{` + good + `,"iat":"$IAT","exp":$EXP}`, // RFC 7519 §2: NumericDate is a number
		`{` + good + `,"iat":$IAT,"exp":"$EXP"}`,
		`{` + good + `,"iat":$IAT,"exp":$EXP,"nbf":"$IAT"}`,
		`{` + good + `,"iat":$IAT,"exp":null}`,
		`{` + good + `,"iat":$IAT}`,
		`{` + good + `,"iat":true,"exp":$EXP}`,
		`{` + good + `,"iat":[1],"exp":$EXP}`,
		`{` + good + `,"iat":1e400,"exp":$EXP}`,
		`{` + good + `,"iat":-1e300,"exp":1e300}`,
		`{` + good + `,"iat":$IAT.5,"exp":$EXP.999}`,
		`{"iss":"` + testIssuer + `","aud":"` + testAudience + `","sub":"orders-svc","client_id":"orders-svc","jti":"$JTI","iat":$IAT,"exp":$EXP}`,
		`{"iss":"` + testIssuer + `","aud":["` + testAudience + `"],"sub":7,"client_id":"orders-svc","jti":"$JTI","iat":$IAT,"exp":$EXP}`,
		`{"iss":"` + testIssuer + `","aud":["` + testAudience + `"],"sub":"orders-svc","client_id":null,"jti":"$JTI","iat":$IAT,"exp":$EXP}`,
		`{"iss":"` + testIssuer + `","aud":["` + testAudience + `"],"sub":"a}b\n","client_id":"orders-svc","jti":"$JTI","iat":$IAT,"exp":$EXP}`,
		`{"iss":"` + testIssuer + `","aud":["` + testAudience + `"],"sub":"orders-svc","client_id":"orders-svc","jti":$JTI,"iat":$IAT,"exp":$EXP}`,
		`{"iss":"` + testIssuer + `","aud":["` + testAudience + `"],"sub":"orders-svc","client_id":"orders-svc","jti":"$JTI","scope":["orders:read"],"iat":$IAT,"exp":$EXP}`,
		`{"iss":"` + testIssuer + `","aud":[7],"sub":"orders-svc","client_id":"orders-svc","jti":"$JTI","iat":$IAT,"exp":$EXP}`,
		`{"iss":null,"aud":["` + testAudience + `"],"sub":"orders-svc","client_id":"orders-svc","jti":"$JTI","iat":$IAT,"exp":$EXP}`,
		`{}`, `[]`, `null`, `"x"`, ``, `{"iat":`,
	} {
		f.Add(s)
	}
	expand := strings.NewReplacer(phJTI, jti, phIAT, strconv.FormatInt(iat, 10), phEXP, strconv.FormatInt(exp, 10))
	header := live[:strings.IndexByte(live, '.')+1] // the key's own header: alg, kid, typ
	introspect := basic(e.Normal.ID, e.Normal.Secret)

	f.Fuzz(func(t *testing.T, claims string) {
		signing := header + base64.RawURLEncoding.EncodeToString([]byte(expand.Replace(claims)))
		sig, err := jwt.SigningMethodEdDSA.Sign(signing, e.Key.Private)
		if err != nil {
			t.Fatal(err)
		}
		tok := signing + "." + base64.RawURLEncoding.EncodeToString(sig)

		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/token/validate", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := e.serve(req)
		switch w.Code {
		case http.StatusOK:
			// Only a claim set as the issuer writes it: dates are numbers (RFC 7519 §2).
			var cl map[string]any
			d := json.NewDecoder(strings.NewReader(expand.Replace(claims)))
			d.UseNumber()
			if err := d.Decode(&cl); err != nil {
				t.Fatalf("200 for claims that are not a JSON object: %s", claims)
			}
			for _, name := range []string{"iat", "exp"} {
				if _, ok := cl[name].(json.Number); !ok {
					t.Fatalf("200 with %s = %#v: %s", name, cl[name], claims)
				}
			}
			if nbf, ok := cl["nbf"]; ok {
				if _, ok := nbf.(json.Number); !ok {
					t.Fatalf("200 with nbf = %#v: %s", nbf, claims)
				}
			}
		case http.StatusUnauthorized:
			if code := wantOAuthError(t, w); code != "invalid_token" {
				t.Fatalf("401 %q: %s", code, w.Body)
			}
		default:
			t.Fatalf("claims %s: status %d: %s", claims, w.Code, w.Body)
		}
		for k := range w.Header() {
			if strings.HasPrefix(k, "X-Auth-") && w.Code != http.StatusOK {
				t.Fatalf("%d with %s: %q", w.Code, k, w.Header().Get(k))
			}
		}

		form := url.Values{"token": {tok}}.Encode()
		req = httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/token/introspect", strings.NewReader(form))
		req.Header.Set("Content-Type", formType)
		req.Header.Set("Authorization", introspect)
		if w := e.serve(req); w.Code != http.StatusOK {
			t.Fatalf("introspect, claims %s: status %d: %s", claims, w.Code, w.Body)
		}
	})
}

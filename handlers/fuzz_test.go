package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/token"
)

// Placeholders a fuzz input may hold, replaced by this process's secrets:
// each fuzz worker builds its own env, so secrets cannot be in the corpus.
const (
	phSecret = "$SECRET" // orders-svc's secret
	phBasic  = "$BASIC"  // HTTP Basic credentials of orders-svc
	phGate   = "$GATE"   // HTTP Basic credentials of gateway (may set the subject)
)

// FuzzTokenEndpoint throws arbitrary bodies, Authorization headers and
// content types at POST /token. It must never fail with a 5xx other than 503,
// must always explain a refusal in OAuth2 JSON, and may issue a token only to
// a caller that presented that client's secret, with an aud its client may
// get: the audiences asked for (resource, audience) when any.
func FuzzTokenEndpoint(f *testing.F) {
	e := newEnv(f)
	grant := "grant_type=client_credentials"
	seeds := []struct{ body, auth, ctype string }{
		{grant, phBasic, formType},
		{grant + "&client_id=orders-svc&client_secret=" + phSecret, "", formType},
		{grant + "&scope=orders:read&expires_in=60", phBasic, formType},
		{grant + "&subject=user-1&scope=orders:write", phGate, formType},
		{grant + "&subject=a%7Bb%7D", phGate, formType},
		{grant + "&subject=user-1", phBasic, formType},
		{grant + "&client_id=orders-svc&client_secret=wrong", "", formType},
		{grant + "&client_id=orders-svc&client_secret=" + phSecret, phBasic, formType},
		{grant + "&client_secret=" + phSecret, "", formType},
		{"grant_type=password&username=a&password=b", phBasic, formType},
		{grant + "&scope=admin", phBasic, formType},
		{grant + "&scope=orders:read%20%20orders:write", phBasic, formType},
		{grant + "&expires_in=-1", phBasic, formType},
		{grant + "&expires_in=99999999999999999999", phBasic, formType},
		{grant + "&" + grant, phBasic, formType},
		{"%zz=1", phBasic, formType},
		{"", "", ""},
		{`{"grant_type":"client_credentials"}`, phBasic, "application/json"},
		{grant, phBasic, formType + "; charset=utf-8"},
		{grant, "Basic !!!", formType},
		{grant, "Basic " + base64.StdEncoding.EncodeToString([]byte("orders-svc")), formType},
		{grant, "Basic " + base64.StdEncoding.EncodeToString([]byte("%zz:%zz")), formType},
		{grant, "Bearer x.y.z", formType},
		{grant, "Basic", formType},
		{grant + "\x00&scope=\xff", phBasic, formType},
		{strings.Repeat("a=b&", 20000), phBasic, formType},
		{grant + "&audience=" + testAudience, phBasic, formType},
		{grant + "&resource=https%3A%2F%2Freports.test%2Fv1&audience=" + testAudience, phBasic, formType},
		{grant + "&audience=" + testAudience + "&audience=" + testAudience, phBasic, formType},
		{grant + "&audience=billing-api", phBasic, formType},
		{grant + "&resource=" + testAudience, phBasic, formType},
		{grant + "&resource=https%3A%2F%2Fa.test%2F%23x", phBasic, formType},
	}
	for _, s := range seeds {
		f.Add(s.body, s.auth, s.ctype)
	}
	gate := basic(e.Gateway.ID, e.Gateway.Secret)
	expand := strings.NewReplacer(phSecret, e.Normal.Secret, phBasic, basic(e.Normal.ID, e.Normal.Secret), phGate, gate)

	f.Fuzz(func(t *testing.T, body, auth, ctype string) {
		body, auth = expand.Replace(body), expand.Replace(auth)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/token", strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		e.Engine.ServeHTTP(w, req)

		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if w.Code != http.StatusOK {
			var out struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Error == "" {
				t.Fatalf("status %d without an OAuth2 error body: %q (%v)", w.Code, w.Body, err)
			}
			return
		}

		var got issued
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("200 with body %q: %v", w.Body, err)
		}
		_, claims := segments(t, got.AccessToken)
		id, _ := claims["client_id"].(string)
		secret, known := e.secrets[id]
		if !known {
			t.Fatalf("token for unknown client %q", id)
		}
		if !presented(body, auth, id, secret) {
			t.Fatalf("token for %q without its credentials: body %q, Authorization %q", id, body, auth)
		}
		v, err := e.Svc.Verdict(t.Context(), e.Clients, token.Request{Token: got.AccessToken})
		if err != nil {
			t.Fatalf("an issued token does not validate, or its aud is not its client's: %v", err)
		}
		form, _ := url.ParseQuery(body)
		if asked := append(form["resource"], form["audience"]...); len(asked) > 0 {
			for _, a := range asked {
				if !v.ForAudience(a) {
					t.Fatalf("aud %q lacks %q, asked for", v.AppendAudience(nil), a)
				}
			}
			for _, a := range v.AppendAudience(nil) {
				if !slices.Contains(asked, a) {
					t.Fatalf("aud %q holds %q, not asked for (%q)", v.AppendAudience(nil), a, asked)
				}
			}
		}
	})
}

// presented reports whether a request carried id's secret, as
// client_secret_post or as RFC 6749 §2.3.1 HTTP Basic.
func presented(body, auth, id, secret string) bool {
	if form, err := url.ParseQuery(body); err == nil && form.Get("client_id") == id && form.Get("client_secret") == secret {
		return true
	}
	scheme, rest, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return false
	}
	u, p, _ := strings.Cut(string(raw), ":")
	u, errU := url.QueryUnescape(u)
	p, errP := url.QueryUnescape(p)
	return errU == nil && errP == nil && u == id && p == secret
}

package handlers_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// The clients of jwtExchangeEnv: wlX trusts the cluster's JWTs and may
// impersonate; wlY trusts them too, with an actor token only; wlDead
// trusts an issuer whose key server is down; wlNone may exchange but
// trusts no issuer; wlOff may not exchange at all.
const (
	typeJWT = "urn:ietf:params:oauth:token-type:jwt"
	wlX     = "wl-x"
	wlY     = "wl-y"
	wlDead  = "wl-dead"
	wlNone  = "wl-none"
	wlOff   = "wl-off"
)

// jwtExchangeEnv is an assertion env (a cluster issuer serving discovery
// and keys over TLS) whose clients exchange the cluster's JWTs; its audit
// log in logs.
func jwtExchangeEnv(t *testing.T, logs *bytes.Buffer) *assertionEnv {
	t.Helper()
	a := newAssertionEnv(t, nil, withLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	cluster := clientauth.TrustedIssuer{Issuer: a.cluster.URL, CAFile: a.clusterCA}
	dead := clientauth.TrustedIssuer{Issuer: "https://127.0.0.1:1", JWKSURI: "https://127.0.0.1:1/jwks"}
	list := a.Clients.All()
	for _, c := range []clients.Client{
		{ID: wlX, Scopes: []string{"orders:read", "orders:write"}, Audiences: []string{billingAPI},
			TokenExchange: true, Impersonation: true, SubjectTokenIssuers: []clientauth.TrustedIssuer{cluster}},
		{ID: wlY, Scopes: []string{"orders:read"}, TokenExchange: true, SubjectTokenIssuers: []clientauth.TrustedIssuer{cluster}},
		{ID: wlDead, Scopes: []string{"orders:read"}, TokenExchange: true, Impersonation: true, SubjectTokenIssuers: []clientauth.TrustedIssuer{dead}},
		{ID: wlNone, Scopes: []string{"orders:read"}, TokenExchange: true, Impersonation: true},
		{ID: wlOff, Scopes: []string{"orders:read"}},
	} {
		secret, sum, err := clients.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		c.SecretSHA256, a.secrets[c.ID] = sum, secret
		list = append(list, c)
	}
	cs, err := clients.New(list)
	if err != nil {
		t.Fatal(err)
	}
	a.Server.Swap(a.Svc, cs, handlers.Version{})
	return a
}

// workloadJWT is a JWT of the cluster for sub, naming aud, with the scope
// orders:read, living 30 minutes; edit changes its claims.
func (a *assertionEnv) workloadJWT(tb testing.TB, aud string, edit func(jwt.MapClaims)) string {
	tb.Helper()
	now := a.Clock.Now()
	c := jwt.MapClaims{"iss": a.cluster.URL, "sub": saSubject, "aud": []string{aud}, "scope": "orders:read",
		"iat": now.Unix(), "exp": now.Add(30 * time.Minute).Unix(), "jti": rand.Text()}
	if edit != nil {
		edit(c)
	}
	return a.sa.sign(tb, c)
}

// TestExchangeWorkloadJWT: a client that trusts the cluster trades the
// cluster's JWT naming it for a token of ours: sub the JWT's, scope within
// the JWT's and the client's, exp no later than the JWT's, no parents; it
// verifies with our JWKS through go-jose and validates. With an actor token
// the new token's act names the actor. A JWT with no scope gives a token
// with none.
func TestExchangeWorkloadJWT(t *testing.T) {
	var logs bytes.Buffer
	a := jwtExchangeEnv(t, &logs)
	x, y := a.client(wlX), a.client(wlY)
	jwtExp := a.Clock.Now().Add(30 * time.Minute).Unix()
	subject := a.workloadJWT(t, wlX, nil)

	o := exchanged(t, a.exchange(t, x, subject, url.Values{"subject_token_type": {typeJWT}, "audience": {billingAPI}}, ""))
	tok := o["access_token"].(string)
	claims := verifyWithJOSE(t, a.env, tok)
	if claims.Subject != saSubject || claims.ClientID != wlX || claims.Scope != "orders:read" || o["scope"] != "orders:read" ||
		len(claims.Audience) != 1 || claims.Audience[0] != billingAPI || claims.Act != nil || claims.Parents != nil {
		t.Errorf("claims %+v, answer %v", claims, o)
	}
	if _, c := segments(t, tok); unixClaim(t, c, "exp") > jwtExp {
		t.Errorf("exp %d after the subject JWT's %d", unixClaim(t, c, "exp"), jwtExp)
	}
	if v := a.validate(t, tok); v.Status != http.StatusOK || v.Header.Get("X-Auth-Subject") != saSubject {
		t.Errorf("validate: %d, X-Auth-Subject %q", v.Status, v.Header.Get("X-Auth-Subject"))
	}
	if !strings.Contains(logs.String(), `"subject_issuer":"`+a.cluster.URL+`"`) || strings.Contains(logs.String(), "eyJ") {
		t.Errorf("audit log: want the subject issuer and no token:\n%s", logs.String())
	}

	// Delegation: wl-y's own token as the actor.
	yOwn := a.issue(t, y, nil).AccessToken
	o = exchanged(t, a.exchange(t, y, a.workloadJWT(t, wlY, nil), url.Values{"subject_token_type": {typeJWT},
		"actor_token": {yOwn}, "actor_token_type": {typeAccess}}, ""))
	if c := verifyWithJOSE(t, a.env, o["access_token"].(string)); c.Act == nil || c.Act.Subject != wlY || c.Subject != saSubject {
		t.Errorf("delegated: sub %q, act %s", c.Subject, actorJSON(c.Act))
	}

	// No scope claim: a token with no scope.
	o = exchanged(t, a.exchange(t, x, a.workloadJWT(t, wlX, func(c jwt.MapClaims) { delete(c, "scope") }),
		url.Values{"subject_token_type": {typeJWT}}, ""))
	if sc, _ := o["scope"].(string); sc != "" || verifyWithJOSE(t, a.env, o["access_token"].(string)).Scope != "" {
		t.Errorf("a JWT without scope: answer %v", o)
	}
	if v := a.validate(t, o["access_token"].(string)); v.Status != http.StatusOK {
		t.Errorf("validate a token with no scope: %d %s", v.Status, v.Body)
	}
}

// TestExchangeWorkloadJWTRefused: every JWT subject token that must not
// become a token of ours is refused with RFC 8693 §2.2.2's error, and no
// token; a description that says why and never echoes the token.
func TestExchangeWorkloadJWTRefused(t *testing.T) {
	a := jwtExchangeEnv(t, &bytes.Buffer{})
	x, y := a.client(wlX), a.client(wlY)
	now := a.Clock.Now()
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := signer{jwt.SigningMethodRS256, a.sa.kid, otherKey}
	good := func(aud string) jwt.MapClaims {
		return jwt.MapClaims{"iss": a.cluster.URL, "sub": saSubject, "aud": []string{aud}, "scope": "orders:read",
			"iat": now.Unix(), "exp": now.Add(30 * time.Minute).Unix()}
	}
	hs256 := jwttest.Sign(t, jwt.SigningMethodHS256, []byte("a shared secret of thirty-two bytes!"), map[string]any{"kid": a.sa.kid}, good(wlX))
	none := jwttest.Sign(t, jwt.SigningMethodNone, nil, nil, good(wlX))
	ours := a.issue(t, x, nil).AccessToken
	jwtType := url.Values{"subject_token_type": {typeJWT}}
	with := func(extra url.Values) url.Values {
		f := url.Values{"subject_token_type": {typeJWT}}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	edit := func(aud string, e func(jwt.MapClaims)) string { return a.workloadJWT(t, aud, e) }
	for _, tc := range []struct {
		name    string
		c       client
		subject string
		form    url.Values
		status  int
		code    string
		says    string
	}{
		{"issuer the client does not trust", x, edit(wlX, func(c jwt.MapClaims) { c["iss"] = "https://other.example" }), jwtType, 400, "invalid_request", "not an issuer this client trusts"},
		{"aud not naming the caller", x, edit(testIssuer, nil), jwtType, 400, "invalid_request", "must name the requesting client"},
		{"aud naming another client", x, edit(wlY, nil), jwtType, 400, "invalid_request", "must name the requesting client"},
		{"expired", x, edit(wlX, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }), jwtType, 400, "invalid_request", "expired"},
		{"lives too long", x, edit(wlX, func(c jwt.MapClaims) { c["exp"] = now.Add(48 * time.Hour).Unix() }), jwtType, 400, "invalid_request", "ahead"},
		{"no iat", x, edit(wlX, func(c jwt.MapClaims) { delete(c, "iat") }), jwtType, 400, "invalid_request", "iat"},
		{"nbf ahead", x, edit(wlX, func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }), jwtType, 400, "invalid_request", "nbf"},
		{"bad signature", x, forged.sign(t, good(wlX)), jwtType, 400, "invalid_request", "signature"},
		{"alg none", x, none, jwtType, 400, "invalid_request", "alg"},
		{"alg HS256", x, hs256, jwtType, 400, "invalid_request", "alg"},
		{"with an act", x, edit(wlX, func(c jwt.MapClaims) { c["act"] = map[string]any{"sub": "ci-runner"} }), jwtType, 400, "invalid_request", "act"},
		{"may_act, no actor token", x, edit(wlX, func(c jwt.MapClaims) { c["may_act"] = map[string]any{"sub": wlX} }), jwtType, 400, "invalid_request", "may_act"},
		{"may_act naming another actor", y, edit(wlY, func(c jwt.MapClaims) { c["may_act"] = map[string]any{"sub": "someone-else"} }),
			with(url.Values{"actor_token": {a.issue(t, y, nil).AccessToken}, "actor_token_type": {typeAccess}}), 400, "invalid_request", "may_act"},
		{"sub no token of ours can carry", x, edit(wlX, func(c jwt.MapClaims) { c["sub"] = "repo:shop/orders:ref:refs/heads/main" }), jwtType, 400, "invalid_request", "sub"},
		{"scope growth", x, edit(wlX, nil), with(url.Values{"scope": {"orders:write"}}), 400, "invalid_scope", "orders:write"},
		{"scope growth, no scope claim", x, edit(wlX, func(c jwt.MapClaims) { delete(c, "scope") }), with(url.Values{"scope": {"orders:read"}}), 400, "invalid_scope", "orders:read"},
		{"a client without token_exchange", a.client(wlOff), edit(wlOff, nil), jwtType, 400, "unauthorized_client", "token_exchange"},
		{"a client that trusts no issuer", a.client(wlNone), edit(wlNone, nil), jwtType, 400, "invalid_request", "subject_token_issuers"},
		{"impersonation off, no actor token", y, edit(wlY, nil), jwtType, 400, "unauthorized_client", "actor_token"},
		{"the JWT sent as an access token", x, edit(wlX, nil), nil, 400, "invalid_request", "subject_token"},
		{"our own token sent as a JWT", x, ours, jwtType, 400, "invalid_request", "not an issuer this client trusts"},
		{"not a JWT", x, "garbage", jwtType, 400, "invalid_request", "not a signed JWT"},
		{"too large", x, strings.Repeat("a", clientauth.MaxAssertionBytes+1), jwtType, 400, "invalid_request", "longer than"},
		{"key server down", a.client(wlDead), jwttest.Sign(t, jwt.SigningMethodRS256, a.sa.priv, map[string]any{"kid": "k"},
			jwt.MapClaims{"iss": "https://127.0.0.1:1", "sub": saSubject, "aud": wlDead, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}),
			jwtType, 503, "temporarily_unavailable", "subject token issuer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.exchange(t, tc.c, tc.subject, tc.form, "")
			wantError(t, r, tc.status, tc.code)
			if strings.Contains(string(r.Body), `"access_token":`) {
				t.Errorf("a refusal came with a token: %s", r.Body)
			}
			var body struct {
				Description string `json:"error_description"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil || !strings.Contains(body.Description, tc.says) {
				t.Errorf("error_description %q, want it to say %q", body.Description, tc.says)
			}
			wantNoEcho(t, r, tc.subject)
		})
	}
}

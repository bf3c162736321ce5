package handlers_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// TestValidate covers a good token: body, headers and required scopes.
func TestValidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.issue(t, e.Normal, nil)
	var jti string
	if err := json.Unmarshal(tok.JTI, &jti); err != nil {
		t.Fatal(err)
	}

	r := e.validate(t, tok.AccessToken)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	body := r.object(t)
	iat := e.Clock.Now().Unix()
	want := map[string]any{
		"active": true, "sub": e.Normal.ID, "client_id": e.Normal.ID, "scope": "orders:read orders:write",
		"iss": testIssuer, "iat": json.Number(itoa(iat)), "exp": json.Number(itoa(iat + 3600)),
		"jti": jti, "worker_id": json.Number(itoa(testWorker)),
	}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("%s = %#v, want %#v", k, body[k], v)
		}
	}
	if _, ok := body["token_type"]; ok {
		t.Errorf("token_type in a validation answer: %s", r.Body)
	}
	headers := map[string]string{
		"X-Auth-Subject": e.Normal.ID, "X-Auth-Client": e.Normal.ID,
		"X-Auth-Scope": "orders:read orders:write", "X-Auth-Token-Id": jti,
		"Cache-Control": "no-store",
	}
	for k, v := range headers {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}

	t.Run("bearer scheme in lower case", func(t *testing.T) {
		r := e.do(t, http.MethodGet, "/token/validate", nil, http.Header{"Authorization": {"bearer " + tok.AccessToken}})
		if r.Status != http.StatusOK {
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		r := e.do(t, http.MethodHead, "/token/validate", nil, http.Header{"Authorization": {"Bearer " + tok.AccessToken}})
		if r.Status != http.StatusOK || r.Header.Get("X-Auth-Token-Id") != jti {
			t.Errorf("status %d, X-Auth-Token-Id %q", r.Status, r.Header.Get("X-Auth-Token-Id"))
		}
	})

	short := e.issue(t, e.Short, nil) // orders:read only
	scopes := []struct {
		name   string
		tok    string
		scope  string
		status int
		code   string
	}{
		{name: "one held scope", tok: tok.AccessToken, scope: "orders:read", status: 200},
		{name: "all held scopes", tok: tok.AccessToken, scope: "orders:write orders:read", status: 200},
		{name: "one scope missing", tok: tok.AccessToken, scope: "orders:read admin", status: 403, code: "insufficient_scope"},
		{name: "narrow token", tok: short.AccessToken, scope: "orders:write", status: 403, code: "insufficient_scope"},
		{name: "narrow token, held scope", tok: short.AccessToken, scope: "orders:read", status: 200},
		{name: "malformed scope", tok: tok.AccessToken, scope: "orders:read  orders:write", status: 400, code: "invalid_request"},
	}
	for _, tt := range scopes {
		t.Run("scope/"+tt.name, func(t *testing.T) {
			r := e.do(t, http.MethodGet, "/token/validate?"+url.Values{"scope": {tt.scope}}.Encode(), nil,
				http.Header{"Authorization": {"Bearer " + tt.tok}})
			if tt.code == "" {
				if r.Status != tt.status {
					t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
				}
				return
			}
			wantError(t, r, tt.status, tt.code)
			wantBearerChallenge(t, r, tt.code)
			if tt.code == "insufficient_scope" {
				if h := r.Header.Get("WWW-Authenticate"); !strings.Contains(h, `scope="`+tt.scope+`"`) {
					t.Errorf("WWW-Authenticate %q does not name the scope %q (RFC 6750 §3)", h, tt.scope)
				}
			}
		})
	}

	t.Run("no Authorization", func(t *testing.T) {
		r := e.do(t, http.MethodGet, "/token/validate", nil, nil)
		wantError(t, r, http.StatusUnauthorized, "invalid_token")
		wantBearerChallenge(t, r, "")
	})
	t.Run("Basic instead of Bearer", func(t *testing.T) {
		r := e.do(t, http.MethodGet, "/token/validate", nil, http.Header{"Authorization": {basic(e.Normal.ID, e.Normal.Secret)}})
		wantError(t, r, http.StatusUnauthorized, "invalid_token")
		wantBearerChallenge(t, r, "")
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestValidateAttacks: every forged, altered, stale or misplaced token is
// refused with the exact status and error code. Each forgery starts from a
// token the server issued, so its session record exists and only the one
// thing under attack can make it fail; a control re-signs without changes.
func TestValidateAttacks(t *testing.T) {
	t.Parallel()

	// wantInvalid asserts RFC 6750 invalid_token.
	wantInvalid := func(t *testing.T, r *response) {
		t.Helper()
		wantError(t, r, http.StatusUnauthorized, "invalid_token")
		wantBearerChallenge(t, r, "invalid_token")
	}

	// Forgeries built from an issued token's header and claims.
	forgeries := []struct {
		name  string
		forge func(t *testing.T, e *env, tok string) string
		ok    bool // the control cases
	}{
		{name: "control: re-signed unchanged", ok: true, forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, nil)
		}},
		{name: "control: typ application/at+jwt", ok: true, forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(h, _ map[string]any) { h["typ"] = "application/at+jwt" })
		}},
		{name: "alg none", forge: func(t *testing.T, e *env, tok string) string {
			_, c := segments(t, tok)
			return b64json(t, map[string]any{"alg": "none", "typ": "at+jwt"}) + "." + b64json(t, c) + "."
		}},
		{name: "alg none with our kid", forge: func(t *testing.T, e *env, tok string) string {
			_, c := segments(t, tok)
			return b64json(t, map[string]any{"alg": "none", "typ": "at+jwt", "kid": e.Key.ID}) + "." + b64json(t, c) + "."
		}},
		{name: "alg none keeping the signature", forge: func(t *testing.T, e *env, tok string) string {
			_, c := segments(t, tok)
			sig := tok[strings.LastIndexByte(tok, '.')+1:]
			return b64json(t, map[string]any{"alg": "none", "typ": "at+jwt", "kid": e.Key.ID}) + "." + b64json(t, c) + "." + sig
		}},
		{name: "HS256 with the public key as secret", forge: func(t *testing.T, e *env, tok string) string {
			_, c := segments(t, tok)
			return jwttest.Sign(t, jwt.SigningMethodHS256, []byte(e.Key.Public), map[string]any{"kid": e.Key.ID, "typ": "at+jwt"}, jwt.MapClaims(c))
		}},
		{name: "HS256 with the JWK x as secret", forge: func(t *testing.T, e *env, tok string) string {
			_, c := segments(t, tok)
			return jwttest.Sign(t, jwt.SigningMethodHS256, []byte(base64.RawURLEncoding.EncodeToString(e.Key.Public)),
				map[string]any{"kid": e.Key.ID, "typ": "at+jwt"}, jwt.MapClaims(c))
		}},
		{name: "unknown kid", forge: func(t *testing.T, e *env, tok string) string {
			other := otherKey(t)
			return resign(t, tok, other.Private, func(h, _ map[string]any) { h["kid"] = other.ID })
		}},
		{name: "other key with our kid", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, otherKey(t).Private, nil)
		}},
		{name: "other key embedded as jwk", forge: func(t *testing.T, e *env, tok string) string {
			other := otherKey(t)
			return resign(t, tok, other.Private, func(h, _ map[string]any) {
				h["kid"] = other.ID
				h["jwk"] = map[string]any{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(other.Public), "kid": other.ID}
			})
		}},
		{name: "no kid", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(h, _ map[string]any) { delete(h, "kid") })
		}},
		{name: "tampered sub", forge: func(t *testing.T, e *env, tok string) string {
			return tamperClaims(t, tok, func(c map[string]any) { c["sub"] = e.Admin.ID })
		}},
		// Scope lives in no Redis key: only the signature can catch this one.
		{name: "tampered scope", forge: func(t *testing.T, e *env, tok string) string {
			return tamperClaims(t, tok, func(c map[string]any) { c["scope"] = "orders:read orders:write admin" })
		}},
		{name: "tampered exp", forge: func(t *testing.T, e *env, tok string) string {
			return tamperClaims(t, tok, func(c map[string]any) { c["exp"] = json.Number(itoa(unixClaim(t, c, "exp") + 3600)) })
		}},
		{name: "tampered signature", forge: func(t *testing.T, e *env, tok string) string {
			i := strings.LastIndexByte(tok, '.')
			sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
			if err != nil {
				t.Fatal(err)
			}
			sig[len(sig)/2] ^= 0x01
			return tok[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
		}},
		{name: "signature cut off", forge: func(t *testing.T, e *env, tok string) string {
			return tok[:strings.LastIndexByte(tok, '.')+1]
		}},
		{name: "signature not base64url", forge: func(t *testing.T, e *env, tok string) string {
			i := strings.LastIndexByte(tok, '.')
			sig, _ := base64.RawURLEncoding.DecodeString(tok[i+1:])
			return tok[:i+1] + base64.StdEncoding.EncodeToString(sig) // padded, "+" and "/"
		}},
		{name: "wrong iss", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["iss"] = "https://evil.test" })
		}},
		{name: "iss with a trailing slash", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["iss"] = testIssuer + "/" })
		}},
		{name: "no iss", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { delete(c, "iss") })
		}},
		{name: "wrong aud", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["aud"] = []string{"billing-api"} })
		}},
		{name: "no aud", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { delete(c, "aud") })
		}},
		{name: "typ JWT", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(h, _ map[string]any) { h["typ"] = "JWT" })
		}},
		{name: "no typ", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(h, _ map[string]any) { delete(h, "typ") })
		}},
		{name: "no exp", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { delete(c, "exp") })
		}},
		{name: "exp in the past", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["exp"] = e.Clock.Now().Add(-time.Hour).Unix() })
		}},
		{name: "iat an hour ahead", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["iat"] = e.Clock.Now().Add(time.Hour).Unix() })
		}},
		{name: "no client_id", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { delete(c, "client_id") })
		}},
		{name: "jti not a snowflake id", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["jti"] = "0x1f" })
		}},
		// Only the length check can refuse this one.
		{name: "oversized but validly signed", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["pad"] = strings.Repeat("x", token.MaxTokenLen) })
		}},
		{name: "unknown claim type", forge: func(t *testing.T, e *env, tok string) string {
			return resign(t, tok, e.Key.Private, func(_, c map[string]any) { c["exp"] = "tomorrow" })
		}},
	}
	for _, tt := range forgeries {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tok := e.issue(t, e.Normal, nil).AccessToken
			if r := e.validate(t, tok); r.Status != http.StatusOK {
				t.Fatalf("the original token does not validate: %d %s", r.Status, r.Body)
			}
			forged := tt.forge(t, e, tok)
			if forged == tok {
				t.Fatal("the forgery did not change the token")
			}
			r := e.validate(t, forged)
			if tt.ok {
				if r.Status != http.StatusOK {
					t.Fatalf("control: status %d: %s", r.Status, r.Body)
				}
				return
			}
			wantInvalid(t, r)
			wantNoEcho(t, r, forged)
		})
	}

	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		cached := e.issue(t, e.Normal, nil).AccessToken
		fresh := e.issue(t, e.Normal, nil).AccessToken // never validated: no cache entry
		if r := e.validate(t, cached); r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		_, claims := segments(t, cached)
		exp := time.Unix(unixClaim(t, claims, "exp"), 0)
		e.Clock.Set(exp.Add(token.DefaultLeeway - time.Second)) // inside the leeway
		for _, tok := range []string{cached, fresh} {
			if r := e.validate(t, tok); r.Status != http.StatusOK {
				t.Fatalf("within the leeway: status %d: %s", r.Status, r.Body)
			}
		}
		e.Clock.Set(exp.Add(token.DefaultLeeway))
		for _, tok := range []string{cached, fresh} {
			wantInvalid(t, e.validate(t, tok))
		}
	})

	t.Run("not yet valid", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		// A second service sharing keys and store, whose clock is an hour ahead.
		ahead, err := token.NewService(e.Keys, e.Store, e.IDs, token.Options{
			Issuer: testIssuer, Audience: testAudience, MaxTTL: testMaxTTL,
			Now: func() time.Time { return e.Clock.Now().Add(time.Hour) },
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.Clients.Authenticate(e.Normal.ID, e.Normal.Secret, e.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		tok, err := ahead.Issue(t.Context(), c, token.IssueRequest{})
		if err != nil {
			t.Fatal(err)
		}
		wantInvalid(t, e.validate(t, tok.AccessToken))
		// An hour later it is good: the record exists, only iat was wrong.
		e.Clock.Add(time.Hour)
		if r := e.validate(t, tok.AccessToken); r.Status != http.StatusOK {
			t.Fatalf("an hour later: status %d: %s", r.Status, r.Body)
		}
	})

	t.Run("revoked", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		tok := e.issue(t, e.Normal, nil).AccessToken
		if r := e.validate(t, tok); r.Status != http.StatusOK { // cached now: revocation must still win
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if r := e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {tok}}); r.Status != http.StatusOK {
			t.Fatalf("revoke: status %d: %s", r.Status, r.Body)
		}
		wantInvalid(t, e.validate(t, tok))
	})

	t.Run("subject revoked", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		before := e.issue(t, e.Gateway, url.Values{"subject": {"user-9"}}).AccessToken
		if r := e.validate(t, before); r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		r := e.do(t, http.MethodDelete, "/subjects/user-9/tokens", nil, http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}})
		if r.Status != http.StatusNoContent {
			t.Fatalf("revoke subject: status %d: %s", r.Status, r.Body)
		}
		wantInvalid(t, e.validate(t, before))
		after := e.issue(t, e.Gateway, url.Values{"subject": {"user-9"}}).AccessToken
		if r := e.validate(t, after); r.Status != http.StatusOK {
			t.Fatalf("a token issued after the revocation: status %d: %s", r.Status, r.Body)
		}
		wantInvalid(t, e.validate(t, before))
	})

	t.Run("token in the query string", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		tok := e.issue(t, e.Normal, nil).AccessToken
		for _, hdr := range []http.Header{nil, {"Authorization": {"Bearer " + tok}}} {
			r := e.do(t, http.MethodGet, "/token/validate?access_token="+url.QueryEscape(tok), nil, hdr)
			wantError(t, r, http.StatusBadRequest, "invalid_request")
			wantBearerChallenge(t, r, "invalid_request")
		}
	})

	t.Run("no redis record", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		// Same keys, issuer and audience, another key prefix: a perfectly
		// signed token whose session this server has never seen.
		r := redistest.New(t)
		otherStore, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		other, err := token.NewService(e.Keys, otherStore, e.IDs, token.Options{
			Issuer: testIssuer, Audience: testAudience, MaxTTL: testMaxTTL, Now: e.Clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.Clients.Authenticate(e.Normal.ID, e.Normal.Secret, e.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		tok, err := other.Issue(t.Context(), c, token.IssueRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Verdict(t.Context(), e.Clients, token.Request{Token: tok.AccessToken}); err != nil {
			t.Fatalf("the other service rejects its own token: %v", err)
		}
		wantInvalid(t, e.validate(t, tok.AccessToken))
	})

	t.Run("garbage", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		random := make([]byte, 300)
		rand.Read(random)
		tests := []struct {
			name string
			tok  string
			code string // in WWW-Authenticate; "" for none
		}{
			{name: "empty", tok: "", code: ""},
			{name: "a.b", tok: "a.b", code: "invalid_token"},
			{name: "dots", tok: "...", code: "invalid_token"},
			{name: "two dots", tok: "..", code: "invalid_token"},
			{name: "random base64", tok: base64.RawURLEncoding.EncodeToString(random), code: "invalid_token"},
			{name: "random three segments", tok: base64.RawURLEncoding.EncodeToString(random[:100]) + "." + base64.RawURLEncoding.EncodeToString(random[100:200]) + "." + base64.RawURLEncoding.EncodeToString(random[200:]), code: "invalid_token"},
			{name: "json header, garbage rest", tok: b64json(t, map[string]string{"alg": "EdDSA", "kid": e.Key.ID, "typ": "at+jwt"}) + ".e30.", code: "invalid_token"},
			{name: "oversized", tok: strings.Repeat("a", token.MaxTokenLen+1), code: "invalid_token"},
			{name: "oversized valid prefix", tok: e.issue(t, e.Normal, nil).AccessToken + strings.Repeat("A", token.MaxTokenLen), code: "invalid_token"},
			{name: "a client secret", tok: e.Normal.Secret, code: "invalid_token"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := e.validate(t, tt.tok)
				wantNoEcho(t, r, tt.tok)
				wantError(t, r, http.StatusUnauthorized, "invalid_token")
				wantBearerChallenge(t, r, tt.code)
			})
		}
	})
}

// otherKey is an Ed25519 key this server does not know.
var otherKey = keysettest.MustKey

// tamperClaims changes the claims of tok and keeps its header and signature.
func tamperClaims(tb testing.TB, tok string, edit func(claims map[string]any)) string {
	tb.Helper()
	parts := strings.Split(tok, ".")
	_, c := segments(tb, tok)
	edit(c)
	return parts[0] + "." + b64json(tb, c) + "." + parts[2]
}

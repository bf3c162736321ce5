package handlers_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestIssueClientAuthentication covers RFC 6749 §2.3.1: HTTP Basic with
// form-urlencoded id and secret, or client_secret_post, never both.
func TestIssueClientAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	grant := "grant_type=client_credentials"
	tests := []struct {
		name   string
		auth   string // Authorization header, "" for none
		again  string // a second Authorization header, "" for none
		body   string
		status int
		code   string // error code, "" on success
		client string // client_id of the token on success
	}{
		{name: "basic", auth: basic(e.Normal.ID, e.Normal.Secret), body: grant, status: 200, client: e.Normal.ID},
		{name: "basic scheme in lower case", auth: "basic " + strings.TrimPrefix(basic(e.Normal.ID, e.Normal.Secret), "Basic "), body: grant, status: 200, client: e.Normal.ID},
		{name: "client_secret_post", body: grant + "&client_id=" + e.Normal.ID + "&client_secret=" + e.Normal.Secret, status: 200, client: e.Normal.ID},
		{name: "basic with client_id in the body too", auth: basic(e.Normal.ID, e.Normal.Secret), body: grant + "&client_id=" + e.Normal.ID, status: 200, client: e.Normal.ID},
		{name: "basic with form-urlencoded id", auth: basic(e.Partner.ID, e.Partner.Secret), body: grant, status: 200, client: e.Partner.ID},
		{name: "client_secret_post with form-urlencoded id", body: grant + "&" + url.Values{"client_id": {e.Partner.ID}, "client_secret": {e.Partner.Secret}}.Encode(), status: 200, client: e.Partner.ID},
		// ":" splits id from secret and "+" decodes to a space: an id sent raw must not authenticate.
		{name: "basic with the id not urlencoded", auth: "Basic " + base64.StdEncoding.EncodeToString([]byte(e.Partner.ID+":"+e.Partner.Secret)), body: grant, status: 401, code: "invalid_client"},
		{name: "basic wrong secret", auth: basic(e.Normal.ID, e.Admin.Secret), body: grant, status: 401, code: "invalid_client"},
		{name: "basic empty secret", auth: basic(e.Normal.ID, ""), body: grant, status: 401, code: "invalid_client"},
		{name: "basic unknown client", auth: basic("nobody", e.Normal.Secret), body: grant, status: 401, code: "invalid_client"},
		{name: "basic not base64", auth: "Basic !!!", body: grant, status: 401, code: "invalid_client"},
		{name: "basic without colon", auth: "Basic " + base64.StdEncoding.EncodeToString([]byte(e.Normal.ID)), body: grant, status: 401, code: "invalid_client"},
		{name: "bearer instead of basic", auth: "Bearer " + e.Normal.Secret, body: grant, status: 401, code: "invalid_client"},
		{name: "post wrong secret", body: grant + "&client_id=" + e.Normal.ID + "&client_secret=" + e.Admin.Secret, status: 401, code: "invalid_client"},
		{name: "post unknown client", body: grant + "&client_id=nobody&client_secret=" + e.Normal.Secret, status: 401, code: "invalid_client"},
		{name: "post id without secret", body: grant + "&client_id=" + e.Normal.ID, status: 401, code: "invalid_client"},
		{name: "no credentials", body: grant, status: 401, code: "invalid_client"},
		{name: "both methods", auth: basic(e.Normal.ID, e.Normal.Secret), body: grant + "&client_id=" + e.Normal.ID + "&client_secret=" + e.Normal.Secret, status: 400, code: "invalid_request"},
		// Several Authorization headers: none is taken (jwtpolicy.Authorization).
		{name: "basic twice", auth: basic(e.Normal.ID, e.Normal.Secret), again: basic(e.Normal.ID, e.Normal.Secret), body: grant, status: 400, code: "invalid_request"},
		{name: "basic, then another client's", auth: basic(e.Normal.ID, e.Normal.Secret), again: basic(e.Admin.ID, e.Admin.Secret), body: grant, status: 400, code: "invalid_request"},
		{name: "empty, then basic", auth: " ", again: basic(e.Normal.ID, e.Normal.Secret), body: grant, status: 400, code: "invalid_request"},
		{name: "basic and another client_id", auth: basic(e.Normal.ID, e.Normal.Secret), body: grant + "&client_id=" + e.Admin.ID, status: 400, code: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{"Content-Type": {formType}}
			if tt.auth != "" {
				hdr.Set("Authorization", tt.auth)
			}
			if tt.again != "" {
				hdr.Add("Authorization", tt.again)
			}
			r := e.do(t, http.MethodPost, "/token", strings.NewReader(tt.body), hdr)
			if tt.code != "" {
				wantNoEcho(t, r, e.Normal.Secret, e.Admin.Secret, e.Partner.Secret)
				wantError(t, r, tt.status, tt.code)
				if tt.status == http.StatusUnauthorized {
					wantBasicChallenge(t, r)
				}
				return
			}
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.status, r.Body)
			}
			var got issued
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			if _, claims := segments(t, got.AccessToken); claims["client_id"] != tt.client {
				t.Errorf("client_id %v, want %q", claims["client_id"], tt.client)
			}
		})
	}
}

// TestIssueResponse checks the RFC 6749 §5.1 response and the token in it.
func TestIssueResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.post(t, "/token", &e.Normal, url.Values{"grant_type": {"client_credentials"}})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if got := r.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store (RFC 6749 §5.1)", got)
	}
	if got := r.Header.Get("Pragma"); got != "no-cache" {
		t.Errorf("Pragma %q, want no-cache", got)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	var got issued
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.TokenType != "Bearer" {
		t.Errorf("token_type %q, want Bearer", got.TokenType)
	}
	if got.ExpiresIn != 3600 {
		t.Errorf("expires_in %d, want the default 3600", got.ExpiresIn)
	}
	if got.Scope != "orders:read orders:write" {
		t.Errorf("scope %q, want all of the client's", got.Scope)
	}
	// jti is a quoted decimal string (JavaScript loses precision above 2^53) equal to the token's jti claim.
	var id string
	if err := json.Unmarshal(got.JTI, &id); err != nil {
		t.Fatalf("jti %s is not a JSON string: %v", got.JTI, err)
	}
	header, claims := segments(t, got.AccessToken)
	if claims["jti"] != id {
		t.Errorf("jti claim %v, jti %q: want equal", claims["jti"], id)
	}
	want := map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": e.Key.ID}
	for k, v := range want {
		if header[k] != v {
			t.Errorf("header %s = %v, want %v", k, header[k], v)
		}
	}
	if claims["iss"] != testIssuer || claims["sub"] != e.Normal.ID || claims["client_id"] != e.Normal.ID || claims["scope"] != got.Scope {
		t.Errorf("claims %v", claims)
	}
	if aud, _ := claims["aud"].([]any); len(aud) != 1 || aud[0] != testAudience {
		t.Errorf("aud %v, want [%q]", claims["aud"], testAudience)
	}
	iat, exp := unixClaim(t, claims, "iat"), unixClaim(t, claims, "exp")
	if iat != e.Clock.Now().Unix() || exp-iat != got.ExpiresIn {
		t.Errorf("iat %d exp %d, want iat %d and exp-iat = expires_in %d", iat, exp, e.Clock.Now().Unix(), got.ExpiresIn)
	}
	if v := e.validate(t, got.AccessToken); v.Status != http.StatusOK {
		t.Errorf("the issued token does not validate: %d %s", v.Status, v.Body)
	}
}

// TestIssueParameters covers grant_type, scope, subject and expires_in.
func TestIssueParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name   string
		as     client
		form   url.Values
		code   string // error code, "" on success
		scope  string // on success
		sub    string // on success
		ttl    int64  // expires_in on success
		status int    // on failure; 400 unless set
	}{
		{name: "defaults", as: e.Normal, form: url.Values{}, scope: "orders:read orders:write", sub: e.Normal.ID, ttl: 3600},
		{name: "missing grant_type", as: e.Normal, form: url.Values{"grant_type": nil}, code: "invalid_request"},
		{name: "empty grant_type", as: e.Normal, form: url.Values{"grant_type": {""}}, code: "invalid_request"},
		{name: "password grant", as: e.Normal, form: url.Values{"grant_type": {"password"}}, code: "unsupported_grant_type"},
		{name: "authorization_code grant", as: e.Normal, form: url.Values{"grant_type": {"authorization_code"}}, code: "unsupported_grant_type"},
		{name: "grant_type in other case", as: e.Normal, form: url.Values{"grant_type": {"Client_Credentials"}}, code: "unsupported_grant_type"},
		{name: "scope subset", as: e.Normal, form: url.Values{"scope": {"orders:read"}}, scope: "orders:read", sub: e.Normal.ID, ttl: 3600},
		{name: "scope repeated entry", as: e.Normal, form: url.Values{"scope": {"orders:read orders:read"}}, scope: "orders:read", sub: e.Normal.ID, ttl: 3600},
		{name: "scope outside the client's", as: e.Normal, form: url.Values{"scope": {"orders:read admin"}}, code: "invalid_scope"},
		{name: "scope of another client", as: e.Short, form: url.Values{"scope": {"orders:write"}}, code: "invalid_scope"},
		{name: "scope with two spaces", as: e.Normal, form: url.Values{"scope": {"orders:read  orders:write"}}, code: "invalid_scope"},
		{name: "scope with a quote", as: e.Normal, form: url.Values{"scope": {`orders"read`}}, code: "invalid_scope"},
		{name: "subject by may_set_subject client", as: e.Gateway, form: url.Values{"subject": {"user-42@example.com"}}, scope: "orders:read orders:write", sub: "user-42@example.com", ttl: 3600},
		{name: "subject by other client", as: e.Normal, form: url.Values{"subject": {"user-42"}}, code: "invalid_request"},
		{name: "subject equal to own id", as: e.Normal, form: url.Values{"subject": {e.Normal.ID}}, scope: "orders:read orders:write", sub: e.Normal.ID, ttl: 3600},
		{name: "subject with braces", as: e.Gateway, form: url.Values{"subject": {"a{b}"}}, code: "invalid_request"},
		{name: "subject with a space", as: e.Gateway, form: url.Values{"subject": {"a b"}}, code: "invalid_request"},
		{name: "subject with a newline", as: e.Gateway, form: url.Values{"subject": {"a\r\nX-Evil: 1"}}, code: "invalid_request"},
		{name: "subject too long", as: e.Gateway, form: url.Values{"subject": {strings.Repeat("a", 129)}}, code: "invalid_request"},
		{name: "expires_in shorter", as: e.Normal, form: url.Values{"expires_in": {"60"}}, scope: "orders:read orders:write", sub: e.Normal.ID, ttl: 60},
		{name: "expires_in capped by global max", as: e.Normal, form: url.Values{"expires_in": {"86400"}}, scope: "orders:read orders:write", sub: e.Normal.ID, ttl: int64(testMaxTTL / time.Second)},
		{name: "expires_in capped by client max_ttl", as: e.Short, form: url.Values{"expires_in": {"3600"}}, scope: "orders:read", sub: e.Short.ID, ttl: int64(shortMaxTTL / time.Second)},
		{name: "default ttl capped by client max_ttl", as: e.Short, form: url.Values{}, scope: "orders:read", sub: e.Short.ID, ttl: int64(shortMaxTTL / time.Second)},
		{name: "expires_in non-numeric", as: e.Normal, form: url.Values{"expires_in": {"soon"}}, code: "invalid_request"},
		{name: "expires_in negative", as: e.Normal, form: url.Values{"expires_in": {"-60"}}, code: "invalid_request"},
		{name: "expires_in zero", as: e.Normal, form: url.Values{"expires_in": {"0"}}, code: "invalid_request"},
		{name: "expires_in fractional", as: e.Normal, form: url.Values{"expires_in": {"1.5"}}, code: "invalid_request"},
		{name: "expires_in overflows", as: e.Normal, form: url.Values{"expires_in": {"99999999999999999999"}}, code: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := url.Values{"grant_type": {"client_credentials"}}
			for k, v := range tt.form {
				if v == nil {
					delete(form, k)
				} else {
					form[k] = v
				}
			}
			r := e.post(t, "/token", &tt.as, form)
			if tt.code != "" {
				wantError(t, r, cmpOr(tt.status, http.StatusBadRequest), tt.code)
				return
			}
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			var got issued
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			_, claims := segments(t, got.AccessToken)
			if got.Scope != tt.scope || claims["scope"] != tt.scope {
				t.Errorf("scope %q (claim %v), want %q", got.Scope, claims["scope"], tt.scope)
			}
			if claims["sub"] != tt.sub {
				t.Errorf("sub %v, want %q", claims["sub"], tt.sub)
			}
			if claims["client_id"] != tt.as.ID {
				t.Errorf("client_id %v, want %q", claims["client_id"], tt.as.ID)
			}
			if got.ExpiresIn != tt.ttl {
				t.Errorf("expires_in %d, want %d", got.ExpiresIn, tt.ttl)
			}
			if d := unixClaim(t, claims, "exp") - unixClaim(t, claims, "iat"); d != tt.ttl {
				t.Errorf("exp - iat = %d, want %d", d, tt.ttl)
			}
		})
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// TestIssueRequestFormat covers what RFC 6749 §3.2 asks of the request itself.
func TestIssueRequestFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	auth := basic(e.Normal.ID, e.Normal.Secret)
	grant := "grant_type=client_credentials"
	tests := []struct {
		name   string
		path   string
		ctype  string
		body   string
		status int
		code   string
	}{
		{name: "form with charset", path: "/token", ctype: formType + "; charset=utf-8", body: grant, status: 200},
		{name: "json body", path: "/token", ctype: "application/json", body: `{"grant_type":"client_credentials"}`, status: 400, code: "invalid_request"},
		{name: "multipart", path: "/token", ctype: "multipart/form-data; boundary=x", body: "--x\r\nContent-Disposition: form-data; name=\"grant_type\"\r\n\r\nclient_credentials\r\n--x--\r\n", status: 400, code: "invalid_request"},
		{name: "no content type", path: "/token", body: grant, status: 400, code: "invalid_request"},
		{name: "repeated grant_type", path: "/token", ctype: formType, body: grant + "&" + grant, status: 400, code: "invalid_request"},
		{name: "repeated scope", path: "/token", ctype: formType, body: grant + "&scope=orders:read&scope=orders:write", status: 400, code: "invalid_request"},
		{name: "malformed escape", path: "/token", ctype: formType, body: grant + "&scope=%zz", status: 400, code: "invalid_request"},
		{name: "oversized body", path: "/token", ctype: formType, body: grant + "&pad=" + strings.Repeat("a", 100<<10), status: 400, code: "invalid_request"},
		{name: "params in the query string", path: "/token?" + grant, ctype: formType, body: "", status: 400, code: "invalid_request"},
		{name: "extra param in the query string", path: "/token?scope=orders:read", ctype: formType, body: grant, status: 400, code: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{"Authorization": {auth}}
			if tt.ctype != "" {
				hdr.Set("Content-Type", tt.ctype)
			}
			r := e.do(t, http.MethodPost, tt.path, strings.NewReader(tt.body), hdr)
			if tt.code != "" {
				wantError(t, r, tt.status, tt.code)
				return
			}
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
			}
		})
	}
}

// TestOAuth2ClientCredentials gets a token with golang.org/x/oauth2, as an
// unmodified third-party client would.
func TestOAuth2ClientCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.WithValue(t.Context(), oauth2.HTTPClient, e.HTTP)
	tests := []struct {
		name  string
		as    client
		style oauth2.AuthStyle
	}{
		{name: "auto-detect", as: e.Normal, style: oauth2.AuthStyleAutoDetect},
		{name: "in header", as: e.Normal, style: oauth2.AuthStyleInHeader},
		{name: "in params", as: e.Normal, style: oauth2.AuthStyleInParams},
		// x/oauth2 form-urlencodes the id in the header, as RFC 6749 §2.3.1 asks.
		{name: "in header, id needs encoding", as: e.Partner, style: oauth2.AuthStyleInHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := clientcredentials.Config{
				ClientID:     tt.as.ID,
				ClientSecret: tt.as.Secret,
				TokenURL:     e.URL + "/token",
				Scopes:       []string{"orders:read"},
				AuthStyle:    tt.style,
			}
			tok, err := cfg.Token(ctx)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			if tok.TokenType != "Bearer" || tok.AccessToken == "" {
				t.Fatalf("token %+v", tok)
			}
			if d := time.Until(tok.Expiry); d < 59*time.Minute || d > time.Hour+time.Minute {
				t.Errorf("expiry in %v, want about an hour", d)
			}
			if scope, _ := tok.Extra("scope").(string); scope != "orders:read" {
				t.Errorf("scope %q, want orders:read", scope)
			}
			r := e.validate(t, tok.AccessToken)
			if r.Status != http.StatusOK {
				t.Fatalf("validate: %d %s", r.Status, r.Body)
			}
			if got := r.Header.Get("X-Auth-Client"); got != tt.as.ID {
				t.Errorf("X-Auth-Client %q, want %q", got, tt.as.ID)
			}
		})
	}

	t.Run("wrong secret", func(t *testing.T) {
		cfg := clientcredentials.Config{ClientID: e.Normal.ID, ClientSecret: "wrong", TokenURL: e.URL + "/token", AuthStyle: oauth2.AuthStyleInHeader}
		_, err := cfg.Token(ctx)
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) {
			t.Fatalf("err %v, want an *oauth2.RetrieveError", err)
		}
		if re.Response.StatusCode != http.StatusUnauthorized || re.ErrorCode != "invalid_client" {
			t.Errorf("status %d error %q, want 401 invalid_client", re.Response.StatusCode, re.ErrorCode)
		}
	})
}

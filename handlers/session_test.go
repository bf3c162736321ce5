package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// TestIntrospect covers RFC 7662.
func TestIntrospect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.issue(t, e.Normal, url.Values{"scope": {"orders:read"}})
	var jti string
	if err := json.Unmarshal(tok.JTI, &jti); err != nil {
		t.Fatal(err)
	}

	t.Run("active", func(t *testing.T) {
		// Another client that may introspect asks, with client_secret_post.
		r := e.do(t, http.MethodPost, "/token/introspect", strings.NewReader(url.Values{
			"token": {tok.AccessToken}, "client_id": {e.Auditor.ID}, "client_secret": {e.Auditor.Secret},
		}.Encode()), http.Header{"Content-Type": {formType}})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", got)
		}
		body := r.object(t)
		iat := e.Clock.Now().Unix()
		want := map[string]any{
			"active": true, "sub": e.Normal.ID, "client_id": e.Normal.ID, "scope": "orders:read",
			"iss": testIssuer, "iat": json.Number(itoa(iat)), "exp": json.Number(itoa(iat + 3600)),
			"jti": jti, "worker_id": json.Number(itoa(testWorker)), "token_type": "Bearer",
		}
		for k, v := range want {
			if body[k] != v {
				t.Errorf("%s = %#v, want %#v", k, body[k], v)
			}
		}
		if aud, _ := body["aud"].([]any); len(aud) != 1 || aud[0] != testAudience {
			t.Errorf("aud %v, want [%q]", body["aud"], testAudience)
		}
	})

	inactive := func(t *testing.T, raw string) {
		t.Helper()
		r := e.post(t, "/token/introspect", &e.Normal, url.Values{"token": {raw}})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		// Nothing but active:false: an inactive token's claims are not told.
		if got := strings.TrimSpace(string(r.Body)); got != `{"active":false}` {
			t.Errorf("body %s, want {\"active\":false}", got)
		}
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", got)
		}
	}
	t.Run("garbage", func(t *testing.T) { inactive(t, "not-a-token") })
	t.Run("oversized", func(t *testing.T) { inactive(t, strings.Repeat("x", 5000)) })
	t.Run("tampered", func(t *testing.T) {
		inactive(t, tamperClaims(t, tok.AccessToken, func(c map[string]any) { c["scope"] = "orders:write" }))
	})
	t.Run("forged by another key", func(t *testing.T) { inactive(t, resign(t, tok.AccessToken, otherKey(t).Private, nil)) })

	t.Run("unauthenticated", func(t *testing.T) {
		r := e.post(t, "/token/introspect", nil, url.Values{"token": {tok.AccessToken}})
		wantError(t, r, http.StatusUnauthorized, "invalid_client")
		wantBasicChallenge(t, r)
		if strings.Contains(string(r.Body), e.Normal.ID) {
			t.Errorf("an unauthenticated caller learned about the token: %s", r.Body)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		r := e.post(t, "/token/introspect", &client{ID: e.Normal.ID, Secret: e.Short.Secret}, url.Values{"token": {tok.AccessToken}})
		wantError(t, r, http.StatusUnauthorized, "invalid_client")
	})
	t.Run("bearer token as client authentication", func(t *testing.T) {
		r := e.do(t, http.MethodPost, "/token/introspect", strings.NewReader(url.Values{"token": {tok.AccessToken}}.Encode()),
			http.Header{"Content-Type": {formType}, "Authorization": {"Bearer " + tok.AccessToken}})
		wantError(t, r, http.StatusUnauthorized, "invalid_client")
	})
	t.Run("missing token", func(t *testing.T) {
		wantError(t, e.post(t, "/token/introspect", &e.Normal, url.Values{}), http.StatusBadRequest, "invalid_request")
	})

	// RFC 7662 §4: a client without may_introspect learns nothing of
	// another client's token, not even that it exists.
	for _, tc := range []struct {
		name   string
		caller client
		active bool
	}{
		{"own token", e.Normal, true},
		{"another client's token", e.Short, false},
		{"another client's token, may_introspect", e.Auditor, true},
		{"another client's token, admin", e.Admin, true},
	} {
		t.Run("privilege/"+tc.name, func(t *testing.T) {
			r := e.post(t, "/token/introspect", &tc.caller, url.Values{"token": {tok.AccessToken}})
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			body := r.object(t)
			if got := body["active"]; got != tc.active {
				t.Errorf("active = %v, want %v", got, tc.active)
			}
			if !tc.active && len(body) != 1 {
				t.Errorf("body %s, want {\"active\":false} only", r.Body)
			}
		})
	}

	// Last: these change the token or the clock.
	t.Run("revoked", func(t *testing.T) {
		other := e.issue(t, e.Normal, nil).AccessToken
		if r := e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {other}}); r.Status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		inactive(t, other)
	})
	t.Run("expired", func(t *testing.T) {
		e.Clock.Add(time.Hour + time.Minute)
		inactive(t, tok.AccessToken)
	})
}

// TestRevoke covers RFC 7009.
func TestRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	valid := func(t *testing.T, tok string) bool {
		t.Helper()
		r := e.validate(t, tok)
		if r.Status != http.StatusOK && r.Status != http.StatusUnauthorized {
			t.Fatalf("validate: status %d: %s", r.Status, r.Body)
		}
		return r.Status == http.StatusOK
	}

	t.Run("own token", func(t *testing.T) {
		tok := e.issue(t, e.Normal, nil).AccessToken
		r := e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {tok}, "token_type_hint": {"access_token"}})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if valid(t, tok) {
			t.Error("the token still validates after its revocation")
		}
		// Revoking it again is fine too (RFC 7009 §2.2).
		if r := e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {tok}}); r.Status != http.StatusOK {
			t.Errorf("second revocation: status %d: %s", r.Status, r.Body)
		}
	})
	t.Run("own token by client_secret_post", func(t *testing.T) {
		tok := e.issue(t, e.Short, nil).AccessToken
		r := e.do(t, http.MethodPost, "/token/revoke", strings.NewReader(url.Values{
			"token": {tok}, "client_id": {e.Short.ID}, "client_secret": {e.Short.Secret},
		}.Encode()), http.Header{"Content-Type": {formType}})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if valid(t, tok) {
			t.Error("the token still validates after its revocation")
		}
	})
	for _, raw := range []string{"garbage", "a.b.c", resign(t, e.issue(t, e.Normal, nil).AccessToken, otherKey(t).Private, nil)} {
		t.Run("unknown token "+raw[:min(len(raw), 8)], func(t *testing.T) {
			r := e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {raw}})
			if r.Status != http.StatusOK {
				t.Errorf("status %d: %s, want 200 (RFC 7009 §2.2)", r.Status, r.Body)
			}
		})
	}
	t.Run("another client's token", func(t *testing.T) {
		tok := e.issue(t, e.Normal, nil).AccessToken
		for _, as := range []client{e.Partner, e.Gateway, e.Short} {
			wantError(t, e.post(t, "/token/revoke", &as, url.Values{"token": {tok}}), http.StatusForbidden, "unauthorized_client")
		}
		if !valid(t, tok) {
			t.Fatal("a refused revocation revoked the token")
		}
		// An admin may revoke any token.
		if r := e.post(t, "/token/revoke", &e.Admin, url.Values{"token": {tok}}); r.Status != http.StatusOK {
			t.Fatalf("admin: status %d: %s", r.Status, r.Body)
		}
		if valid(t, tok) {
			t.Error("the token still validates after an admin revoked it")
		}
	})
	t.Run("unauthenticated", func(t *testing.T) {
		tok := e.issue(t, e.Normal, nil).AccessToken
		r := e.post(t, "/token/revoke", nil, url.Values{"token": {tok}})
		wantError(t, r, http.StatusUnauthorized, "invalid_client")
		wantBasicChallenge(t, r)
		r = e.post(t, "/token/revoke", &client{ID: e.Normal.ID, Secret: "guess"}, url.Values{"token": {tok}})
		wantError(t, r, http.StatusUnauthorized, "invalid_client")
		if !valid(t, tok) {
			t.Fatal("an unauthenticated revocation revoked the token")
		}
	})
	t.Run("missing token", func(t *testing.T) {
		wantError(t, e.post(t, "/token/revoke", &e.Normal, url.Values{}), http.StatusBadRequest, "invalid_request")
	})
	t.Run("token in the query string", func(t *testing.T) {
		tok := e.issue(t, e.Normal, nil).AccessToken
		r := e.do(t, http.MethodPost, "/token/revoke?token="+url.QueryEscape(tok), strings.NewReader(""),
			http.Header{"Content-Type": {formType}, "Authorization": {basic(e.Normal.ID, e.Normal.Secret)}})
		wantError(t, r, http.StatusBadRequest, "invalid_request")
	})
}

// TestRevokeSubject covers DELETE /subjects/{subject}/tokens.
func TestRevokeSubject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var victim []string
	for _, scope := range []string{"orders:read", "orders:write", "orders:read orders:write", ""} {
		victim = append(victim, e.issue(t, e.Gateway, url.Values{"subject": {"user-42"}, "scope": {scope}}).AccessToken)
	}
	bystander := e.issue(t, e.Gateway, url.Values{"subject": {"user-7"}}).AccessToken
	client := e.issue(t, e.Normal, nil).AccessToken
	all := append([]string{bystander, client}, victim...)
	for _, tok := range all {
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Fatalf("before: status %d: %s", r.Status, r.Body)
		}
	}

	del := func(t *testing.T, subject, auth string) *response {
		t.Helper()
		hdr := http.Header{}
		if auth != "" {
			hdr.Set("Authorization", auth)
		}
		return e.do(t, http.MethodDelete, "/subjects/"+subject+"/tokens", nil, hdr)
	}
	refused := []struct {
		name, auth string
		status     int
		code       string
	}{
		{name: "no auth", status: 401, code: "invalid_client"},
		{name: "wrong admin secret", auth: basic(e.Admin.ID, e.Normal.Secret), status: 401, code: "invalid_client"},
		{name: "bearer token", auth: "Bearer " + client, status: 401, code: "invalid_client"},
		{name: "non-admin", auth: basic(e.Normal.ID, e.Normal.Secret), status: 403, code: "unauthorized_client"},
		{name: "may_set_subject is not admin", auth: basic(e.Gateway.ID, e.Gateway.Secret), status: 403, code: "unauthorized_client"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			r := del(t, "user-42", tt.auth)
			wantError(t, r, tt.status, tt.code)
			if tt.status == http.StatusUnauthorized {
				wantBasicChallenge(t, r)
			}
		})
	}
	for _, tok := range victim {
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Fatalf("a refused request revoked a token: %d %s", r.Status, r.Body)
		}
	}

	t.Run("bad subject", func(t *testing.T) {
		wantError(t, del(t, "a%7Bb%7D", basic(e.Admin.ID, e.Admin.Secret)), http.StatusBadRequest, "invalid_request")
	})
	t.Run("admin", func(t *testing.T) {
		r := del(t, "user-42", basic(e.Admin.ID, e.Admin.Secret))
		if r.Status != http.StatusNoContent || len(r.Body) != 0 {
			t.Fatalf("status %d body %q, want 204 and no body", r.Status, r.Body)
		}
		for i, tok := range victim {
			r := e.validate(t, tok)
			wantError(t, r, http.StatusUnauthorized, "invalid_token")
			if t.Failed() {
				t.Fatalf("token %d of the subject still validates", i)
			}
		}
		for _, tok := range []string{bystander, client} {
			if r := e.validate(t, tok); r.Status != http.StatusOK {
				t.Errorf("another subject's token: status %d: %s", r.Status, r.Body)
			}
		}
		// Revoking again, or a subject with no tokens, is fine.
		for _, s := range []string{"user-42", "nobody"} {
			if r := del(t, s, basic(e.Admin.ID, e.Admin.Secret)); r.Status != http.StatusNoContent {
				t.Errorf("%s: status %d: %s", s, r.Status, r.Body)
			}
		}
		if r := e.validate(t, e.issue(t, e.Gateway, url.Values{"subject": {"user-42"}}).AccessToken); r.Status != http.StatusOK {
			t.Errorf("a token issued after the revocation: status %d: %s", r.Status, r.Body)
		}
	})
}

// TestRevokeClient covers DELETE /clients/{client}/tokens: every token of
// the client, whatever its subject, and nothing else.
func TestRevokeClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	victim := []string{
		e.issue(t, e.Gateway, url.Values{"subject": {"ceo"}}).AccessToken,
		e.issue(t, e.Gateway, url.Values{"subject": {"user-7"}}).AccessToken,
		e.issue(t, e.Gateway, nil).AccessToken,
	}
	bystander := e.issue(t, e.Normal, nil).AccessToken
	del := func(t *testing.T, client, auth string) *response {
		t.Helper()
		return e.do(t, http.MethodDelete, "/clients/"+client+"/tokens", nil, http.Header{"Authorization": {auth}})
	}
	wantError(t, del(t, e.Gateway.ID, basic(e.Gateway.ID, e.Gateway.Secret)), http.StatusForbidden, "unauthorized_client")
	wantError(t, del(t, e.Gateway.ID, basic(e.Admin.ID, e.Normal.Secret)), http.StatusUnauthorized, "invalid_client")
	wantError(t, del(t, "a%7Bb%7D", basic(e.Admin.ID, e.Admin.Secret)), http.StatusBadRequest, "invalid_request")
	for _, tok := range victim {
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Fatalf("a refused request revoked a token: %d %s", r.Status, r.Body)
		}
	}
	if r := del(t, e.Gateway.ID, basic(e.Admin.ID, e.Admin.Secret)); r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("admin: status %d body %q, want 204 and no body", r.Status, r.Body)
	}
	for i, tok := range victim {
		wantError(t, e.validate(t, tok), http.StatusUnauthorized, "invalid_token")
		if t.Failed() {
			t.Fatalf("token %d of the client still validates", i)
		}
	}
	if r := e.validate(t, bystander); r.Status != http.StatusOK {
		t.Errorf("another client's token: status %d: %s", r.Status, r.Body)
	}
}

// TestIssueAfterRevokeClient: right after DELETE /clients/{client}/tokens,
// POST /token never answers 200 with a token that does not validate: it
// answers 503 temporarily_unavailable with a Retry-After within the
// leeway, not counted as the service unavailable, until a new token is past
// the client's revocation; every token it hands out validates. Tokens are
// requested every 500 ms for 8 s on the service's and the IDs' clock.
func TestIssueAfterRevokeClient(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Now().Truncate(time.Second))
	e := newEnv(t, withIDClock(clock.Now))
	e.Clock.Set(clock.Now())
	for _, c := range []client{e.Gateway, e.Opaque} {
		t.Run(c.ID, func(t *testing.T) {
			old := e.issue(t, c, nil).AccessToken
			r := e.do(t, http.MethodDelete, "/clients/"+c.ID+"/tokens", nil, http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}})
			if r.Status != http.StatusNoContent {
				t.Fatalf("revoke: status %d: %s", r.Status, r.Body)
			}
			wantError(t, e.validate(t, old), http.StatusUnauthorized, "invalid_token")
			unavailable := e.metrics(t)["snowtoken_unavailable_total"]
			refused, handed := 0, 0
			for i := range 16 {
				after := time.Duration(i) * 500 * time.Millisecond
				r := e.post(t, "/token", &c, url.Values{"grant_type": {"client_credentials"}})
				switch r.Status {
				case http.StatusOK:
					handed++
					var out issued
					if err := json.Unmarshal(r.Body, &out); err != nil {
						t.Fatal(err)
					}
					if v := e.validate(t, out.AccessToken); v.Status != http.StatusOK {
						t.Errorf("the token handed out %v after the revocation: validate %d %s", after, v.Status, v.Body)
					}
				case http.StatusServiceUnavailable:
					refused++
					wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
					if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 6 {
						t.Errorf("%v after: Retry-After %q, want 1 to 6 s", after, r.Header.Get("Retry-After"))
					}
				default:
					t.Fatalf("%v after: status %d: %s", after, r.Status, r.Body)
				}
				clock.Add(500 * time.Millisecond)
				e.Clock.Add(500 * time.Millisecond)
			}
			if refused == 0 || handed == 0 {
				t.Errorf("%d refused, %d handed out: want both (the window, then valid tokens)", refused, handed)
			}
			if got := e.metrics(t)["snowtoken_unavailable_total"]; got != unavailable {
				t.Errorf("snowtoken_unavailable_total %s -> %s: the revocation window counted as unavailable", unavailable, got)
			}
		})
	}
}

// TestRevokeUnknownKid: POST /token/revoke of a token whose kid the
// replica does not hold answers 200 for a dropped key's tombstone and, once
// the replica's keys are known current (a keys directory whose keys.json is
// the one in force), for any made-up kid; 503 temporarily_unavailable only
// when it cannot tell (keys made in memory, keys.json changed since it was
// loaded). None of it counts in snowtoken_unavailable_total: anyone can
// send a made-up kid.
func TestRevokeUnknownKid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.issue(t, e.Normal, nil).AccessToken
	gone := otherKey(t)
	dropped := resign(t, tok, gone.Private, func(h, _ map[string]any) { h["kid"] = gone.ID })
	// madeUp is tok under a made-up kid, issued ago before now.
	madeUp := func(ago time.Duration) string {
		return resign(t, tok, otherKey(t).Private, func(h, c map[string]any) {
			h["kid"] = "made-up"
			c["iat"] = e.Clock.Now().Add(-ago).Unix()
		})
	}
	madeUpNew := madeUp(0)
	madeUpSettled := madeUp(keyset.Propagation + token.DefaultLeeway + time.Minute) // its key would be everywhere
	madeUpExpired := madeUp(testMaxTTL + token.DefaultLeeway + time.Minute)         // expired wherever its key is
	revoke := func(t *testing.T, raw string) *response {
		t.Helper()
		return e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {raw}})
	}
	unavailable := e.metrics(t)["snowtoken_unavailable_total"]

	// The env's keys are made in memory, as a plain list's: undecidable,
	// unless the token has expired wherever its key is.
	r := revoke(t, madeUpSettled)
	wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if r := revoke(t, madeUpExpired); r.Status != http.StatusOK {
		t.Errorf("made-up kid of an expired token, keys in memory: status %d %s, want 200", r.Status, r.Body)
	}

	// A keys directory with e.Key active and gone's tombstone.
	dir := t.TempDir()
	pemBytes, err := e.Key.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	manifest, err := json.Marshal(keyset.Manifest{
		Keys:    []keyset.Entry{{File: "k.pem", Kid: e.Key.ID, State: keyset.Active, Published: now, Activated: now}},
		Dropped: []keyset.DroppedKey{{Kid: gone.ID, Dropped: now.Add(-time.Hour)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"k.pem": pemBytes, keyset.ManifestFile: manifest} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := keyset.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := e.Svc.WithKeys(ks)
	if err != nil {
		t.Fatal(err)
	}
	e.Server.Swap(svc, e.Clients, handlers.Version{Keys: ks.Version()})
	for name, raw := range map[string]string{"dropped key": dropped, "made-up kid": madeUpSettled} {
		if r := revoke(t, raw); r.Status != http.StatusOK {
			t.Errorf("%s with current keys: status %d %s, want 200", name, r.Status, r.Body)
		}
	}
	// A key made active at once may still be on its way to this replica.
	wantError(t, revoke(t, madeUpNew), http.StatusServiceUnavailable, "temporarily_unavailable")
	if r := e.validate(t, tok); r.Status != http.StatusOK {
		t.Errorf("the real token after the revocations of its look-alikes: %d %s", r.Status, r.Body)
	}

	// keys.json changed and not loaded (a reload pending or refused).
	if err := os.WriteFile(filepath.Join(dir, keyset.ManifestFile), append(manifest, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	wantError(t, revoke(t, madeUpSettled), http.StatusServiceUnavailable, "temporarily_unavailable")
	if r := revoke(t, dropped); r.Status != http.StatusOK {
		t.Errorf("dropped key with keys.json changed: status %d %s, want 200 (its tombstone is loaded)", r.Status, r.Body)
	}
	if got := e.metrics(t)["snowtoken_unavailable_total"]; got != unavailable {
		t.Errorf("snowtoken_unavailable_total %s -> %s: unknown kids counted as the service unavailable", unavailable, got)
	}
}

package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// TestRevocationLogThroughHandlers: each revocation the HTTP API offers (a
// JWT and an opaque token at POST /token/revoke, a subject's and a client's
// tokens at DELETE) answers only once its record and its entry in the
// revocation log are written: exactly one entry each, saying what was
// revoked. With the log unwritable, each answers 503 and revokes nothing.
func TestRevocationLogThroughHandlers(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	e := newEnv(t, withRedis(r.Client, r.Prefix))
	ctx := t.Context()
	logKey := e.Store.LogKey()
	jti := func(iss issued) string { return strings.Trim(string(iss.JTI), `"`) }
	admin := http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}}

	jwt := e.issue(t, e.Gateway, url.Values{"subject": {"alice"}})
	opaque := e.issue(t, e.Opaque, url.Values{"subject": {"alice"}})
	victim := e.issue(t, e.Normal, nil)
	revokes := []struct {
		name   string
		status int
		revoke func() *response
		want   func() string // the entry's fields
	}{
		{"jwt", http.StatusOK,
			func() *response {
				return e.post(t, "/token/revoke", &e.Gateway, url.Values{"token": {jwt.AccessToken}})
			},
			func() string {
				return fmt.Sprintf("map[i:%s k:t v:%d]", jti(jwt), e.Clock.Now().Unix()+jwt.ExpiresIn)
			}},
		{"opaque", http.StatusOK,
			func() *response {
				return e.post(t, "/token/revoke", &e.Opaque, url.Values{"token": {opaque.AccessToken}})
			},
			func() string {
				return fmt.Sprintf("map[i:%s k:t v:%d]", jti(opaque), e.Clock.Now().Unix()+opaque.ExpiresIn)
			}},
		{"subject", http.StatusNoContent,
			func() *response { return e.do(t, http.MethodDelete, "/subjects/alice/tokens", nil, admin) },
			func() string {
				return fmt.Sprintf("map[i:alice k:s v:%s]", r.Client.Get(ctx, r.Prefix+"{alice}:gen").Val())
			}},
		{"client", http.StatusNoContent,
			func() *response { return e.do(t, http.MethodDelete, "/clients/"+e.Normal.ID+"/tokens", nil, admin) },
			func() string {
				return fmt.Sprintf("map[i:%s k:c v:%d]", e.Normal.ID, e.Clock.Now().Add(5*time.Second).UnixMilli())
			}},
	}

	// The log unwritable (a string where the Stream goes): 503, and every
	// token still validates.
	if err := r.Client.Set(ctx, logKey, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range revokes {
		wantError(t, c.revoke(), http.StatusServiceUnavailable, "temporarily_unavailable")
	}
	for _, tok := range []issued{jwt, opaque, victim} {
		if got := e.validate(t, tok.AccessToken); got.Status != http.StatusOK {
			t.Fatalf("a revocation that answered 503 revoked a token: %d %s", got.Status, got.Body)
		}
	}
	if err := r.Client.Del(ctx, logKey).Err(); err != nil {
		t.Fatal(err)
	}

	for i, c := range revokes {
		if got := c.revoke(); got.Status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, got.Status, c.status, got.Body)
		}
		msgs, err := r.Client.XRange(ctx, logKey, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != i+1 {
			t.Fatalf("%s: the log has %d entries, want %d", c.name, len(msgs), i+1)
		}
		if got, want := fmt.Sprint(msgs[i].Values), c.want(); got != want {
			t.Errorf("%s: entry %s, want %s", c.name, got, want)
		}
	}
	for _, tok := range []issued{jwt, opaque, victim} {
		wantError(t, e.validate(t, tok.AccessToken), http.StatusUnauthorized, "invalid_token")
	}
}

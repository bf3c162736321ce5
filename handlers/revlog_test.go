package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// revocation is one revocation the HTTP API offers, on a token issued for
// it, and the fields of the log entry it must append.
type revocation struct {
	name   string
	status int
	revoke func() *response
	want   func() string
}

// revocations issues a JWT and an opaque token for subject alice and a
// token of e.Normal, and returns them and the four revocations that end
// them: a JWT and an opaque token at POST /token/revoke, the subject's and
// the client's tokens at DELETE. rdb and prefix are e's Redis.
func revocations(t *testing.T, e *env, rdb redis.UniversalClient, prefix string) ([]revocation, []issued) {
	t.Helper()
	jti := func(iss issued) string { return strings.Trim(string(iss.JTI), `"`) }
	admin := http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}}
	jwt := e.issue(t, e.Gateway, url.Values{"subject": {"alice"}})
	opaque := e.issue(t, e.Opaque, url.Values{"subject": {"alice"}})
	victim := e.issue(t, e.Normal, nil)
	return []revocation{
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
				return fmt.Sprintf("map[i:alice k:s v:%s]", rdb.Get(t.Context(), prefix+"{alice}:gen").Val())
			}},
		{"client", http.StatusNoContent,
			func() *response { return e.do(t, http.MethodDelete, "/clients/"+e.Normal.ID+"/tokens", nil, admin) },
			func() string {
				return fmt.Sprintf("map[i:%s k:c v:%d]", e.Normal.ID, e.Clock.Now().Add(5*time.Second).UnixMilli())
			}},
	}, []issued{jwt, opaque, victim}
}

// wantNoRevocation checks that each revocation answers 503 and ends no token.
func wantNoRevocation(t *testing.T, e *env, revs []revocation, tokens []issued) {
	t.Helper()
	for _, c := range revs {
		wantError(t, c.revoke(), http.StatusServiceUnavailable, "temporarily_unavailable")
	}
	for _, tok := range tokens {
		if got := e.validate(t, tok.AccessToken); got.Status != http.StatusOK {
			t.Fatalf("a revocation that answered 503 revoked a token: %d %s", got.Status, got.Body)
		}
	}
}

// wantEachLogged checks that each revocation succeeds and appends exactly
// one entry, with its fields, to the log at logKey, empty before, and that
// it ends the tokens.
func wantEachLogged(t *testing.T, e *env, rdb redis.UniversalClient, logKey string, revs []revocation, tokens []issued) {
	t.Helper()
	for i, c := range revs {
		if got := c.revoke(); got.Status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, got.Status, c.status, got.Body)
		}
		msgs, err := rdb.XRange(t.Context(), logKey, "-", "+").Result()
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
	for _, tok := range tokens {
		wantError(t, e.validate(t, tok.AccessToken), http.StatusUnauthorized, "invalid_token")
	}
}

// TestRevocationLogThroughHandlers: each revocation the HTTP API offers (a
// JWT and an opaque token at POST /token/revoke, a subject's and a client's
// tokens at DELETE) answers only once its record and its entry in the
// revocation log are written: exactly one entry each, saying what was
// revoked. With the log unwritable (a string where the Stream goes), each
// answers 503 and revokes nothing.
func TestRevocationLogThroughHandlers(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	e := newEnv(t, withRedis(r.Client, r.Prefix))
	revs, tokens := revocations(t, e, r.Client, r.Prefix)
	logKey := e.Store.LogKey()
	if err := r.Client.Set(t.Context(), logKey, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantNoRevocation(t, e, revs, tokens)
	if err := r.Client.Del(t.Context(), logKey).Err(); err != nil {
		t.Fatal(err)
	}
	wantEachLogged(t, e, r.Client, logKey, revs, tokens)
}

// TestRevocationOnFullRedis: on a full Redis under noeviction, which
// refuses the log's XADD, each revocation answers 503 and writes neither
// its entry nor its record (a token's DEL alone would have gone through:
// the script writes the entry first); once Redis has room, each succeeds
// with its entry.
func TestRevocationOnFullRedis(t *testing.T) {
	srv := redistest.NewConfiguredServer(t, "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	e := newEnv(t, withRedis(rdb, "st:"))
	revs, tokens := revocations(t, e, rdb, "st:")
	fillRedis(t, rdb)
	wantNoRevocation(t, e, revs, tokens)
	if n := rdb.Exists(t.Context(), e.Store.LogKey()).Val(); n != 0 {
		t.Fatalf("a refused revocation wrote the log")
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	wantEachLogged(t, e, rdb, e.Store.LogKey(), revs, tokens)
}

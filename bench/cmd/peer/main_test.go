package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	redis9 "github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// peerRedis returns a real Redis for the peer: the one SNOWTOKEN_TEST_REDIS_URL
// names, the test's keys under a prefix of its own and deleted when it ends,
// else a redis-server of the test's own. It skips the test when there is
// neither: the peer is measured against a real Redis, not an imitation.
func peerRedis(t *testing.T) (redisURL, prefix string, rdb redis9.UniversalClient) {
	t.Helper()
	if redistest.Real() {
		r := redistest.New(t)
		return os.Getenv(redistest.EnvURL), r.Prefix, r.Client
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skipf("needs a real Redis: set %s or put redis-server on PATH (Debian: apt-get install redis-server)", redistest.EnvURL)
	}
	s := redistest.NewConfiguredServer(t)
	return s.URL(), "", s.Client()
}

// peer is a running peer server for one test.
type peer struct {
	t          *testing.T
	url        string
	prefix     string
	rdb        redis9.UniversalClient
	logs       *bytes.Buffer
	closeStore func() error
}

func startPeer(t *testing.T) *peer {
	t.Helper()
	redisURL, prefix, rdb := peerRedis(t)
	logs := new(bytes.Buffer)
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg := config{RedisURL: redisURL, ClientID: "svc", ClientSecret: "right-secret", Scope: "read write", KeyPrefix: prefix}
	h, closeStore, err := newHandler(t.Context(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &peer{t: t, url: srv.URL, prefix: prefix, rdb: rdb, logs: logs, closeStore: closeStore}
}

// issue posts form to /token as client svc with secret and returns the answer.
func (p *peer) issue(secret string, form url.Values) answer {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("svc", secret)
	return p.do(req)
}

// validate asks /validate about a bearer token and returns the answer.
func (p *peer) validate(bearer string) answer {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url+"/validate", nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	return p.do(req)
}

// answer is an answer of the peer, its JSON body decoded.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (p *peer) do(req *http.Request) answer {
	p.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		p.t.Fatalf("%s %s: %d %q is not JSON: %v", req.Method, req.URL.Path, resp.StatusCode, raw, err)
	}
	return answer{resp.StatusCode, resp.Header, body}
}

// clientCredentials is the form of a client credentials grant asking for
// scope ("": none asked for).
func clientCredentials(scope string) url.Values {
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	return form
}

func (a answer) want(t *testing.T, status int, fields map[string]any) {
	t.Helper()
	if a.status != status {
		t.Errorf("status %d %v, want %d", a.status, a.body, status)
	}
	for k, v := range fields {
		if a.body[k] != v {
			t.Errorf("%s = %v (%T), want %v (%T); body %v", k, a.body[k], a.body[k], v, v, a.body)
		}
	}
}

func TestIssueAndValidate(t *testing.T) {
	p := startPeer(t)
	before := time.Now()
	a := p.issue("right-secret", clientCredentials(""))
	after := time.Now()
	a.want(t, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3600.0, "scope": "read write"})
	access, _ := a.body["access_token"].(string)

	// A JWT signed with EdDSA, for the client, living an hour (the signature
	// is the library's to check: its key is not exposed).
	claims := jwt.MapClaims{}
	tok, _, err := jwt.NewParser().ParseUnverified(access, claims)
	if err != nil {
		t.Fatalf("access_token %q is not a JWT: %v", access, err)
	}
	if alg := tok.Header["alg"]; alg != "EdDSA" {
		t.Errorf("alg %v, want EdDSA", alg)
	}
	if aud, _ := claims.GetAudience(); len(aud) != 1 || aud[0] != "svc" {
		t.Errorf("aud %v, want [svc]", aud)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		t.Fatalf("exp: %v %v", exp, err)
	}
	if lo, hi := before.Add(time.Hour).Truncate(time.Second), after.Add(time.Hour); exp.Before(lo) || exp.After(hi) {
		t.Errorf("exp %v, want an hour after issue: between %v and %v", exp.Time, lo, hi)
	}

	p.validate(access).want(t, http.StatusOK, map[string]any{"active": true, "sub": "svc", "client_id": "svc", "scope": "read write"})

	a = p.issue("right-secret", clientCredentials("read"))
	a.want(t, http.StatusOK, map[string]any{"scope": "read"})
	access, _ = a.body["access_token"].(string)
	p.validate(access).want(t, http.StatusOK, map[string]any{"scope": "read"})

	if p.logs.Len() != 0 {
		t.Errorf("logged on success: %s", p.logs)
	}
}

func TestRefusals(t *testing.T) {
	p := startPeer(t)
	p.issue("wrong-secret", clientCredentials("")).want(t, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
	p.issue("right-secret", clientCredentials("read admin")).want(t, http.StatusBadRequest, map[string]any{"error": "invalid_scope"})
	// Refused for its grant type, not for the unknown refresh token (invalid_grant).
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"r"}}
	p.issue("right-secret", refresh).want(t, http.StatusUnauthorized, map[string]any{"error": "unauthorized_client"})

	for name, bearer := range map[string]string{
		"garbage": "garbage",
		"forged":  "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJhdWQiOlsic3ZjIl19.c2ln",
	} {
		a := p.validate(bearer)
		a.want(t, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})
		if h := a.header.Get("WWW-Authenticate"); h != `Bearer error="invalid_token"` {
			t.Errorf("%s: WWW-Authenticate %q", name, h)
		}
	}

	// A token whose record is deleted from Redis is no longer valid.
	a := p.issue("right-secret", clientCredentials(""))
	a.want(t, http.StatusOK, nil)
	access, _ := a.body["access_token"].(string)
	p.validate(access).want(t, http.StatusOK, map[string]any{"active": true})
	ctx := t.Context()
	record, err := p.rdb.Get(ctx, p.prefix+access).Result()
	if err != nil {
		t.Fatalf("the access token's key: %v", err)
	}
	if n, err := p.rdb.Del(ctx, p.prefix+access, p.prefix+record).Result(); err != nil || n != 2 {
		t.Fatalf("deleting the token's two keys: %d, %v", n, err)
	}
	p.validate(access).want(t, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})

	if p.logs.Len() != 0 {
		t.Errorf("logged a refusal: %s", p.logs)
	}
}

func TestRedisFailure(t *testing.T) {
	p := startPeer(t)
	a := p.issue("right-secret", clientCredentials(""))
	access, _ := a.body["access_token"].(string)
	p.closeStore()
	p.validate(access).want(t, http.StatusInternalServerError, map[string]any{"error": "server_error"})
	p.issue("right-secret", clientCredentials("")).want(t, http.StatusInternalServerError, map[string]any{"error": "server_error"})
	lines := strings.Split(strings.TrimSpace(p.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2 (one a failure): %s", len(lines), p.logs)
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] != "ERROR" || rec["err"] == nil {
			t.Errorf("log line %q: want JSON at level ERROR with err (%v)", l, err)
		}
	}
}

func TestNewHandlerNeedsRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := config{RedisURL: "redis://" + addr + "/0", ClientID: "svc", ClientSecret: "s", Scope: "read"}
	if _, _, err := newHandler(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("newHandler with no Redis at %s: %v, want an error naming it", addr, err)
	}
	cfg.RedisURL = "http://" + addr
	if _, _, err := newHandler(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "-redis") {
		t.Errorf("newHandler with -redis %s: %v, want an error naming -redis", cfg.RedisURL, err)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	want := config{Addr: "127.0.0.1:18082", RedisURL: "redis://127.0.0.1:6379/0", ClientID: "bench", ClientSecret: "bench-secret", Scope: "read write"}
	if err != nil || c != want {
		t.Errorf("defaults %+v, %v; want %+v", c, err, want)
	}
	c, err = parseFlags([]string{"-addr", "127.0.0.1:9", "-redis", "redis://h:1/3", "-client-id", "i", "-client-secret", "s", "-scope", "a"}, io.Discard)
	want = config{Addr: "127.0.0.1:9", RedisURL: "redis://h:1/3", ClientID: "i", ClientSecret: "s", Scope: "a"}
	if err != nil || c != want {
		t.Errorf("flags %+v, %v; want %+v", c, err, want)
	}
	for _, args := range [][]string{
		{"-client-secret", ""}, // the library would take any secret
		{"-client-id", ""},
		{"extra"},
		{"-no-such-flag"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
}

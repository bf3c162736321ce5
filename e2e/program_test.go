package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// waitLimit bounds every wait on the program; it is a deadline for a hung
// test, never a timing the test depends on.
const waitLimit = 30 * time.Second

// devEnvVars is dev mode on a free port.
func devEnvVars() map[string]string {
	return map[string]string{"SNOWTOKEN_ADDR": "127.0.0.1:0", "SNOWTOKEN_LOG_LEVEL": "debug"}
}

// TestLongMaxTokenTTL: with SNOWTOKEN_MAX_TOKEN_TTL past the default, the
// revocation log keeps its entries as long (token.LogRetention): the
// issuer starts, and a token of that lifetime revokes (dev mode's embedded
// Redis).
func TestLongMaxTokenTTL(t *testing.T) {
	env := devEnvVars()
	env["SNOWTOKEN_MAX_TOKEN_TTL"] = "72h"
	p := startProgram(t, env)
	tok := p.issueForm(t, p.dev, url.Values{"scope": {"read"}, "expires_in": {"259200"}})
	if status, body := p.post(t, "/token/revoke", p.dev, url.Values{"token": {tok}}); status != http.StatusOK {
		t.Fatalf("POST /token/revoke: %d %s, want 200", status, body)
	}
	if status, body := p.validateRaw(t, tok); status != http.StatusUnauthorized {
		t.Errorf("GET /token/validate after revoke: %d %s, want 401", status, body)
	}
}

func TestEndToEndDev(t *testing.T) {
	p := startProgram(t, devEnvVars())

	tok := p.issueForm(t, p.dev, url.Values{"scope": {"read"}, "subject": {"alice"}})
	status, body := p.validateRaw(t, tok)
	if status != http.StatusOK {
		t.Fatalf("GET /token/validate: %d %s, want 200", status, body)
	}
	var claims struct {
		Active   bool   `json:"active"`
		Sub      string `json:"sub"`
		ClientID string `json:"client_id"`
		Scope    string `json:"scope"`
	}
	if err := json.Unmarshal(body, &claims); err != nil {
		t.Fatal(err)
	}
	if !claims.Active || claims.Sub != "alice" || claims.ClientID != "dev" || claims.Scope != "read" {
		t.Errorf("GET /token/validate = %s, want active, sub alice, client_id dev, scope read", body)
	}

	// Requests that fail, so their logs are in the hygiene check below.
	if status, body := p.post(t, "/token", fleetClient{"dev", "wrong-" + p.dev.secret}, url.Values{"grant_type": {"client_credentials"}}); status != http.StatusUnauthorized {
		t.Errorf("POST /token with a wrong secret: %d %s, want 401", status, body)
	}
	req, err := http.NewRequest(http.MethodGet, p.url("/token/validate?access_token="+url.QueryEscape(tok)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := doRequest(t, req); status != http.StatusBadRequest {
		t.Errorf("GET /token/validate?access_token=: %d %s, want 400", status, body)
	}

	if status, body := p.post(t, "/token/revoke", p.dev, url.Values{"token": {tok}}); status != http.StatusOK {
		t.Fatalf("POST /token/revoke: %d %s, want 200", status, body)
	}
	if status, body := p.validateRaw(t, tok); status != http.StatusUnauthorized {
		t.Errorf("GET /token/validate after revoke: %d %s, want 401", status, body)
	}

	if err := p.stop(t); err != nil {
		t.Errorf("run after its context ended = %v, want nil (graceful shutdown)", err)
	}
	logs := p.logs()
	if !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("no \"stopped\" log line after shutdown:\n%s", logs)
	}
	checkLogHygiene(t, logs, p.dev.secret, tok)
	if testing.Verbose() {
		t.Logf("output:\n%s", logs)
	}
}

// checkLogHygiene checks that the output never holds the token, and holds the
// secret only in the dev banner.
func checkLogHygiene(tb testing.TB, logs, secret, accessToken string) {
	tb.Helper()
	if strings.Contains(logs, accessToken) {
		tb.Errorf("the logs hold the access token:\n%s", logs)
	}
	// Part of the token is a leak too: its claims, or any 16 characters of
	// its signature, which are random.
	parts := strings.Split(accessToken, ".")
	if len(parts) != 3 {
		tb.Fatalf("access token %q is not a JWS", accessToken)
	}
	if strings.Contains(logs, parts[1]) {
		tb.Errorf("the logs hold the claims of the access token:\n%s", logs)
	}
	for i := 0; i+16 <= len(parts[2]); i++ {
		if piece := parts[2][i : i+16]; strings.Contains(logs, piece) {
			tb.Errorf("the logs hold part of the access token's signature %q:\n%s", piece, logs)
			break
		}
	}
	bannerStart := strings.Index(logs, "\n=====")
	if bannerStart < 0 {
		tb.Fatalf("no dev banner in the output:\n%s", logs)
	}
	rest := logs[bannerStart+1:]
	bannerLen := strings.Index(rest[1:], "\n=====")
	if bannerLen < 0 {
		tb.Fatalf("the dev banner does not end:\n%s", logs)
	}
	banner := rest[:bannerLen+1]
	if !strings.Contains(banner, secret) {
		tb.Fatalf("the banner does not show the secret:\n%s", banner)
	}
	if outside := logs[:bannerStart] + rest[bannerLen+1:]; strings.Contains(outside, secret) {
		tb.Errorf("the output holds the client secret outside the dev banner:\n%s", outside)
	}
}

func TestEndToEndProduction(t *testing.T) {
	redisURL := os.Getenv(redistest.EnvURL)
	if redisURL == "" {
		t.Skipf("needs a real Redis: set %s", redistest.EnvURL)
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "signing.pem")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "new", "-out", keyPath}, nil, &out); err != nil {
		t.Fatalf("keys new: %v", err)
	}

	out.Reset()
	if err := run(t.Context(), []string{"client", "new", "-id", "svc", "-scopes", "a,b"}, nil, &out); err != nil {
		t.Fatalf("client new: %v", err)
	}
	secret, entry := parseClientNew(t, out.String())
	clientsPath := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(clientsPath, []byte(`{"clients": [`+entry+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startProgram(t, map[string]string{
		"SNOWTOKEN_ENV":          "production",
		"SNOWTOKEN_ADDR":         "127.0.0.1:0",
		"SNOWTOKEN_REDIS_URL":    redisURL,
		"SNOWTOKEN_SIGNING_KEYS": keyPath,
		"SNOWTOKEN_CLIENTS_FILE": clientsPath,
		"SNOWTOKEN_ISSUER":       "https://auth.example.test",
		"SNOWTOKEN_WORKER_ID":    "3",
		// A first claim of worker 3 waits one lease TTL: keep it short.
		"SNOWTOKEN_WORKER_LEASE_TTL": "1s",
	})
	waitReady(t, p.url("/readyz"), waitLimit)
	tok := p.issueForm(t, fleetClient{"svc", secret}, url.Values{"scope": {"b"}, "expires_in": {"60"}})
	status, body := p.validateRaw(t, tok)
	if status != http.StatusOK {
		t.Fatalf("GET /token/validate: %d %s, want 200", status, body)
	}
	var claims struct {
		Iss, Sub, Scope string
		WorkerID        int64 `json:"worker_id"`
	}
	if err := json.Unmarshal(body, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Iss != "https://auth.example.test" || claims.Sub != "svc" || claims.Scope != "b" || claims.WorkerID != 3 {
		t.Errorf("GET /token/validate = %s, want iss https://auth.example.test, sub svc, scope b, worker 3", body)
	}
	if status, body := p.post(t, "/token", fleetClient{"svc", "wrong"}, url.Values{"grant_type": {"client_credentials"}}); status != http.StatusUnauthorized {
		t.Errorf("POST /token with a wrong secret: %d %s, want 401", status, body)
	}
	// Revoking deletes the record, so the shared Redis is left as it was.
	if status, body := p.post(t, "/token/revoke", fleetClient{"svc", secret}, url.Values{"token": {tok}}); status != http.StatusOK {
		t.Fatalf("POST /token/revoke: %d %s, want 200", status, body)
	}
	if status, _ := p.validateRaw(t, tok); status != http.StatusUnauthorized {
		t.Errorf("GET /token/validate after revoke: %d, want 401", status)
	}
	if err := p.stop(t); err != nil {
		t.Errorf("run after its context ended = %v, want nil", err)
	}
	logs := p.logs()
	for _, s := range []string{secret, tok, "DEV MODE"} {
		if strings.Contains(logs, s) {
			t.Errorf("the production logs hold %q:\n%s", s, logs)
		}
	}
}

// parseClientNew reads the secret and the clients-file entry `client new` printed.
func parseClientNew(tb testing.TB, out string) (secret, entry string) {
	tb.Helper()
	m := regexp.MustCompile(`(?m)^client_secret:\s*(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("client new printed no secret:\n%s", out)
	}
	secret = m[1]
	_, entry, ok := strings.Cut(out, "clients-file entry:\n")
	if !ok {
		tb.Fatalf("client new printed no clients-file entry:\n%s", out)
	}
	entry = strings.TrimSpace(entry)
	var c clients.Client
	if err := json.Unmarshal([]byte(entry), &c); err != nil {
		tb.Fatalf("the clients-file entry %s: %v", entry, err)
	}
	if c.ID != "svc" || strings.Join(c.Scopes, ",") != "a,b" || c.Admin || c.MaySetSubject {
		tb.Errorf("the clients-file entry = %s, want id svc, scopes a b, nothing else", entry)
	}
	if strings.Contains(entry, secret) {
		tb.Errorf("the clients-file entry holds the secret itself: %s", entry)
	}
	return secret, entry
}

func TestProductionWithoutSettings(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), nil, map[string]string{"SNOWTOKEN_ENV": "production"}, &out)
	if !errors.Is(err, config.ErrConfig) || !strings.Contains(err.Error(), "SNOWTOKEN_REDIS_URL") {
		t.Errorf("run in production with nothing set = %v, want ErrConfig naming SNOWTOKEN_REDIS_URL", err)
	}
}

// TestNoHalfDevMode starts the program as the security review did: a
// production configuration without SNOWTOKEN_ENV whose clients-file variable
// is misspelt. It must not start in dev mode with a generated admin client:
// start-up fails naming the misspelling and the missing variable.
func TestNoHalfDevMode(t *testing.T) {
	redisSrv := redistest.NewServer(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "signing.pem")
	if err := run(t.Context(), []string{"keys", "new", "-out", keyPath}, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"clients file misspelt", map[string]string{
			"SNOWTOKEN_REDIS_URL":    redisSrv.URL(),
			"SNOWTOKEN_SIGNING_KEYS": keyPath,
			"SNOWTOKEN_ISSUER":       "https://auth.example.test",
			"SNOWTOKEN_CLIENT_FILE":  filepath.Join(dir, "clients.json"),
		}, []string{"SNOWTOKEN_CLIENT_FILE: did you mean SNOWTOKEN_CLIENTS_FILE?", "SNOWTOKEN_CLIENTS_FILE is required"}},
		{"keys missing", map[string]string{
			"SNOWTOKEN_REDIS_URL": redisSrv.URL(),
			"SNOWTOKEN_ISSUER":    "https://auth.example.test",
		}, []string{"SNOWTOKEN_SIGNING_KEYS is required", "SNOWTOKEN_CLIENTS_FILE is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["SNOWTOKEN_ADDR"] = "127.0.0.1:0"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// Were it to start, it stops at once, and the test fails below.
			out := &stopOnListening{cancel: cancel}
			err := run(ctx, nil, tc.env, out)
			if !errors.Is(err, config.ErrConfig) {
				t.Fatalf("run = %v, want ErrConfig; output:\n%s", err, out.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("run = %q, want it to say %q", err, want)
				}
			}
			for _, leak := range []string{"DEV MODE", "client_secret"} {
				if strings.Contains(out.String(), leak) {
					t.Errorf("the output holds %q:\n%s", leak, out.String())
				}
			}
		})
	}
}

// stopOnListening collects the program's output and cancels its context
// once it listens.
type stopOnListening struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	b      strings.Builder
}

func (w *stopOnListening) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(`"msg":"listening"`)) {
		w.cancel()
	}
	return w.b.Write(p)
}

func (w *stopOnListening) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDevBannerCommands runs the shell commands the dev banner prints: the
// first sets CLIENT_ID and CLIENT_SECRET, the second TOKEN, the third
// validates it.
func TestDevBannerCommands(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	p := startProgram(t, devEnvVars())
	logs := p.logs()
	start := strings.Index(logs, " export CLIENT_ID=")
	end := strings.Index(logs, "/token/validate\n")
	if start < 0 || end < start {
		t.Fatalf("no export CLIENT_ID=..., TOKEN=$(...) and /token/validate commands in the banner:\n%s", logs)
	}
	script := logs[start : end+len("/token/validate\n")]
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	var claims struct {
		Active   bool   `json:"active"`
		ClientID string `json:"client_id"`
		Scope    string `json:"scope"`
	}
	if err := json.Unmarshal(out, &claims); err != nil || !claims.Active || claims.ClientID != "dev" || claims.Scope != "read write" {
		t.Errorf("the banner's commands printed %s (%v), want an active token of client dev with scope \"read write\"", out, err)
	}
}

// TestRedisURLErrorHidesPassword checks that a malformed Redis URL stops
// start-up with an error that names the variable and not the password
// (url.Parse quotes the whole URL).
func TestRedisURLErrorHidesPassword(t *testing.T) {
	const password = "hunter2"
	for _, env := range []map[string]string{
		{"SNOWTOKEN_REDIS_URL": "redis://user:" + password + "@redis.internal:port/0"},
		{"SNOWTOKEN_REDIS_URL": "redis://user:" + password + "%zz@redis.internal/0"},
		{"SNOWTOKEN_REDIS_CLUSTER_URL": "redis://user:" + password + "@redis.internal:port"},
		{"SNOWTOKEN_REDIS_SENTINEL_URL": "redis://user:" + password + "@redis.internal:port?master_name=m"},
	} {
		env["SNOWTOKEN_ADDR"] = "127.0.0.1:0"
		// Cancelled: the error must come before serving, or the run would not end.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var out bytes.Buffer
		err := run(ctx, nil, env, &out)
		if err == nil {
			t.Errorf("run with %v: started", env)
			continue
		}
		if strings.Contains(err.Error()+out.String(), password) {
			t.Errorf("run with %v shows the password: err %q, output:\n%s", env, err, out.String())
		}
		for name := range env {
			if name != "SNOWTOKEN_ADDR" && !strings.Contains(err.Error(), name) {
				t.Errorf("run with %v: err %q, want it to name %s", env, err, name)
			}
		}
	}
}

func TestKeysNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.pem")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "new", "-out", path}, nil, &out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyset.ParsePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	if k.Private == nil {
		t.Error("keys new wrote no private key")
	}
	if !strings.Contains(out.String(), k.ID) {
		t.Errorf("keys new printed %q, want the kid %s", out.String(), k.ID)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}

	// It never overwrites.
	existing := filepath.Join(dir, "existing.pem")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"keys", "new", "-out", existing}, nil, &out); err == nil {
		t.Error("keys new over an existing file succeeded")
	}
	if got, err := os.ReadFile(existing); err != nil || string(got) != "keep me" {
		t.Errorf("the existing file now holds %q (%v), want it untouched", got, err)
	}
	if err := run(t.Context(), []string{"keys", "new"}, nil, &out); err == nil {
		t.Error("keys new without -out succeeded")
	}
}

func TestIDDecode(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"id", "decode", "4194332675"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	var p snowflakealg.Parts
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("id decode printed %q: %v", out.String(), err)
	}
	want := snowflakealg.Parts{ID: 4194332675, Time: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), Worker: 7, Sequence: 3}
	if p.ID != want.ID || !p.Time.Equal(want.Time) || p.Worker != want.Worker || p.Sequence != want.Sequence {
		t.Errorf("id decode 4194332675 = %+v, want %+v", p, want)
	}
	for _, args := range [][]string{{"id", "decode", "-1"}, {"id", "decode", "x"}, {"id", "decode"}, {"id"}} {
		if err := run(t.Context(), args, nil, &out); err == nil {
			t.Errorf("run %q succeeded", args)
		}
	}
}

// TestIDDecodeWideLayouts decodes the largest ID of layouts whose timestamp
// field outlasts time.Duration (about 292 years).
func TestIDDecodeWideLayouts(t *testing.T) {
	for _, tc := range []struct {
		bits, id string
		want     time.Time // zero: past the year 9999, an error
	}{
		{"44/7/12", "9223372036854775807", time.Date(2583, 6, 23, 6, 20, 44, 415e6, time.UTC)},
		{"44/7/12", "524288", time.Date(2026, 1, 1, 0, 0, 0, 1e6, time.UTC)},
		{"47/4/12", "9223372036854775807", time.Date(6485, 10, 17, 2, 45, 55, 327e6, time.UTC)},
		{"61/1/1", "4", time.Date(2026, 1, 1, 0, 0, 0, 1e6, time.UTC)},
		{"61/1/1", "9223372036854775807", time.Time{}},
	} {
		var out bytes.Buffer
		err := run(t.Context(), []string{"id", "decode", tc.id}, map[string]string{"SNOWTOKEN_BITS": tc.bits}, &out)
		if tc.want.IsZero() {
			if !errors.Is(err, snowflakealg.ErrInvalidID) || !strings.Contains(err.Error(), "9999") {
				t.Errorf("SNOWTOKEN_BITS=%s id decode %s: %q, %v; want ErrInvalidID past the year 9999", tc.bits, tc.id, out.String(), err)
			}
			continue
		}
		var p snowflakealg.Parts
		if err != nil || json.Unmarshal(out.Bytes(), &p) != nil || !p.Time.Equal(tc.want) {
			t.Errorf("SNOWTOKEN_BITS=%s id decode %s: %q, %v; want time %v", tc.bits, tc.id, out.String(), err, tc.want)
		}
	}
}

func TestHelpListsEveryVar(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, v := range config.Vars {
		if !strings.Contains(out.String(), v.Name) {
			t.Errorf("-h does not list %s:\n%s", v.Name, out.String())
		}
	}
	out.Reset()
	if err := run(t.Context(), []string{"frobnicate"}, nil, &out); err == nil {
		t.Error("an unknown command succeeded")
	}
}

func TestHealthcheck(t *testing.T) {
	p := startProgram(t, devEnvVars())
	hcEnv := map[string]string{"SNOWTOKEN_ADDR": p.addr}
	if err := run(t.Context(), []string{"healthcheck"}, hcEnv, io.Discard); err != nil {
		t.Errorf("healthcheck against a running server: %v", err)
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	// Nothing listens on the port now.
	if conn, err := net.Dial("tcp", p.addr); err == nil {
		conn.Close()
		t.Skipf("something else took %s", p.addr)
	}
	if err := run(t.Context(), []string{"healthcheck"}, hcEnv, io.Discard); err == nil {
		t.Error("healthcheck succeeded with nothing listening")
	}
}

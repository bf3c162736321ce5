package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/internal/atomicfile"
	"github.com/snowtoken/snowtoken/token"
)

// reloadLoad issues tokens and validates them without pause, each new token
// and one issued earlier (maybe under another key), at the issuer and at a
// consumer verifying locally against the JWKS, and records every refusal:
// every token it holds is valid, so any refusal is a false rejection.
type reloadLoad struct {
	p        *fleetProc // issues
	at       *fleetProc // validates; nil: p
	c        fleetClient
	consumer *client.Validator
	hc       *http.Client

	checks atomic.Int64
	mu     sync.Mutex
	tokens []string // the last ones issued
	faults []string
}

func (l *reloadLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.faults) < 20 {
		l.faults = append(l.faults, fmt.Sprintf(format, args...))
	}
}

// run loops until ctx ends.
func (l *reloadLoad) run(ctx context.Context) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.p.url("/token"), strings.NewReader("grant_type=client_credentials"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		l.mu.Lock()
		c := l.c // setClient may change it
		l.mu.Unlock()
		req.SetBasicAuth(c.id, c.secret)
		status, body := l.do(req)
		if ctx.Err() != nil {
			return
		}
		var tok fleetToken
		if status != http.StatusOK || json.Unmarshal(body, &tok) != nil {
			l.fail("POST /token: %d %s", status, body)
			continue
		}
		l.mu.Lock()
		l.tokens = append(l.tokens, tok.AccessToken)
		if len(l.tokens) > 256 {
			l.tokens = l.tokens[1:]
		}
		older := l.tokens[rand.IntN(len(l.tokens))]
		l.mu.Unlock()
		for _, raw := range []string{tok.AccessToken, older} {
			at := l.p
			if l.at != nil {
				at = l.at
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, at.url("/token/validate"), nil)
			req.Header.Set("Authorization", "Bearer "+raw)
			if status, body := l.do(req); status != http.StatusOK && ctx.Err() == nil {
				l.fail("GET /token/validate of a valid token: %d %s", status, body)
			}
			if _, err := l.consumer.Validate(ctx, raw); err != nil && ctx.Err() == nil {
				l.fail("a consumer verifying locally refused a valid token: %v", err)
			}
			l.checks.Add(1)
		}
	}
}

// setClient makes the load authenticate as c from now on.
func (l *reloadLoad) setClient(c fleetClient) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c = c
}

func (l *reloadLoad) do(req *http.Request) (int, []byte) {
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// waitChecks waits until the load has checked n more tokens, so that each
// step of the test is run under load.
func (l *reloadLoad) waitChecks(tb testing.TB, n int64) {
	tb.Helper()
	want := l.checks.Load() + n
	deadline := time.Now().Add(fleetWait)
	for l.checks.Load() < want {
		if time.Now().After(deadline) {
			tb.Fatalf("the load checked %d tokens, not %d, in %v", l.checks.Load(), want, fleetWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// events counts p's log records of an audit event.
func (p *fleetProc) events(event string) int {
	n := 0
	for _, r := range p.records() {
		if r["event"] == event {
			n++
		}
	}
	return n
}

// waitEvents waits until p has logged n records of event.
func (p *fleetProc) waitEvents(tb testing.TB, event string, n int) {
	tb.Helper()
	deadline := time.Now().Add(fleetWait)
	for p.events(event) < n {
		if time.Now().After(deadline) {
			tb.Fatalf("%s logged %d %s events, want %d; output:\n%s", p.name, p.events(event), event, n, lastLines(p.out.String(), 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shortSHA is a file's version as /readyz shows it.
func shortSHA(tb testing.TB, path string) string {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

// readyConfig returns the config /readyz names.
func (p *fleetProc) readyConfig(tb testing.TB) map[string]any {
	tb.Helper()
	status, _, body := fleetCall(tb, http.MethodGet, p.url("/readyz"), nil, "", nil)
	var r struct {
		Config map[string]any `json:"config"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil {
		tb.Fatalf("/readyz: %d %s", status, body)
	}
	return r.Config
}

// backdate moves the times of dir's keys.json back by d, as if the keys had
// been published (and retired) d earlier: the publish delay passes at once.
func backdate(tb testing.TB, dir string, d time.Duration) {
	tb.Helper()
	m, _, err := token.ReadKeyManifest(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range m.Keys {
		e := &m.Keys[i]
		e.Published = e.Published.Add(-d)
		if !e.Activated.IsZero() {
			e.Activated = e.Activated.Add(-d)
		}
		if !e.Retired.IsZero() {
			e.Retired = e.Retired.Add(-d)
		}
	}
	if err := writeManifest(dir, m); err != nil {
		tb.Fatal(err)
	}
}

// TestReloadUnderLoad rotates the signing key of a running replica under a
// load of issuing and validating, through `snowtoken keys rotate` and the
// watcher, changes the clients file where only SIGHUP can tell, and breaks
// the keys and the clients file on purpose: no valid token is ever rejected, by the issuer or by
// a consumer that verifies locally through the client package's JWKS cache
// (with its default cache lifetime), and the broken set is refused with one
// log line while the old one keeps serving.
//
// The publish delay is simulated, not waited for: the keys' times in
// keys.json are moved back by token.KeyPublishDelay and the consumer's clock
// forward by as much, as if the time had passed for both.
func TestReloadUnderLoad(t *testing.T) {
	bin := fleetBinary(t)
	redisURL, _ := fleetRedis(t)
	creds := newFleetCreds(t, bin)

	// The keys directory starts from the key the replicas used as a list.
	keysDir := filepath.Join(t.TempDir(), "keys")
	fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir, "-adopt", creds.keyPath)
	// The clients file is a link to a file elsewhere, as a mounted Secret's
	// files are: a change of the file behind it happens in a directory the
	// replica does not watch, so only SIGHUP tells it.
	clientsTarget := creds.clientsPath
	clientsLink := filepath.Join(t.TempDir(), "clients.json")
	if err := os.Symlink(clientsTarget, clientsLink); err != nil {
		t.Fatal(err)
	}
	creds.clientsPath = clientsLink
	env := creds.env(map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}, fleetAddr(t, "127.0.0.41"), "127.0.0.41",
		"SNOWTOKEN_SIGNING_KEYS", keysDir)
	p := startFleetProc(t, bin, "replica", env)

	var offset atomic.Int64 // the consumer's clock: real time moved forward
	consumer, err := client.New(client.Options{
		IssuerURL: "http://" + p.addr, Issuer: fleetIssuer, Mode: client.Local, RevocationCheck: client.Skip,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	load := &reloadLoad{p: p, c: creds.svc, consumer: consumer, hc: &http.Client{Timeout: 10 * time.Second}}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { load.run(ctx) })
	}
	defer func() { stop(); wg.Wait() }()
	load.waitChecks(t, 50)

	manifest := filepath.Join(keysDir, token.KeysManifest)
	wantConfig := func(step string) {
		t.Helper()
		got := p.readyConfig(t)
		if want := shortSHA(t, manifest); got["keys"] != want {
			t.Errorf("%s: /readyz keys %v, want keys.json's %s", step, got["keys"], want)
		}
		if want := shortSHA(t, clientsTarget); got["clients"] != want {
			t.Errorf("%s: /readyz clients %v, want the clients file's %s", step, got["clients"], want)
		}
		info := fmt.Sprintf(`snowtoken_config_info{clients="%s",keys="%s"}`, got["clients"], got["keys"])
		if v := p.metric(t, info); v != 1 {
			t.Errorf("%s: %s = %v, want 1", step, info, v)
		}
	}
	wantConfig("at start")
	reloads := 0
	step := func(name string, change func()) {
		t.Helper()
		change()
		reloads++
		p.waitEvents(t, "config.reloaded", reloads)
		load.waitChecks(t, 50)
		wantConfig(name)
	}

	// 1. A next key: published, not signing.
	step("next key added", func() { fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir) })
	// 2. The publish delay passes: consumers' caches have expired.
	step("publish delay passed", func() {
		backdate(t, keysDir, token.KeyPublishDelay)
		offset.Add(int64(token.KeyPublishDelay))
	})
	// 3. The next key signs; the old one is retired and still verifies.
	step("next key activated", func() { fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir) })
	ks, err := token.LoadKeyDir(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	tok := p.issue(t, creds.svc, "")
	if kid := jwtKid(t, tok.AccessToken); kid != ks.SigningKeyID() {
		t.Errorf("after the rotation tokens have kid %s, want the activated key's %s", kid, ks.SigningKeyID())
	}

	// 4. A new client, in a change only SIGHUP reveals.
	secret, sum, err := token.NewClientSecret()
	if err != nil {
		t.Fatal(err)
	}
	late := fleetClient{id: "late", secret: secret}
	var cf token.ClientsFile
	data, err := os.ReadFile(clientsTarget)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cf); err != nil {
		t.Fatal(err)
	}
	cf.Clients = append(cf.Clients, token.Client{ID: late.id, SecretSHA256: sum, Scopes: []string{"read"}})
	step("SIGHUP", func() {
		doc, err := json.Marshal(cf)
		if err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.Replace(clientsTarget, doc); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.ContainsFunc(p.records(), func(r map[string]any) bool {
		return r["event"] == "config.reloaded" && r["trigger"] == "sighup"
	}) {
		t.Error("no reload with trigger sighup")
	}
	p.issue(t, late, "")

	// 5. A broken set: refused with one log line, the old set serving.
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	before := p.readyConfig(t)
	if err := atomicfile.Replace(manifest, []byte(`{"keys": [{"file": "key-gone.pem"`)); err != nil {
		t.Fatal(err)
	}
	p.waitEvents(t, "config.reload_refused", 1)
	load.waitChecks(t, 50)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil { // the same set again: counted, not logged again
		t.Fatal(err)
	}
	deadline := time.Now().Add(fleetWait)
	for p.metric(t, `snowtoken_config_reloads_total{result="refused"}`) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second refusal of the broken set was not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.events("config.reload_refused"); n != 1 {
		t.Errorf("%d log lines for one broken set, want 1", n)
	}
	for _, r := range p.records() {
		if r["event"] == "config.reload_refused" {
			if r["file"] != keysDir || !strings.Contains(fmt.Sprint(r["err"]), manifest) {
				t.Errorf("the refusal names file %v and says %v; want %s and the manifest", r["file"], r["err"], keysDir)
			}
		}
	}
	if got := p.readyConfig(t); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("/readyz config after a refused set: %v, want the set in force %v", got, before)
	}
	if err := atomicfile.Replace(manifest, good); err != nil {
		t.Fatal(err)
	}
	load.waitChecks(t, 50)

	// 6. A clients file with a misspelt field: refused, naming the client
	// and the field, and the client keeps its restrictions.
	goodClients, err := os.ReadFile(clientsTarget)
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(string(goodClients), `"id":"late"`, `"id":"late","ADMIN":true`, 1)
	if typo == string(goodClients) {
		t.Fatalf("no client late in %s", goodClients)
	}
	if err := atomicfile.Replace(clientsTarget, []byte(typo)); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitEvents(t, "config.reload_refused", 2)
	for _, r := range p.records() {
		if r["event"] == "config.reload_refused" && r["variable"] == "SNOWTOKEN_CLIENTS_FILE" {
			if msg := fmt.Sprint(r["err"]); r["file"] != clientsLink || !strings.Contains(msg, `"late"`) || !strings.Contains(msg, `"ADMIN"`) {
				t.Errorf("the refusal names file %v and says %q; want %s, the client late and the field ADMIN", r["file"], msg, clientsLink)
			}
		}
	}
	p.issue(t, late, "") // the set in force still has it
	if err := atomicfile.Replace(clientsTarget, goodClients); err != nil {
		t.Fatal(err)
	}
	load.waitChecks(t, 50)
	if v := p.metric(t, `snowtoken_config_reloads_total{result="ok"}`); v != float64(reloads) {
		t.Errorf(`snowtoken_config_reloads_total{result="ok"} = %v, want %d`, v, reloads)
	}

	stop()
	wg.Wait()
	if len(load.faults) > 0 {
		t.Errorf("%d valid tokens rejected (of %d checks), the first:\n%s", len(load.faults), load.checks.Load(), strings.Join(load.faults, "\n"))
	}
	t.Logf("%d validations under load, %d reloads", load.checks.Load(), reloads)
}

// jwtKid returns the kid of a token's header.
func jwtKid(tb testing.TB, raw string) string {
	tb.Helper()
	header, _, _ := strings.Cut(raw, ".")
	var h struct {
		Kid string `json:"kid"`
	}
	b, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || json.Unmarshal(b, &h) != nil {
		tb.Fatalf("token header %q: %v", header, err)
	}
	return h.Kid
}

// TestSIGHUPInDevMode: dev mode generates its key and client, so SIGHUP has
// nothing to reload; it says so, and does not end the process, which is
// SIGHUP's default action.
func TestSIGHUPInDevMode(t *testing.T) {
	p := startProgram(t, devEnvVars())
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(p.logs(), "nothing to reload in dev mode") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of SIGHUP in the log:\n%s", p.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := testHTTPClient.Get(p.url("/healthz"))
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz after SIGHUP: %d", resp.StatusCode)
	}
}

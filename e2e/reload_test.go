package e2e

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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/internal/atomicfile"
	"github.com/snowtoken/snowtoken/internal/watch/watchtest"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// reloadLoad issues tokens and validates them without pause, each new token
// and one issued earlier (maybe under another key), at the issuer and at a
// consumer verifying locally against the JWKS, and records every refusal:
// every token it holds is valid, so any refusal is a false rejection.
type reloadLoad struct {
	p        *issuer // issues
	at       *issuer // validates; nil: p
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
		l.mu.Lock()
		c := l.c // setClient may change it
		l.mu.Unlock()
		req, _ := newCall(http.MethodPost, l.p.url("/token"), &c, "", url.Values{"grant_type": {"client_credentials"}})
		status, body := l.do(req.WithContext(ctx))
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
			req, _ := newCall(http.MethodGet, at.url("/token/validate"), nil, raw, nil)
			if status, body := l.do(req.WithContext(ctx)); status != http.StatusOK && ctx.Err() == nil {
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
func (p *issuer) events(event string) int {
	n := 0
	for _, r := range p.records() {
		if r["event"] == event {
			n++
		}
	}
	return n
}

// waitEvents waits until p has logged n records of event.
func (p *issuer) waitEvents(tb testing.TB, event string, n int) {
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
func (p *issuer) readyConfig(tb testing.TB) map[string]any {
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
	m, _, err := keyset.ReadManifest(dir)
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
	doc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyset.ManifestFile), doc, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// keysDirFleet returns the binary, a Redis, credentials and a keys directory
// that starts from the credentials' key, as the replicas used it as a list.
func keysDirFleet(tb testing.TB) (bin, redisURL string, creds fleetCreds, keysDir string) {
	tb.Helper()
	bin = fleetBinary(tb)
	redisURL, _ = fleetRedis(tb)
	creds = newFleetCreds(tb, bin)
	keysDir = filepath.Join(tb.TempDir(), "keys")
	fleetCommand(tb, bin, "keys", "rotate", "-dir", keysDir, "-adopt", creds.keyPath)
	return bin, redisURL, creds, keysDir
}

// TestReloadUnderLoad rotates the signing key of a running replica under a
// load of issuing and validating, through `snowtoken keys rotate` and the
// watcher, changes the clients file where only SIGHUP can tell (in place
// through a hard link in a directory not watched), and breaks
// the keys and the clients file on purpose: no valid token is ever rejected, by the issuer or by
// a consumer that verifies locally through the client package's JWKS cache
// (with its default cache lifetime), and the broken set is refused with one
// log line while the old one keeps serving.
//
// The publish delay is simulated, not waited for: the keys' times in
// keys.json are moved back by keyset.PublishDelay and the consumer's clock
// forward by as much, as if the time had passed for both.
func TestReloadUnderLoad(t *testing.T) {
	bin, redisURL, creds, keysDir := keysDirFleet(t)
	// The clients file is a link to a file elsewhere, as a mounted Secret's
	// files are. The file also has a hard link in a third directory: a
	// change made in place through it is one no directory watch sees
	// (inotify tells that directory alone), so only SIGHUP tells.
	clientsTarget := creds.clientsPath
	clientsLink := filepath.Join(t.TempDir(), "clients.json")
	if err := os.Symlink(clientsTarget, clientsLink); err != nil {
		t.Fatal(err)
	}
	clientsHardLink := filepath.Join(t.TempDir(), "clients.json")
	if err := os.Link(clientsTarget, clientsHardLink); err != nil {
		t.Fatal(err)
	}
	creds.clientsPath = clientsLink
	p := fleet{bin, creds}.start(t, replica{name: "replica", ip: "127.0.0.41", redis: map[string]string{"SNOWTOKEN_REDIS_URL": redisURL},
		env: []string{"SNOWTOKEN_SIGNING_KEYS", keysDir}})

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

	manifest := filepath.Join(keysDir, keyset.ManifestFile)
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
		backdate(t, keysDir, keyset.PublishDelay)
		offset.Add(int64(keyset.PublishDelay))
	})
	// 3. The next key signs; the old one is retired and still verifies.
	step("next key activated", func() { fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir) })
	ks, err := keyset.LoadDir(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	tok := p.issue(t, creds.svc, "")
	if kid := jwtKid(t, tok.AccessToken); kid != ks.SigningKeyID() {
		t.Errorf("after the rotation tokens have kid %s, want the activated key's %s", kid, ks.SigningKeyID())
	}

	// 4. A new client, in a change only SIGHUP reveals.
	secret, sum, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	late := fleetClient{id: "late", secret: secret}
	var cf clients.File
	data, err := os.ReadFile(clientsTarget)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cf); err != nil {
		t.Fatal(err)
	}
	cf.Clients = append(cf.Clients, clients.Client{ID: late.id, SecretSHA256: sum, Scopes: []string{"read"}})
	step("SIGHUP", func() {
		doc, err := json.Marshal(cf)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(clientsHardLink, doc, 0o600); err != nil { // in place, through the hard link
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
	if got := p.readyConfig(t); got["clients"] != before["clients"] || got["keys"] != before["keys"] || got["refused"] == nil {
		t.Errorf("/readyz config after a refused set: %v, want the set in force %v and the keys refused", got, before)
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
	resp, err := fleetHTTP.Get(p.url("/healthz"))
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz after SIGHUP: %d", resp.StatusCode)
	}
}

// until401 polls the validation of tok at p until it answers 401 and returns
// how long that took; it fails tb if it does not within fleetWait, a
// deadline for a reload that never happens, not a timing.
func (p *issuer) until401(tb testing.TB, tok fleetToken, why string) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		status, _ := p.validate(tb, tok)
		if status == http.StatusUnauthorized {
			return time.Since(start)
		}
		if status != http.StatusOK {
			tb.Fatalf("token %d %s: %d, want 200 and then 401", tok.TokenID, why, status)
		}
		if time.Since(start) > fleetWait {
			tb.Fatalf("token %d still validates %s (waited %v): the replica did not reload the clients file", tok.TokenID, why, fleetWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReloadLayouts disables a client, as an operator does, in each layout a
// clients file comes in, with a replica watching it: a plain file changed by
// `snowtoken client disable`; a symlink to a file in another directory (the
// command writes the target); a Kubernetes Secret mount, updated as the
// kubelet does (a swap of ..data); a plain file in a directory that another
// program writes every 20 ms. In each, the client's token answers 401 with
// no restart and no SIGHUP. It logs how long that took, from the end of the
// change (figures, not a check: time is for benchmarks). Enabled again
// (`snowtoken client enable`), the client gets new tokens, and the one it
// held while disabled stays refused.
func TestReloadLayouts(t *testing.T) {
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	command := func(sub, file string) { fleetCommand(t, bin, "client", sub, "-file", file, "-id", creds.svc.id) }
	copyTo := func(path string) string {
		data, err := os.ReadFile(creds.clientsPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for i, layout := range []struct {
		name string
		// setup lays the clients file out and returns SNOWTOKEN_CLIENTS_FILE
		// and the change that runs a client subcommand (disable, enable)
		// on svc.
		setup func(t *testing.T) (string, func(sub string))
	}{
		{"plain file", func(t *testing.T) (string, func(string)) {
			path := copyTo(filepath.Join(t.TempDir(), "clients.json"))
			return path, func(sub string) { command(sub, path) }
		}},
		{"symlink to a file in another directory", func(t *testing.T) (string, func(string)) {
			target := copyTo(filepath.Join(t.TempDir(), "clients.json"))
			link := filepath.Join(t.TempDir(), "clients.json")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link, func(sub string) { command(sub, link) }
		}},
		{"kubernetes ..data swap", func(t *testing.T) (string, func(string)) {
			mount := t.TempDir()
			staged := copyTo(filepath.Join(t.TempDir(), "clients.json"))
			data, _ := os.ReadFile(staged)
			watchtest.KubeletWrite(t, mount, "clients.json", data)
			return filepath.Join(mount, "clients.json"), func(sub string) {
				command(sub, staged)
				data, err := os.ReadFile(staged)
				if err != nil {
					t.Fatal(err)
				}
				watchtest.KubeletWrite(t, mount, "clients.json", data)
			}
		}},
		{"plain file in a directory written every 20 ms", func(t *testing.T) (string, func(string)) {
			dir := t.TempDir()
			path := copyTo(filepath.Join(dir, "clients.json"))
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ctx.Err() == nil; i++ {
					_ = os.WriteFile(filepath.Join(dir, "app.log"), []byte(strconv.Itoa(i)), 0o600)
					time.Sleep(20 * time.Millisecond)
				}
			}()
			t.Cleanup(func() { stop(); <-done })
			return path, func(sub string) { command(sub, path) }
		}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			clients, change := layout.setup(t)
			// A Redis each: disabling the client revokes its tokens, and
			// the next layout issues to it again.
			redisURL, rdb := fleetRedis(t)
			ip := fmt.Sprintf("127.0.0.%d", 51+i)
			p := fleet{bin, creds}.start(t, replica{name: "replica", ip: ip, redis: map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}, env: []string{"SNOWTOKEN_CLIENTS_FILE", clients}})
			tok := p.issue(t, creds.svc, "")
			p.mustValidate(t, tok, p.worker(t))
			change("disable")
			took := p.until401(t, tok, "after `client disable`")
			t.Logf("%s: the disabled client's token answered 401 %v after the change", layout.name, took.Round(time.Millisecond))
			p.waitClientsFile(t, clients)
			// Revoked in Redis too, so that the revocation log carries it
			// to the consumers that follow its feed.
			rec := p.waitLog(t, "a client removed or disabled in the clients file: its tokens are revoked")
			if rec["client_id"] != creds.svc.id {
				t.Errorf("revoked %v, want %s", rec["client_id"], creds.svc.id)
			}
			entries, err := rdb.XRange(t.Context(), redisstore.DefaultKeyPrefix+"{revlog}", "-", "+").Result()
			if err != nil || len(entries) == 0 || entries[len(entries)-1].Values["k"] != "c" || entries[len(entries)-1].Values["i"] != creds.svc.id {
				t.Errorf("revocation log %v (%v), want the client's entry last", entries, err)
			}
			// Enabled again: the client authenticates (a token, or 503
			// until its new tokens' IDs are past the revocation), and the
			// token it held while disabled stays revoked.
			change("enable")
			p.waitClientsFile(t, clients)
			if status, _, _, body := p.tryIssue(t, creds.svc, ""); status != http.StatusOK && status != http.StatusServiceUnavailable {
				t.Errorf("POST /token, the client enabled again: %d %s, want 200 or 503", status, body)
			}
			p.mustReject(t, tok, "held while its client was disabled, the client enabled again")
		})
	}
}

// TestReloadSourcesApart breaks the keys directory of a running replica and
// then disables a client: the clients file still reloads (the client's
// token answers 401), and the refused keys show where operators look while
// the set in force keeps serving: /readyz stays 200 and names them in
// config.refused with the reason, snowtoken_reload_refused{source="keys"}
// is 1 and the failure counted, and the error is logged once. Fixing the
// keys clears it all.
func TestReloadSourcesApart(t *testing.T) {
	bin, redisURL, creds, keysDir := keysDirFleet(t)
	p := fleet{bin, creds}.start(t, replica{name: "replica", ip: "127.0.0.55", redis: map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}, env: []string{"SNOWTOKEN_SIGNING_KEYS", keysDir}})
	tok := p.issue(t, creds.svc, "")
	keysInForce := p.readyConfig(t)["keys"]

	manifest := filepath.Join(keysDir, keyset.ManifestFile)
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Replace(manifest, []byte(`{"keys": [`)); err != nil {
		t.Fatal(err)
	}
	p.waitEvents(t, "config.reload_refused", 1)
	fleetCommand(t, bin, "client", "disable", "-file", creds.clientsPath, "-id", creds.svc.id)
	p.until401(t, tok, "after `client disable` with the keys directory broken")
	p.waitClientsFile(t, creds.clientsPath)

	got := p.readyConfig(t)
	if got["keys"] != keysInForce {
		t.Errorf("/readyz keys %v with keys.json broken, want the keys in force %v", got["keys"], keysInForce)
	}
	refused, _ := got["refused"].(map[string]any)
	keys, _ := refused["keys"].(map[string]any)
	since, err := time.Parse(time.RFC3339Nano, fmt.Sprint(keys["since"]))
	if _, shown := keys["reason"]; shown || err != nil || time.Since(since) > fleetWait || len(refused) != 1 {
		t.Errorf("/readyz config.refused %v, want only keys, with a time and no reason (the log has it)", got["refused"])
	}
	for series, want := range map[string]float64{
		`snowtoken_reload_refused{source="keys"}`:    1,
		`snowtoken_reload_refused{source="clients"}`: 0,
	} {
		if v := p.metric(t, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	if v := p.metric(t, `snowtoken_reload_failures_total{source="keys"}`); v < 1 {
		t.Errorf(`snowtoken_reload_failures_total{source="keys"} = %v, want 1 or more`, v)
	}
	if v := p.metric(t, `snowtoken_reload_failures_total{source="clients"}`); v != 0 {
		t.Errorf(`snowtoken_reload_failures_total{source="clients"} = %v, want 0`, v)
	}
	for _, r := range p.records() {
		if r["event"] == "config.reload_refused" && (r["level"] != "ERROR" || r["source"] != "keys") {
			t.Errorf("refusal logged as %v, source %v; want ERROR, keys", r["level"], r["source"])
		}
	}
	if n := p.events("config.reload_refused"); n != 1 {
		t.Errorf("%d log lines for one broken keys.json, want 1", n)
	}

	if err := atomicfile.Replace(manifest, good); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(fleetWait)
	for p.metric(t, `snowtoken_reload_refused{source="keys"}`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal(`snowtoken_reload_refused{source="keys"} still 1 after keys.json was fixed`)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.readyConfig(t); got["refused"] != nil || got["keys"] != keysInForce {
		t.Errorf("/readyz config after keys.json was fixed: %v, want keys %v and nothing refused", got, keysInForce)
	}
}

// TestReloadOnModeChange replaces the clients file of a running replica with
// one that disables a client but that the replica cannot read (mode 0000,
// as a file left behind by root's umask or another owner would be): the
// reload is refused, shown in /readyz and snowtoken_reload_refused, and the
// client keeps its tokens. Then the mode alone is fixed (chmod 0600, as an
// operator does): the watcher takes that change too and the file loads,
// with no SIGHUP. As root, which reads any file, the replica runs as the
// user nobody (65534, through setpriv) and owns the files.
func TestReloadOnModeChange(t *testing.T) {
	bin := fleetBinary(t)
	redisURL, _ := fleetRedis(t)
	creds := newFleetCreds(t, bin)
	var asUser []string // the command that runs the replica
	uid := os.Geteuid()
	if uid == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("as root, needs setpriv (util-linux) to run the replica as a user whom a file mode can refuse")
		}
		uid = 65534
		asUser = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	dir, err := os.MkdirTemp("", "snowtoken-mode-") // t.TempDir is 0700: not for another user
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	place := func(from, name string, mode os.FileMode) string {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	keyPath := place(creds.keyPath, "signing.pem", 0o600)
	clients := place(creds.clientsPath, "clients.json", 0o600)
	p := fleet{bin, creds}.start(t, replica{name: "replica", ip: "127.0.0.56", redis: map[string]string{"SNOWTOKEN_REDIS_URL": redisURL},
		env: []string{"SNOWTOKEN_SIGNING_KEYS", keyPath, "SNOWTOKEN_CLIENTS_FILE", clients}, wrap: asUser})
	tok := p.issue(t, creds.svc, "")
	inForce := p.readyConfig(t)["clients"]

	// The new file: svc disabled, unreadable, renamed over the old one.
	staged := filepath.Join(t.TempDir(), "clients.json")
	if err := os.WriteFile(staged, mustRead(t, clients), 0o600); err != nil {
		t.Fatal(err)
	}
	fleetCommand(t, bin, "client", "disable", "-file", staged, "-id", creds.svc.id)
	next := place(staged, "clients.json.new", 0)
	if err := os.Rename(next, clients); err != nil {
		t.Fatal(err)
	}
	p.waitEvents(t, "config.reload_refused", 1)
	if status, _ := p.validate(t, tok); status != http.StatusOK {
		t.Errorf("svc's token while the new file is refused: %d, want 200 (the set in force)", status)
	}
	got := p.readyConfig(t)
	refused, _ := got["refused"].(map[string]any)
	if _, ok := refused["clients"].(map[string]any); got["clients"] != inForce || !ok {
		t.Errorf("/readyz config with the file unreadable: %v, want clients %v and clients refused", got, inForce)
	}
	var why string // the reason is in the error log, not on /readyz
	for _, r := range p.records() {
		if r["event"] == "config.reload_refused" && r["source"] == "clients" {
			why = fmt.Sprint(r["err"])
		}
	}
	if !strings.Contains(why, "permission denied") {
		t.Errorf("config.reload_refused for the clients file says %q, want permission denied", why)
	}
	if v := p.metric(t, `snowtoken_reload_refused{source="clients"}`); v != 1 {
		t.Errorf(`snowtoken_reload_refused{source="clients"} = %v, want 1`, v)
	}

	if err := os.Chmod(clients, 0o600); err != nil {
		t.Fatal(err)
	}
	took := p.until401(t, tok, "after the clients file was made readable")
	t.Logf("the disabled client's token answered 401 %v after the chmod", took.Round(time.Millisecond))
	p.waitClientsFile(t, clients)
	if v := p.metric(t, `snowtoken_reload_refused{source="clients"}`); v != 0 {
		t.Errorf(`snowtoken_reload_refused{source="clients"} = %v after the file loaded, want 0`, v)
	}
	if got := p.readyConfig(t); got["refused"] != nil {
		t.Errorf("/readyz config.refused %v after the file loaded, want none", got["refused"])
	}
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// setAudiences rewrites the clients file at path with the client id's
// audiences set to auds, as an operator edits it: a new file renamed over
// the old.
func setAudiences(tb testing.TB, path, id string, auds ...string) {
	tb.Helper()
	found := false
	editClients(tb, path, func(c map[string]any) {
		if c["id"] == id {
			c["audiences"], found = auds, true
		}
	})
	if !found {
		tb.Fatalf("no client %q in %s", id, path)
	}
}

// TestReloadNarrowedAudiences: taking an audience off a client in the
// clients file ends its tokens here at once (CheckClient) and in Redis too,
// as a client cutoff in the revocation log, so that the consumers that
// follow the log's feed, which never see the clients file, refuse them as
// well.
func TestReloadNarrowedAudiences(t *testing.T) {
	redisURL, rdb := fleetRedis(t)
	p := startIssuer(t, issuerOpts{redis: redisURL, prepare: func(_ string, creds fleetCreds) []string {
		setAudiences(t, creds.clientsPath, creds.svc.id, "https://a.test", "https://b.test")
		return nil
	}})
	creds := p.creds
	tok := p.issue(t, creds.svc, "")
	p.mustValidate(t, tok, p.worker(t))
	setAudiences(t, creds.clientsPath, creds.svc.id, "https://b.test")
	took := p.until401(t, tok, "after https://a.test was taken off its client")
	t.Logf("the token for the audience taken off answered 401 %v after the change", took.Round(time.Millisecond))
	rec := p.waitLog(t, "a client whose audiences the clients file narrowed: its tokens are revoked")
	if rec["client_id"] != creds.svc.id {
		t.Errorf("revoked %v, want %s", rec["client_id"], creds.svc.id)
	}
	entries, err := rdb.XRange(t.Context(), redisstore.DefaultKeyPrefix+"{revlog}", "-", "+").Result()
	if err != nil || len(entries) == 0 || entries[len(entries)-1].Values["k"] != "c" || entries[len(entries)-1].Values["i"] != creds.svc.id {
		t.Errorf("revocation log %v (%v), want the client's cutoff last", entries, err)
	}
	if p.findLog("a client removed or disabled in the clients file: its tokens are revoked") != nil {
		t.Error("the narrowed client was logged as removed or disabled")
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/logtest"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// The issuer driver: one type for a running issuer, whether the binary
// built from the repository root or the program in process (startProgram:
// run, as main calls it); one way to start the binary, one replica or many
// (a fleet's start and launch, startIssuer for one with a fleet of its
// own); and one way to call it: call sends any request, issue/issueForm,
// validate/validateRaw, revoke and revokeSubject the common ones, on top of
// it. spawnProc runs any other program (redis-server, Prometheus, the
// example consumer).

// issuer is one running snowtoken: a process of the binary, or the program
// run in process.
type issuer struct {
	name        string
	addr        string                 // host:port of the API
	metricsAddr string                 // host:port of the metrics listener, or off
	dev         fleetClient            // dev mode's client, from the banner; set by startProgram
	bin         string                 // the binary; set by a fleet
	creds       fleetCreds             // its key and clients; set by a fleet
	feeds       map[string]fleetClient // clients with revocation_feed, by ID; set by startIssuer
	cmd         *exec.Cmd              // the process; nil in process
	cancel      context.CancelFunc     // ends the program in process; nil for a process
	out         *logtest.Buffer
	done        chan struct{} // closed when the process or the program has ended
	err         error         // what Wait or run returned; read after done
}

// startProgram runs the program in process with env until the test ends,
// and returns once it listens (and, in dev mode, has printed its banner, so
// that dev holds the dev client).
func startProgram(tb testing.TB, env map[string]string) *issuer {
	tb.Helper()
	env = withMetricsAddr(env)
	ctx, cancel := context.WithCancel(context.Background())
	p := &issuer{name: "program", cancel: cancel, out: &logtest.Buffer{}, done: make(chan struct{})}
	go func() {
		p.err = run(ctx, nil, env, p.out)
		close(p.done)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(waitLimit):
			tb.Error("the program did not stop")
		}
	})
	rec := p.waitLog(tb, "listening")
	p.addr, _ = rec["addr"].(string)
	p.metricsAddr, _ = rec["metrics_addr"].(string)
	if env["SNOWTOKEN_ENV"] == "production" {
		return p
	}
	secretRE := regexp.MustCompile(`CLIENT_SECRET=(\S+)`)
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(5 * time.Millisecond) {
		if m := secretRE.FindStringSubmatch(p.out.String()); m != nil {
			p.dev = fleetClient{id: "dev", secret: m[1]}
			return p
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the program printed no dev banner; output:\n%s", p.logs())
		}
	}
}

// withMetricsAddr is env with the metrics listener on a free loopback port
// unless env says where: the default port would be shared by parallel runs.
func withMetricsAddr(env map[string]string) map[string]string {
	if _, ok := env["SNOWTOKEN_METRICS_ADDR"]; ok {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	out["SNOWTOKEN_METRICS_ADDR"] = "127.0.0.1:0"
	return out
}

// stop ends the issuer as an operator does (SIGTERM to a process, the
// context's end in process) and returns what Wait or run returned.
func (p *issuer) stop(tb testing.TB) error {
	tb.Helper()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	} else {
		p.cancel()
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(waitLimit):
		tb.Fatalf("%s did not stop", p.name)
		return nil
	}
}

// logs returns everything the issuer wrote so far.
func (p *issuer) logs() string { return p.out.String() }

// spawnProc starts bin with args and env only (and PATH); the process is
// killed when tb ends if it still runs, and its output shown if tb failed.
func spawnProc(tb testing.TB, name string, env map[string]string, bin string, args ...string) *issuer {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &issuer{name: name, cmd: cmd, out: &logtest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.kill()
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", name, lastLines(p.out.String(), 40))
		}
	})
	return p
}

// fleet is what the replicas of a test share: the binary and its
// credentials, one signing key and one clients file (fleetCreds).
type fleet struct {
	bin   string
	creds fleetCreds
}

// newFleet is the binary built from the repository root with new
// credentials.
func newFleet(tb testing.TB) fleet {
	tb.Helper()
	bin := fleetBinary(tb)
	return fleet{bin: bin, creds: newFleetCreds(tb, bin)}
}

// replica says how a fleet starts one replica; each zero field means the
// usual.
type replica struct {
	name   string            // in failures; "issuer" when empty
	ip     string            // worker IP and listening address; 127.0.0.1 when empty
	listen string            // the listening address's IP when not ip (a second replica on one worker IP)
	redis  map[string]string // the SNOWTOKEN_REDIS_* variables
	env    []string          // more variables, as name, value pairs; they win
	wrap   []string          // a command, with its arguments, that runs the binary (prlimit, setpriv)
	dev    bool              // dev mode: no credentials, no Redis, only the address (and env)
}

// start starts r and returns it once it listens and is ready: on a Redis
// where its worker has no mark yet, a replica waits one lease TTL before
// it issues (lease: Lost state).
func (f fleet) start(tb testing.TB, r replica) *issuer {
	tb.Helper()
	p := f.launch(tb, r)
	p.metricsAddr, _ = p.waitLog(tb, "listening")["metrics_addr"].(string)
	waitReady(tb, p.url("/readyz"), fleetWait)
	return p
}

// launch starts r and returns at once, for a test that waits itself or
// watches it refuse to start; the process is killed when tb ends if it
// still runs.
func (f fleet) launch(tb testing.TB, r replica) *issuer {
	tb.Helper()
	if r.name == "" {
		r.name = "issuer"
	}
	if r.ip == "" {
		r.ip = "127.0.0.1"
	}
	if r.listen == "" {
		r.listen = r.ip
	}
	var env map[string]string
	if r.dev {
		env = map[string]string{"SNOWTOKEN_ADDR": fleetAddr(tb, r.listen)}
		for i := 0; i+1 < len(r.env); i += 2 {
			env[r.env[i]] = r.env[i+1]
		}
	} else {
		env = f.creds.env(r.redis, fleetAddr(tb, r.listen), r.ip, r.env...)
	}
	env = withMetricsAddr(env)
	cmd := append(slices.Clone(r.wrap), f.bin)
	p := spawnProc(tb, r.name, env, cmd[0], cmd[1:]...)
	p.addr = env["SNOWTOKEN_ADDR"]
	p.bin, p.creds = f.bin, f.creds
	return p
}

// issuerOpts says how startIssuer starts an issuer from the binary; each
// zero field means the usual.
type issuerOpts struct {
	ip    string   // worker IP and listening address; 127.0.0.1 when empty
	redis string   // SNOWTOKEN_REDIS_URL; fleetRedis's when empty
	feeds []string // IDs of more clients, allowed the revocation feed
	env   []string // more variables, as name, value pairs
	// prepare, when set, runs before the start with the binary and the
	// credentials (to add clients or keys) and returns more variables.
	prepare func(bin string, creds fleetCreds) []string
}

// startIssuer starts one production issuer, a fleet of its own (newFleet)
// on a real Redis, as o says, and returns it ready.
func startIssuer(tb testing.TB, o issuerOpts) *issuer {
	tb.Helper()
	f := newFleet(tb)
	feeds := map[string]fleetClient{}
	for _, id := range o.feeds {
		out := fleetCommand(tb, f.bin, "client", "new", "-file", f.creds.clientsPath, "-id", id)
		feeds[id] = fleetClient{id: id, secret: secretIn(tb, out)}
	}
	if len(feeds) > 0 {
		editClients(tb, f.creds.clientsPath, func(c map[string]any) {
			if _, ok := feeds[c["id"].(string)]; ok {
				c["revocation_feed"] = true
			}
		})
	}
	if o.redis == "" {
		o.redis, _ = fleetRedis(tb)
	}
	env := o.env
	if o.prepare != nil {
		env = append(env, o.prepare(f.bin, f.creds)...)
	}
	p := f.start(tb, replica{ip: o.ip, redis: map[string]string{"SNOWTOKEN_REDIS_URL": o.redis}, env: env})
	p.feeds = feeds
	return p
}

// waitReady polls readyz until it answers 200, or fails tb after limit.
func waitReady(tb testing.TB, readyz string, limit time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := fleetHTTP.Get(readyz)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready after %v: %v", readyz, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the process at once, if it still runs, and waits for it.
func (p *issuer) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
	} else {
		p.cancel()
	}
	<-p.done
}

// exited waits for the process to end by itself and returns what Wait returned.
func (p *issuer) exited(tb testing.TB) error {
	tb.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(fleetWait):
		tb.Fatalf("%s did not exit", p.name)
		return nil
	}
}

// records returns the JSON log records the process has written so far.
func (p *issuer) records() []map[string]any {
	var recs []map[string]any
	for line := range strings.Lines(p.out.String()) {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil {
			recs = append(recs, r)
		}
	}
	return recs
}

// findLog returns the first log record with message msg, or nil.
func (p *issuer) findLog(msg string) map[string]any {
	for _, r := range p.records() {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// waitLog waits for a log record with message msg and returns it.
func (p *issuer) waitLog(tb testing.TB, msg string) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(fleetWait)
	for {
		exited := false
		select {
		case <-p.done:
			exited = true
		default:
		}
		if r := p.findLog(msg); r != nil {
			return r
		}
		if exited {
			tb.Fatalf("%s exited (%v) before logging %q; output:\n%s", p.name, p.err, msg, lastLines(p.out.String(), 40))
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not log %q; output:\n%s", p.name, msg, lastLines(p.out.String(), 40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// worker returns the worker ID the process logged when it started listening.
func (p *issuer) worker(tb testing.TB) int64 {
	tb.Helper()
	w, ok := p.waitLog(tb, "listening")["worker_id"].(float64)
	if !ok {
		tb.Fatalf("%s logged no worker_id when it started listening", p.name)
	}
	return int64(w)
}

func lastLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

func (p *issuer) url(path string) string { return "http://" + p.addr + path }

// metricsURL is the URL of GET /metrics on p's metrics listener.
func (p *issuer) metricsURL(tb testing.TB) string {
	tb.Helper()
	addr, ok := p.waitLog(tb, "listening")["metrics_addr"].(string)
	if !ok || addr == "off" {
		tb.Fatalf("%s logs no metrics_addr", p.name)
	}
	return "http://" + addr + "/metrics"
}

var fleetHTTP = &http.Client{Timeout: 10 * time.Second}

// fleetCall sends one request: a form with HTTP Basic client authentication
// when c is set, else a Bearer token when bearer is set. It returns the
// status, headers and body.
func fleetCall(tb testing.TB, method, target string, c *fleetClient, bearer string, form url.Values) (int, http.Header, []byte) {
	tb.Helper()
	req, err := newCall(method, target, c, bearer, form)
	if err != nil {
		tb.Fatal(err)
	}
	return roundTrip(tb, req)
}

// newCall is the request fleetCall and faultDo send: form as its body when
// set, HTTP Basic as c when c is set, a Bearer token when bearer is set.
func newCall(method, target string, c *fleetClient, bearer string, form url.Values) (*http.Request, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c != nil {
		req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return req, nil
}

// roundTrip sends req and returns the status, headers and body.
func roundTrip(tb testing.TB, req *http.Request) (int, http.Header, []byte) {
	tb.Helper()
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, resp.Header, b
}

// doRequest sends req and returns the status and body.
func doRequest(tb testing.TB, req *http.Request) (int, []byte) {
	tb.Helper()
	status, _, body := roundTrip(tb, req)
	return status, body
}

// call sends one request to path at p, as fleetCall does.
func (p *issuer) call(tb testing.TB, method, path string, c *fleetClient, bearer string, form url.Values) (int, http.Header, []byte) {
	tb.Helper()
	return fleetCall(tb, method, p.url(path), c, bearer, form)
}

// post POSTs form to path at p with c's HTTP Basic authentication and
// returns the status and body.
func (p *issuer) post(tb testing.TB, path string, c fleetClient, form url.Values) (int, []byte) {
	tb.Helper()
	status, _, body := p.call(tb, http.MethodPost, path, &c, "", form)
	return status, body
}

// fleetToken is the part of a POST /token response the tests use.
type fleetToken struct {
	AccessToken string          `json:"access_token"`
	TokenID     snowflakealg.ID `json:"jti"`
}

// fleetClaims is the part of a GET /token/validate response the tests use.
type fleetClaims struct {
	Subject  string          `json:"sub"`
	JTI      snowflakealg.ID `json:"jti"`
	WorkerID int64           `json:"worker_id"`
}

// tryIssue asks for a token for subject (empty: the client itself).
func (p *issuer) tryIssue(tb testing.TB, c fleetClient, subject string) (int, http.Header, fleetToken, []byte) {
	tb.Helper()
	form := url.Values{}
	if subject != "" {
		form.Set("subject", subject)
	}
	return p.tryIssueForm(tb, c, form)
}

// tryIssueForm asks for a token with form (grant_type set here).
func (p *issuer) tryIssueForm(tb testing.TB, c fleetClient, form url.Values) (int, http.Header, fleetToken, []byte) {
	tb.Helper()
	form.Set("grant_type", "client_credentials")
	status, h, body := p.call(tb, http.MethodPost, "/token", &c, "", form)
	var tok fleetToken
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" || tok.TokenID == 0 {
			tb.Fatalf("POST /token at %s: %s: %v", p.name, body, err)
		}
	}
	return status, h, tok, body
}

// issueForm asks for a Bearer token with form, which must be issued, and
// returns the access token.
func (p *issuer) issueForm(tb testing.TB, c fleetClient, form url.Values) string {
	tb.Helper()
	status, _, tok, body := p.tryIssueForm(tb, c, form)
	var typ struct {
		TokenType string `json:"token_type"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &typ) != nil || typ.TokenType != "Bearer" {
		tb.Fatalf("POST /token at %s: %d %s, want 200 with a Bearer access_token", p.name, status, body)
	}
	return tok.AccessToken
}

// issue asks for a token, which must be issued.
func (p *issuer) issue(tb testing.TB, c fleetClient, subject string) fleetToken {
	tb.Helper()
	status, _, tok, body := p.tryIssue(tb, c, subject)
	if status != http.StatusOK {
		tb.Fatalf("POST /token at %s: %d %s, want 200", p.name, status, body)
	}
	return tok
}

// validate checks a token at the process and returns the status and claims.
func (p *issuer) validate(tb testing.TB, tok fleetToken) (int, fleetClaims) {
	tb.Helper()
	status, body := p.validateRaw(tb, tok.AccessToken)
	var cl fleetClaims
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &cl); err != nil {
			tb.Fatalf("GET /token/validate at %s: %s: %v", p.name, body, err)
		}
	}
	return status, cl
}

// validateRaw calls GET /token/validate with access and returns the status
// and body.
func (p *issuer) validateRaw(tb testing.TB, access string) (int, []byte) {
	tb.Helper()
	status, _, body := p.call(tb, http.MethodGet, "/token/validate", nil, access, nil)
	return status, body
}

// mustValidate checks that the token is live at the process and was issued
// under worker.
func (p *issuer) mustValidate(tb testing.TB, tok fleetToken, worker int64) {
	tb.Helper()
	status, cl := p.validate(tb, tok)
	if status != http.StatusOK || cl.JTI != tok.TokenID || cl.WorkerID != worker {
		tb.Fatalf("token %d at %s: %d %+v, want 200 with jti %d, worker %d", tok.TokenID, p.name, status, cl, tok.TokenID, worker)
	}
}

// mustReject checks that the token is refused at the process as invalid:
// at once when the process revoked it itself or decides from Redis, within
// SNOWTOKEN_REVLOG_THRESHOLD when its revocation log follower must apply
// the entry first (it polls for up to fleetRejectWait, a bound for a hung
// test, not the guarantee, which the load tool measures: cd bench && go
// run ./cmd/load -revocation), and for good once refused.
func (p *issuer) mustReject(tb testing.TB, tok fleetToken, why string) {
	tb.Helper()
	status, _ := p.validate(tb, tok)
	for end := time.Now().Add(fleetRejectWait); status == http.StatusOK && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		status, _ = p.validate(tb, tok)
	}
	if status != http.StatusUnauthorized {
		tb.Fatalf("token %d at %s %s: %d, want 401", tok.TokenID, p.name, why, status)
	}
	if status, _ := p.validate(tb, tok); status != http.StatusUnauthorized {
		tb.Fatalf("token %d at %s %s: refused, then %d", tok.TokenID, p.name, why, status)
	}
}

// fleetRejectWait bounds how long mustReject waits for a revocation to reach
// a process that decides from the revocation log.
const fleetRejectWait = 2 * time.Second

// revoke revokes a token through RFC 7009 and returns the status.
func (p *issuer) revoke(tb testing.TB, c fleetClient, tok fleetToken) int {
	tb.Helper()
	status, _, _ := fleetCall(tb, http.MethodPost, p.url("/token/revoke"), &c, "", url.Values{"token": {tok.AccessToken}})
	return status
}

// revokeSubject revokes every token of subject and returns the status.
func (p *issuer) revokeSubject(tb testing.TB, c fleetClient, subject string) int {
	tb.Helper()
	status, _, _ := fleetCall(tb, http.MethodDelete, p.url("/subjects/"+url.PathEscape(subject)+"/tokens"), &c, "", nil)
	return status
}

// decodeWorker asks the process to decode an ID and returns its worker.
func (p *issuer) decodeWorker(tb testing.TB, id snowflakealg.ID) int64 {
	tb.Helper()
	status, _, body := fleetCall(tb, http.MethodGet, p.url("/ids/"+id.String()), nil, "", nil)
	var parts snowflakealg.Parts
	if status != http.StatusOK || json.Unmarshal(body, &parts) != nil || parts.ID != id {
		tb.Fatalf("GET /ids/%d at %s: %d %s", id, p.name, status, body)
	}
	return parts.Worker
}

package docker

import (
	"cmp"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
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

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/redisstore"
	"github.com/snowtoken/snowtoken/token/txn"
)

// envRequireNginx makes a missing nginx a failure instead of a skip; CI sets it.
const envRequireNginx = "SNOWTOKEN_TEST_REQUIRE_NGINX"

// nginxBinary returns the nginx to run, or skips (fails under envRequireNginx).
func nginxBinary(tb testing.TB) string {
	tb.Helper()
	missing := func(why string) {
		tb.Helper()
		if os.Getenv(envRequireNginx) == "1" {
			tb.Fatalf("%s, and %s=1", why, envRequireNginx)
		}
		tb.Skipf("%s (set %s=1 to make this a failure)", why, envRequireNginx)
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		missing("nginx is not on PATH")
	}
	out, err := exec.Command(bin, "-V").CombinedOutput()
	if err != nil {
		missing(fmt.Sprintf("nginx -V: %v: %s", err, out))
	}
	if !strings.Contains(string(out), "http_auth_request_module") {
		missing("this nginx has no auth_request module")
	}
	// startNginx logs with -e, which nginx has since 1.19.5.
	if v, ok := nginxVersion(string(out)); !ok || slices.Compare(v, []int{1, 19, 5}) < 0 {
		missing(fmt.Sprintf("this nginx (%s) is older than 1.19.5, which the test needs for -e", strings.Trim(strings.ReplaceAll(fmt.Sprint(v), " ", "."), "[]")))
	}
	return bin
}

// nginxVersion reads the version out of nginx -V's "nginx version: nginx/1.22.1".
func nginxVersion(v string) ([]int, bool) {
	_, rest, ok := strings.Cut(v, "nginx version: nginx/")
	rest, _, _ = strings.Cut(rest, "\n")
	rest, _, _ = strings.Cut(rest, " ")
	if !ok || rest == "" {
		return nil, false
	}
	var out []int
	for f := range strings.SplitSeq(rest, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) == 3
}

func TestNginxVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"nginx version: nginx/1.22.1\nbuilt with OpenSSL", []int{1, 22, 1}},
		{"nginx version: nginx/1.18.0 (Ubuntu)\n", []int{1, 18, 0}},
		{"nginx version: openresty/1.21.4.1\n", nil},
		{"", nil},
		{"nginx version: nginx/", nil},
	} {
		if got, ok := nginxVersion(c.in); !slices.Equal(got, c.want) || ok != (c.want != nil) {
			t.Errorf("nginxVersion(%q) = %v, %v; want %v", c.in, got, ok, c.want)
		}
	}
}

// nginxHosts are the host-specific strings of nginx/default.conf: Docker's
// DNS server, the issuer's and the three consumers' addresses, and the
// listen address. An empty consumerFollow is 127.0.0.1:1, where nothing
// answers.
type nginxHosts struct{ resolver, issuer, consumer, consumerDPoP, listen, consumerFollow string }

// renderNginxConf is nginx/default.conf with its six host-specific strings
// replaced, each exactly once, and nothing else changed.
func renderNginxConf(tb testing.TB, conf string, h nginxHosts) string {
	tb.Helper()
	h.consumerFollow = cmp.Or(h.consumerFollow, "127.0.0.1:1")
	for _, r := range []struct{ old, new string }{
		{"resolver 127.0.0.11 ", "resolver " + h.resolver + " "},
		{"set $snowtoken_issuer issuer:8080;", "set $snowtoken_issuer " + h.issuer + ";"},
		{"server consumer:8081;", "server " + h.consumer + ";"},
		{"server consumer-dpop:8081;", "server " + h.consumerDPoP + ";"},
		{"server consumer-follow:8081;", "server " + h.consumerFollow + ";"},
		{"listen 8080;", "listen " + h.listen + ";"},
	} {
		if n := strings.Count(conf, r.old); n != 1 {
			tb.Fatalf("nginx/default.conf holds %q %d times, want once", r.old, n)
		}
		conf = strings.Replace(conf, r.old, r.new, 1)
	}
	return conf
}

// nginxMainConf stands in for the image's /etc/nginx/nginx.conf, which
// includes conf.d/*.conf in its http block; every path is under dir, so
// nginx runs unprivileged and leaves nothing behind.
func nginxMainConf(dir, version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker_processes 1;\nevents { worker_connections 256; }\nhttp {\n")
	fmt.Fprintf(&b, "    default_type application/octet-stream;\n    keepalive_timeout 65;\n")
	fmt.Fprintf(&b, "    access_log %s;\n", filepath.Join(dir, "access.log"))
	fmt.Fprintf(&b, "    client_body_temp_path %s;\n    proxy_temp_path %s;\n", filepath.Join(dir, "tmp", "body"), filepath.Join(dir, "tmp", "proxy"))
	for _, m := range []string{"fastcgi", "uwsgi", "scgi"} {
		if !strings.Contains(version, "--without-http_"+m+"_module") {
			fmt.Fprintf(&b, "    %s_temp_path %s;\n", m, filepath.Join(dir, "tmp", m))
		}
	}
	fmt.Fprintf(&b, "    include %s;\n}\n", filepath.Join(dir, "default.conf"))
	return b.String()
}

func TestRenderNginxConf(t *testing.T) {
	conf, err := os.ReadFile(filepath.Join("nginx", "default.conf"))
	if err != nil {
		t.Fatal(err)
	}
	got := renderNginxConf(t, string(conf), nginxHosts{"127.0.0.1:4", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:5", "127.0.0.1:3", "127.0.0.1:6"})
	if got == string(conf) {
		t.Fatal("rendering changed nothing")
	}
	// Undoing the six replacements gives the file back: nothing else changed.
	back := strings.NewReplacer("resolver 127.0.0.1:4 ", "resolver 127.0.0.11 ", "issuer 127.0.0.1:1;", "issuer issuer:8080;",
		"server 127.0.0.1:2;", "server consumer:8081;", "server 127.0.0.1:5;", "server consumer-dpop:8081;",
		"server 127.0.0.1:6;", "server consumer-follow:8081;", "listen 127.0.0.1:3;", "listen 8080;").Replace(got)
	if back != string(conf) {
		t.Error("rendering changed more than the six host-specific strings")
	}
}

// recorder is a reverse proxy that remembers the headers of what passed.
type recorder struct {
	mu   sync.Mutex
	seen []http.Header
	next http.Handler
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.seen = append(rec.seen, r.Header.Clone())
	rec.mu.Unlock()
	rec.next.ServeHTTP(w, r)
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.seen)
}

func (rec *recorder) last(tb testing.TB) http.Header {
	tb.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) == 0 {
		tb.Fatal("nothing reached the upstream")
	}
	return rec.seen[len(rec.seen)-1]
}

// testIssuer is the real issuer in-process, wired as serve.go wires it, as
// the Compose stack configures it: nginx's address (127.0.0.1 here,
// 172.28.0.2 there) is both a trusted proxy (its X-Forwarded-For names the
// client) and a DPoP forwarder (its auth_request names the original
// request), and DPoP proofs are checked against the store's shared record.
type testIssuer struct {
	redis   *redistest.Redis
	secret  string // client demo: orders:read orders:write, as `snowtoken init` makes it
	handler http.Handler
	// feed is the revocation log the issuer serves (fresh), to client
	// feeder with feedSecret.
	feed       *revfeedtest.Source
	feedSecret string
	// skew moves the issuer's clock (token.Options.Now) from the wall
	// clock's, in nanoseconds: a token issued while it is two hours back
	// has expired when it is zero again.
	skew atomic.Int64
	// txnKey is the key its Transaction Tokens verify with.
	txnKey txntoken.Keys
}

// newTestIssuer starts one at issuerURL, its public URL (SNOWTOKEN_ISSUER);
// with dpopNonces, DPoP proofs must carry its nonces (SNOWTOKEN_DPOP_NONCE).
func newTestIssuer(tb testing.TB, issuerURL string, dpopNonces bool) *testIssuer {
	tb.Helper()
	r := redistest.New(tb)
	k := keysettest.MustKey(tb)
	keys, err := keyset.New(k)
	if err != nil {
		tb.Fatal(err)
	}
	secret, sum, err := clients.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	feedSecret, feedSum, err := clients.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	clients, err := clients.New([]clients.Client{{ID: "demo", SecretSHA256: sum, Scopes: []string{"orders:read", "orders:write"}},
		{ID: "feeder", SecretSHA256: feedSum, Scopes: []string{}, RevocationFeed: true}})
	if err != nil {
		tb.Fatal(err)
	}
	feed := revfeedtest.New(true)
	ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 7})
	if err != nil {
		tb.Fatal(err)
	}
	store, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		tb.Fatal(err)
	}
	iss := &testIssuer{redis: r, secret: secret, feed: feed, feedSecret: feedSecret}
	now := func() time.Time { return time.Now().Add(time.Duration(iss.skew.Load())) }
	svc, err := token.NewService(keys, store, ids, token.Options{Issuer: issuerURL, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	minter, err := txn.New(txn.Options{TrustDomain: "shop.internal"}, ids) // the Compose file's SNOWTOKEN_TXN_TRUST_DOMAIN
	if err != nil {
		tb.Fatal(err)
	}
	iss.txnKey = func(string) (ed25519.PublicKey, error) { return k.Public, nil }
	iss.handler, err = handlers.New(handlers.Options{Txn: minter,
		Service: svc, Clients: clients, IDs: ids,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Feed:   feed, TrustedProxies: []string{"127.0.0.1"}, DPoPForwarders: []string{"127.0.0.1"},
		DPoP: dpop.Options{Replay: store.Proofs()}, DPoPNonces: dpopNonces,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return iss
}

// startConsumer runs the consumer binary the Dockerfile builds, configured
// as the Compose file configures it (consumer-dpop with publicURL, the
// consumer without), and returns its address.
func startConsumer(tb testing.TB, issuerURL, publicURL string) string {
	tb.Helper()
	bin := builtBinaries(tb)["consumer"]
	addr := "127.0.0.1:" + strconv.Itoa(freePort(tb))
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SNOWTOKEN_ISSUER_URL=" + issuerURL, "CONSUMER_ADDR=" + addr, "CONSUMER_PUBLIC_URL=" + publicURL}
	exited, output := startProcess(tb, "consumer", cmd, syscall.SIGTERM)
	waitOK(tb, "http://"+addr+"/healthz", exited, output)
	return addr
}

// startNginx runs nginx with conf as its server block on a free loopback
// port, and returns the port's URL. h.listen is chosen here.
func startNginx(tb testing.TB, bin string, h nginxHosts) string {
	tb.Helper()
	version, _ := exec.Command(bin, "-V").CombinedOutput()
	conf, err := os.ReadFile(filepath.Join("nginx", "default.conf"))
	if err != nil {
		tb.Fatal(err)
	}
	h.listen = "127.0.0.1:" + strconv.Itoa(freePort(tb))
	dir := tb.TempDir()
	// nginx started as root runs its worker as nobody, which must reach dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		tb.Fatal(err)
	}
	rendered := renderNginxConf(tb, string(conf), h)
	if err := os.WriteFile(filepath.Join(dir, "default.conf"), []byte(rendered), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(nginxMainConf(dir, string(version))), 0o644); err != nil {
		tb.Fatal(err)
	}
	args := []string{"-p", dir + "/", "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr",
		"-g", "daemon off; pid " + filepath.Join(dir, "nginx.pid") + "; error_log stderr;"}
	if out, err := exec.Command(bin, append([]string{"-t"}, args...)...).CombinedOutput(); err != nil {
		tb.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	exited, output := startProcess(tb, "nginx", cmd, syscall.SIGQUIT) // SIGQUIT: graceful stop
	tb.Cleanup(func() {
		if tb.Failed() {
			access, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			tb.Logf("nginx access log:\n%s", access)
		}
	})
	base := "http://" + h.listen
	waitOK(tb, base+"/nginx-health", exited, output)
	return base
}

// waitOK polls url until it answers 200, failing if the process exits first.
func waitOK(tb testing.TB, url string, exited <-chan struct{}, output func() string) {
	tb.Helper()
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			tb.Fatalf("%s: the process exited\n%s", url, output())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not answer 200 in 15s (last error %v)\n%s", url, err, output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callGateway sends a request to nginx at base, a form body (if any) with
// its Content-Type, and returns the response with its body read.
func callGateway(tb testing.TB, c *http.Client, base, method, path string, header http.Header, body string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, string(b)
}

// TestNginxGateway runs nginx/default.conf in a real nginx in front of the
// real issuer and the real consumer, and checks what a client and the
// consumer see.
func TestNginxGateway(t *testing.T) {
	nginx := nginxBinary(t)
	const issuerURL = "http://localhost:8080" // the Compose file's SNOWTOKEN_ISSUER

	iss := newTestIssuer(t, issuerURL, false)
	issuerRec := &recorder{next: iss.handler}
	issuerSrv := httptest.NewServer(issuerRec)
	t.Cleanup(issuerSrv.Close)

	consumerAddr := startConsumer(t, issuerSrv.URL, "")
	consumerURL, _ := url.Parse("http://" + consumerAddr)
	consumerRec := &recorder{next: httputil.NewSingleHostReverseProxy(consumerURL)}
	consumerSrv := httptest.NewServer(consumerRec)
	t.Cleanup(consumerSrv.Close)

	// consumer-follow stands in: it validates tokens itself, so nginx
	// passes the request on as it came.
	var (
		followMu   sync.Mutex
		followPath string
	)
	followRec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followMu.Lock()
		followPath = r.URL.RequestURI()
		followMu.Unlock()
		io.WriteString(w, `{"orders":[]}`)
	})}
	followSrv := httptest.NewServer(followRec)
	t.Cleanup(followSrv.Close)

	gw := startNginx(t, nginx, nginxHosts{resolver: "127.0.0.11", issuer: issuerSrv.Listener.Addr().String(), consumer: consumerSrv.Listener.Addr().String(), consumerDPoP: "127.0.0.1:1",
		consumerFollow: followSrv.Listener.Addr().String()})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(client.CloseIdleConnections)

	do := func(t *testing.T, method, path string, header http.Header, body string) (*http.Response, string) {
		t.Helper()
		return callGateway(t, client, gw, method, path, header, body)
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	type issued struct {
		AccessToken string `json:"access_token"`
		Scope       string `json:"scope"`
		TokenID     string `json:"jti"`
	}
	issue := func(t *testing.T, scope string, extra http.Header) issued {
		t.Helper()
		form := url.Values{"grant_type": {"client_credentials"}}
		if scope != "" {
			form.Set("scope", scope)
		}
		h := http.Header{}
		for k, v := range extra {
			h[k] = v
		}
		req, _ := http.NewRequest("POST", "/", nil)
		req.SetBasicAuth("demo", iss.secret)
		h.Set("Authorization", req.Header.Get("Authorization"))
		resp, body := do(t, "POST", "/token", h, form.Encode())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /token through nginx: %s %s", resp.Status, body)
		}
		var tok issued
		if err := json.Unmarshal([]byte(body), &tok); err != nil || tok.AccessToken == "" {
			t.Fatalf("POST /token: %v: %s", err, body)
		}
		return tok
	}
	forged := http.Header{
		"X-Auth-Subject":  {"admin"},
		"X-Auth-Client":   {"admin"},
		"X-Auth-Scope":    {"orders:read orders:write admin"},
		"X-Auth-Token-Id": {"1"},
		"Txn-Token":       {"eyJhbGciOiJub25lIiwidHlwIjoidHhudG9rZW4rand0In0.eyJzdWIiOiJhZG1pbiJ9."},
	}
	withForged := func(h http.Header) http.Header {
		for k, v := range forged {
			h[k] = v
		}
		return h
	}

	var tok issued
	t.Run("token route strips X-Auth headers", func(t *testing.T) {
		tok = issue(t, "", forged)
		got := issuerRec.last(t)
		for k := range forged {
			if v := got.Values(k); len(v) > 0 {
				t.Errorf("the issuer got client-sent %s: %q", k, v)
			}
		}
		if tok.Scope != "orders:read orders:write" {
			t.Errorf("scope %q, want the client's scopes", tok.Scope)
		}
	})

	// wantJSONError checks an error nginx answers itself: the API's own
	// shape (RFC 6749 / 6750 JSON), never nginx's HTML page.
	wantJSONError := func(t *testing.T, resp *http.Response, body, code string) {
		t.Helper()
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") ||
			json.Unmarshal([]byte(body), &e) != nil || e.Error != code || e.Description == "" {
			t.Errorf("%s %s (%s): want a JSON error %q with a description", resp.Status, body, ct, code)
		}
	}

	t.Run("no token is 401", func(t *testing.T) {
		before := consumerRec.count()
		resp, body := do(t, "GET", "/orders", withForged(http.Header{}), "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %s, want 401", resp.Status)
		}
		wantJSONError(t, resp, body, "invalid_token")
		if c := resp.Header.Values("WWW-Authenticate"); len(c) != 1 || !strings.HasPrefix(c[0], "Bearer ") {
			t.Errorf("WWW-Authenticate %q, want one: the issuer's Bearer challenge", c)
		}
		if consumerRec.count() != before {
			t.Error("the consumer was reached without a token")
		}
	})

	t.Run("bad token is 401", func(t *testing.T) {
		resp, body := do(t, "GET", "/orders", bearer("not.a.token"), "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %s, want 401", resp.Status)
		}
		wantJSONError(t, resp, body, "invalid_token")
		if c := resp.Header.Values("WWW-Authenticate"); len(c) != 1 || !strings.Contains(c[0], `error="invalid_token"`) {
			t.Errorf("WWW-Authenticate %q, want one, with error=\"invalid_token\"", c)
		}
	})

	t.Run("valid token reaches the consumer with its identity", func(t *testing.T) {
		resp, body := do(t, "GET", "/orders", withForged(bearer(tok.AccessToken)), "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s, want 200: %s", resp.Status, body)
		}
		if c := resp.Header.Get("WWW-Authenticate"); c != "" {
			t.Errorf("a 200 carries WWW-Authenticate %q", c)
		}
		got := consumerRec.last(t)
		for k, want := range map[string]string{
			"X-Auth-Subject":  "demo",
			"X-Auth-Client":   "demo",
			"X-Auth-Scope":    "orders:read orders:write",
			"X-Auth-Token-Id": tok.TokenID,
		} {
			if v := got.Values(k); len(v) != 1 || v[0] != want {
				t.Errorf("the consumer saw %s: %q, want only %q (the client sent %q)", k, v, want, forged.Get(k))
			}
		}
		if got.Get("Authorization") != "Bearer "+tok.AccessToken {
			t.Error("the consumer did not get the bearer token to check it itself")
		}
		// The Transaction Token the validation minted, in place of the
		// client's: verified with the issuer's key, for the same subject.
		if txns := got.Values(txntoken.Header); len(txns) != 1 {
			t.Errorf("the consumer saw Txn-Token %q, want one, the issuer's", txns)
		} else if c, err := txntoken.Parse(txns[0], iss.txnKey, txntoken.ParseOptions{TrustDomain: "shop.internal"}); err != nil || c.Subject != "demo" || c.Scope != "orders:read" {
			t.Errorf("the consumer's Txn-Token: %+v, %v: want the issuer's, sub demo, scope orders:read", c, err)
		}
		var answer struct {
			Subject string `json:"subject"`
		}
		if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Subject != "demo" {
			t.Errorf("the consumer answered %s, want subject demo (%v)", body, err)
		}
	})

	t.Run("token without orders:read is 403", func(t *testing.T) {
		writer := issue(t, "orders:write", nil)
		before := consumerRec.count()
		resp, body := do(t, "GET", "/orders", bearer(writer.AccessToken), "")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %s, want 403", resp.Status)
		}
		wantJSONError(t, resp, body, "insufficient_scope")
		if c := resp.Header.Values("WWW-Authenticate"); len(c) != 1 || !strings.Contains(c[0], `error="insufficient_scope"`) {
			t.Errorf("WWW-Authenticate %q, want one, with error=\"insufficient_scope\"", c)
		}
		if consumerRec.count() != before {
			t.Error("the consumer was reached with a token lacking orders:read")
		}
	})

	t.Run("well-known routes reach the issuer", func(t *testing.T) {
		resp, body := do(t, "GET", "/.well-known/jwks.json", nil, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"keys"`) {
			t.Errorf("GET /.well-known/jwks.json: %s %s", resp.Status, body)
		}
		resp, body = do(t, "GET", "/.well-known/oauth-authorization-server", nil, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, issuerURL+"/token") {
			t.Errorf("GET /.well-known/oauth-authorization-server: %s %s", resp.Status, body)
		}
	})

	t.Run("other paths are 404 at the gateway", func(t *testing.T) {
		for _, p := range []string{"/metrics", "/healthz", "/subjects/demo/tokens", "/_auth/orders", "/orders/1"} {
			if resp, _ := do(t, "GET", p, nil, ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s: %s, want 404", p, resp.Status)
			}
		}
	})

	t.Run("follow consumer gets the request with no auth_request", func(t *testing.T) {
		asked := issuerRec.count()
		resp, body := do(t, "GET", "/follow/orders", withForged(bearer(tok.AccessToken)), "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /follow/orders: %s %s, want the consumer's 200", resp.Status, body)
		}
		if issuerRec.count() != asked {
			t.Error("nginx asked the issuer about a request to /follow/orders: consumer-follow validates it itself")
		}
		got := followRec.last(t)
		followMu.Lock()
		if followPath != "/orders" {
			t.Errorf("consumer-follow got %s, want /orders (/follow stripped)", followPath)
		}
		followMu.Unlock()
		if a := got.Get("Authorization"); a != "Bearer "+tok.AccessToken {
			t.Errorf("consumer-follow got Authorization %q, want the client's", a)
		}
		for k := range forged {
			if v := got.Values(k); len(v) > 0 {
				t.Errorf("consumer-follow got client-sent %s: %q", k, v)
			}
		}
	})

	// A second token, still valid, for the outage below.
	spare := issue(t, "orders:read", nil)

	t.Run("revoked token is 401", func(t *testing.T) {
		form := url.Values{"token": {tok.AccessToken}}
		req, _ := http.NewRequest("POST", "/", nil)
		req.SetBasicAuth("demo", iss.secret)
		resp, body := do(t, "POST", "/token/revoke", http.Header{"Authorization": {req.Header.Get("Authorization")}}, form.Encode())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /token/revoke: %s %s", resp.Status, body)
		}
		before := consumerRec.count()
		resp, _ = do(t, "GET", "/orders", bearer(tok.AccessToken), "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %s, want 401", resp.Status)
		}
		if consumerRec.count() != before {
			t.Error("the consumer was reached with a revoked token")
		}
		if resp, _ := do(t, "GET", "/orders", bearer(spare.AccessToken), ""); resp.StatusCode != http.StatusOK {
			t.Errorf("another token of the same client: %s, want 200", resp.Status)
		}
	})

	t.Run("issuer unavailable is 503", func(t *testing.T) {
		iss.redis.Client.Close() // the issuer's Redis is gone: validation answers 503
		resp, body := do(t, "GET", "/orders", bearer(spare.AccessToken), "")
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %s, want 503: %s", resp.Status, body)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		wantJSONError(t, resp, body, "temporarily_unavailable")
	})

	t.Run("issuer down is a JSON 503 on every route", func(t *testing.T) {
		issuerSrv.Close() // nginx reaches no replica: its own 502
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/token", "grant_type=client_credentials"},
			{"GET", "/.well-known/jwks.json", ""},
			{"GET", "/orders", ""},
		} {
			h := bearer(spare.AccessToken)
			if r.method == "POST" {
				h = http.Header{}
			}
			resp, body := do(t, r.method, r.path, h, r.body)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s %s with the issuer down: %s %v, want 503 with Retry-After", r.method, r.path, resp.Status, resp.Header)
			}
			wantJSONError(t, resp, body, "temporarily_unavailable")
		}
	})
}

// fakeIssuer is one replica as nginx sees it: it answers what the gateway's
// routes need (POST /token, GET /token/validate, GET /.well-known/jwks.json)
// with 200, or, refusing, everything with the issuer's 503 (its Redis is
// unreachable). It counts the requests it got.
type fakeIssuer struct {
	refusing bool
	hits     atomic.Int64
}

func (f *fakeIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	if f.refusing {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"temporarily_unavailable","error_description":"the token store is unavailable"}`)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/token":
		// A retried POST reaches the next replica with its body.
		if form, err := url.ParseQuery(string(body)); err != nil || form.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_request","error_description":"body %q"}`, body)
			return
		}
		io.WriteString(w, `{"access_token":"t","token_type":"Bearer"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/token/validate":
		w.Header().Set("X-Auth-Subject", "demo")
		io.WriteString(w, `{"active":true}`)
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/jwks.json":
		io.WriteString(w, `{"keys":[]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestNginxRetriesRefusingReplica runs nginx/default.conf in front of three
// replicas named "issuer" (a DNS server of the test's own in place of
// Docker's), one of which refuses every request with 503 as a replica cut off
// from Redis does: no request through nginx fails, POST /token and the
// auth_request subrequest of /orders included, and the refusing replica was
// tried (so the requests did meet it). With every replica refusing, nginx
// tries no more than 3 of them and passes the issuer's 503 on.
func TestNginxRetriesRefusingReplica(t *testing.T) {
	nginx := nginxBinary(t)
	// 127.0.0.2-4 are the three replicas, .3 refusing; .5-.7 refuse too,
	// for the bound on tries.
	var addrs []netip.Addr
	fakes := map[netip.Addr]*fakeIssuer{}
	for i := range 6 {
		a := netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)})
		addrs = append(addrs, a)
		fakes[a] = &fakeIssuer{refusing: i != 0 && i != 2}
	}
	hits := func(addrs ...netip.Addr) (n int64) {
		for _, a := range addrs {
			n += fakes[a].hits.Load()
		}
		return n
	}
	port := replicasServing(t, func(a netip.Addr) http.Handler { return fakes[a] }, addrs...)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"orders":[1]}`)
	}))
	t.Cleanup(consumer.Close)
	dns := newDNSServer(t, "issuer.")
	// Three replicas, the second refusing.
	dns.set(addrs[:3]...)
	gw := startNginx(t, nginx, nginxHosts{resolver: dns.Addr(), issuer: "issuer:" + strconv.Itoa(port), consumer: consumer.Listener.Addr().String(), consumerDPoP: "127.0.0.1:1"})
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(c.CloseIdleConnections)

	call := func(method, path, body string) (int, string) {
		t.Helper()
		resp, b := callGateway(t, c, gw, method, path, http.Header{"Authorization": {"Bearer t"}}, body)
		return resp.StatusCode, b
	}
	routes := []struct{ method, path, body string }{
		{http.MethodPost, "/token", "grant_type=client_credentials&scope=orders%3Aread"},
		{http.MethodGet, "/orders", ""},
		{http.MethodGet, "/.well-known/jwks.json", ""},
	}
	const rounds = 40
	failed := map[string]int{}
	for range rounds {
		for _, r := range routes {
			if status, body := call(r.method, r.path, r.body); status != http.StatusOK {
				failed[r.method+" "+r.path]++
				if failed[r.method+" "+r.path] == 1 {
					t.Logf("%s %s: %d %s", r.method, r.path, status, body)
				}
			}
		}
	}
	refused := hits(addrs[1])
	t.Logf("%d requests through nginx, the refusing replica got %d of the %d upstream requests",
		rounds*len(routes), refused, hits(addrs[:3]...))
	if len(failed) > 0 {
		t.Errorf("requests that failed through nginx with one of three replicas answering 503: %v of %d each; want none", failed, rounds)
	}
	if refused == 0 {
		t.Fatal("no request reached the refusing replica: the test proved nothing")
	}

	// Four replicas, every one refusing: the issuer's own 503, after 3 tries.
	refusing := []netip.Addr{addrs[1], addrs[3], addrs[4], addrs[5]}
	dns.set(refusing...)
	for deadline := time.Now().Add(20 * time.Second); hits(addrs[3:]...) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nginx did not take the new DNS answer in 20 s (valid=5s)")
		}
		call(http.MethodGet, "/.well-known/jwks.json", "")
	}
	before := hits(refusing...)
	status, body := call(http.MethodPost, "/token", routes[0].body)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "temporarily_unavailable") {
		t.Errorf("POST /token with every replica refusing: %d %s; want the issuer's 503", status, body)
	}
	if tries := hits(refusing...) - before; tries != 3 {
		t.Errorf("POST /token with four replicas refusing reached them %d times, want 3 (proxy_next_upstream_tries)", tries)
	}
}

// TestNginxRevocationFeed checks that the revocation feed's stream passes
// through nginx/default.conf as it comes: a revocation made while the
// stream is open arrives, in order after the earlier ones, and heartbeats
// follow, the one event sent while no heartbeat flows included (far smaller
// than nginx's buffers, so a proxy that held data back until its buffer
// filled would never deliver it). No timing is asserted: the test's guard
// fails a stream that never delivers. nginx 1.22 passes data on to a client
// that reads even with proxy_buffering on, so this does not tell the
// location's proxy_buffering off from on: that setting is for a consumer
// that does not read, whose backlog would otherwise pile up in nginx's
// buffers and temporary files instead of meeting the issuer's write timeout.
func TestNginxRevocationFeed(t *testing.T) {
	nginx := nginxBinary(t)
	iss := newTestIssuer(t, "http://localhost:8080", false)
	issuerSrv := httptest.NewServer(iss.handler)
	t.Cleanup(issuerSrv.Close)
	gw := startNginx(t, nginx, nginxHosts{resolver: "127.0.0.11", issuer: issuerSrv.Listener.Addr().String(), consumer: "127.0.0.1:1", consumerDPoP: "127.0.0.1:1"})

	first := iss.feed.Add(revocation.KindToken, "117811659438825472", 1001, 2_000_000_000)
	second := iss.feed.Add(revocation.KindSubject, "alice", 1002, 0)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw+"/revocations/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("feeder", iss.feedSecret)
	req.Header.Set("Last-Event-ID", first.ID)
	resp, err := (&http.Transport{Proxy: nil}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /revocations/events through nginx: %s, %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	type sse struct{ id, name string }
	events := make(chan sse, 64)
	go func() {
		defer close(events)
		var ev sse
		buf := make([]byte, 0, 4096)
		line := []byte{}
		for {
			n, err := resp.Body.Read(buf[:cap(buf)])
			for _, b := range buf[:n] {
				if b != '\n' {
					line = append(line, b)
					continue
				}
				switch l := string(line); {
				case l == "":
					if ev.name != "" {
						events <- ev
					}
					ev = sse{}
				case strings.HasPrefix(l, "id: "):
					ev.id = l[4:]
				case strings.HasPrefix(l, "event: "):
					ev.name = l[7:]
				}
				line = line[:0]
			}
			if err != nil {
				return
			}
		}
	}()
	next := func(name string) sse {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended before a %s event", name)
				}
				if ev.name == name {
					return ev
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s event through nginx: the stream is held back", name)
			}
		}
	}
	if ev := next("revoked"); ev.id != second.ID {
		t.Fatalf("first event %s, want %s", ev.id, second.ID)
	}
	next("heartbeat")
	// The issuer goes stale: no more heartbeats, whose bytes would push a
	// buffering proxy's buffer out. A revocation now is the stream's only
	// data: it arrives as it is, or never.
	iss.feed.SetFresh(false, 0)
	third := iss.feed.Add(revocation.KindClient, "partner", 1003, 0)
	if ev := next("revoked"); ev.id != third.ID {
		t.Fatalf("event %s, want %s", ev.id, third.ID)
	}
	// Fresh again: a heartbeat follows, after the event.
	iss.feed.SetFresh(true, 0)
	next("heartbeat")
}

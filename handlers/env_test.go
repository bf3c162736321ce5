package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/redisstore"
	"github.com/snowtoken/snowtoken/token/txn"
)

// The service every test talks to.
const (
	testIssuer   = "https://issuer.test"
	testAudience = "orders-api" // SNOWTOKEN_AUDIENCE: the aud of clients that list none
	testWorker   = 7
	testMaxTTL   = 2 * time.Hour // global cap, above token.DefaultTTL
	shortMaxTTL  = 5 * time.Minute
	formType     = "application/x-www-form-urlencoded"
)

// The audiences of client APIs.
const (
	ordersAPI  = testAudience
	billingAPI = "billing-api"
	reportsAPI = "https://reports.test/v1"
)

// client is a registered client's credentials as a caller holds them.
type client struct{ ID, Secret string }

// env is one running issuer: the real gin engine behind an httptest.Server.
type env struct {
	URL     string
	HTTP    *http.Client
	Engine  *gin.Engine
	Server  *handlers.Server
	Svc     *token.Service
	Key     keyset.Key
	Keys    *keyset.Set
	Store   *redisstore.Store
	Clients *clients.Registry
	IDs     *snowflakealg.SnowFlakeAlg
	Clock   *clocktest.Clock // the token service's clock: iat, exp, expiry checks
	Metrics *prometheus.Registry

	Normal  client // scopes orders:read orders:write
	Gateway client // may_set_subject
	Admin   client // admin
	Short   client // max_ttl 5m, scope orders:read
	Partner client // an ID that needs form-urlencoding in HTTP Basic
	Auditor client // may_introspect
	APIs    client // audiences ordersAPI (its default), billingAPI, reportsAPI
	Opaque  client // token_format opaque, may_set_subject, scopes orders:read orders:write
	Bound   client // dpop_bound_access_tokens, scope orders:read
	secrets map[string]string
}

type envConfig struct {
	rdb     redis.UniversalClient
	prefix  string
	idNow   func() time.Time
	log     *slog.Logger
	limiter *authlimit.Limiter
	proxies []string
	fwd     []string
	tracer  trace.TracerProvider
	ready   func(context.Context) error
	refused func() map[string]handlers.Refusal
	revs    token.Revocations
	dpop    dpop.Options
	nonces  bool
	fetch   clientauth.FetchOptions
	feed    revfeed.Source
	extra   []clients.Client
	txn     *txn.Options
}

type envOption func(*envConfig)

// withClients registers extra clients beside the env's, each with a
// secret of its own (env.client).
func withClients(extra ...clients.Client) envOption {
	return func(c *envConfig) { c.extra = append(c.extra, extra...) }
}

// client returns the credentials of the client id registered with withClients.
func (e *env) client(id string) client { return client{ID: id, Secret: e.secrets[id]} }

// withTxn mints Transaction Tokens with opts (on the service's clock).
func withTxn(opts txn.Options) envOption {
	return func(c *envConfig) { c.txn = &opts }
}

// withRedis puts the sessions in rdb under prefix instead of redistest.New.
func withRedis(rdb redis.UniversalClient, prefix string) envOption {
	return func(c *envConfig) { c.rdb, c.prefix = rdb, prefix }
}

// withIDClock gives the Snowflake generator its own clock.
func withIDClock(now func() time.Time) envOption {
	return func(c *envConfig) { c.idNow = now }
}

// withLogger sends the handlers' log to log instead of discarding it.
func withLogger(log *slog.Logger) envOption {
	return func(c *envConfig) { c.log = log }
}

// withAuthLimiter limits failed client authentications with l.
func withAuthLimiter(l *authlimit.Limiter) envOption {
	return func(c *envConfig) { c.limiter = l }
}

// withTrustedProxies believes X-Forwarded-For from proxies.
func withTrustedProxies(proxies ...string) envOption {
	return func(c *envConfig) { c.proxies = proxies }
}

// withDPoPForwarders believes the original request of a DPoP proof that
// callers at addrs name in X-Forwarded-Method, -Proto, -Host and -Uri.
func withDPoPForwarders(addrs ...string) envOption {
	return func(c *envConfig) { c.fwd = addrs }
}

// withTracing records spans with tp, in the handlers and the store.
func withTracing(tp trace.TracerProvider) envOption {
	return func(c *envConfig) { c.tracer = tp }
}

// withReady adds the readiness check ready.
func withReady(ready func(context.Context) error) envOption {
	return func(c *envConfig) { c.ready = ready }
}

// withRefused shows refused reloads in /readyz.
func withRefused(refused func() map[string]handlers.Refusal) envOption {
	return func(c *envConfig) { c.refused = refused }
}

// withRevocations has the service decide from revs (token.Options.Revocations).
func withRevocations(revs token.Revocations) envOption {
	return func(c *envConfig) { c.revs = revs }
}

// withDPoP checks DPoP proofs with opts; without it, with dpop's defaults
// and the store's shared replay record (redisstore.Proofs), as serve does.
// nonces makes a server nonce required (handlers.Options.DPoPNonces).
func withDPoP(opts dpop.Options, nonces bool) envOption {
	return func(c *envConfig) { c.dpop, c.nonces = opts, nonces }
}

// withFetch fetches client key sets with opts (assertion_test.go).
func withFetch(opts clientauth.FetchOptions) envOption {
	return func(c *envConfig) { c.fetch = opts }
}

// newEnv starts an issuer for tb; everything stops when tb ends.
func newEnv(tb testing.TB, opts ...envOption) *env {
	tb.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.rdb == nil {
		r := redistest.New(tb)
		cfg.rdb, cfg.prefix = r.Client, r.Prefix
	}
	key := keysettest.MustKey(tb)
	keys, err := keyset.New(key)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{Key: key, Keys: keys, secrets: map[string]string{}}
	newClient := func(c clients.Client) (clients.Client, client) {
		secret, sum, err := clients.NewSecret()
		if err != nil {
			tb.Fatal(err)
		}
		c.SecretSHA256 = sum
		e.secrets[c.ID] = secret
		return c, client{ID: c.ID, Secret: secret}
	}
	var list [9]clients.Client
	list[0], e.Normal = newClient(clients.Client{ID: "orders-svc", Scopes: []string{"orders:read", "orders:write"}})
	list[1], e.Gateway = newClient(clients.Client{ID: "gateway", Scopes: []string{"orders:read", "orders:write"}, MaySetSubject: true})
	list[2], e.Admin = newClient(clients.Client{ID: "ops-admin", Scopes: []string{"orders:read"}, Admin: true})
	list[3], e.Short = newClient(clients.Client{ID: "short-lived", Scopes: []string{"orders:read"}, MaxTTL: clients.Duration(shortMaxTTL)})
	list[4], e.Partner = newClient(clients.Client{ID: "partner:eu+1@example.com", Scopes: []string{"orders:read"}})
	list[5], e.Auditor = newClient(clients.Client{ID: "auditor", Scopes: []string{"orders:read"}, MayIntrospect: true})
	list[6], e.APIs = newClient(clients.Client{ID: "apis", Scopes: []string{"orders:read"}, Audiences: []string{ordersAPI, billingAPI, reportsAPI}})
	list[7], e.Opaque = newClient(clients.Client{ID: "opaque-gw", Scopes: []string{"orders:read", "orders:write"}, MaySetSubject: true,
		TokenFormat: token.FormatOpaque})
	list[8], e.Bound = newClient(clients.Client{ID: "bound-svc", Scopes: []string{"orders:read"}, DPoPBoundAccessTokens: true})
	all := list[:]
	for _, c := range cfg.extra {
		cl, _ := newClient(c)
		all = append(all, cl)
	}
	if e.Clients, err = clients.New(all); err != nil {
		tb.Fatal(err)
	}
	if e.IDs, err = snowflakealg.New(snowflakealg.Settings{WorkerID: testWorker, Now: cfg.idNow}); err != nil {
		tb.Fatal(err)
	}
	e.Clock = clocktest.New(time.Now().Truncate(time.Second))
	if e.Store, err = redisstore.New(cfg.rdb, redisstore.Options{Prefix: cfg.prefix, TracerProvider: cfg.tracer}); err != nil {
		tb.Fatal(err)
	}
	e.Svc, err = token.NewService(keys, e.Store, e.IDs, token.Options{
		Issuer: testIssuer, Audience: testAudience, MaxTTL: testMaxTTL, Now: e.Clock.Now, Revocations: cfg.revs,
	})
	if err != nil {
		tb.Fatal(err)
	}
	var minter *txn.Minter
	if cfg.txn != nil {
		cfg.txn.Now = e.Clock.Now
		if minter, err = txn.New(*cfg.txn, e.IDs); err != nil {
			tb.Fatal(err)
		}
	}
	srv := httptest.NewUnstartedServer(nil)
	e.URL = "http://" + srv.Listener.Addr().String()
	e.Metrics = prometheus.NewRegistry()
	if cfg.dpop.Replay == nil {
		cfg.dpop.Replay = e.Store.Proofs()
	}
	e.Server, err = handlers.NewServer(handlers.Options{
		DPoP: cfg.dpop, DPoPNonces: cfg.nonces,
		Service: e.Svc, Clients: e.Clients, IDs: e.IDs, BaseURL: e.URL,
		Logger: cfg.log, AuthLimiter: cfg.limiter, TrustedProxies: cfg.proxies, DPoPForwarders: cfg.fwd, Registry: e.Metrics,
		TracerProvider: cfg.tracer,
		Ready:          cfg.ready,
		Refused:        cfg.refused,
		Feed:           cfg.feed,
		Txn:            minter,
	})
	if err != nil {
		tb.Fatal(err)
	}
	e.Engine = e.Server.Engine()
	srv.Config.Handler = e.Engine
	srv.Start()
	tb.Cleanup(srv.Close)
	e.HTTP = srv.Client()
	return e
}

// response is what came back, body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends one request; hdr may be nil.
func (e *env) do(tb testing.TB, method, path string, body io.Reader, hdr http.Header) *response {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), method, e.URL+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	var oauthErr struct {
		Description string `json:"error_description"`
	}
	if resp.StatusCode >= 400 && json.Unmarshal(b, &oauthErr) == nil {
		wantNoChain(tb, oauthErr.Description)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// chainTexts are texts of Go errors that a description must not show: this
// module's sentinel errors (their package prefixes) and the libraries' that
// requests reach (golang-jwt's, net/http's, strconv's, the JSON and base64
// decoders').
var chainTexts = []string{
	"token: ", "handlers: ", "snowflakealg: ", "bitsalloc: ", "jwtpolicy: ", "lease: ", "dpop: ",
	jwt.ErrTokenMalformed.Error(), jwt.ErrTokenUnverifiable.Error(), jwt.ErrTokenSignatureInvalid.Error(),
	jwt.ErrTokenRequiredClaimMissing.Error(), jwt.ErrTokenInvalidAudience.Error(), jwt.ErrTokenExpired.Error(),
	jwt.ErrTokenUsedBeforeIssued.Error(), jwt.ErrTokenInvalidIssuer.Error(), jwt.ErrTokenNotValidYet.Error(),
	jwt.ErrTokenInvalidClaims.Error(), "http: ", "strconv.", "invalid syntax",
	"json: ", "jsontext: ", "cannot unmarshal", "illegal base64", "unexpected EOF",
}

// wantNoChain checks that an error description tells the client what is
// wrong in words of its own, not with the Go error chain behind it (which
// the server logs instead).
func wantNoChain(tb testing.TB, desc string) {
	tb.Helper()
	for _, t := range chainTexts {
		if strings.Contains(desc, t) {
			tb.Errorf("error_description %q shows the Go error chain (%q)", desc, t)
		}
	}
}

// post sends form to path, authenticated with HTTP Basic as c when c is not nil.
func (e *env) post(tb testing.TB, path string, c *client, form url.Values) *response {
	tb.Helper()
	hdr := http.Header{"Content-Type": {formType}}
	if c != nil {
		hdr.Set("Authorization", basic(c.ID, c.Secret))
	}
	return e.do(tb, http.MethodPost, path, strings.NewReader(form.Encode()), hdr)
}

// basic is the RFC 6749 §2.3.1 Authorization header: id and secret form-urlencoded, then base64.
func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// validate calls GET /token/validate with tok as the Bearer token.
func (e *env) validate(tb testing.TB, tok string) *response {
	tb.Helper()
	return e.do(tb, http.MethodGet, "/token/validate", nil, http.Header{"Authorization": {"Bearer " + tok}})
}

// issued is a successful token response.
type issued struct {
	AccessToken string          `json:"access_token"`
	TokenType   string          `json:"token_type"`
	ExpiresIn   int64           `json:"expires_in"`
	Scope       string          `json:"scope"`
	JTI         json.RawMessage `json:"jti"`
}

// issue gets a token for c over HTTP Basic with extra form parameters, and fails tb unless it gets one.
func (e *env) issue(tb testing.TB, c client, extra url.Values) issued {
	tb.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	for k, v := range extra {
		form[k] = v
	}
	r := e.post(tb, "/token", &c, form)
	if r.Status != http.StatusOK {
		tb.Fatalf("issue for %s: status %d, body %s", c.ID, r.Status, r.Body)
	}
	var out issued
	if err := json.Unmarshal(r.Body, &out); err != nil {
		tb.Fatalf("issue: %v in %s", err, r.Body)
	}
	return out
}

// object decodes a JSON object body.
func (r *response) object(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		tb.Fatalf("status %d: body is not a JSON object: %v: %q", r.Status, err, r.Body)
	}
	return m
}

// metrics scrapes /metrics: each series, labels included, to its value.
func (e *env) metrics(tb testing.TB) map[string]string {
	tb.Helper()
	// The registry as the metrics listener serves it (the API does not).
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(e.Metrics, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("/metrics: status %d", rec.Code)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			if name, val, ok := strings.Cut(line, " "); ok {
				got[name] = val
			}
		}
	}
	return got
}

// wantError checks an error response: status, the error code, and no-store.
func wantError(tb testing.TB, r *response, status int, code string) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if got := r.object(tb)["error"]; got != code {
		tb.Errorf("error %v, want %q; body %s", got, code, r.Body)
	}
	if got := r.Header.Get("Cache-Control"); got != "no-store" {
		tb.Errorf("Cache-Control %q, want no-store", got)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("Content-Type %q, want application/json", ct)
	}
}

// wantBearerChallenge checks an RFC 6750 §3 challenge; code "" means none (no credentials sent).
func wantBearerChallenge(tb testing.TB, r *response, code string) {
	tb.Helper()
	h := r.Header.Get("WWW-Authenticate")
	if !strings.HasPrefix(h, `Bearer realm="`) {
		tb.Errorf("WWW-Authenticate %q, want a Bearer challenge with a realm", h)
	}
	if code == "" {
		if strings.Contains(h, "error=") {
			tb.Errorf("WWW-Authenticate %q: an error code without credentials (RFC 6750 §3.1)", h)
		}
		return
	}
	if !strings.Contains(h, `error="`+code+`"`) {
		tb.Errorf("WWW-Authenticate %q, want error=%q", h, code)
	}
}

// wantBasicChallenge checks the RFC 6749 §5.2 challenge of an invalid_client.
func wantBasicChallenge(tb testing.TB, r *response) {
	tb.Helper()
	if h := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Basic ") || !strings.Contains(h, "realm=") {
		tb.Errorf("WWW-Authenticate %q, want a Basic challenge with a realm", h)
	}
}

// wantNoEcho checks that no secret (a client secret, a token or a part of
// one) comes back in the response: error descriptions end up in logs.
func wantNoEcho(tb testing.TB, r *response, secrets ...string) {
	tb.Helper()
	for _, s := range secrets {
		for _, part := range strings.Split(s, ".") {
			if len(part) >= 16 && (bytes.Contains(r.Body, []byte(part)) || strings.Contains(fmt.Sprint(r.Header), part)) {
				tb.Errorf("response echoes a secret %.12q...: %s", part, r.Body)
			}
		}
	}
}

// segments decodes a JWT's header and claims, numbers kept exact.
func segments(tb testing.TB, tok string) (header, claims map[string]any) {
	tb.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		tb.Fatalf("token has %d segments, want 3", len(parts))
	}
	dec := func(s string) map[string]any {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			tb.Fatalf("segment %q: %v", s, err)
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			tb.Fatalf("segment %s: %v", b, err)
		}
		return m
	}
	return dec(parts[0]), dec(parts[1])
}

// unixClaim reads a NumericDate claim.
func unixClaim(tb testing.TB, claims map[string]any, name string) int64 {
	tb.Helper()
	n, ok := claims[name].(json.Number)
	if !ok {
		tb.Fatalf("claim %s = %v, want a number", name, claims[name])
	}
	v, err := n.Int64()
	if err != nil {
		tb.Fatalf("claim %s: %v", name, err)
	}
	return v
}

// resign signs the header and claims of tok, after edit changed them, with
// priv as EdDSA. The edit may change any member but alg.
func resign(tb testing.TB, tok string, priv ed25519.PrivateKey, edit func(header, claims map[string]any)) string {
	tb.Helper()
	h, c := segments(tb, tok)
	if edit != nil {
		edit(h, c)
	}
	h["alg"] = jwt.SigningMethodEdDSA.Alg()
	if _, ok := h["typ"]; !ok {
		h["typ"] = jwttest.Omit
	}
	return jwttest.Sign(tb, jwt.SigningMethodEdDSA, priv, h, jwt.MapClaims(c))
}

// b64json is base64url(JSON(v)), as a JWT segment.
func b64json(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

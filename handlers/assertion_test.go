package handlers_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/logtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// assertionEnv is an issuer (the real gin engine, Redis, the replay record
// of client assertions on it) whose clients authenticate without secrets:
//
//	pk      private_key_jwt, an Ed25519 key inline (jwks)
//	pk-uri  private_key_jwt, an RS256 key at a URL (jwks_uri, served by keys)
//	orders  workload identity: a service account of the "cluster" (an OIDC
//	        issuer served by cluster over TLS, its CA in clusterCA: discovery
//	        and keys, on loopback, which SNOWTOKEN_KEY_FETCH_ALLOW_NETS allows)
//	post    a secret, client_secret_post only
type assertionEnv struct {
	*env
	pk, pkURI, sa signer
	cluster       *httptest.Server
	clusterCA     string       // the PEM file of cluster's certificate
	keyHits       atomic.Int32 // requests to the jwks_uri of pk-uri
	keys          *httptest.Server
	postSecret    string
}

// signer signs assertions with one key.
type signer struct {
	method jwt.SigningMethod
	kid    string
	priv   crypto.Signer
}

func (s signer) jwks(tb testing.TB) json.RawMessage {
	tb.Helper()
	k, err := jose.JSONWebKey{Key: s.priv.Public(), KeyID: s.kid, Algorithm: s.method.Alg(), Use: "sig"}.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return json.RawMessage(`{"keys":[` + string(k) + `]}`)
}

func (s signer) sign(tb testing.TB, claims jwt.MapClaims) string {
	tb.Helper()
	return jwttest.Sign(tb, s.method, s.priv, map[string]any{"kid": s.kid}, claims)
}

const saSubject = "system:serviceaccount:shop:orders"

func newAssertionEnv(tb testing.TB, replay clientauth.ReplayCache, opts ...envOption) *assertionEnv {
	tb.Helper()
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	a := &assertionEnv{
		pk:    signer{jwt.SigningMethodEdDSA, "pk-1", edPriv},
		pkURI: signer{jwt.SigningMethodRS256, "pk-uri-1", rsaPriv},
		sa:    signer{jwt.SigningMethodRS256, "cluster-1", rsaPriv},
	}
	a.keys = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.keyHits.Add(1)
		w.Write(a.pkURI.jwks(tb))
	}))
	tb.Cleanup(a.keys.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"` + a.cluster.URL + `","jwks_uri":"` + a.cluster.URL + `/openid/v1/jwks"}`))
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, r *http.Request) { w.Write(a.sa.jwks(tb)) })
	a.cluster = httptest.NewTLSServer(mux)
	tb.Cleanup(a.cluster.Close)
	a.clusterCA = filepath.Join(tb.TempDir(), "ca.crt")
	if err := os.WriteFile(a.clusterCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.cluster.Certificate().Raw}), 0o600); err != nil {
		tb.Fatal(err)
	}

	if replay == nil {
		r := redistest.New(tb)
		opts = append(opts, withRedis(r.Client, r.Prefix))
	}
	a.env = newEnv(tb, opts...)
	if replay == nil {
		replay = a.Store.Assertions()
	}
	// The env's server with the replay record: a server of its own on
	// the env's service, clients swapped in as a reload does.
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	hs := httptest.NewUnstartedServer(nil)
	a.URL = "http://" + hs.Listener.Addr().String()
	a.Metrics = prometheus.NewRegistry() // the server's own: the env's has its server's series
	// The cluster is on loopback, which its discovery document's jwks_uri
	// reaches only through the allow-list.
	cfg.fetch.AllowNets = append(cfg.fetch.AllowNets, netip.MustParsePrefix("127.0.0.0/8"))
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.dpop.Replay == nil {
		cfg.dpop.Replay = a.Store.Proofs()
	}
	srv, err := handlers.NewServer(handlers.Options{Service: a.Svc, Clients: a.Clients, IDs: a.IDs, BaseURL: a.URL, Logger: cfg.log,
		AuthLimiter: cfg.limiter, DPoP: cfg.dpop, DPoPNonces: cfg.nonces, Registry: a.Metrics,
		Assertions: clientauth.Options{Replay: replay, Fetch: cfg.fetch}})
	if err != nil {
		tb.Fatal(err)
	}
	a.Server, a.Engine = srv, srv.Engine()
	hs.Config.Handler = a.Engine
	hs.Start()
	tb.Cleanup(hs.Close)
	a.HTTP = hs.Client()
	var sum string
	a.postSecret, sum, _ = clients.NewSecret()
	a.Server.Swap(a.Svc, a.clients(tb, sum, a.keys.URL), handlers.Version{})
	return a
}

// clients are the env's clients, jwks_uri pk-uri's keys.
func (a *assertionEnv) clients(tb testing.TB, postSum, jwksURI string) *clients.Registry {
	tb.Helper()
	cs, err := clients.New([]clients.Client{
		{ID: "pk", Scopes: []string{"orders:read"}, TokenEndpointAuthMethod: clients.AuthPrivateKeyJWT, JWKS: a.pk.jwks(tb)},
		{ID: "pk-uri", Scopes: []string{"orders:read"}, TokenEndpointAuthMethod: clients.AuthPrivateKeyJWT, JWKSURI: jwksURI},
		{ID: "orders", Scopes: []string{"orders:read"}, WorkloadIdentity: &clientauth.WorkloadIdentity{TrustedIssuer: clientauth.TrustedIssuer{Issuer: a.cluster.URL, CAFile: a.clusterCA}, Subject: saSubject}},
		{ID: "post", Scopes: []string{"orders:read"}, SecretSHA256: postSum, TokenEndpointAuthMethod: clients.AuthSecretPost},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// assertion is a good private_key_jwt assertion of client id, to aud.
func (a *assertionEnv) assertion(tb testing.TB, s signer, id string, edit func(jwt.MapClaims)) string {
	now := a.Clock.Now()
	c := jwt.MapClaims{"iss": id, "sub": id, "aud": testIssuer, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": rand.Text()}
	if edit != nil {
		edit(c)
	}
	return s.sign(tb, c)
}

// saToken is a projected service-account token of the cluster for us.
func (a *assertionEnv) saToken(tb testing.TB, sub string) string {
	now := a.Clock.Now()
	return a.sa.sign(tb, jwt.MapClaims{"iss": a.cluster.URL, "sub": sub, "aud": []string{testIssuer},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "one-jti-for-the-pod"})
}

// asserted posts a client_credentials request authenticated by assertion.
func (a *assertionEnv) asserted(tb testing.TB, id, assertion string, hdr http.Header, extra url.Values) *response {
	tb.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {clientauth.AssertionType}, "client_assertion": {assertion}}
	if id != "" {
		form.Set("client_id", id)
	}
	for k, v := range extra {
		form[k] = v
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set("Content-Type", formType)
	r := a.do(tb, http.MethodPost, "/token", strings.NewReader(form.Encode()), hdr)
	if r.Status >= 400 {
		var body struct {
			Description string `json:"error_description"`
		}
		json.Unmarshal(r.Body, &body)
		if strings.Contains(body.Description, "clientauth: ") {
			tb.Errorf("error_description %q shows the Go error chain", body.Description)
		}
		wantNoEcho(tb, r, assertion)
	}
	return r
}

// tokenClient is the client_id claim of an issued token.
func tokenClient(tb testing.TB, r *response) any {
	tb.Helper()
	if r.Status != http.StatusOK {
		tb.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var tok issued
	if err := json.Unmarshal(r.Body, &tok); err != nil {
		tb.Fatal(err)
	}
	_, claims := segments(tb, tok.AccessToken)
	return claims["client_id"]
}

// TestClientAssertions: clients without secrets get tokens through the real
// engine, and every misuse is refused in the protocol's shape.
func TestClientAssertions(t *testing.T) {
	t.Parallel()
	a := newAssertionEnv(t, nil)

	if got := tokenClient(t, a.asserted(t, "", a.assertion(t, a.pk, "pk", nil), nil, nil)); got != "pk" {
		t.Errorf("private_key_jwt without client_id: client_id claim %v, want pk", got)
	}
	if got := tokenClient(t, a.asserted(t, "pk", a.assertion(t, a.pk, "pk", nil), nil, nil)); got != "pk" {
		t.Errorf("private_key_jwt with client_id: client_id claim %v", got)
	}
	if got := tokenClient(t, a.asserted(t, "", a.assertion(t, a.pkURI, "pk-uri", nil), nil, nil)); got != "pk-uri" {
		t.Errorf("private_key_jwt, jwks_uri: client_id claim %v", got)
	}
	sa := a.saToken(t, saSubject)
	for i := range 2 { // the pod sends its token until kubelet rotates it
		if got := tokenClient(t, a.asserted(t, "orders", sa, nil, nil)); got != "orders" {
			t.Errorf("workload identity, use %d: client_id claim %v", i+1, got)
		}
	}

	replayed := a.assertion(t, a.pk, "pk", nil)
	a.asserted(t, "", replayed, nil, nil)
	big := strings.Repeat("a", clientauth.MaxAssertionBytes+1)
	for _, tc := range []struct {
		name, id, assertion string
		hdr                 http.Header
		extra               url.Values
		status              int
		code                string
	}{
		{"replayed", "", replayed, nil, nil, 401, "invalid_client"},
		{"client_id of another client", "pk-uri", a.assertion(t, a.pk, "pk", nil), nil, nil, 401, "invalid_client"},
		{"signed with another client's key", "", a.assertion(t, a.pkURI, "pk", nil), nil, nil, 401, "invalid_client"},
		{"expired", "", a.assertion(t, a.pk, "pk", func(c jwt.MapClaims) { c["exp"] = a.Clock.Now().Add(-time.Hour).Unix() }), nil, nil, 401, "invalid_client"},
		{"aud elsewhere", "", a.assertion(t, a.pk, "pk", func(c jwt.MapClaims) { c["aud"] = "https://other.test/token" }), nil, nil, 401, "invalid_client"},
		{"no jti", "", a.assertion(t, a.pk, "pk", func(c jwt.MapClaims) { delete(c, "jti") }), nil, nil, 401, "invalid_client"},
		{"too large", "pk", big, nil, nil, 401, "invalid_client"},
		{"not a JWT", "", "garbage", nil, nil, 401, "invalid_client"},
		{"unknown client", "", a.assertion(t, a.pk, "nobody", nil), nil, nil, 401, "invalid_client"},
		{"a secret client", "post", a.assertion(t, a.pk, "post", nil), nil, nil, 401, "invalid_client"},
		{"workload token without client_id", "", sa, nil, nil, 401, "invalid_client"},
		{"another service account", "orders", a.saToken(t, "system:serviceaccount:shop:default"), nil, nil, 401, "invalid_client"},
		{"wrong assertion type", "", a.assertion(t, a.pk, "pk", nil), nil, url.Values{"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:saml2-bearer"}}, 401, "invalid_client"},
		{"no assertion", "pk", "", nil, nil, 400, "invalid_request"},
		{"with Basic too", "", a.assertion(t, a.pk, "pk", nil), http.Header{"Authorization": {basic("post", a.postSecret)}}, nil, 400, "invalid_request"},
		{"with a secret too", "post", a.assertion(t, a.pk, "pk", nil), nil, url.Values{"client_secret": {a.postSecret}}, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.asserted(t, tc.id, tc.assertion, tc.hdr, tc.extra)
			wantError(t, r, tc.status, tc.code)
			if tc.status == 401 {
				wantBasicChallenge(t, r)
			}
		})
	}

	// Secrets: a client naming client_secret_post may not use Basic; a
	// private_key_jwt client has no secret to send.
	grant := url.Values{"grant_type": {"client_credentials"}}
	wantError(t, a.post(t, "/token", &client{"post", a.postSecret}, grant), 401, "invalid_client")
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"post"}, "client_secret": {a.postSecret}}
	if r := a.do(t, http.MethodPost, "/token", strings.NewReader(form.Encode()), http.Header{"Content-Type": {formType}}); r.Status != http.StatusOK {
		t.Errorf("client_secret_post: status %d: %s", r.Status, r.Body)
	}
	wantError(t, a.post(t, "/token", &client{"pk", ""}, grant), 401, "invalid_client")
}

// TestClientAssertionsMetadata: discovery lists private_key_jwt and its
// algorithms when assertions are checked.
func TestClientAssertionsMetadata(t *testing.T) {
	t.Parallel()
	a := newAssertionEnv(t, nil)
	md := a.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", nil, nil).object(t)
	for _, name := range []string{"token_endpoint_auth_methods_supported", "introspection_endpoint_auth_methods_supported", "revocation_endpoint_auth_methods_supported"} {
		if got, _ := json.Marshal(md[name]); string(got) != `["client_secret_basic","client_secret_post","private_key_jwt"]` {
			t.Errorf("%s = %s", name, got)
		}
	}
	if got, _ := json.Marshal(md["token_endpoint_auth_signing_alg_values_supported"]); string(got) != `["EdDSA","ES256","RS256","PS256"]` {
		t.Errorf("token_endpoint_auth_signing_alg_values_supported = %s", got)
	}
	// Every member is in the description (TestOpenAPIResponseNames checks
	// the metadata of an issuer without assertions).
	schema, _ := resolveRef(loadOpenAPI(t), "#/components/schemas/AuthorizationServerMetadata").(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	for name := range md {
		if _, ok := props[name]; !ok {
			t.Errorf("metadata member %q is not in docs/openapi.yaml", name)
		}
	}
}

// downReplay is a replay record whose store is down.
type downReplay struct{}

func (downReplay) Seen(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, errors.New("redis down")
}

// TestClientAssertionsReplayDown: the replay record failing is 503, not a
// refusal of the client, and not counted as a failed authentication.
func TestClientAssertionsReplayDown(t *testing.T) {
	t.Parallel()
	le := redistest.NewServer(t)
	l, err := authlimit.New(le.Client(), authlimit.Settings{Failures: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := newAssertionEnv(t, downReplay{}, withAuthLimiter(l))
	for range 3 {
		r := a.asserted(t, "", a.assertion(t, a.pk, "pk", nil), nil, nil)
		wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	}
}

// TestClientAssertionsLimit: refused assertions (signed with another
// client's key) count as failed authentications, as wrong secrets do: past
// the limit, even a good assertion is 429.
func TestClientAssertionsLimit(t *testing.T) {
	t.Parallel()
	le := redistest.NewServer(t)
	l, err := authlimit.New(le.Client(), authlimit.Settings{Failures: 3})
	if err != nil {
		t.Fatal(err)
	}
	a := newAssertionEnv(t, nil, withAuthLimiter(l))
	for i := range 4 { // the failure past the 3 allowed is the first 429
		want, code := 401, "invalid_client"
		if i == 3 {
			want, code = http.StatusTooManyRequests, "temporarily_unavailable"
		}
		wantError(t, a.asserted(t, "", a.assertion(t, a.pkURI, "pk", nil), nil, nil), want, code)
	}
	wantError(t, a.asserted(t, "", a.assertion(t, a.pk, "pk", nil), nil, nil), http.StatusTooManyRequests, "temporarily_unavailable")
}

// TestClientAssertionsReload: a reload that keeps a client's jwks_uri keeps
// its fetched keys (no fetch); one that changes it fetches the new URL.
func TestClientAssertionsReload(t *testing.T) {
	t.Parallel()
	a := newAssertionEnv(t, nil)
	tokenClient(t, a.asserted(t, "", a.assertion(t, a.pkURI, "pk-uri", nil), nil, nil))
	_, sum, _ := clients.NewSecret()
	a.Server.Swap(a.Svc, a.clients(t, sum, a.keys.URL), handlers.Version{})
	tokenClient(t, a.asserted(t, "", a.assertion(t, a.pkURI, "pk-uri", nil), nil, nil))
	if got := a.keyHits.Load(); got != 1 {
		t.Errorf("%d fetches of the unchanged jwks_uri across a reload, want 1", got)
	}
	a.Server.Swap(a.Svc, a.clients(t, sum, a.keys.URL+"/v2"), handlers.Version{})
	tokenClient(t, a.asserted(t, "", a.assertion(t, a.pkURI, "pk-uri", nil), nil, nil))
	if got := a.keyHits.Load(); got != 2 {
		t.Errorf("%d fetches after the jwks_uri changed, want 2", got)
	}
}

// BenchmarkIssueByAssertion is POST /token through the engine (no network,
// the real Redis) for a client with a secret and for private_key_jwt
// clients (EdDSA inline, RS256 from a cached jwks_uri): the assertion's
// check is what private_key_jwt adds (the target: within 1.3× of
// the secret's issue plus one verification; clientauth's BenchmarkSignature
// is the verification). Assertions are made outside the timer.
//
//	go test -run '^$' -bench IssueByAssertion -benchmem ./handlers/
func BenchmarkIssueByAssertion(b *testing.B) {
	a := newAssertionEnv(b, nil)
	secretForm := url.Values{"grant_type": {"client_credentials"}, "client_id": {"post"}, "client_secret": {a.postSecret}}.Encode()
	b.Run("secret", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(secretForm))
			req.Header.Set("Content-Type", formType)
			serve(b, a.env, req)
		}
	})
	for _, c := range []struct {
		name, id string
		s        signer
	}{{"private_key_jwt=EdDSA", "pk", a.pk}, {"private_key_jwt=RS256,jwks_uri", "pk-uri", a.pkURI}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			forms := make([]string, b.N)
			for i := range forms {
				forms[i] = url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {clientauth.AssertionType},
					"client_assertion": {a.assertion(b, c.s, c.id, nil)}}.Encode()
			}
			b.ResetTimer()
			for i := range b.N {
				req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(forms[i]))
				req.Header.Set("Content-Type", formType)
				serve(b, a.env, req)
			}
		})
	}
}

// TestClientAssertionDPoPNonce: a client assertion sent with a DPoP proof
// that lacks the server's nonce is not spent by the use_dpop_nonce answer:
// the client sends the same body again, with a proof carrying the nonce,
// and gets its token (the proof is checked before the client
// authenticates, and recorded after). Once it has, the assertion is spent.
func TestClientAssertionDPoPNonce(t *testing.T) {
	a := newAssertionEnv(t, nil, withDPoP(dpop.Options{}, true))
	k := newDPoPKey(t, "EdDSA")
	as := a.assertion(t, a.pk, "pk", nil)
	proof := func(nonce string) http.Header {
		return http.Header{"Dpop": {k.proof(t, "POST", a.URL+"/token", "", nonce, a.Clock.Now(), nil)}}
	}
	r := a.asserted(t, "pk", as, proof(""), nil)
	wantError(t, r, http.StatusBadRequest, "use_dpop_nonce")
	nonce := r.Header.Get("DPoP-Nonce")
	if r := a.asserted(t, "pk", as, proof(nonce), nil); r.Status != http.StatusOK {
		t.Fatalf("the same assertion with a proof carrying the nonce: %d %s", r.Status, r.Body)
	}
	wantError(t, a.asserted(t, "pk", as, proof(nonce), nil), http.StatusUnauthorized, "invalid_client")
}

// TestClientAssertionKeysUnreachable: a key set that cannot be fetched is
// the service's failure, 503 with Retry-After, never invalid_client.
func TestClientAssertionKeysUnreachable(t *testing.T) {
	a := newAssertionEnv(t, nil)
	_, sum, _ := clients.NewSecret()
	a.Server.Swap(a.Svc, a.clients(t, sum, "http://127.0.0.1:1/jwks"), handlers.Version{}) // nothing listens there
	r := a.asserted(t, "pk-uri", a.assertion(t, a.pkURI, "pk-uri", nil), nil, nil)
	wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

// TestClientKeysUnavailableSignal: assertions of a client whose key server
// hangs are 503, counted per client in
// snowtoken_client_keys_unavailable_total and logged as such, and leave
// snowtoken_unavailable_total, the Redis and ID-generator signal, at 0
// (57 of them once raised it to 57 with Redis healthy, and logged
// "unavailable").
func TestClientKeysUnavailableSignal(t *testing.T) {
	t.Parallel()
	hung := make(chan struct{})
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(keys.Close)
	t.Cleanup(func() { close(hung) })
	log := new(logtest.Buffer)
	a := newAssertionEnv(t, nil, withFetch(clientauth.FetchOptions{Timeout: 200 * time.Millisecond}),
		withLogger(slog.New(slog.NewJSONHandler(log, nil))))
	_, sum, _ := clients.NewSecret()
	a.Server.Swap(a.Svc, a.clients(t, sum, keys.URL), handlers.Version{})
	const n = 5
	for range n {
		r := a.asserted(t, "pk-uri", a.assertion(t, a.pkURI, "pk-uri", nil), nil, nil)
		wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	}
	m := a.metrics(t)
	if got := m[`snowtoken_client_keys_unavailable_total{client_id="pk-uri"}`]; got != strconv.Itoa(n) {
		t.Errorf("snowtoken_client_keys_unavailable_total{client_id=\"pk-uri\"} = %q, want %d", got, n)
	}
	if got := m["snowtoken_unavailable_total"]; got != "0" {
		t.Errorf("snowtoken_unavailable_total = %q, want 0: Redis and the ID generator are fine", got)
	}
	var keysLogged int
	for _, rec := range log.Records(t) {
		switch rec["msg"] {
		case "unavailable":
			t.Errorf("logged as the service unavailable: %v", rec)
		case "client keys unavailable":
			keysLogged++
			if rec["client_id"] != "pk-uri" || rec["level"] != "WARN" {
				t.Errorf("record %v: want WARN with client_id pk-uri", rec)
			}
		}
	}
	if keysLogged != n {
		t.Errorf("%d records of client keys unavailable, want %d (internal/logsum summarises them in the server)", keysLogged, n)
	}
}

// rotatingKeys is a jwks_uri whose key set a test replaces.
type rotatingKeys struct {
	set  atomic.Pointer[json.RawMessage]
	hits atomic.Int32
	*httptest.Server
}

func newRotatingKeys(tb testing.TB, set json.RawMessage) *rotatingKeys {
	k := &rotatingKeys{}
	k.set.Store(&set)
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.hits.Add(1)
		w.Write(*k.set.Load())
	}))
	tb.Cleanup(k.Close)
	return k
}

// TestClientAssertionsReloadDropsKeys: a client's key is compromised and
// taken out of its jwks_uri's set. A reload that changes the client's
// entry drops the set fetched for it, so that an assertion signed with the
// old key is refused at once, not once the cache's TTL has passed: the jwks_uri moves to another URL and back within the
// TTL; then, at one URL throughout, the operator changes keys_refreshed
// alone (client refresh-keys).
func TestClientAssertionsReloadDropsKeys(t *testing.T) {
	t.Parallel()
	a := newAssertionEnv(t, nil)
	_, sum, _ := clients.NewSecret()
	compromised := a.pkURI
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	next := signer{jwt.SigningMethodEdDSA, "pk-uri-2", edPriv}
	keys := newRotatingKeys(t, compromised.jwks(t))
	a.Server.Swap(a.Svc, a.clients(t, sum, keys.URL), handlers.Version{})
	tokenClient(t, a.asserted(t, "pk-uri", a.assertion(t, compromised, "pk-uri", nil), nil, nil))

	rotated := next.jwks(t)
	keys.set.Store(&rotated) // the compromised key is taken out
	a.Server.Swap(a.Svc, a.clients(t, sum, keys.URL+"/v2"), handlers.Version{})
	a.Server.Swap(a.Svc, a.clients(t, sum, keys.URL), handlers.Version{})
	wantError(t, a.asserted(t, "pk-uri", a.assertion(t, compromised, "pk-uri", nil), nil, nil), http.StatusUnauthorized, "invalid_client")
	tokenClient(t, a.asserted(t, "pk-uri", a.assertion(t, next, "pk-uri", nil), nil, nil))
	if got := keys.hits.Load(); got != 2 {
		t.Errorf("%d fetches, want 2: before the rotation, and after the reloads", got)
	}

	// The same URL throughout: the operator runs client refresh-keys,
	// which changes the entry's keys_refreshed alone.
	_, edPriv3, _ := ed25519.GenerateKey(rand.Reader)
	third := signer{jwt.SigningMethodEdDSA, "pk-uri-3", edPriv3}
	tokenClient(t, a.asserted(t, "pk-uri", a.assertion(t, next, "pk-uri", nil), nil, nil)) // cached
	rotatedAgain := third.jwks(t)
	keys.set.Store(&rotatedAgain)                                                          // next is taken out
	tokenClient(t, a.asserted(t, "pk-uri", a.assertion(t, next, "pk-uri", nil), nil, nil)) // still cached, until the TTL
	list := a.clients(t, sum, keys.URL).All()
	for i := range list {
		if list[i].ID == "pk-uri" {
			list[i].KeysRefreshed = a.Clock.Now().UTC().Truncate(time.Second)
		}
	}
	refreshed, err := clients.New(list)
	if err != nil {
		t.Fatal(err)
	}
	a.Server.Swap(a.Svc, refreshed, handlers.Version{})
	wantError(t, a.asserted(t, "pk-uri", a.assertion(t, next, "pk-uri", nil), nil, nil), http.StatusUnauthorized, "invalid_client")
	tokenClient(t, a.asserted(t, "pk-uri", a.assertion(t, third, "pk-uri", nil), nil, nil))
}
